//! The partition-key arguments of the commands that touch documents
//! (`item`, `sproc exec`, `query`), shared so that every command spells a
//! key the same way.

use clap::Args;
use partita::{EngineError, Error, PartitionKey};

/// The partition key of a request: `--pk` (a string), `--pk-json` (any JSON
/// key value) or `--pk-none` (documents without the key property).
#[derive(Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Pk {
    /// The partition-key value, as a string.
    #[arg(long)]
    pk: Option<String>,
    /// The partition-key value as JSON (a number, boolean, null or
    /// string), or a hierarchical key's levels as an array (`["t1","u1"]`).
    #[arg(long, value_name = "JSON")]
    pk_json: Option<String>,
    /// The partition of documents that lack the key property.
    #[arg(long)]
    pk_none: bool,
}

/// Like [`Pk`], but optional (queries fan out without one).
#[derive(Args)]
#[group(required = false, multiple = false)]
pub(crate) struct OptionalPk {
    /// Run in the logical partition with this string key.
    #[arg(long)]
    pk: Option<String>,
    /// Run in the logical partition with this JSON key (`["t1","u1"]`: a
    /// hierarchical key or a prefix of one, covering every partition under it).
    #[arg(long, value_name = "JSON")]
    pk_json: Option<String>,
    /// Run in the partition of documents that lack the key property.
    #[arg(long)]
    pk_none: bool,
}

fn partition_key(
    pk: Option<String>,
    pk_json: Option<String>,
    pk_none: bool,
) -> Result<Option<PartitionKey>, Error> {
    Ok(match (pk, pk_json) {
        (Some(s), _) => Some(PartitionKey::String(s)),
        (None, Some(text)) => {
            Some(PartitionKey::parse(&text).map_err(|e| EngineError::BadRequest(e.to_string()))?)
        }
        (None, None) if pk_none => Some(PartitionKey::None),
        (None, None) => None,
    })
}

impl Pk {
    pub(crate) fn key(self) -> Result<PartitionKey, Error> {
        partition_key(self.pk, self.pk_json, self.pk_none)
            .map(|k| k.expect("clap requires one of --pk, --pk-json, --pk-none"))
    }
}

impl OptionalPk {
    /// The key, or `None` when no option names one.
    pub(crate) fn key(self) -> Result<Option<PartitionKey>, Error> {
        partition_key(self.pk, self.pk_json, self.pk_none)
    }
}
