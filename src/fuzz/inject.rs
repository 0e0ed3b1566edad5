//! The two fault injectors the fuzzer wraps around the real thing.
//!
//! * [`FaultyCollection`] wraps the `host_api::Collection` a procedure runs
//!   against (the engine's transaction). It numbers the data operations the
//!   procedure performs (reads, feeds, queries, creates, replaces, upserts,
//!   deletes) and fails the k-th one with a chosen status, either as an
//!   error the script receives in its callback or as a fatal
//!   [`HostError::abort`] the runtime ends the call with. Every other
//!   operation goes through unchanged, so the wrapped call is the real call.
//! * [`CrashStorage`] wraps the durable `engine::storage::Storage`: it is
//!   the tests' fault-injecting storage, `engine::testing::FaultyStorage`
//!   (the reason the facade enables the engine's `testing` feature). When
//!   the calling thread armed it, the next commit "crashes": it fails
//!   either before the durable write (nothing reached the disk) or after it
//!   (the record is durable but the process dies before acknowledging it).
//!   The engine then refuses writes until the fuzzer reopens the directory,
//!   which is what a restart after a crash does.

use engine::testing::CommitFault;
use host_api::{Collection, ErrorCode, HostError};

use crate::intercept::{Intercepted, Interceptor};

/// How an injected host error reaches the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// As the operation's error: the script's callback receives it.
    Callback,
    /// As a fatal error: the runtime ends the call; the script cannot catch it.
    Abort,
}

/// A planned host-operation fault: fail operation `op` (1-based).
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpFault {
    pub(crate) op: u32,
    pub(crate) code: ErrorCode,
    pub(crate) delivery: Delivery,
}

/// Counts the data operations of a call and fails the planned one.
pub(crate) struct FaultPlan {
    plan: Option<OpFault>,
    /// Data operations attempted so far, by name.
    pub(crate) ops: Vec<&'static str>,
    /// The operation that was failed, if the call got that far.
    pub(crate) injected: Option<(u32, &'static str)>,
}

/// A collection that counts operations and fails the planned one.
pub(crate) type FaultyCollection<'a> = Intercepted<'a, FaultPlan>;

/// `inner` with `plan`'s fault (none: it only counts).
pub(crate) fn faulty(inner: &mut dyn Collection, plan: Option<OpFault>) -> FaultyCollection<'_> {
    Intercepted::new(
        inner,
        FaultPlan {
            plan,
            ops: Vec::new(),
            injected: None,
        },
    )
}

impl Interceptor for FaultPlan {
    /// Counts operation `name` and fails it if it is the planned one.
    fn before(&mut self, name: &'static str) -> Result<(), HostError> {
        self.ops.push(name);
        let n = u32::try_from(self.ops.len()).unwrap_or(u32::MAX);
        match self.plan {
            Some(plan) if plan.op == n => {
                self.injected = Some((n, name));
                let message = format!(
                    "fault injected by partita fuzz: operation {n} ({name}) failed with {}",
                    plan.code
                );
                Err(match plan.delivery {
                    Delivery::Callback => HostError::new(plan.code, message),
                    Delivery::Abort => HostError::abort(plan.code, message),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Where a simulated crash happens during a commit: before the durable
/// write (nothing reached the disk) or after it (the record is durable, but
/// the process "died" before acknowledging it).
pub(crate) use engine::testing::FailPoint as CrashPoint;

/// The durable storage with crashes at commit: `engine::testing`'s
/// fault-injecting wrapper, whose commits fail when the committing thread
/// armed them ([`arm_crash`]).
pub(crate) type CrashStorage<S> = engine::testing::FaultyStorage<S>;

/// Makes the next commit on this thread crash at `point` (commits run on
/// the committing thread, so concurrent calls cannot take each other's);
/// `None` disarms a crash the commit did not take.
pub(crate) fn arm_crash(point: Option<CrashPoint>) {
    engine::testing::fail_next_commit_on_this_thread(point.map(|point| {
        let at = match point {
            CrashPoint::BeforeDurableWrite => "before the durable write",
            CrashPoint::AfterDurableWrite => "after the durable write",
        };
        CommitFault::new(
            point,
            format!("simulated crash {at} (injected by partita fuzz); reopen the database"),
        )
    }));
}

/// Whether `code` is one of the statuses the fuzzer injects.
pub(crate) const INJECTED_CODES: [ErrorCode; 6] = [
    ErrorCode::NOT_FOUND,
    ErrorCode::CONFLICT,
    ErrorCode::PRECONDITION_FAILED,
    ErrorCode::TOO_MANY_REQUESTS,
    ErrorCode::RETRY_WITH,
    ErrorCode::INTERNAL,
];
