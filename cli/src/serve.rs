//! `partita serve`: the command-line face of `partita_server`.
//!
//! Opens the database (durable by default), binds, prints one JSON line
//! with the endpoint and key on stdout (so scripts and tests can read where
//! to connect), then serves until SIGINT or SIGTERM and shuts down
//! gracefully. A store that cannot write (a full disk, a read-only file
//! system, no permission) opens read-only: the server starts, prints a
//! `{"warning": …}` line on stderr naming the directory and the cause,
//! serves reads, and answers writes with 503.
//!
//! With `--tls` it serves HTTPS with a self-signed certificate generated at
//! start, written as PEM to `tls-cert.pem` in the data directory (in a
//! temporary directory removed at exit for `--in-memory`) and named in the
//! startup line as `"certificate"`, so clients can trust it;
//! `--tls-cert FILE --tls-key FILE` serve the user's own instead.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use partita::{Database, Limits};
use partita_server::{
    EMULATOR_KEY, Gateway, GatewayLimits, MasterKey, ServeOptions, Server, TlsConfig, WireError,
};
use serde_json::json;

/// Examples of `partita serve`.
pub(crate) const EXAMPLE: &str = "Examples:
  partita --in-memory serve
  partita --data ./partita-data serve --bind 127.0.0.1:8081
  partita --in-memory serve --tls      (HTTPS; the printed \"certificate\" is the PEM to trust)
  partita serve --tls-cert cert.pem --tls-key key.pem
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
    /// How long a new connection may stay silent, and then silent between requests (milliseconds).
    #[arg(long, value_name = "MS")]
    idle_timeout_ms: Option<u64>,
    /// The most connections served at once; more are answered 503 and closed.
    #[arg(long, default_value_t = ServeOptions::default().max_connections, value_name = "N")]
    max_connections: usize,
    /// The most bytes of request bodies held at once, over all connections;
    /// a request that cannot get its share within two seconds is answered 503.
    #[arg(long, default_value_t = ServeOptions::default().max_buffered_bytes, value_name = "BYTES")]
    max_buffered_bytes: usize,
    /// How long a request may run before it is answered 408 (milliseconds; by
    /// default the scripts' wall clock plus 5 s).
    #[arg(long, value_name = "MS")]
    call_deadline_ms: Option<u64>,
    /// Serve HTTPS (HTTP/1.1 and h2 by ALPN) with a self-signed certificate
    /// generated at start for localhost, 127.0.0.1 and ::1; its PEM file is
    /// named in the startup line.
    #[arg(long)]
    tls: bool,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Run scripts in the server's process instead of in worker processes:
    /// faster, for trusted scripts only. In process, a script stuck in a
    /// native built-in or exhausting memory can stall or abort the server
    /// (docs/scripts.md lists what only a worker bounds).
    #[arg(long, conflicts_with = "isolate_scripts")]
    pub(crate) scripts_in_process: bool,
}

/// Runs the server; returns when it has shut down.
pub(crate) fn main(db: anyhow::Result<(Database, Limits)>, args: &ServeArgs) -> ExitCode {
    match serve(db, args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let report = json!({"status": 500, "substatus": 0, "message": format!("{err:#}")});
            let _ = writeln!(std::io::stderr(), "{report}");
            ExitCode::FAILURE
        }
    }
}

fn serve(db: anyhow::Result<(Database, Limits)>, args: &ServeArgs) -> anyhow::Result<()> {
    let key = MasterKey::from_base64(&args.key)?;
    let (db, script_limits) = db?;
    let isolated = script_limits.workers.is_some();
    // A store that could not write at open serves reads; say so at once.
    if let Some(reason) = db.raw().read_only() {
        let warning = json!({"warning": format!("{reason}; serving reads, writes answer 503")});
        let _ = writeln!(std::io::stderr(), "{warning}");
    }
    // Kept until the server stops: the generated certificate of an
    // in-memory server lives in it.
    let mut temp_dir = None;
    let tls = tls_config(args, db.data_dir(), &mut temp_dir)?;
    let gateway = Gateway::new(db, key, GatewayLimits::default())
        .map_err(|e| WireError::new(e.status(), e.to_string()))?
        .with_https(tls.is_some())
        .with_script_limits(script_limits);
    let defaults = ServeOptions::default();
    let idle = args.idle_timeout_ms.map(Duration::from_millis);
    let options = ServeOptions {
        bind: args.bind,
        header_timeout: Duration::from_millis(args.client_timeout_ms),
        body_timeout: Duration::from_millis(args.client_timeout_ms),
        first_byte_timeout: idle.unwrap_or(defaults.first_byte_timeout),
        idle_timeout: idle.unwrap_or(defaults.idle_timeout),
        max_connections: args.max_connections.max(1),
        max_buffered_bytes: args.max_buffered_bytes,
        call_deadline: args.call_deadline_ms.map(Duration::from_millis),
        tls: tls.as_ref().map(|(config, _)| config.clone()),
        ..defaults
    };
    let server = Server::bind(Arc::new(gateway), options)?;
    let addr = server.local_addr()?;
    let mut ready = match &tls {
        None => json!({"endpoint": format!("http://{addr}/"), "key": args.key}),
        Some((_, certificate)) => json!({
            "endpoint": format!("https://{addr}/"),
            "key": args.key,
            "certificate": certificate.display().to_string(),
        }),
    };
    ready["scripts"] = json!(if isolated {
        "worker processes"
    } else {
        "in process"
    });
    server.run_until(shutdown_signal(), move || {
        // Printed once SIGINT/SIGTERM handlers are in place. A closed
        // stdout is no reason not to serve.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{ready}");
        let _ = stdout.flush();
    })?;
    Ok(())
}

/// The TLS configuration the arguments ask for, and the certificate file
/// clients should trust: the user's, or the generated one, written to
/// `tls-cert.pem` in `data_dir` (or in a new `temp_dir` when in memory).
fn tls_config(
    args: &ServeArgs,
    data_dir: Option<&Path>,
    temp_dir: &mut Option<tempfile::TempDir>,
) -> anyhow::Result<Option<(TlsConfig, PathBuf)>> {
    let tls_error = |e: partita_server::TlsError| WireError::new(e.status(), e.to_string());
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let config = TlsConfig::from_pem_files(cert, key).map_err(tls_error)?;
        let cert = std::path::absolute(cert).unwrap_or_else(|_| cert.clone());
        return Ok(Some((config, cert)));
    }
    if !args.tls {
        return Ok(None);
    }
    let config = TlsConfig::self_signed().map_err(tls_error)?;
    let dir = match data_dir {
        Some(dir) => dir.to_path_buf(),
        None => temp_dir
            .insert(
                tempfile::Builder::new()
                    .prefix("partita-serve-")
                    .tempdir()
                    .map_err(|e| {
                        WireError::new(
                            500,
                            format!("cannot create a directory for the TLS certificate: {e}"),
                        )
                    })?,
            )
            .path()
            .to_path_buf(),
    };
    let path =
        std::path::absolute(dir.join("tls-cert.pem")).unwrap_or_else(|_| dir.join("tls-cert.pem"));
    std::fs::write(&path, config.certificate_pem()).map_err(|e| {
        WireError::new(
            500,
            format!(
                "cannot write the TLS certificate to {}: {e}",
                path.display()
            ),
        )
    })?;
    Ok(Some((config, path)))
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
