//! `partita container`: create and list containers.

use clap::Subcommand;
use partita::{ContainerProperties, Database};
use serde_json::{Value, json};

use crate::json::{METADATA_CHARGE, charged};

/// The `--help` examples of `partita container`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita container create posts --pk /postId --physical-partitions 8
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
        } => {
            let mut props = ContainerProperties::hierarchical(name, pk);
            props.physical_partitions = physical_partitions;
            let container = db.create_container_with(props)?;
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
    })
}
