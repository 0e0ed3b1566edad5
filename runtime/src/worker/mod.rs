//! Process isolation for JavaScript: scripts run in worker processes under
//! operating-system limits, for the bounds boa cannot enforce in process.
//!
//! In process, a script that doubles a string with `+` some 35 times makes
//! an allocation fail, and boa aborts the process; a prototype chain that
//! boa builds in bytecode (`new F()` after `F.prototype = o`, in a loop) can
//! overflow the native stack on lookup, which also kills the process; and
//! the wall clock is only looked at when the script calls the host. boa
//! 0.22 has no allocation hook, no string limit and no per-instruction hook
//! (see [`Limits`]). A worker process turns each of these into
//! the failure of one call:
//!
//! ```text
//!   host thread (owns the transaction)          worker process (owns a sandbox)
//!   run_js ──Run{script, params, limits}──────► js::run(.., &mut Proxy, ..)
//!          ◄──Call{create, doc}───────────────   Proxy::create
//!   txn.create(doc)
//!          ──Reply{document}──────────────────►   callback runs
//!          ◄──Speculate{replace, doc}─────────   callback(err) runs at once
//!   txn.replace(doc) (failed? kill, roll back, run again)
//!          ◄──Done{body, logs, stats}──────────   queue drained
//!   commit (the caller)
//!
//!   the worker dies (abort, stack overflow, killed at the deadline):
//!   EOF or timeout ──► kill, reap, read its stderr ──► Failure (the caller rolls back)
//! ```
//!
//! * The transaction never leaves the host: the worker's collection is a
//!   [`Proxy`](child) that forwards each operation, and the host performs it
//!   on the real `&mut dyn Collection`. A dead worker leaves nothing behind
//!   that the caller's rollback does not undo.
//! * Limits are set by the host on the child (`prlimit`) before it is sent
//!   any call: an address-space limit ([`WorkerOptions::address_space`]),
//!   so an allocation bomb fails inside the worker, and no core dumps. The
//!   script runs on a thread with a [`SCRIPT_THREAD_STACK`] stack, whose
//!   overflow the Rust runtime reports before aborting.
//! * The host waits for each message with a deadline (`poll`): the call's
//!   wall time plus [`KILL_GRACE`]. Past it the worker is killed, so the
//!   wall clock is a hard bound here, even for loops that never call the
//!   host.
//! * Why a worker died is read from its exit signal and its last words on
//!   stderr: "memory allocation of N bytes failed" is [`Budget::Memory`],
//!   "has overflowed its stack" is [`Budget::NativeStack`], both 408 like
//!   every other bound; anything else is [`Error::Internal`] (500).
//! * While every call in flight can have two cores, both sides poll for
//!   their next message for up to [`SPIN`] before blocking: on an idle VM
//!   a blocked reader waits for a halted virtual CPU to wake, about 25 µs
//!   per message. With more calls they block at once.
//! * Round trips are what isolation costs (each wakes the other side), so
//!   a call makes as few as the script allows. A write whose callback can
//!   only see the error (`function (err) {…}`: see `js::run::Seen`) is
//!   *speculated*: the worker goes on as if it succeeded and sends it with
//!   its next message that has to go at once (an operation it waits for,
//!   or the call's end), so the host wakes once for all of them, or after
//!   at most two [`TICK`]s when the script computes without calling the
//!   host. If it fails, the host kills that worker, rolls the collection
//!   back to where the call began ([`Collection::mark`]) and runs the call
//!   again without speculation, so the script and the caller see exactly
//!   what they would in process; that script is not speculated again. A
//!   procedure whose first operation read the document named by one of its
//!   parameters gets that document *read ahead* with its next calls (the
//!   read is not charged if the script does not take it). The worker keeps
//!   the text of the scripts it ran and asks for one it lacks. For the
//!   blog's createComment that leaves one message each way per call.
//! * A worker serves one call at a time and is reused (its sandbox pool and
//!   compiled-script cache stay warm, and boa's per-call isolation holds as
//!   in process); a dead one is replaced by a fresh process on the next
//!   call. The pool spawns workers on demand, one per concurrent call, and
//!   keeps up to [`WorkerOptions::max_idle`] idle ones.
//!
//! The worker program is any executable that calls [`worker_main`] (the
//! `partita` binary does, as `partita script-worker`). The cost is a few
//! round trips per call: see README for the measured figures. Logs written
//! before a worker died are lost with it.
//!
//! [`SCRIPT_THREAD_STACK`]: crate::SCRIPT_THREAD_STACK

mod child;
mod wire;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use host_api::{Collection, HostError, QueryRequest, WriteOptions};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Resource, Rlimit, prlimit};
use serde_json::Value;

use self::wire::{
    CollectionWire, DocumentWire, FromWorker, HostCall, InvocationWire, Prefetched, ReplyWire,
    ScriptRef, ToWorker,
};
use crate::{Budget, Error, Failure, Invocation, Limits, Output, Script, Statistics};

/// How long past a call's wall-time limit the host waits before it kills
/// the worker. The worker stops a script at the limit itself when the
/// script calls the host; this is the backstop for code that never does.
pub const KILL_GRACE: Duration = Duration::from_millis(100);

/// How to start worker processes, and their limits.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The executable; it must call [`worker_main`] when run with `args`.
    pub program: PathBuf,
    /// Its arguments (for the `partita` binary: `["script-worker"]`).
    pub args: Vec<OsString>,
    /// The worker's address-space limit (`RLIMIT_AS`), in bytes: what its
    /// code, its stacks, its heap and the script's values together may map.
    /// An allocation past it fails in the worker, which ends the call with
    /// [`Budget::Memory`]. The default is 2 GiB. The worker's own mappings
    /// count: the `partita` binary maps about 1.2 GB at start (mimalloc
    /// reserves 1 GiB of address space up front), a worker on the system
    /// allocator about 0.1 GB.
    pub address_space: u64,
    /// Idle workers kept for the next calls; more concurrent calls spawn
    /// more workers, and those beyond this exit when their call is done.
    pub max_idle: usize,
}

impl WorkerOptions {
    /// Workers started as `program args...`, with the default limits.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> WorkerOptions {
        WorkerOptions {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            address_space: 2 << 30,
            max_idle: 16,
        }
    }
}

/// A pool of worker processes that run JavaScript calls; cheap to clone
/// (clones share the pool). Set it as [`Limits::workers`] and every
/// JavaScript procedure, trigger and user-defined function called with those
/// limits runs in a worker. See the module docs.
#[derive(Clone)]
pub struct WorkerPool {
    inner: Arc<Inner>,
}

struct Inner {
    options: WorkerOptions,
    idle: Mutex<Vec<Worker>>,
    started: AtomicU64,
    lost: AtomicU64,
    /// Calls running in the pool's workers now.
    in_flight: AtomicUsize,
    read_ahead: AtomicU64,
    speculated: AtomicU64,
    reruns: AtomicU64,
    /// What earlier calls of each script taught the pool.
    hints: Mutex<HashMap<ScriptRef, Hint>>,
}

/// How to run a script's next call, learned from its earlier ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hint {
    /// The parameter holding the id of the document the procedure read
    /// first, which the host reads ahead (see `run`).
    prefetch: Option<usize>,
    /// Whether writes whose callback sees only the error may be
    /// speculated; off for good once one of them failed.
    speculate: bool,
}

impl Default for Hint {
    fn default() -> Hint {
        Hint {
            prefetch: None,
            speculate: true,
        }
    }
}

/// The most scripts a pool keeps hints for; past it, it starts over.
const MAX_HINTS: usize = 4096;

/// A call counted in [`Inner::in_flight`] until dropped.
struct InFlight<'a>(&'a Inner);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many workers a pool started and how many it lost (workers that died
/// or were killed during a call), and how its round trips were saved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Processes started.
    pub started: u64,
    /// Processes that died or were killed during a call.
    pub lost: u64,
    /// Documents the host read ahead that the script then read.
    pub read_ahead: u64,
    /// Writes sent without waiting for their reply, because their callback
    /// sees only whether they failed.
    pub speculated: u64,
    /// Calls run a second time because a speculated write failed.
    pub reruns: u64,
}

impl WorkerPool {
    /// A pool that starts workers with `options` as calls need them (none
    /// is started here).
    pub fn new(options: WorkerOptions) -> WorkerPool {
        WorkerPool {
            inner: Arc::new(Inner {
                options,
                idle: Mutex::new(Vec::new()),
                started: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                read_ahead: AtomicU64::new(0),
                speculated: AtomicU64::new(0),
                reruns: AtomicU64::new(0),
                hints: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The options the pool starts workers with.
    pub fn options(&self) -> &WorkerOptions {
        &self.inner.options
    }

    /// How many workers were started and lost so far.
    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            started: self.inner.started.load(Ordering::Relaxed),
            lost: self.inner.lost.load(Ordering::Relaxed),
            read_ahead: self.inner.read_ahead.load(Ordering::Relaxed),
            speculated: self.inner.speculated.load(Ordering::Relaxed),
            reruns: self.inner.reruns.load(Ordering::Relaxed),
        }
    }

    /// An idle worker that is still alive, or a new one. (An idle worker
    /// can die from outside, the OOM killer say; one that dies after this
    /// check fails the call it was given.)
    fn take(&self) -> io::Result<Worker> {
        loop {
            let idle = self.idle().pop();
            match idle {
                Some(mut worker) => {
                    if let Ok(None) = worker.child.try_wait() {
                        return Ok(worker);
                    }
                }
                None => {
                    let worker = Worker::start(&self.inner.options)?;
                    self.inner.started.fetch_add(1, Ordering::Relaxed);
                    return Ok(worker);
                }
            }
        }
    }

    /// Counts a call in, and says how long its two sides may poll for
    /// messages ([`SPIN`]): only while every call's two sides can have a
    /// core of their own.
    fn enter(&self) -> (InFlight<'_>, Duration) {
        static CORES: OnceLock<usize> = OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let calls = self.inner.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let spin = if calls * 2 <= cores {
            SPIN
        } else {
            Duration::ZERO
        };
        (InFlight(&self.inner), spin)
    }

    fn hint(&self, key: &ScriptRef) -> Hint {
        let hints = self.inner.hints.lock().unwrap_or_else(|e| e.into_inner());
        hints.get(key).copied().unwrap_or_default()
    }

    fn learn(&self, key: &ScriptRef, change: impl FnOnce(&mut Hint)) {
        let mut hints = self.inner.hints.lock().unwrap_or_else(|e| e.into_inner());
        if hints.len() >= MAX_HINTS && !hints.contains_key(key) {
            hints.clear();
        }
        change(hints.entry(key.clone()).or_default());
    }

    fn give_back(&self, worker: Worker) {
        let mut idle = self.idle();
        if idle.len() < self.inner.options.max_idle {
            idle.push(worker);
        }
        // Otherwise it is dropped: killed and reaped.
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Worker>> {
        // A panic while holding the lock leaves a valid Vec.
        self.inner.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPool")
            .field("options", &self.inner.options)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Pools are equal when they are the same pool.
impl PartialEq for WorkerPool {
    fn eq(&self, other: &WorkerPool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for WorkerPool {}

/// The entry point of a worker process: serves calls from the host on
/// standard input and output until the host closes standard input, then
/// exits. Call it first thing in `main` when the process was started as a
/// worker (the `partita` binary: `partita script-worker`); it never
/// returns. Nothing else in the process may write to standard output.
pub fn worker_main() -> ! {
    // A panic in the engine is caught and reported as the call's failure;
    // the default hook would also print it to stderr, which nobody drains
    // while the worker lives.
    std::panic::set_hook(Box::new(|_| {}));
    let Ok(outbox) = child::Outbox::stdout() else {
        std::process::exit(3)
    };
    exit_with_the_host(outbox.clone());
    let code = std::thread::Builder::new()
        .name("script".into())
        .stack_size(crate::SCRIPT_THREAD_STACK)
        .spawn(move || child::serve(outbox))
        .map_or(3, |thread| thread.join().unwrap_or(3));
    std::process::exit(code)
}

/// Ends this worker when the host goes away, whatever its script is doing:
/// a host killed with SIGKILL cannot kill its workers, and one stuck in a
/// native loop would never read the end of its input. A thread waits for
/// the host's end of stdin to close (`POLLHUP`, asked for without reading,
/// so the script thread's reads are undisturbed) and exits the process.
/// Every [`TICK`] it also writes out what the script thread left waiting
/// in `outbox` since the previous tick.
fn exit_with_the_host(outbox: child::Outbox) {
    let watch = move || {
        let stdin = std::io::stdin();
        let mut fds = [PollFd::new(&stdin, PollFlags::empty())];
        let tick = timespec(TICK);
        loop {
            match poll(&mut fds, Some(&tick)) {
                Ok(0) => outbox.flush_stale(),
                Ok(_) if !fds[0].revents().is_empty() => std::process::exit(0),
                Err(rustix::io::Errno::INTR) | Ok(_) => {}
                Err(_) => std::process::exit(0),
            }
        }
    };
    // Without the watcher a worker still serves; it only outlives a killed
    // host, so failing to start it is no reason not to.
    let _ = std::thread::Builder::new()
        .name("host-watch".into())
        .stack_size(64 * 1024)
        .spawn(watch);
}

/// A running worker process and its pipes.
struct Worker {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    stderr: ChildStderr,
}

/// A worker is never dropped in the middle of a call (those are buried),
/// so it is idle: kill it and reap it, or it stays a zombie for as long as
/// the host lives.
impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why talking to a worker stopped.
enum Lost {
    /// The deadline passed.
    Deadline,
    /// A pipe failed or the worker broke the protocol (EOF when it died).
    Pipe(io::Error),
    /// The host gave up on this run (a speculated write failed): the
    /// worker, still running it, is killed; it is not a loss.
    Voided,
}

impl From<io::Error> for Lost {
    fn from(e: io::Error) -> Lost {
        Lost::Pipe(e)
    }
}

impl Worker {
    fn start(options: &WorkerOptions) -> io::Result<Worker> {
        let mut child = Command::new(&options.program)
            .args(&options.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_clear()
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot start the script worker {}: {e}",
                        options.program.display()
                    ),
                )
            })?;
        let pid = Some(Pid::from_child(&child));
        let limit = |n| Rlimit {
            current: Some(n),
            maximum: Some(n),
        };
        let limited = prlimit(pid, Resource::As, limit(options.address_space))
            .and_then(|_| prlimit(pid, Resource::Core, limit(0)));
        if let Err(e) = limited {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!(
                "cannot limit the script worker's memory: {e}"
            )));
        }
        let (Some(input), Some(output), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three pipes were requested")
        };
        Ok(Worker {
            child,
            input,
            output: BufReader::new(output),
            stderr,
        })
    }

    fn send(&mut self, message: &ToWorker) -> io::Result<()> {
        wire::send(&mut self.input, message)
    }

    /// The next message, waiting until `deadline` at most, polling for
    /// `spin` first.
    fn receive(&mut self, deadline: Instant, spin: Duration) -> Result<FromWorker, Lost> {
        if self.output.buffer().is_empty() && !spin_until_readable(self.output.get_ref(), spin) {
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Lost::Deadline);
                }
                let timeout = timespec(left);
                let mut fds = [PollFd::new(self.output.get_ref(), PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Ok(0) => continue,
                    Ok(_) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(Lost::Pipe(e.into())),
                }
            }
        }
        match wire::receive(&mut self.output)? {
            Some(message) => Ok(message),
            None => Err(Lost::Pipe(io::ErrorKind::UnexpectedEof.into())),
        }
    }

    /// Kills the worker (if it still runs), reaps it and says why it is
    /// gone: its exit status and the last lines it wrote to stderr.
    fn bury(mut self) -> Death {
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        Death {
            signal: status.and_then(|s| s.signal()),
            code: status.and_then(|s| s.code()),
            last_words: last_words(&mut self.stderr),
        }
    }
}

/// How often a worker's watcher thread looks for messages the script
/// thread left unsent: a speculated write waits for the next message that
/// must go at once, and at most two ticks when none comes (a script that
/// computes without calling the host). Twenty wake-ups a second of an
/// idle worker cost nothing measurable.
const TICK: Duration = Duration::from_millis(50);

/// How long a side that expects a message soon polls for it before it
/// blocks, when the machine has a core to spare for it (see
/// [`WorkerPool::enter`]). A blocked reader is woken by the kernel, which
/// on an idle VM means waking a halted virtual CPU: measured here, a
/// createComment in a worker took 330 µs blocking and 52 µs polling for
/// 50 µs first (200 µs bought nothing more), but with 16 calls on 2 cores
/// polling took the CPU the calls needed (9.7k against 2.7k/s).
const SPIN: Duration = Duration::from_micros(50);

/// Polls `fd` without blocking for up to `time`; whether it became
/// readable (or hung up: the read that follows will say).
pub(super) fn spin_until_readable(fd: impl std::os::fd::AsFd, time: Duration) -> bool {
    if time.is_zero() {
        return false;
    }
    let started = Instant::now();
    let zero = timespec(Duration::ZERO);
    loop {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        if matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
            return true;
        }
        if started.elapsed() >= time {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// What a dead worker left on its stderr: up to 64 KiB, read for at most
/// 100 ms (a process it started could hold the pipe open; ours start none).
fn last_words(stderr: &mut ChildStderr) -> String {
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    while bytes.len() < 64 << 10 {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = timespec(left);
        let mut fds = [PollFd::new(&*stderr, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => break,
            Ok(_) => match stderr.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            },
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: d.subsec_nanos().into(),
    }
}

/// How a worker ended.
struct Death {
    signal: Option<i32>,
    code: Option<i32>,
    last_words: String,
}

impl Death {
    /// The error the call fails with, given why the host stopped waiting.
    fn error(&self, lost: &Lost, limits: &Limits, options: &WorkerOptions) -> Error {
        let reason = match lost {
            Lost::Deadline => {
                return Error::Budget(Budget::WallTime {
                    limit: limits.wall_time,
                });
            }
            Lost::Pipe(e) => e,
            Lost::Voided => return Error::Internal("the run was voided".to_owned()),
        };
        // Nothing a script does reaches the worker's stderr (its logs are
        // captured, panics are silent): only the Rust runtime's reports.
        let said = |needle: &str| {
            self.last_words
                .lines()
                .find(|line| line.contains(needle))
                .map(str::trim)
        };
        if let Some(line) = said("memory allocation of") {
            // Rust's report: "memory allocation of N bytes failed".
            let size = line
                .split_whitespace()
                .find_map(|word| word.parse::<u64>().ok())
                .map_or_else(String::new, |n| format!("of {n} bytes "));
            return Error::Budget(Budget::Memory {
                limit: usize::try_from(options.address_space).unwrap_or(usize::MAX),
                what: format!("an allocation {size}in the script's worker process"),
            });
        }
        if said("has overflowed its stack").is_some() {
            return Error::Budget(Budget::NativeStack {
                limit: crate::SCRIPT_THREAD_STACK,
            });
        }
        let how = match (self.signal, self.code) {
            (Some(signal), _) => format!("killed by signal {signal}"),
            (None, Some(code)) => format!("exit code {code}"),
            (None, None) => "status unknown".to_owned(),
        };
        let tail: String = self
            .last_words
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .to_owned();
        Error::Internal(format!(
            "the script worker {} failed during the call ({reason}; {how}){}{tail}",
            options.program.display(),
            if tail.is_empty() { "" } else { ": " },
        ))
    }
}

/// Runs a procedure or trigger in a worker of `pool`; [`crate::run_js`]'s
/// contract.
#[allow(clippy::result_large_err)] // As `run_js`.
pub(crate) fn run(
    pool: &WorkerPool,
    script: &Script<'_>,
    invocation: Invocation,
    collection: &mut dyn Collection,
    limits: &Limits,
) -> Result<Output, Failure> {
    let started = Instant::now();
    let (_in_flight, spin) = pool.enter();
    let key = ScriptRef::from(script);
    let hint = pool.hint(&key);
    let invocation = InvocationWire::from(invocation);
    let params: &[Value] = match &invocation {
        InvocationWire::Procedure { params } => params,
        _ => &[],
    };
    // Where a speculated write that failed rolls back to; without it, no
    // speculation and no reading ahead.
    let marked = collection.mark();
    let speculate = hint.speculate && marked;
    // The read this procedure began with last time, done here so that the
    // worker need not ask for it. What it cost is taken back if the script
    // does not read it after all.
    let prefetch_id = hint
        .prefetch
        .filter(|_| marked)
        .and_then(|i| params.get(i)?.as_str())
        .map(str::to_owned);
    let (prefetch, mut prefetch_cost) = match &prefetch_id {
        Some(id) => read_ahead(&mut *collection, id),
        None => (None, Statistics::default()),
    };
    let prefetched = prefetch.is_some();
    let mut request = ToWorker::Run {
        script: key.clone(),
        invocation,
        limits: limits.into(),
        spin,
        collection: CollectionWire {
            container_id: collection.container_id().to_owned(),
            partition_key: collection.partition_key().to_json_array(),
            self_link: collection.self_link(),
            alt_link: collection.alt_link(),
        },
        speculate,
        prefetch,
        ids: crate::js::ids_state(),
    };
    // The worker continues this thread's sequence; move it on past what
    // the worker may have used, so the next call's ids are new.
    crate::js::skip_ids();
    let (result, prefetch_used) = loop {
        let attempt = attempt(
            pool,
            &request,
            script.body,
            &mut *collection,
            spin,
            started,
            limits,
        );
        match attempt {
            Attempt::Speculation => {
                // A write the worker assumed would succeed failed: run the
                // call again from where it began, this time waiting for
                // every reply (and from now on, for this script).
                pool.inner.reruns.fetch_add(1, Ordering::Relaxed);
                pool.learn(&key, |hint| hint.speculate = false);
                collection.roll_back();
                if let (true, Some(id)) = (prefetched, &prefetch_id) {
                    // Read it again, for the statistics: the state is the
                    // one it was read in, so it reads the same.
                    prefetch_cost = read_ahead(&mut *collection, id).1;
                }
                if let ToWorker::Run { speculate, .. } = &mut request {
                    *speculate = false;
                }
            }
            Attempt::Ended {
                result,
                first_read,
                prefetch_used,
            } => {
                if prefetch_used {
                    pool.inner.read_ahead.fetch_add(1, Ordering::Relaxed);
                } else {
                    let params = match &request {
                        ToWorker::Run {
                            invocation: InvocationWire::Procedure { params },
                            ..
                        } => params.as_slice(),
                        _ => &[],
                    };
                    let learned = first_read
                        .and_then(|id| params.iter().position(|p| p.as_str() == Some(&id)));
                    if learned != hint.prefetch {
                        pool.learn(&key, |hint| hint.prefetch = learned);
                    }
                }
                break (result, prefetch_used);
            }
        }
    };
    let mut stats = collection.stats();
    if prefetched && !prefetch_used {
        stats = stats.since(prefetch_cost);
    }
    result
        .map(|mut output| {
            output.stats = output.stats.with_documents(stats);
            output
        })
        .map_err(|mut failure| {
            failure.stats = failure.stats.with_documents(stats);
            failure
        })
}

/// Reads `id` ahead of a call, after [`Collection::mark`]: the document
/// and what reading it cost, or nothing (rolled back) when it cannot be
/// read, which the script then finds out itself if it reads it.
fn read_ahead(collection: &mut dyn Collection, id: &str) -> (Option<Prefetched>, Statistics) {
    let before = collection.stats();
    match collection.read(id) {
        Ok(document) => {
            let cost = collection.stats().since(before);
            let prefetched = Prefetched {
                id: id.to_owned(),
                document: DocumentWire(document),
            };
            (Some(prefetched), cost)
        }
        Err(_) => {
            collection.roll_back();
            (None, Statistics::default())
        }
    }
}

/// How one run of a call in a worker ended.
enum Attempt {
    /// It ended, well or not.
    Ended {
        result: Result<Output, Failure>,
        /// The id of the call's first operation when that was a point read
        /// the worker waited for: what to read ahead next time.
        first_read: Option<String>,
        /// Whether the script took the document read ahead.
        prefetch_used: bool,
    },
    /// A speculated write failed: nothing after it was performed, and the
    /// call must run again without speculation.
    Speculation,
}

/// Runs `request` (a [`ToWorker::Run`] of the script whose text is `body`)
/// once in a worker, performing its operations on `collection`.
fn attempt(
    pool: &WorkerPool,
    request: &ToWorker,
    body: &str,
    collection: &mut dyn Collection,
    spin: Duration,
    started: Instant,
    limits: &Limits,
) -> Attempt {
    // The failure of an operation the worker posted without waiting for
    // its reply: the call's outcome, as it would have been in process.
    let mut posted: Option<HostError> = None;
    let mut speculation_failed = false;
    let mut first_read = None;
    let mut first = true;
    let conversation = converse(pool, request, spin, started, limits, |worker, message| {
        if !matches!(message, FromWorker::NeedScript)
            && std::mem::take(&mut first)
            && let FromWorker::Call(HostCall::Read { id }) = &message
        {
            first_read = Some(id.clone());
        }
        match message {
            FromWorker::NeedScript => {
                let body = body.to_owned();
                worker.send(&ToWorker::Script { body })?;
                Ok(None)
            }
            FromWorker::Call(call) => {
                let reply = perform(&mut *collection, call);
                worker.send(&ToWorker::Reply(reply))?;
                Ok(None)
            }
            FromWorker::Post(call) => {
                if posted.is_none() {
                    posted = perform(&mut *collection, call).err().map(HostError::from);
                }
                Ok(None)
            }
            FromWorker::Speculate(call) => {
                pool.inner.speculated.fetch_add(1, Ordering::Relaxed);
                if posted.is_none() {
                    match perform(&mut *collection, call).map_err(HostError::from) {
                        Err(e) if e.ends_call() => posted = Some(e),
                        Err(_) => {
                            // The worker is running code that assumed
                            // success: stop it at once, whatever that
                            // code does (it may never call the host).
                            speculation_failed = true;
                            return Err(Lost::Voided);
                        }
                        Ok(_) => {}
                    }
                }
                Ok(None)
            }
            FromWorker::Done {
                result,
                prefetch_used,
            } => Ok(Some((result, prefetch_used))),
            FromWorker::UdfDone(_) => Err(protocol("a function's result for a procedure call")),
        }
    });
    if speculation_failed {
        return Attempt::Speculation;
    }
    let (done, prefetch_used) = match conversation {
        Ok((done, prefetch_used)) => (Ok(done), prefetch_used),
        Err(failure) => (Err(failure), false),
    };
    let result = match (done, posted) {
        (Ok(Ok(output)), None) => Ok(Output::from(output)),
        (Ok(Ok(output)), Some(error)) => {
            let output = Output::from(output);
            Err(Failure {
                error: crate::js::unhandled(error),
                logs: output.logs,
                stats: output.stats,
            })
        }
        (Ok(Err(failure)), None) => Err(Failure::from(failure)),
        (Ok(Err(failure)), Some(error)) => {
            let failure = Failure::from(failure);
            Err(Failure {
                error: crate::js::unhandled(error),
                ..failure
            })
        }
        (Err(failure), _) => Err(failure),
    };
    Attempt::Ended {
        result,
        first_read,
        prefetch_used,
    }
}

/// Calls a user-defined function in a worker of `pool`; [`crate::run_udf`]'s
/// contract.
#[allow(clippy::result_large_err)] // As `run_udf`.
pub(crate) fn run_udf(
    pool: &WorkerPool,
    udf: &Script<'_>,
    args: &[Option<Value>],
    limits: &Limits,
) -> Result<Option<Value>, Failure> {
    let (_in_flight, spin) = pool.enter();
    let request = ToWorker::Udf {
        script: udf.into(),
        args: args.to_vec(),
        limits: limits.into(),
    };
    let result = converse(
        pool,
        &request,
        spin,
        Instant::now(),
        limits,
        |_, message| match message {
            FromWorker::UdfDone(done) => Ok(Some(done)),
            FromWorker::NeedScript
            | FromWorker::Call(_)
            | FromWorker::Post(_)
            | FromWorker::Speculate(_)
            | FromWorker::Done { .. } => Err(protocol("a collection operation from a function")),
        },
    );
    result.and_then(|done| done.map_err(Failure::from))
}

/// A conversation's result, or the failure it ended in (the caller adds
/// the collection's statistics). Unboxed, as `run_js`'s.
type Conversation<T> = Result<T, Failure>;

/// Sends `request` to a worker and hands every message to `on_message`
/// until it returns the result. On any failure (the worker died, broke the
/// protocol or ran past the deadline) the worker is buried and the failure
/// explained; otherwise the worker goes back to the pool.
#[allow(clippy::result_large_err)] // As `run_js`.
fn converse<T>(
    pool: &WorkerPool,
    request: &ToWorker,
    spin: Duration,
    started: Instant,
    limits: &Limits,
    mut on_message: impl FnMut(&mut Worker, FromWorker) -> Result<Option<T>, Lost>,
) -> Conversation<T> {
    let fail = |error: Error| Failure {
        error,
        logs: String::new(),
        stats: Statistics {
            wall_time: started.elapsed(),
            ..Statistics::default()
        },
    };
    // An idle worker may die between `take` and the request: then the
    // request cannot be sent, and a fresh one takes it.
    let mut attempts = 0;
    let mut worker = loop {
        let mut candidate = match pool.take() {
            Ok(worker) => worker,
            Err(e) => return Err(fail(Error::Internal(e.to_string()))),
        };
        match candidate.send(request) {
            Ok(()) => break candidate,
            Err(e) => {
                attempts += 1;
                let death = candidate.bury();
                if attempts == 2 {
                    // A fresh worker that cannot take a call either: say
                    // why it died.
                    pool.inner.lost.fetch_add(1, Ordering::Relaxed);
                    let error = death.error(&Lost::Pipe(e), limits, &pool.inner.options);
                    return Err(fail(error));
                }
            }
        }
    };
    let deadline = started + limits.wall_time + KILL_GRACE;
    let outcome = (|| {
        loop {
            let message = worker.receive(deadline, spin)?;
            if let Some(done) = on_message(&mut worker, message)? {
                return Ok(done);
            }
        }
    })();
    match outcome {
        Ok(done) => {
            pool.give_back(worker);
            Ok(done)
        }
        Err(Lost::Voided) => {
            drop(worker);
            Err(fail(Error::Internal("the run was voided".to_owned())))
        }
        Err(lost) => {
            pool.inner.lost.fetch_add(1, Ordering::Relaxed);
            let death = worker.bury();
            Err(fail(death.error(&lost, limits, &pool.inner.options)))
        }
    }
}

fn protocol(what: &str) -> Lost {
    Lost::Pipe(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the worker sent {what}"),
    ))
}

fn write_options(if_match: &Option<String>) -> WriteOptions<'_> {
    WriteOptions {
        if_match: if_match.as_deref(),
    }
}

/// Performs one operation a worker asked for on the real collection.
fn perform(
    collection: &mut dyn Collection,
    call: HostCall,
) -> Result<ReplyWire, wire::HostErrorWire> {
    let reply = match call {
        HostCall::ResolveLink { link } => {
            collection.resolve_document_link(&link).map(ReplyWire::Id)
        }
        HostCall::Read { id } => collection.read(&id).map(Into::into),
        HostCall::ReadFeed {
            page_size,
            continuation,
        } => collection
            .read_feed(page_size, continuation.as_deref())
            .map(Into::into),
        HostCall::Create { doc } => collection.create(doc).map(Into::into),
        HostCall::Replace { id, doc, if_match } => collection
            .replace(&id, doc, write_options(&if_match))
            .map(Into::into),
        HostCall::Upsert { doc, if_match } => collection
            .upsert(doc, write_options(&if_match))
            .map(Into::into),
        HostCall::Delete { id, if_match } => collection
            .delete(&id, write_options(&if_match))
            .map(|()| ReplyWire::Done),
        HostCall::Query {
            sql,
            parameters,
            page_size,
            continuation,
        } => collection
            .query(QueryRequest {
                sql: &sql,
                parameters: &parameters,
                page_size,
                continuation: continuation.as_deref(),
            })
            .map(Into::into),
    };
    reply.map_err(Into::into)
}
