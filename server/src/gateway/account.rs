//! Account discovery (`GET /`): the account's name, its one region's
//! endpoint (with the scheme the transport serves) and the consistency and
//! query limits the SDKs read before their first request.

use serde_json::json;

use super::Gateway;
use crate::wire::{WireError, WireRequest, WireResponse, header};

impl Gateway {
    pub(super) fn account(&self, req: &WireRequest) -> Result<WireResponse, WireError> {
        let host = header(&req.headers, "host")?.unwrap_or("127.0.0.1:8081");
        let endpoint = format!("{}://{host}/", self.scheme);
        let location = json!([{"name": "South Central US", "databaseAccountEndpoint": endpoint}]);
        Ok(WireResponse::json(
            200,
            &json!({
                "id": "partita",
                "_rid": "partita.sql.cosmos.azure.com",
                "_self": "",
                "media": "//media/",
                "addresses": "//addresses/",
                "_dbs": "//dbs/",
                "writableLocations": location,
                "readableLocations": location,
                "enableMultipleWriteLocations": false,
                "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"},
                "userReplicationPolicy": {"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "systemReplicationPolicy": {"minReplicaSetSize": 1, "maxReplicasetSize": 4},
                "readPolicy": {"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
                "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":262144,\"sqlAllowTop\":true,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true}",
            }),
        ))
    }
}
