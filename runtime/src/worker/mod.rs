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
//! * A worker runs one call at a time and is reused (its sandbox pool and
//!   compiled-script cache stay warm, and boa's per-call isolation holds as
//!   in process); a dead one is replaced by a fresh process on the next
//!   call. It can *hold* up to [`CHANNELS`] calls: they share its stdin
//!   (each frame names its call's sequence number) and each has an output
//!   channel of its own (stdout, or an inherited pipe). The worker runs
//!   them in the order sent and queues the rest.
//! * The pool starts workers on demand until [`WorkerOptions::running`]
//!   of them run calls (the cores, by default); then a call queues behind
//!   the least busy worker that began or ended a call within [`FLOWING`].
//!   Waking a blocked process costs more than the call's own work on a
//!   busy machine, and its memory is cold after others ran: a worker with
//!   a queue goes from one call to the next without either. A queued call
//!   that has heard nothing after [`RESCUE`] while a call sent before it
//!   still runs sends a `Cancel`, retires that worker (it takes no more
//!   calls, and is killed once its calls end; the channel is never read
//!   again) and runs in another worker, unqueued; so does a call whose
//!   worker died before it began. Only the call's own host thread performs
//!   its operations, so a call sent twice is performed at most once. Up to
//!   [`WorkerOptions::max_idle`] idle workers are kept.
//!
//! The worker program is any executable that calls [`worker_main`] (the
//! `partita` binary does, as `partita script-worker`). The cost is a few
//! round trips per call: see README for the measured figures. Logs written
//! before a worker died are lost with it.
//!
//! [`SCRIPT_THREAD_STACK`]: crate::SCRIPT_THREAD_STACK

mod child;
mod wire;

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::io::{self, BufReader, PipeReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use host_api::{Collection, HostError, QueryRequest, WriteOptions};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Resource, Rlimit, prlimit};
use serde_json::Value;

use self::wire::{
    Addressed, CollectionWire, DocumentWire, FromWorker, HostCall, InvocationWire, Prefetched,
    ReplyWire, ScriptRef, ToWorker,
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
    /// How many workers run calls before a new call queues behind one of
    /// them instead of waking another (a queued call starts without a
    /// wake-up, in a worker whose memory is in the caches). The default is
    /// the machine's cores. A call never queues behind one that has run
    /// for more than 10 ms, and leaves the queue for another worker after
    /// 50 ms.
    pub running: usize,
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
            running: cores(),
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
    /// The worker processes that take calls, busy or idle.
    workers: Mutex<Vec<Arc<Process>>>,
    started: AtomicU64,
    lost: AtomicU64,
    /// Calls running in the pool's workers now.
    in_flight: AtomicUsize,
    read_ahead: AtomicU64,
    speculated: AtomicU64,
    reruns: AtomicU64,
    queued: AtomicU64,
    moved: AtomicU64,
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
    /// Calls sent to a worker behind another call.
    pub queued: u64,
    /// Calls sent again to another worker before they began: they waited
    /// too long behind another call, or their worker died first.
    pub moved: u64,
}

impl WorkerPool {
    /// A pool that starts workers with `options` as calls need them (none
    /// is started here).
    pub fn new(options: WorkerOptions) -> WorkerPool {
        WorkerPool {
            inner: Arc::new(Inner {
                options,
                workers: Mutex::new(Vec::new()),
                started: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                read_ahead: AtomicU64::new(0),
                speculated: AtomicU64::new(0),
                reruns: AtomicU64::new(0),
                queued: AtomicU64::new(0),
                moved: AtomicU64::new(0),
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
            queued: self.inner.queued.load(Ordering::Relaxed),
            moved: self.inner.moved.load(Ordering::Relaxed),
        }
    }

    /// A channel of a worker process for one call whose first message is
    /// `size` bytes: once [`WorkerOptions::running`] workers run calls, one
    /// queued behind the calls of the least busy worker that is still
    /// making progress (when `queue` allows and the message is small);
    /// else an idle worker's (the one used last, if still alive); else a
    /// new worker's.
    fn lease(&self, queue: bool, size: usize) -> io::Result<Lease> {
        let now = Instant::now();
        {
            let mut workers = self.workers();
            // Idle workers can die from outside (the OOM killer, say):
            // those are dropped here; one that dies after this check fails
            // the call it was given, which then runs elsewhere.
            workers.retain(|p| p.state().calls > 0 || matches!(p.child().try_wait(), Ok(None)));
            let mut idle: Option<(Instant, &Arc<Process>)> = None;
            let mut busy: Option<(usize, &Arc<Process>)> = None;
            let mut running = 0;
            for process in workers.iter() {
                let state = process.state();
                if state.calls > 0 {
                    running += 1;
                }
                if state.free.is_empty() {
                    continue;
                }
                if state.calls == 0 {
                    if idle.is_none_or(|(last, _)| state.progress > last) {
                        idle = Some((state.progress, process));
                    }
                } else if now.saturating_duration_since(state.progress) < FLOWING
                    && busy.is_none_or(|(calls, _)| state.calls < calls)
                {
                    busy = Some((state.calls, process));
                }
            }
            // With a worker running on every core, a call waits behind one
            // rather than wake another: it starts as soon as a core would
            // be free for it anyway, without a wake-up, in a worker whose
            // memory is still in the caches.
            let queueing = queue && size <= MAX_QUEUED && running >= self.inner.options.running;
            if let (true, Some((_, process))) = (queueing, busy)
                && let Some(lease) = Lease::new(process, now)
            {
                self.inner.queued.fetch_add(1, Ordering::Relaxed);
                return Ok(lease);
            }
            if let Some(lease) = idle.and_then(|(_, process)| Lease::new(process, now)) {
                return Ok(lease);
            }
        }
        let process = Arc::new(Process::start(&self.inner.options)?);
        // Its progress counts from when it could first take a call.
        let lease = Lease::new(&process, Instant::now())
            .ok_or_else(|| io::Error::other("a new script worker has no free channel"))?;
        self.workers().push(process);
        self.inner.started.fetch_add(1, Ordering::Relaxed);
        Ok(lease)
    }

    /// Called when a call on `process` ended well: past the idle limit, an
    /// idle worker is retired and killed.
    fn ended(&self, process: &Arc<Process>) {
        if process.state().calls > 0 {
            return;
        }
        let mut workers = self.workers();
        let idle = workers.iter().filter(|p| p.state().calls == 0).count();
        if idle > self.inner.options.max_idle && process.state().calls == 0 {
            workers.retain(|p| !Arc::ptr_eq(p, process));
            drop(workers);
            process.retire();
        }
    }

    /// Takes `process` out of the pool: it gets no more calls, and is
    /// killed once those it has end.
    fn remove(&self, process: &Arc<Process>) {
        self.workers().retain(|p| !Arc::ptr_eq(p, process));
        process.retire();
    }

    fn workers(&self) -> MutexGuard<'_, Vec<Arc<Process>>> {
        // A panic while holding the lock leaves a valid Vec.
        self.inner.workers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a call in, and says how long its two sides may poll for
    /// messages ([`SPIN`]): only while every call's two sides can have a
    /// core of their own.
    fn enter(&self) -> (InFlight<'_>, Duration) {
        let cores = cores();
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
    let Ok(channels) = child::Outbox::channels() else {
        std::process::exit(3)
    };
    exit_with_the_host(channels.clone());
    let code = std::thread::Builder::new()
        .name("script".into())
        .stack_size(crate::SCRIPT_THREAD_STACK)
        .spawn(move || child::serve(channels))
        .map_or(3, |thread| thread.join().unwrap_or(3));
    std::process::exit(code)
}

/// Ends this worker when the host goes away, whatever its script is doing:
/// a host killed with SIGKILL cannot kill its workers, and one stuck in a
/// native loop would never read the end of its input. A thread waits for
/// the host's end of stdin to close (`POLLHUP`, asked for without reading,
/// so the script thread's reads are undisturbed) and exits the process.
/// Every [`TICK`] it also writes out what the script thread left waiting
/// in its output channels since the previous tick.
fn exit_with_the_host(channels: Vec<child::Outbox>) {
    let watch = move || {
        let stdin = std::io::stdin();
        let mut fds = [PollFd::new(&stdin, PollFlags::empty())];
        let tick = timespec(TICK);
        loop {
            match poll(&mut fds, Some(&tick)) {
                Ok(0) => channels.iter().for_each(child::Outbox::flush_stale),
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

/// How many calls one worker process can hold at once, the one it runs
/// and those queued behind it: one output channel each.
const CHANNELS: usize = 8;

/// A call is queued behind a busy worker only while that worker makes
/// progress: a call of it began or ended this recently. One that has run
/// longer takes no more calls until it ends.
const FLOWING: Duration = Duration::from_millis(10);

/// How long a queued call waits for its first message while a call ahead
/// of it still runs, before it leaves the queue and runs elsewhere (its
/// worker then takes no more calls).
const RESCUE: Duration = Duration::from_millis(50);

/// The largest first message a call may queue with: the seven a worker
/// can have queued then fit in its input pipe (64 KiB) together, so no
/// writer waits for the call ahead.
const MAX_QUEUED: usize = 4 << 10;

fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A running worker process: its input, shared by the calls sent to it
/// (in order, each with a sequence number), and its output channels, one
/// per call it holds.
struct Process {
    child: Mutex<Child>,
    input: Mutex<ChildStdin>,
    stderr: Mutex<ChildStderr>,
    state: Mutex<State>,
}

struct State {
    /// The output channels no call holds.
    free: Vec<(u32, BufReader<PipeReader>)>,
    /// Calls holding a channel of this worker.
    calls: usize,
    next_seq: u64,
    /// Calls sent and not yet ended, by sequence number. The worker runs
    /// its calls in the order sent, so a call is still queued while one
    /// sent before it is here.
    unfinished: BTreeSet<u64>,
    /// When a call of this worker last began on an idle worker or ended.
    progress: Instant,
    /// Out of the pool: killed when its last call ends.
    retired: bool,
}

/// Killed and reaped, or it stays a zombie for as long as the host lives.
impl Drop for Process {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Why talking to a worker stopped.
enum Lost {
    /// The deadline passed.
    Deadline,
    /// A pipe failed or the worker broke the protocol (EOF when it died).
    Pipe(io::Error),
    /// The call could not be sent (the worker had died).
    Unsent(io::Error),
    /// The host gave up on this run (a speculated write failed): the
    /// worker, still running it, is killed; it is not a loss.
    Voided,
    /// The call waited past [`RESCUE`] behind another that still runs.
    Queued,
}

impl From<io::Error> for Lost {
    fn from(e: io::Error) -> Lost {
        Lost::Pipe(e)
    }
}

impl Process {
    fn start(options: &WorkerOptions) -> io::Result<Process> {
        use std::os::fd::{AsRawFd, BorrowedFd};
        use std::os::unix::process::CommandExt;
        // Channel 0 is the worker's stdout; the others are pipes it
        // inherits, named in its environment.
        let (first, stdout) = std::io::pipe()?;
        let mut readers = vec![(0, BufReader::new(first))];
        let mut inherited = Vec::new();
        for channel in 1..CHANNELS as u32 {
            let (reader, writer) = std::io::pipe()?;
            readers.push((channel, BufReader::new(reader)));
            // Above the standard descriptors, which the spawn replaces in
            // the child (a host started with one of them closed could get
            // it for a pipe).
            inherited.push(rustix::io::fcntl_dupfd_cloexec(&writer, 3)?);
        }
        let fds: Vec<i32> = inherited.iter().map(|w| w.as_raw_fd()).collect();
        let named = fds.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let mut command = Command::new(&options.program);
        command
            .args(&options.args)
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .env_clear()
            .env(child::CHANNELS_VAR, named);
        // The pipes are close-on-exec, so no other process this host starts
        // inherits them; the worker keeps its own across `exec`.
        // SAFETY: runs in the forked child before `exec`; it only makes
        // `fcntl` calls on descriptors that `inherited` keeps open until
        // after the spawn, and allocates nothing.
        unsafe {
            command.pre_exec(move || {
                for &fd in &fds {
                    let fd = BorrowedFd::borrow_raw(fd);
                    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot start the script worker {}: {e}",
                    options.program.display()
                ),
            )
        })?;
        drop(command);
        drop(inherited);
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
        let (Some(input), Some(stderr)) = (child.stdin.take(), child.stderr.take()) else {
            unreachable!("both pipes were requested")
        };
        readers.reverse(); // Channel 0 is taken first.
        Ok(Process {
            child: Mutex::new(child),
            input: Mutex::new(input),
            stderr: Mutex::new(stderr),
            state: Mutex::new(State {
                free: readers,
                calls: 0,
                next_seq: 1,
                unfinished: BTreeSet::new(),
                progress: Instant::now(),
                retired: false,
            }),
        })
    }

    /// Whether a call sent before call `seq` has not ended (the worker
    /// runs its calls in the order sent, so `seq` has not begun).
    fn ahead_of(&self, seq: u64) -> bool {
        self.state().unfinished.range(..seq).next().is_some()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state completes under the lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn child(&self) -> MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks it retired, and kills it if no call holds it.
    fn retire(&self) {
        let mut state = self.state();
        state.retired = true;
        if state.calls == 0 {
            drop(state);
            let _ = self.child().kill();
        }
    }

    /// Kills the worker (if it still runs), reaps it and says why it is
    /// gone: its exit status and the last lines it wrote to stderr.
    fn bury(&self) -> Death {
        let status = {
            let mut child = self.child();
            let _ = child.kill();
            child.wait().ok()
        };
        let mut stderr = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        Death {
            signal: status.and_then(|s| s.signal()),
            code: status.and_then(|s| s.code()),
            last_words: last_words(&mut stderr),
        }
    }
}

/// One call's hold on a worker: an output channel, and the call's place in
/// the worker's order once sent.
struct Lease {
    process: Arc<Process>,
    channel: u32,
    /// The channel's reader; `None` once the call left it with messages
    /// possibly still to come (the channel is then never used again).
    reader: Option<BufReader<PipeReader>>,
    /// The call's sequence number, once sent.
    seq: u64,
    /// Whether any message of this call arrived.
    heard: bool,
    /// When the call was leased a channel.
    since: Instant,
}

impl Lease {
    /// A free channel of `process`, if it has one.
    fn new(process: &Arc<Process>, now: Instant) -> Option<Lease> {
        let mut state = process.state();
        let (channel, reader) = state.free.pop()?;
        if state.calls == 0 {
            state.progress = now;
        }
        state.calls += 1;
        Some(Lease {
            process: Arc::clone(process),
            channel,
            reader: Some(reader),
            seq: 0,
            heard: false,
            since: now,
        })
    }

    /// Sends the call's first message, taking the next place in the
    /// worker's order.
    fn start(&mut self, message: &mut Addressed) -> io::Result<()> {
        let mut input = self.process.input.lock().unwrap_or_else(|e| e.into_inner());
        self.seq = {
            let mut state = self.process.state();
            let seq = state.next_seq;
            state.next_seq += 1;
            state.unfinished.insert(seq);
            seq
        };
        message.send(&mut *input, self.seq, self.channel)
    }

    /// Sends a message of the running call (an answer, a script's text).
    fn send(&mut self, message: &ToWorker) -> io::Result<()> {
        let mut message = Addressed::new(message)?;
        let mut input = self.process.input.lock().unwrap_or_else(|e| e.into_inner());
        message.send(&mut *input, self.seq, self.channel)
    }

    /// Whether a call sent before this one has not ended: then this one
    /// has not begun.
    fn behind(&self) -> bool {
        self.process.ahead_of(self.seq)
    }

    /// The next message, waiting until `deadline` at most, polling for
    /// `spin` first. Before the first one, a call that waits past
    /// [`RESCUE`] behind another is [`Lost::Queued`].
    fn receive(&mut self, deadline: Instant, spin: Duration) -> Result<FromWorker, Lost> {
        let Some(reader) = &mut self.reader else {
            return Err(Lost::Pipe(io::ErrorKind::BrokenPipe.into()));
        };
        if reader.buffer().is_empty() && !spin_until_readable(reader.get_ref(), spin) {
            let mut rescue = (!self.heard).then(|| self.since + RESCUE);
            loop {
                let now = Instant::now();
                let until = rescue.map_or(deadline, |r| r.min(deadline));
                let left = until.saturating_duration_since(now);
                if left.is_zero() {
                    if now >= deadline {
                        return Err(Lost::Deadline);
                    }
                    if self.process.ahead_of(self.seq) {
                        return Err(Lost::Queued);
                    }
                    // It runs: no more rescue checks.
                    rescue = None;
                    continue;
                }
                let timeout = timespec(left);
                let mut fds = [PollFd::new(reader.get_ref(), PollFlags::IN)];
                match poll(&mut fds, Some(&timeout)) {
                    Ok(0) => continue,
                    Ok(_) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(Lost::Pipe(e.into())),
                }
            }
        }
        match wire::receive(reader)? {
            Some(message) => {
                self.heard = true;
                Ok(message)
            }
            None => Err(Lost::Pipe(io::ErrorKind::UnexpectedEof.into())),
        }
    }

    /// The call ended well: its channel is free again.
    fn finish(mut self) {
        let mut state = self.process.state();
        state.unfinished.remove(&self.seq);
        state.progress = Instant::now();
        if let Some(reader) = self.reader.take() {
            state.free.push((self.channel, reader));
        }
    }

    /// The call leaves the queue it waits in: the worker is told to drop
    /// it, and the channel, which may yet get messages, is not used again.
    fn cancel(mut self) -> io::Result<()> {
        self.reader = None;
        self.process.state().unfinished.remove(&self.seq);
        self.send(&ToWorker::Cancel)
    }
}

/// The call no longer holds the worker: a retired worker is killed after
/// its last call.
impl Drop for Lease {
    fn drop(&mut self) {
        let mut state = self.process.state();
        state.calls -= 1;
        if state.retired && state.calls == 0 {
            drop(state);
            let _ = self.process.child().kill();
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
            Lost::Pipe(e) | Lost::Unsent(e) => e,
            Lost::Voided => return Error::Internal("the run was voided".to_owned()),
            Lost::Queued => return Error::Internal("the call waited in a queue".to_owned()),
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
    let conversation = converse(pool, request, spin, started, limits, |lease, message| {
        if !matches!(message, FromWorker::NeedScript)
            && std::mem::take(&mut first)
            && let FromWorker::Call(HostCall::Read { id }) = &message
        {
            first_read = Some(id.clone());
        }
        match message {
            FromWorker::NeedScript => {
                let body = body.to_owned();
                lease.send(&ToWorker::Script { body })?;
                Ok(None)
            }
            FromWorker::Call(call) => {
                let reply = perform(&mut *collection, call);
                lease.send(&ToWorker::Reply(reply))?;
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
/// explained; otherwise the worker stays in the pool.
///
/// A call that never began in its worker (it was queued behind a call
/// that still runs, or that worker died or was killed first) runs in
/// another worker, never queued again; nothing of it was performed.
#[allow(clippy::result_large_err)] // As `run_js`.
fn converse<T>(
    pool: &WorkerPool,
    request: &ToWorker,
    spin: Duration,
    started: Instant,
    limits: &Limits,
    mut on_message: impl FnMut(&mut Lease, FromWorker) -> Result<Option<T>, Lost>,
) -> Conversation<T> {
    let fail = |error: Error| Failure {
        error,
        logs: String::new(),
        stats: Statistics {
            wall_time: started.elapsed(),
            ..Statistics::default()
        },
    };
    let mut message = match Addressed::new(request) {
        Ok(message) => message,
        Err(e) => return Err(fail(Error::Internal(e.to_string()))),
    };
    let deadline = started + limits.wall_time + KILL_GRACE;
    let mut queue = true;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let mut lease = match pool.lease(queue, message.len()) {
            Ok(lease) => lease,
            Err(e) => return Err(fail(Error::Internal(e.to_string()))),
        };
        let outcome = (|| {
            lease.start(&mut message).map_err(Lost::Unsent)?;
            loop {
                let message = lease.receive(deadline, spin)?;
                if let Some(done) = on_message(&mut lease, message)? {
                    return Ok(done);
                }
            }
        })();
        let lost = match outcome {
            Ok(done) => {
                let process = Arc::clone(&lease.process);
                lease.finish();
                pool.ended(&process);
                return Ok(done);
            }
            Err(lost) => lost,
        };
        match lost {
            Lost::Voided => {
                pool.remove(&lease.process);
                let _ = lease.process.child().kill();
                return Err(fail(Error::Internal("the run was voided".to_owned())));
            }
            Lost::Queued => {
                pool.remove(&lease.process);
                // A failure to tell the worker is its own: it is retired.
                let _ = lease.cancel();
                pool.inner.moved.fetch_add(1, Ordering::Relaxed);
                queue = false;
            }
            lost => {
                // Whether this call had begun in the worker: one that had
                // not is sent again, elsewhere (twice more at most).
                let begun = lease.heard
                    || match lost {
                        Lost::Unsent(_) => false,
                        Lost::Deadline => true,
                        _ => !lease.behind(),
                    };
                pool.remove(&lease.process);
                let death = lease.process.bury();
                if begun || attempts >= 3 {
                    pool.inner.lost.fetch_add(1, Ordering::Relaxed);
                    return Err(fail(death.error(&lost, limits, &pool.inner.options)));
                }
                pool.inner.moved.fetch_add(1, Ordering::Relaxed);
                queue = false;
            }
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
