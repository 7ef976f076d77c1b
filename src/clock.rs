//! The wall clock a log stamps append times with, injectable so tests control time without sleeping.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of milliseconds since the Unix epoch.
///
/// ```
/// use strata_log::{Clock, ManualClock};
/// let manual = ManualClock::new(1_000);
/// let clock: Clock = manual.clock();
/// manual.advance(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// assert!(Clock::system().now_ms() > 1_600_000_000_000);
/// ```
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    /// The system wall clock.
    pub fn system() -> Clock {
        Clock(Arc::new(system_now_ms))
    }

    /// A clock that calls `f`.
    pub fn from_fn(f: impl Fn() -> i64 + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

fn system_now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// A clock moved only by hand, for tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(now_ms)))
    }

    /// A [`Clock`] that reads this one.
    pub fn clock(&self) -> Clock {
        let now = Arc::clone(&self.0);
        Clock::from_fn(move || now.load(Ordering::SeqCst))
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward (or back, with a negative `ms`).
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}
