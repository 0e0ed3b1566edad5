//! `partita container`: create and list containers.

use clap::Subcommand;
use partita::{ContainerProperties, Database};
use serde_json::{Value, json};

use crate::json::{METADATA_CHARGE, charged};

/// The `--help` examples of `partita container`.
pub(crate) const EXAMPLES: &str = "Examples:
  partita container create posts --pk /postId --physical-partitions 8
  partita container list";

#[derive(Subcommand)]
pub(crate) enum ContainerCommand {
    /// Create a container.
    #[command(after_help = "Example: partita container create posts --pk /postId")]
    Create {
        /// The container id.
        name: String,
        /// The partition-key path.
        #[arg(long)]
        pk: String,
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
            let mut props = ContainerProperties::new(name, pk);
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
    json!({
        "id": props.id,
        "partitionKey": {"paths": [props.partition_key_path], "kind": "Hash"},
        "physicalPartitions": props.physical_partitions,
    })
}
