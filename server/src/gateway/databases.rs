//! Databases (`/dbs[/{db}]`): the database level the engine lacks, kept
//! in the registry (`registry.rs`).

use serde_json::{Value, json};

use super::Gateway;
use super::offers::requested_throughput;
use super::queries::metadata_feed;
use super::requests::object_body;
use crate::registry::DbEntry;
use crate::wire::{WireError, WireRequest, WireResponse};

impl Gateway {
    pub(super) fn create_database(&self, req: &WireRequest) -> Result<WireResponse, WireError> {
        let body = object_body(req, "database")?;
        let Some(Value::String(name)) = body.get("id") else {
            return Err(WireError::bad_request(
                "the database body needs a string id",
            ));
        };
        let throughput = requested_throughput(req)?;
        let entry = self.registry.create_database(name, throughput)?;
        Ok(WireResponse::json(201, &database_json(&entry)))
    }

    pub(super) fn list_databases(
        &self,
        query: Option<&WireRequest>,
    ) -> Result<WireResponse, WireError> {
        let items = self
            .registry
            .databases()
            .iter()
            .map(database_json)
            .collect();
        metadata_feed("", "Databases", items, query)
    }

    pub(super) fn read_database(&self, db: &str) -> Result<WireResponse, WireError> {
        Ok(WireResponse::json(
            200,
            &database_json(&self.registry.database(db)?),
        ))
    }

    pub(super) fn delete_database(&self, db: &str) -> Result<WireResponse, WireError> {
        self.registry.delete_database(db)?;
        Ok(WireResponse::empty(204))
    }
}

pub(super) fn database_json(entry: &DbEntry) -> Value {
    json!({
        "id": entry.name, "_rid": entry.rid, "_self": format!("dbs/{}/", entry.rid),
        "_etag": entry.etag, "_colls": "colls/", "_users": "users/", "_ts": entry.ts
    })
}
