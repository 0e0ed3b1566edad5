//! The transport: HTTP/1.1 and HTTP/2 (h2c) on a TCP listener with hyper
//! and tokio, optionally inside TLS (`tls.rs`: h2 or http/1.1 by ALPN).
//!
//! Nothing a client does without the key can hold the server's memory,
//! descriptors or threads:
//!
//! ```text
//!   accept ─► connection permit (max_connections) ── none left ─► 503, close
//!     └─► watchdog: while no request of the connection is being served, it
//!         is closed first_byte_timeout (idle_timeout after a request) after
//!         it went idle unless a byte arrives, and header_timeout after that
//!         byte unless a whole request head has (TLS handshake included)
//!   request head ─► declared length > limit ─► 413 (body read and dropped)
//!                ─► Gateway::authorize ─► 400/401 (body never read)
//!                ─► body bytes reserved from the shared budget
//!                   (max_buffered_bytes) ── not within body_wait ─► 503
//!                ─► body read (body_timeout, 408) ─► Gateway::handle on the
//!                   blocking pool ── past the call deadline ─► 408
//! ```
//!
//! The watchdog is one timer per connection, fed by a wrapper around the
//! socket that notes the first byte read after the connection went idle and
//! by the service, which counts the requests in progress. It sees only
//! bytes and complete request heads, so it covers HTTP/1.1, h2c and TLS
//! alike: an HTTP/2 connection that opens and sends nothing, or sends part
//! of a header block, is closed like an HTTP/1.1 one. A body's bytes stay
//! reserved until its handler returns, so the budget bounds what the
//! handlers hold too. A handler past its deadline is abandoned, not
//! stopped (a blocking thread cannot be cancelled): the client gets its 408
//! and the connection goes on, and if the handler had not started yet it
//! never does.
//!
//! Shutdown stops accepting, lets every in-flight request finish (an
//! engine call either commits or rolls back; none is cut in half), closes
//! idle keep-alive connections, gives up on stragglers after a grace
//! period, and then on handler threads that are still stuck (the runtime is
//! shut down with a timeout, so the process exits).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::gateway::Gateway;
use super::tls::TlsConfig;
use super::wire::{WireError, WireRequest, WireResponse, code_name};

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

/// How long shutdown waits for handler threads after the grace period
/// (threads still running then are left to the process's exit).
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// How many connections over the cap may be in the middle of being told so
/// at once; beyond them a new connection is closed without an answer.
const MAX_REFUSING: usize = 64;

/// How long a refused connection is given to take its 503.
const REFUSAL_TIME: Duration = Duration::from_millis(500);

/// How long the accept loop pauses when accepting fails (out of
/// descriptors, say), rather than retrying at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The unit in which the body budget counts bytes (a semaphore's permits).
const BUDGET_UNIT: usize = 1024;

/// How the server listens and what it tolerates.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen (`127.0.0.1:8081`; port 0 picks a free port).
    pub bind: SocketAddr,
    /// The largest request body (Cosmos DB: 2 MB documents; a little more
    /// for the JSON around them).
    pub max_request_bytes: usize,
    /// How long a new connection may stay silent before it is closed.
    pub first_byte_timeout: Duration,
    /// How long a client may take, from the first byte of a request (or of
    /// the TLS handshake), to send the request's whole head.
    pub header_timeout: Duration,
    /// How long a connection may stay silent between requests.
    pub idle_timeout: Duration,
    /// How long a client may take to send its body.
    pub body_timeout: Duration,
    /// How long a request's handler may run before the client is answered
    /// 408 in its place (`None`: [`Gateway::call_deadline`]).
    pub call_deadline: Option<Duration>,
    /// The most connections served at once; more are answered 503 and
    /// closed. Keep it well under the process's descriptor limit.
    pub max_connections: usize,
    /// The most bytes of request bodies the server holds at once, over all
    /// connections (at least [`ServeOptions::max_request_bytes`]).
    pub max_buffered_bytes: usize,
    /// How long a request waits for its body's share of
    /// [`ServeOptions::max_buffered_bytes`] before it is answered 503.
    pub body_wait: Duration,
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
            first_byte_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            call_deadline: None,
            max_connections: 512,
            max_buffered_bytes: 64 * 1024 * 1024,
            body_wait: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(8),
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

/// What every connection's tasks share.
struct Shared {
    gateway: Arc<Gateway>,
    options: ServeOptions,
    call_deadline: Duration,
    /// Bytes of request bodies held, in [`BUDGET_UNIT`]s.
    body_budget: Arc<Semaphore>,
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
    /// installs is in place) and connections are being accepted. Returns at
    /// most [`ServeOptions::shutdown_grace`] and a second after `shutdown`
    /// completes, even if handlers are stuck (they are left running).
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
        let served = runtime.block_on(self.serve(shutdown, ready));
        // Dropping the runtime would wait for every blocking task, and a
        // handler stuck in a script never ends.
        runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
        served
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
        let connections = Arc::new(Semaphore::new(self.options.max_connections));
        let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
        let shared = Arc::new(Shared {
            call_deadline: self
                .options
                .call_deadline
                .unwrap_or_else(|| self.gateway.call_deadline()),
            body_budget: Arc::new(Semaphore::new(
                self.options
                    .max_buffered_bytes
                    .max(self.options.max_request_bytes)
                    .div_ceil(BUDGET_UNIT),
            )),
            gateway: self.gateway,
            options: self.options,
        });
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
                        // Out of descriptors and the like: the connection
                        // waits in the backlog; try again a little later.
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    match connections.clone().try_acquire_owned() {
                        Ok(permit) => {
                            let serving = serve_connection(shared.clone(), stream, graceful.watcher());
                            tokio::spawn(async move {
                                serving.await;
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            // Over the cap: answered, within bounds of its
                            // own; past those, just closed.
                            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                                let max = shared.options.max_connections;
                                tokio::spawn(async move {
                                    refuse(stream, max).await;
                                    drop(permit);
                                });
                            }
                        }
                    }
                }
                () = &mut shutdown => break,
            }
        }
        drop(listener);
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(shared.options.shutdown_grace) => {}
        }
        Ok(())
    }
}

/// Serves one connection until it ends, its client is too slow or idle too
/// long (see the module docs), or shutdown closes it.
async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    watcher: hyper_util::server::graceful::Watcher,
) {
    let options = &shared.options;
    let addrs = Addrs {
        local: stream.local_addr().ok(),
        remote: stream.peer_addr().ok(),
    };
    let state = Arc::new(ConnState::new());
    let io = Watched {
        io: stream,
        state: state.clone(),
    };
    let service = {
        let shared = shared.clone();
        let state = state.clone();
        service_fn(move |req| {
            let busy = state.begin_request();
            let shared = shared.clone();
            async move {
                let response = serve_request(shared, req, addrs).await;
                drop(busy);
                response
            }
        })
    };
    // HTTP/1.1, or HTTP/2 with prior knowledge (h2c), which the Rust SDK
    // negotiates by default.
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let tls = options.tls.as_ref().map(TlsConfig::acceptor);
    let serving = async move {
        if let Some(acceptor) = tls {
            // A failed handshake just closes the connection; a slow one is
            // the watchdog's.
            let Ok(stream) = acceptor.accept(io).await else {
                return;
            };
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let _ = watcher.watch(conn).await;
        } else {
            let conn = builder.serve_connection(TokioIo::new(io), service);
            let _ = watcher.watch(conn).await;
        }
    };
    tokio::select! {
        () = serving => {}
        () = state.watchdog(options) => {}
    }
}

/// Tells a connection over the cap that the server is full (HTTP/1.1 503,
/// `Connection: close`), then closes it.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let body = serde_json::json!({
        "code": code_name(503),
        "message": format!(
            "the server is serving its maximum of {max_connections} connections \
             (--max-connections); retry later"
        ),
    })
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nx-ms-retry-after-ms: 1000\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        // Read (and drop) what the client sent, so closing does not reset
        // the connection before the client has read the answer.
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}

/// When a connection may be closed: the requests it has in progress and
/// when it last went idle. Times are milliseconds since `epoch`.
struct ConnState {
    epoch: Instant,
    in_progress: AtomicUsize,
    /// When the connection last went idle (0: it opened then).
    idle_since: AtomicU64,
    /// One more than when the first byte after `idle_since` was read (0:
    /// none yet).
    first_byte: AtomicU64,
    /// Whether a request has been served (idle, rather than first-byte,
    /// timeout).
    served: AtomicBool,
    /// Wakes the watchdog when the deadline may have moved: the first byte
    /// of an idle period was read, or the last request in progress ended.
    changed: Notify,
}

/// A request in progress on its connection; ends it when dropped.
struct Busy(Arc<ConnState>);

impl Drop for Busy {
    fn drop(&mut self) {
        let state = &self.0;
        if state.in_progress.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.first_byte.store(0, Ordering::Release);
            state.idle_since.store(state.now(), Ordering::Release);
            state.changed.notify_one();
        }
    }
}

impl ConnState {
    fn new() -> ConnState {
        ConnState {
            epoch: Instant::now(),
            in_progress: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            first_byte: AtomicU64::new(0),
            served: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn begin_request(self: &Arc<ConnState>) -> Busy {
        self.in_progress.fetch_add(1, Ordering::AcqRel);
        self.served.store(true, Ordering::Release);
        Busy(self.clone())
    }

    fn saw_bytes(&self) {
        if self.first_byte.load(Ordering::Acquire) == 0
            && self
                .first_byte
                .compare_exchange(0, self.now() + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.changed.notify_one();
        }
    }

    /// When the connection is to be closed if nothing changes; `None` while
    /// a request is in progress.
    fn deadline(&self, options: &ServeOptions) -> Option<Instant> {
        if self.in_progress.load(Ordering::Acquire) > 0 {
            return None;
        }
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let first_byte = self.first_byte.load(Ordering::Acquire);
        let at = if first_byte > 0 {
            (first_byte - 1).saturating_add(millis(options.header_timeout))
        } else {
            let silence = if self.served.load(Ordering::Acquire) {
                options.idle_timeout
            } else {
                options.first_byte_timeout
            };
            self.idle_since
                .load(Ordering::Acquire)
                .saturating_add(millis(silence))
        };
        Some(self.epoch + Duration::from_millis(at))
    }

    /// Completes when the connection has been idle or slow past its
    /// deadline.
    async fn watchdog(&self, options: &ServeOptions) {
        loop {
            match self.deadline(options) {
                None => self.changed.notified().await,
                Some(deadline) if deadline <= Instant::now() => return,
                Some(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline.into()) => {}
                        () = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}

/// A socket that tells its connection's [`ConnState`] when bytes arrive.
struct Watched<T> {
    io: T,
    state: Arc<ConnState>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.saw_bytes();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
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

/// The two ends of a connection.
#[derive(Clone, Copy)]
struct Addrs {
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
}

async fn serve_request(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    addrs: Addrs,
) -> Result<Response<Full<Bytes>>, Infallible> {
    // The Data Explorer's page and files are public (the page asks for the
    // key unless the client is on this machine) and have no body.
    if crate::explorer::is_explorer_path(req.uri().path()) {
        let page = crate::explorer::serve(
            req.method().as_str(),
            req.uri().path(),
            addrs.remote,
            shared.gateway.key_text(),
        );
        return Ok(into_hyper(page));
    }
    let response = match read_request(&shared, req, addrs).await {
        Ok((wire, reserved)) => {
            // Server-side duration: from the whole request being read to the
            // response being ready, queueing for a blocking thread included.
            let started = Instant::now();
            let response = handle(&shared, wire, reserved).await;
            let micros = started.elapsed().as_micros();
            response.with(
                "x-ms-request-duration-ms",
                format!("{}.{:03}", micros / 1000, micros % 1000),
            )
        }
        Err(Refused::Answer(response)) => response,
        Err(Refused::Error(err)) => err.response().with("content-type", "application/json"),
    };
    Ok(into_hyper(response))
}

/// Runs the gateway on the blocking pool, answering 408 in its place when
/// it runs past the call deadline. The body's reservation is released when
/// the handler returns, however late.
async fn handle(
    shared: &Arc<Shared>,
    wire: WireRequest,
    reserved: Option<OwnedSemaphorePermit>,
) -> WireResponse {
    // A fuzz run is many calls, bounded by their number, not by one call's
    // deadline.
    let deadline = if Gateway::is_fuzz_run(&wire) {
        crate::gateway::FUZZ_DEADLINE
    } else {
        shared.call_deadline
    };
    let abandoned = Arc::new(AtomicBool::new(false));
    let handler = {
        let gateway = shared.gateway.clone();
        let abandoned = abandoned.clone();
        tokio::task::spawn_blocking(move || {
            let _reserved = reserved;
            // Nobody waits for a request that queued past its deadline.
            (!abandoned.load(Ordering::Acquire)).then(|| gateway.handle(&wire, SystemTime::now()))
        })
    };
    match tokio::time::timeout(deadline, handler).await {
        Ok(Ok(Some(response))) => response,
        Ok(Err(e)) => WireError::new(500, format!("the request handler failed: {e}")).response(),
        Ok(Ok(None)) | Err(_) => {
            abandoned.store(true, Ordering::Release);
            WireError::new(
                408,
                format!(
                    "the request did not complete within {} ms (the scripts' wall clock and a \
                     margin); it may still take effect, so read before retrying a write",
                    deadline.as_millis()
                ),
            )
            .response()
            .with("content-type", "application/json")
        }
    }
}

/// Why a request was answered before its body was read whole.
enum Refused {
    /// A response the gateway built (400 or 401 with its usual headers).
    Answer(WireResponse),
    /// An error of the transport's own.
    Error(WireError),
}

impl From<WireError> for Refused {
    fn from(err: WireError) -> Refused {
        Refused::Error(err)
    }
}

/// How far over the body limit a request is still read (and dropped) to
/// answer it with a 413 rather than a reset connection.
const DRAIN_FACTOR: usize = 2;

/// Reads a body and drops it, up to `drain_limit` bytes; `false` when it
/// was longer or failed.
async fn drain_body(mut body: Incoming, drain_limit: usize) -> bool {
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return false;
        };
        if let Ok(data) = frame.into_data() {
            total = total.saturating_add(data.len());
            if total > drain_limit {
                return false;
            }
        }
    }
    true
}

/// Reads a body of at most `limit` bytes within the shared budget: the
/// declared length is reserved before reading, a body of unknown length
/// reserves each frame as it comes. `None` when the body is longer than
/// `limit` (after reading and dropping up to `drain_limit` bytes of it).
async fn collect_body(
    shared: &Shared,
    mut body: Incoming,
    declared: Option<usize>,
    limit: usize,
    drain_limit: usize,
) -> Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>, WireError> {
    let mut reserved = match declared {
        Some(length) => reserve(shared, length).await?,
        None => None,
    };
    let mut kept = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            WireError::bad_request(format!("the request body could not be read: {e}"))
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let total = kept.len().saturating_add(data.len());
        if total > limit {
            // Over the limit without a declared length: drop what was
            // kept, and read and drop a little more before the 413.
            drop((kept, reserved));
            let _ = drain_body(body, drain_limit.saturating_sub(total)).await;
            return Ok(None);
        }
        if declared.is_none() {
            let more = reserve(shared, data.len()).await?;
            match (&mut reserved, more) {
                (Some(held), Some(more)) => held.merge(more),
                (held @ None, more) => *held = more,
                (Some(_), None) => {}
            }
        }
        kept.extend_from_slice(&data);
    }
    Ok(Some((Bytes::from(kept), reserved)))
}

/// Reserves `bytes` of the shared body budget, waiting at most
/// [`ServeOptions::body_wait`].
///
/// # Errors
/// 503 when the budget stays spent.
async fn reserve(shared: &Shared, bytes: usize) -> Result<Option<OwnedSemaphorePermit>, WireError> {
    if bytes == 0 {
        return Ok(None);
    }
    let units = u32::try_from(bytes.div_ceil(BUDGET_UNIT)).unwrap_or(u32::MAX);
    let acquire = shared.body_budget.clone().acquire_many_owned(units);
    match tokio::time::timeout(shared.options.body_wait, acquire).await {
        Ok(Ok(permit)) => Ok(Some(permit)),
        Ok(Err(_)) | Err(_) => Err(WireError::new(
            503,
            format!(
                "the server already holds its maximum of {} bytes of request bodies \
                 (--max-buffered-bytes); retry later",
                shared.options.max_buffered_bytes
            ),
        )),
    }
}

async fn read_request(
    shared: &Shared,
    req: Request<Incoming>,
    addrs: Addrs,
) -> Result<(WireRequest, Option<OwnedSemaphorePermit>), Refused> {
    let options = &shared.options;
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
    let body_late = || {
        WireError::new(
            408,
            format!(
                "the request body did not arrive within {}s",
                options.body_timeout.as_secs()
            ),
        )
    };
    // A body a little over the limit is read and dropped before the 413,
    // because the SDKs write the whole body before they read the answer
    // and see a reset connection, not the 413, when the server stops
    // reading; a body far over it is refused at once.
    let drain_limit = options.max_request_bytes.saturating_mul(DRAIN_FACTOR);
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse::<usize>().ok());
    if let Some(length) = declared
        && length > options.max_request_bytes
    {
        if length <= drain_limit {
            tokio::time::timeout(options.body_timeout, drain_body(body, drain_limit))
                .await
                .map_err(|_| body_late())?;
        }
        return Err(too_large().into());
    }
    // The signature covers the head only: refuse an unsigned request before
    // reading (let alone holding) its body. The body is then read and
    // dropped in the background, so a client that writes it whole before
    // reading sees the answer rather than a reset.
    if let Err(response) = shared.gateway.authorize(
        parts.method.as_str(),
        parts.uri.path(),
        &parts.headers,
        SystemTime::now(),
    ) {
        let body_timeout = options.body_timeout;
        tokio::spawn(tokio::time::timeout(
            body_timeout,
            drain_body(body, drain_limit),
        ));
        return Err(Refused::Answer(response));
    }
    let collected = tokio::time::timeout(
        options.body_timeout,
        collect_body(
            shared,
            body,
            declared,
            options.max_request_bytes,
            drain_limit,
        ),
    )
    .await
    .map_err(|_| body_late())?;
    let Some((body, reserved)) = collected? else {
        return Err(too_large().into());
    };
    let mut headers = parts.headers;
    // HTTP/2 carries the host as the URI's authority, not a header.
    if !headers.contains_key(hyper::header::HOST)
        && let Some(authority) = parts.uri.authority()
        && let Ok(value) = hyper::header::HeaderValue::from_str(authority.as_str())
    {
        headers.insert(hyper::header::HOST, value);
    }
    Ok((
        WireRequest {
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            headers,
            body,
            local_addr: addrs.local,
            remote_addr: addrs.remote,
        },
        reserved,
    ))
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
