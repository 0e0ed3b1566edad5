//! `partita serve`: the command-line face of `partita::server`.
//!
//! Opens the database (durable by default), binds, prints one JSON line
//! with the endpoint and key on stdout (so scripts and tests can read where
//! to connect), then serves until SIGINT or SIGTERM and shuts down
//! gracefully.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use partita::Database;
use partita::server::{
    EMULATOR_KEY, Gateway, GatewayLimits, MasterKey, ServeOptions, Server, WireError,
};
use serde_json::json;

/// Examples of `partita serve`.
pub(crate) const EXAMPLE: &str = "Examples:
  partita --in-memory serve
  partita --data ./partita-data serve --bind 127.0.0.1:8081
  Then: CosmosClient(\"http://127.0.0.1:8081/\", credential=<the printed key>)";

/// Arguments of `partita serve`.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (port 0 picks a free port; the chosen endpoint is printed).
    #[arg(long, default_value = "127.0.0.1:8081")]
    bind: SocketAddr,
    /// Account key clients sign with (base64); the Cosmos DB emulator's key by default.
    #[arg(long, default_value = EMULATOR_KEY)]
    key: String,
    /// How long a client may take to send a request's headers, and then its body (milliseconds).
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    client_timeout_ms: u64,
}

/// Runs the server; returns when it has shut down.
pub(crate) fn main(db: anyhow::Result<Database>, args: &ServeArgs) -> ExitCode {
    match serve(db, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let report = json!({"status": 500, "substatus": 0, "message": format!("{err:#}")});
            let _ = writeln!(std::io::stderr(), "{report}");
            ExitCode::FAILURE
        }
    }
}

fn serve(db: anyhow::Result<Database>, args: &ServeArgs) -> anyhow::Result<()> {
    let key = MasterKey::from_base64(&args.key)?;
    let gateway = Gateway::new(db?, key, GatewayLimits::default())
        .map_err(|e| WireError::new(e.status(), e.to_string()))?;
    let options = ServeOptions {
        bind: args.bind,
        header_timeout: Duration::from_millis(args.client_timeout_ms),
        body_timeout: Duration::from_millis(args.client_timeout_ms),
        ..ServeOptions::default()
    };
    let server = Server::bind(Arc::new(gateway), options)?;
    let addr = server.local_addr()?;
    let ready = json!({"endpoint": format!("http://{addr}/"), "key": args.key});
    server.run_until(shutdown_signal(), move || {
        // Printed once SIGINT/SIGTERM handlers are in place. A closed
        // stdout is no reason not to serve.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{ready}");
        let _ = stdout.flush();
    })?;
    Ok(())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
