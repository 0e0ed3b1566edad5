//! The transport: HTTP/1.1 and HTTP/2 (h2c) on a TCP listener with hyper
//! and tokio, optionally inside TLS (`tls.rs`: h2 or http/1.1 by ALPN).
//!
//! Each connection is served by hyper with a header-read timeout (a client
//! that trickles its headers is dropped). A request's body is read with a
//! size limit (413 beyond it, refused early from `content-length`) and a
//! timeout (408), then handed to [`Gateway::handle`] on tokio's blocking
//! pool. Shutdown stops accepting, lets every in-flight request finish (an
//! engine call either commits or rolls back; none is cut in half), closes
//! idle keep-alive connections, and gives up on stragglers after a grace
//! period.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;

use super::gateway::Gateway;
use super::tls::TlsConfig;
use super::wire::{WireError, WireRequest, WireResponse};

/// Stack size of the server's threads. Script calls need 4 MB of free stack
/// (the JavaScript runtime's red zone; Wasm needs less) and otherwise run on
/// a fresh 16 MB segment that is mapped, faulted in and unmapped on every
/// call: a `mmap`, an `mprotect`, a `munmap` (with a TLB shootdown across
/// cores) and a page fault per touched stack page, per request. Threads born
/// with this much stack run every call in place.
const THREAD_STACK: usize = partita::SCRIPT_THREAD_STACK;

/// How long an idle handler thread lives. Each keeps a warm script context
/// (10–20 ms to build), so they are kept for long rather than tokio's 10 s.
const HANDLER_KEEP_ALIVE: Duration = Duration::from_secs(3600);

/// How the server listens and what it tolerates.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen (`127.0.0.1:8081`; port 0 picks a free port).
    pub bind: SocketAddr,
    /// The largest request body (Cosmos DB: 2 MB documents; a little more
    /// for the JSON around them).
    pub max_request_bytes: usize,
    /// How long a client may take to send its headers.
    pub header_timeout: Duration,
    /// How long a client may take to send its body.
    pub body_timeout: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// Worker threads of the async runtime (0: one per core).
    pub worker_threads: usize,
    /// Threads that run engine calls (0: four per core, eight over a
    /// database that syncs every commit). Requests beyond them queue; each
    /// thread keeps a warm script context, so more threads than cores buy
    /// only overlap with commits waiting for their fsync: durable commits
    /// wait for one, and the more of them wait together the more share it
    /// (`partita serve`, createComment, 64 connections: 8.5-8.8k/s with 16
    /// threads against 7.0-7.7k/s with 8), while in memory the extra threads
    /// only contend (27k/s with 8 against 23k/s with 16).
    pub handler_threads: usize,
    /// Serve HTTPS with this certificate instead of plain HTTP.
    pub tls: Option<TlsConfig>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8081)),
            max_request_bytes: 2 * 1024 * 1024 + 64 * 1024,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            worker_threads: 0,
            handler_threads: 0,
            tls: None,
        }
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound or the runtime not started.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the server's runtime: {0}")]
    Runtime(std::io::Error),
}

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    gateway: Arc<Gateway>,
    listener: std::net::TcpListener,
    options: ServeOptions,
}

impl Server {
    /// Binds the listening socket (so the address is known and taken before
    /// [`Server::run_until`]).
    ///
    /// # Errors
    /// [`ServerError::Bind`].
    pub fn bind(gateway: Arc<Gateway>, options: ServeOptions) -> Result<Server, ServerError> {
        let bind_error = |source| ServerError::Bind {
            addr: options.bind,
            source,
        };
        let listener = std::net::TcpListener::bind(options.bind).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        Ok(Server {
            gateway,
            listener,
            options,
        })
    }

    /// The address the server listens on.
    ///
    /// # Errors
    /// The OS error, if the socket has none.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then shuts down gracefully.
    /// Blocks the calling thread (it runs its own tokio runtime). `ready` is
    /// called once `shutdown` has been polled (so a signal handler it
    /// installs is in place) and connections are being accepted.
    ///
    /// # Errors
    /// [`ServerError::Runtime`] when the runtime cannot start.
    pub fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        ready: impl FnOnce() + Send + 'static,
    ) -> Result<(), ServerError> {
        let runtime = server_runtime(&self.options, syncs_commits(self.gateway.db.raw()))
            .map_err(ServerError::Runtime)?;
        runtime.block_on(self.serve(shutdown, ready))
    }

    async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
        ready: impl FnOnce() + Send + 'static,
    ) -> Result<(), ServerError> {
        let addr = self.options.bind;
        let listener = tokio::net::TcpListener::from_std(self.listener)
            .map_err(|source| ServerError::Bind { addr, source })?;
        let graceful = GracefulShutdown::new();
        let options = Arc::new(self.options);
        tokio::pin!(shutdown);
        tokio::select! {
            biased;
            () = &mut shutdown => return Ok(()),
            () = std::future::ready(()) => ready(),
        }
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else {
                        // Out of descriptors and the like: back off briefly.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let gateway = self.gateway.clone();
                    let header_timeout = options.header_timeout;
                    let tls = options.tls.as_ref().map(TlsConfig::acceptor);
                    let options = options.clone();
                    let service = service_fn(move |req| {
                        serve_request(gateway.clone(), options.clone(), req)
                    });
                    // HTTP/1.1, or HTTP/2 with prior knowledge (h2c), which
                    // the Rust SDK negotiates by default.
                    let watcher = graceful.watcher();
                    tokio::spawn(async move {
                        let mut builder = auto::Builder::new(TokioExecutor::new());
                        builder
                            .http1()
                            .timer(TokioTimer::new())
                            .header_read_timeout(header_timeout);
                        builder.http2().timer(TokioTimer::new());
                        if let Some(acceptor) = tls {
                            // The handshake gets the header timeout too; a
                            // failed one just closes the connection.
                            let handshake = tokio::time::timeout(header_timeout, acceptor.accept(stream));
                            let Ok(Ok(stream)) = handshake.await else { return };
                            let conn = builder.serve_connection(TokioIo::new(stream), service);
                            let _ = watcher.watch(conn).await;
                            return;
                        }
                        let conn = builder.serve_connection(TokioIo::new(stream), service);
                        let _ = watcher.watch(conn).await;
                    });
                }
                () = &mut shutdown => break,
            }
        }
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(options.shutdown_grace) => {}
        }
        Ok(())
    }
}

/// Whether every commit of `db` waits for an fsync.
fn syncs_commits(db: &engine::Database) -> bool {
    db.data_dir().is_some() && db.options().durability == engine::Durability::Full
}

/// The server's runtime: async workers for the connections, and handler
/// threads (tokio's blocking pool) for engine calls; see
/// [`ServeOptions::handler_threads`].
fn server_runtime(
    options: &ServeOptions,
    syncs_commits: bool,
) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if options.worker_threads > 0 {
        builder.worker_threads(options.worker_threads);
    }
    let per_core = if syncs_commits { 8 } else { 4 };
    let handlers = match options.handler_threads {
        0 => per_core * std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    builder
        .max_blocking_threads(handlers)
        .thread_stack_size(THREAD_STACK)
        .thread_keep_alive(HANDLER_KEEP_ALIVE)
        .enable_all()
        .thread_name("partita-serve")
        .build()
}

async fn serve_request(
    gateway: Arc<Gateway>,
    options: Arc<ServeOptions>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match read_request(&options, req).await {
        Ok(wire) => {
            // Server-side duration: from the whole request being read to the
            // response being ready, queueing for a blocking thread included.
            let started = Instant::now();
            let response =
                match tokio::task::spawn_blocking(move || gateway.handle(&wire, SystemTime::now()))
                    .await
                {
                    Ok(response) => response,
                    Err(e) => {
                        WireError::new(500, format!("the request handler failed: {e}")).response()
                    }
                };
            let micros = started.elapsed().as_micros();
            response.with(
                "x-ms-request-duration-ms",
                format!("{}.{:03}", micros / 1000, micros % 1000),
            )
        }
        Err(err) => err.response().with("content-type", "application/json"),
    };
    Ok(into_hyper(response))
}

/// How far over the body limit a request is still read (and dropped) to
/// answer it with a 413 rather than a reset connection.
const DRAIN_FACTOR: usize = 2;

/// Reads a body of at most `limit` bytes; `None` when it is longer, after
/// reading and dropping up to `drain_limit` bytes of it.
async fn collect_body(
    mut body: Incoming,
    limit: usize,
    drain_limit: usize,
) -> Result<Option<Bytes>, hyper::Error> {
    // Sized from the declared length (at most the limit), so a body is
    // copied once rather than regrown frame by frame.
    let hint = usize::try_from(hyper::body::Body::size_hint(&body).lower()).unwrap_or(limit);
    let mut kept = Vec::with_capacity(hint.min(limit));
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        total = total.saturating_add(data.len());
        if total > drain_limit {
            return Ok(None);
        }
        if total <= limit {
            kept.extend_from_slice(&data);
        }
    }
    Ok((total <= limit).then(|| Bytes::from(kept)))
}

async fn read_request(
    options: &ServeOptions,
    req: Request<Incoming>,
) -> Result<WireRequest, WireError> {
    let (parts, body) = req.into_parts();
    let too_large = || {
        WireError::new(
            413,
            format!(
                "the request body exceeds {} bytes (documents are limited to 2 MB)",
                options.max_request_bytes
            ),
        )
    };
    // A body a little over the limit is read and dropped before the 413,
    // because the SDKs write the whole body before they read the answer
    // and see a reset connection, not the 413, when the server stops
    // reading; a body far over it is refused at once.
    let drain_limit = options.max_request_bytes.saturating_mul(DRAIN_FACTOR);
    if let Some(length) = parts.headers.get(hyper::header::CONTENT_LENGTH)
        && length
            .to_str()
            .ok()
            .and_then(|l| l.parse::<usize>().ok())
            .is_some_and(|l| l > drain_limit)
    {
        return Err(too_large());
    }
    let collected = tokio::time::timeout(
        options.body_timeout,
        collect_body(body, options.max_request_bytes, drain_limit),
    )
    .await
    .map_err(|_| {
        WireError::new(
            408,
            format!(
                "the request body did not arrive within {}s",
                options.body_timeout.as_secs()
            ),
        )
    })?;
    let body = match collected {
        Ok(Some(body)) => body,
        Ok(None) => return Err(too_large()),
        Err(e) => {
            return Err(WireError::bad_request(format!(
                "the request body could not be read: {e}"
            )));
        }
    };
    let mut headers = parts.headers;
    // HTTP/2 carries the host as the URI's authority, not a header.
    if !headers.contains_key(hyper::header::HOST)
        && let Some(authority) = parts.uri.authority()
        && let Ok(value) = hyper::header::HeaderValue::from_str(authority.as_str())
    {
        headers.insert(hyper::header::HOST, value);
    }
    Ok(WireRequest {
        method: parts.method.as_str().to_owned(),
        path: parts.uri.path().to_owned(),
        headers,
        body,
    })
}

fn into_hyper(response: WireResponse) -> Response<Full<Bytes>> {
    let mut out = Response::new(Full::new(Bytes::from(response.body)));
    *out.status_mut() =
        StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    for (name, value) in response.headers {
        // Values this server builds are ASCII; an echoed value that is not
        // (it was read as visible ASCII) cannot fail, but never panic.
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            headers.append(name, value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_threads_run_scripts_on_their_own_stack() {
        let runtime = server_runtime(&ServeOptions::default(), false).unwrap();
        let in_place = runtime
            .block_on(runtime.spawn_blocking(runtime::runs_scripts_in_place))
            .unwrap();
        assert!(
            in_place,
            "handler threads need {} bytes of free stack",
            runtime::SCRIPT_STACK_NEEDED
        );
    }
}
