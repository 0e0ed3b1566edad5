//! The official Rust SDK (`azure_data_cosmos` 1.1.0-beta.1, binary encoding
//! off) against `partita serve`: connect, databases and containers, item
//! CRUD with etags, and queries both with the SDK's own planner (which sends
//! ORDER BY as the `orderByItems`/`payload` envelope query) and with
//! gateway query plans; and the same SDK over HTTPS (`serve --tls`).
//!
//! The server is the `partita` binary built by the main workspace
//! (`PARTITA_BIN`, default `../../target/debug/partita`), started on a free
//! port for each test.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use azure_data_cosmos::models::ContainerProperties;
use azure_data_cosmos::options::{
    BinaryEncodingOptions, ConnectionPoolOptions, QueryOptions, QueryPlanMode,
    ServerCertificateValidation,
};
use azure_data_cosmos::{
    AccountReference, CosmosClient, CosmosRuntime, FeedScope, PartitionKey, Query, RoutingStrategy,
};
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const KEY: &str =
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";

struct Server {
    child: Child,
    endpoint: String,
}

impl Server {
    fn start() -> Server {
        Server::start_with(&[])
    }

    /// Starts the server with extra `serve` arguments.
    fn start_with(extra: &[&str]) -> Server {
        let bin = std::env::var_os("PARTITA_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/partita"),
            PathBuf::from,
        );
        assert!(
            bin.exists(),
            "{} is missing: build it first (cargo build -p partita-cli) or set PARTITA_BIN",
            bin.display()
        );
        let mut child = Command::new(bin)
            .args(["--in-memory", "serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap();
        Server {
            child,
            endpoint: ready["endpoint"].as_str().unwrap().to_owned(),
        }
    }

    async fn client(&self) -> CosmosClient {
        self.client_with(CosmosClient::builder()).await
    }

    async fn client_with(&self, builder: azure_data_cosmos::CosmosClientBuilder) -> CosmosClient {
        let account = AccountReference::with_authentication_key(
            self.endpoint.parse().unwrap(),
            KEY.to_owned(),
        );
        builder
            .with_binary_encoding_options(BinaryEncodingOptions::new().with_enabled(false))
            .build(
                account,
                RoutingStrategy::ProximityTo("South Central US".into()),
            )
            .await
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    id: String,
    pk: String,
    n: i64,
}

fn status(err: &azure_data_cosmos::CosmosError) -> u16 {
    u16::from(err.status().status_code())
}

#[tokio::test(flavor = "multi_thread")]
async fn crud_and_queries_with_both_planners() {
    let server = Server::start();
    let client = server.client().await;
    client.create_database("rdb", None).await.unwrap();
    let db = client.database_client("rdb");
    db.create_container(ContainerProperties::new("items", "/pk".into()), None)
        .await
        .unwrap();
    let err = db
        .create_container(ContainerProperties::new("items", "/pk".into()), None)
        .await
        .unwrap_err();
    assert_eq!(status(&err), 409);
    let items = db.container_client("items", None).await.unwrap();

    // CRUD.
    for i in 0..9 {
        let item = Item {
            id: format!("i{i}"),
            pk: format!("k{}", i % 3),
            n: i,
        };
        items
            .create_item(item.pk.clone(), &item.id, &item, None)
            .await
            .unwrap();
    }
    let read: Item = items
        .read_item("k1", "i4", None)
        .await
        .unwrap()
        .into_model()
        .unwrap();
    assert_eq!(read.n, 4);
    let replaced = Item { n: 40, ..read };
    items
        .replace_item("k1", "i4", &replaced, None)
        .await
        .unwrap();
    let upserted = Item {
        id: "u".into(),
        pk: "k0".into(),
        n: 100,
    };
    items.upsert_item("k0", "u", &upserted, None).await.unwrap();
    let err = items
        .create_item("k0", "u", &upserted, None)
        .await
        .unwrap_err();
    assert_eq!(status(&err), 409);
    items.delete_item("k0", "u", None).await.unwrap();
    let err = items.read_item("k0", "u", None).await.unwrap_err();
    assert_eq!(status(&err), 404);
    let read: Item = items
        .read_item(PartitionKey::from("k1"), "i4", None)
        .await
        .unwrap()
        .into_model()
        .unwrap();
    assert_eq!(read.n, 40);

    // Queries: single partition, then cross-partition with each planner.
    let single: Vec<Item> = items
        .query_items(
            Query::from("SELECT * FROM c WHERE c.n >= @min")
                .with_parameter("@min", 3)
                .unwrap(),
            FeedScope::partition("k2"),
            None,
        )
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut ids: Vec<&str> = single.iter().map(|i| i.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["i5", "i8"]);

    for mode in [QueryPlanMode::LocalPreferred, QueryPlanMode::GatewayOnly] {
        let options = || Some(QueryOptions::default().with_query_plan_mode(mode));
        let ordered: Vec<Item> = items
            .query_items(
                "SELECT * FROM c ORDER BY c.n DESC",
                FeedScope::full_container(),
                options(),
            )
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let ns: Vec<i64> = ordered.iter().map(|i| i.n).collect();
        assert_eq!(ns, [40, 8, 7, 6, 5, 3, 2, 1, 0], "{mode:?}");

        let top: Vec<Value> = items
            .query_items(
                "SELECT TOP 2 VALUE c.id FROM c ORDER BY c.n",
                FeedScope::full_container(),
                options(),
            )
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(top, [json!("i0"), json!("i1")], "{mode:?}");

        let filtered: Vec<Item> = items
            .query_items(
                "SELECT * FROM c WHERE c.n > 5",
                FeedScope::full_container(),
                options(),
            )
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(filtered.len(), 4, "{mode:?}");
    }
    // A cross-partition aggregate: the gateway's plan names it, and the
    // SDK, which has no aggregate pipeline, refuses it as it does against
    // the service. In one partition the server answers it.
    let err = match items
        .query_items::<Value>(
            "SELECT VALUE COUNT(1) FROM c",
            FeedScope::full_container(),
            None,
        )
        .await
    {
        Ok(stream) => stream.try_collect::<Vec<_>>().await.unwrap_err(),
        Err(err) => err,
    };
    assert_eq!(status(&err), 400);
    assert!(err.to_string().contains("aggregates"), "{err}");
    let count: Vec<Value> = items
        .query_items(
            "SELECT VALUE COUNT(1) FROM c",
            FeedScope::partition("k1"),
            None,
        )
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(count, [json!(3)]);

    // Deletes.
    items.delete(None).await.unwrap();
    assert_eq!(status(&items.read(None).await.unwrap_err()), 404);
    db.delete(None).await.unwrap();
    assert_eq!(status(&db.read(None).await.unwrap_err()), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn crud_and_queries_over_https() {
    let server = Server::start_with(&["--tls"]);
    assert!(
        server.endpoint.starts_with("https://"),
        "{}",
        server.endpoint
    );
    // The SDK has no option to trust one more certificate; it skips
    // validation for emulator hosts (loopback) when asked.
    let pool = ConnectionPoolOptions::builder()
        .with_server_certificate_validation(ServerCertificateValidation::RequiredUnlessEmulator)
        .build()
        .unwrap();
    let runtime = CosmosRuntime::builder()
        .with_connection_pool(pool)
        .build()
        .await
        .unwrap();
    let client = server
        .client_with(CosmosClient::builder().with_runtime(runtime))
        .await;
    client.create_database("tls", None).await.unwrap();
    let db = client.database_client("tls");
    db.create_container(ContainerProperties::new("items", "/pk".into()), None)
        .await
        .unwrap();
    let items = db.container_client("items", None).await.unwrap();
    for i in 0..3 {
        let item = Item {
            id: format!("i{i}"),
            pk: "k".into(),
            n: i,
        };
        items.create_item("k", &item.id, &item, None).await.unwrap();
    }
    let read: Item = items
        .read_item("k", "i1", None)
        .await
        .unwrap()
        .into_model()
        .unwrap();
    assert_eq!(read.n, 1);
    let ordered: Vec<Item> = items
        .query_items(
            "SELECT * FROM c ORDER BY c.n DESC",
            FeedScope::full_container(),
            None,
        )
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ns: Vec<i64> = ordered.iter().map(|i| i.n).collect();
    assert_eq!(ns, [2, 1, 0]);
    items.delete_item("k", "i0", None).await.unwrap();
    assert_eq!(
        status(&items.read_item("k", "i0", None).await.unwrap_err()),
        404
    );
    db.delete(None).await.unwrap();
}
