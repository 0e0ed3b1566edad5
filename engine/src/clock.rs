//! The engine's clock: where `_ts` and time to live read the time.
//!
//! A [`Clock`] is a shared function returning the current [`SystemTime`].
//! [`Options::clock`](crate::Options::clock) defaults to the system clock;
//! tests give a [`ManualClock`] and move it, so expiry is tested without
//! sleeping:
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use engine::{Database, ManualClock, Options};
//!
//! let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000));
//! let options = Options { clock: clock.clock(), ..Options::default() };
//! assert_eq!(options.clock.now_secs(), 1_000);
//! clock.advance(Duration::from_secs(5));
//! assert_eq!(options.clock.now_secs(), 1_005);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, cheap to clone and share between threads.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Clock {
    /// The system clock ([`SystemTime::now`]).
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime::now))
    }

    /// A clock reading `now`.
    pub fn from_fn(now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now))
    }

    /// The current time.
    pub fn now(&self) -> SystemTime {
        (self.0)()
    }

    /// Seconds since the Unix epoch (0 before it), the unit of `_ts`.
    pub fn now_secs(&self) -> u64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

/// A clock that stands still until it is moved, for tests.
#[derive(Clone, Debug)]
pub struct ManualClock {
    /// Nanoseconds since the Unix epoch.
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start` (the Unix epoch if `start` is before it).
    pub fn new(start: SystemTime) -> ManualClock {
        let nanos = start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        ManualClock {
            nanos: Arc::new(AtomicU64::new(nanos)),
        }
    }

    /// A [`Clock`] that reads this one.
    pub fn clock(&self) -> Clock {
        let nanos = self.nanos.clone();
        Clock::from_fn(move || UNIX_EPOCH + Duration::from_nanos(nanos.load(Ordering::SeqCst)))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            })
            .ok();
    }

    /// The time the clock reads.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}
