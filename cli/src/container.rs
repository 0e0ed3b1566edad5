//! `partita container`: create and list containers, and change their time
//! to live and indexing policy.

use clap::Subcommand;
use partita::{ContainerProperties, Database, EngineError, IndexingPolicy, UniqueKey};
use serde_json::{Value, json};

use crate::json::{METADATA_CHARGE, charged, json_argument};

/// The `--help` examples of `partita container`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita container create posts --pk /postId --physical-partitions 8
  partita container create sessions --pk /userId --default-ttl 3600
  partita container create users --pk /tenant --unique-key /email
  partita container create posts --pk /postId --indexing-policy @policy.json
  partita container set-ttl sessions --default-ttl off
  partita container set-indexing-policy posts --indexing-policy @policy.json
  partita container create sessions --pk /tenantId --pk /userId --pk /sessionId
  partita container list";

#[derive(Subcommand)]
pub(crate) enum ContainerCommand {
    /// Create a container.
    #[command(after_help = "Example: partita container create posts --pk /postId")]
    Create {
        /// The container id.
        name: String,
        /// The partition-key path; two or three (repeated, or one
        /// comma-separated list) make a hierarchical key (MultiHash).
        #[arg(long, required = true, value_delimiter = ',')]
        pk: Vec<String>,
        /// Physical partitions to hash logical partitions onto.
        #[arg(long, default_value_t = 4)]
        physical_partitions: u32,
        /// Time to live: seconds after an item's last write, or -1 (items
        /// expire only by their own `ttl`); off when left out.
        #[arg(long, allow_hyphen_values = true)]
        default_ttl: Option<i32>,
        /// A unique key: comma-separated paths (`/name,/address/zip`),
        /// unique within each logical partition; repeat for more keys.
        #[arg(long)]
        unique_key: Vec<String>,
        /// The indexing policy, as the service's JSON (or `@file` to read
        /// it from a file); the service's default when left out. Stored,
        /// validated and shown; queries do not use an index yet.
        #[arg(long, value_name = "JSON")]
        indexing_policy: Option<String>,
    },
    /// Change a container's time to live.
    #[command(after_help = "Example: partita container set-ttl sessions --default-ttl 600")]
    SetTtl {
        /// The container id.
        name: String,
        /// Seconds after an item's last write, -1 (items expire only by
        /// their own `ttl`), or `off`.
        #[arg(long, allow_hyphen_values = true)]
        default_ttl: String,
    },
    /// Replace a container's indexing policy.
    #[command(
        after_help = "Example: partita container set-indexing-policy posts --indexing-policy @policy.json"
    )]
    SetIndexingPolicy {
        /// The container id.
        name: String,
        /// The policy, as the service's JSON (or `@file`).
        #[arg(long, value_name = "JSON")]
        indexing_policy: String,
    },
    /// List containers.
    #[command(after_help = "Example: partita container list")]
    List,
}

/// Runs one `partita container` command.
pub(crate) fn run(db: &Database, command: ContainerCommand) -> anyhow::Result<Value> {
    Ok(match command {
        ContainerCommand::Create {
            name,
            pk,
            physical_partitions,
            default_ttl,
            unique_key,
            indexing_policy,
        } => {
            let mut props = ContainerProperties::hierarchical(name, pk);
            props.physical_partitions = physical_partitions;
            props.default_ttl = default_ttl;
            props.unique_keys = unique_key
                .iter()
                .map(|paths| UniqueKey::new(paths.split(',').map(str::trim)))
                .collect();
            if let Some(policy) = indexing_policy {
                props.indexing_policy = policy_argument(&policy)?;
            }
            let container = db.create_container_with(props)?;
            charged(container_json(&container.properties()), METADATA_CHARGE)
        }
        ContainerCommand::SetTtl { name, default_ttl } => {
            let ttl = match default_ttl.as_str() {
                "off" => None,
                n => Some(n.parse::<i32>().map_err(|_| {
                    EngineError::BadRequest(format!(
                        "--default-ttl must be a number of seconds, -1 or off, not {n:?}"
                    ))
                })?),
            };
            let container = db.container(&name)?;
            container.set_default_ttl(ttl)?;
            charged(container_json(&container.properties()), METADATA_CHARGE)
        }
        ContainerCommand::SetIndexingPolicy {
            name,
            indexing_policy,
        } => {
            let policy = policy_argument(&indexing_policy)?;
            let container = db.container(&name)?;
            container.set_indexing_policy(policy)?;
            charged(container_json(&container.properties()), METADATA_CHARGE)
        }
        ContainerCommand::List => {
            let containers: Vec<Value> = db.containers().iter().map(container_json).collect();
            json!({
                "containers": containers,
                "count": containers.len(),
                "requestCharge": METADATA_CHARGE,
            })
        }
    })
}

/// `--indexing-policy`: JSON or `@file`, checked as the service checks it
/// (a 400 with its message).
fn policy_argument(text: &str) -> anyhow::Result<IndexingPolicy> {
    let value = json_argument("--indexing-policy", text)?;
    IndexingPolicy::from_json(&value)
        .map_err(|e| EngineError::BadRequest(format!("--indexing-policy: {e}")).into())
}

fn container_json(props: &ContainerProperties) -> Value {
    let paths = props.partition_key_paths();
    let partition_key = if paths.len() > 1 {
        json!({"paths": paths, "kind": "MultiHash", "version": 2})
    } else {
        json!({"paths": paths, "kind": "Hash"})
    };
    json!({
        "id": props.id,
        "partitionKey": partition_key,
        "physicalPartitions": props.physical_partitions,
        "defaultTtl": props.default_ttl,
        "uniqueKeyPolicy": {
            "uniqueKeys": props.unique_keys.iter().map(|k| json!({"paths": k.paths})).collect::<Vec<_>>(),
        },
        "indexingPolicy": props.indexing_policy.to_json(),
    })
}
