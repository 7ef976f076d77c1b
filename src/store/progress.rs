//! How far dispatch has come: the commit-log offset below which every message is in its queue and
//! the index. A put waits here for its own message (read-your-writes), and learns here that the
//! dispatcher is failing or the store closed instead of waiting forever.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// See the module documentation.
pub(crate) struct Progress {
    /// Mirrors `state.dispatched` for readers that do not wait.
    dispatched: AtomicU64,
    /// The dispatcher thread is asked to stop (its pauses end at once).
    halting: AtomicBool,
    state: Mutex<State>,
    /// Waiters for dispatch (puts, handles, retry pauses).
    changed: Condvar,
    /// The dispatcher thread, waiting to be asked for something (not woken by progress: a put
    /// that dispatches its own message wakes no thread).
    work: Condvar,
}

struct State {
    /// Every message below this offset is dispatched.
    dispatched: u64,
    /// Why dispatch is stuck at `dispatched`, until it moves again.
    failure: Option<String>,
    /// The dispatcher thread must dispatch up to here: messages no put dispatches itself
    /// (`put_nowait`, a put whose message was not visible yet, a failed dispatch to retry).
    wanted: u64,
    /// The dispatcher stopped for good (the store is closing).
    stopped: bool,
}

impl Progress {
    /// Dispatch starts at `offset`.
    pub(crate) fn new(offset: u64) -> Progress {
        Progress {
            dispatched: AtomicU64::new(offset),
            halting: AtomicBool::new(false),
            state: Mutex::new(State { dispatched: offset, failure: None, wanted: offset, stopped: false }),
            changed: Condvar::new(),
            work: Condvar::new(),
        }
    }

    /// Every message below this offset is dispatched.
    pub(crate) fn dispatched(&self) -> u64 {
        self.dispatched.load(Ordering::Acquire)
    }

    /// Dispatch reached `offset` (messages below it are in their queues): wakes the waiters, and
    /// clears a failure.
    pub(crate) fn advance(&self, offset: u64) {
        let mut state = self.state.lock();
        if offset > state.dispatched {
            state.dispatched = offset;
            self.dispatched.store(offset, Ordering::Release);
        }
        state.failure = None;
        drop(state);
        self.changed.notify_all();
    }

    /// Dispatch is stuck at its current offset because of `reason` (the dispatcher thread
    /// retries): the waiters for messages at or past it are told.
    pub(crate) fn fail(&self, reason: String) {
        let mut state = self.state.lock();
        state.failure = Some(reason);
        state.wanted = state.wanted.max(state.dispatched + 1);
        drop(state);
        self.changed.notify_all();
        self.work.notify_all();
    }

    /// Asks the dispatcher thread to dispatch the message at `log_offset` (and what is before it).
    pub(crate) fn want(&self, log_offset: u64) {
        let mut state = self.state.lock();
        if log_offset < state.wanted || log_offset < state.dispatched {
            return;
        }
        state.wanted = log_offset + 1;
        drop(state);
        self.work.notify_all();
    }

    /// The dispatcher thread's wait: until something it must dispatch is not dispatched yet, or
    /// it is asked to stop (`false`).
    pub(crate) fn wait_for_work(&self) -> bool {
        let mut state = self.state.lock();
        loop {
            if self.is_halting() || state.stopped {
                return false;
            }
            if state.wanted > state.dispatched {
                return true;
            }
            self.work.wait(&mut state);
        }
    }

    /// The dispatcher stopped for good: waiters for what it did not reach get `Error::Closed`.
    pub(crate) fn stop(&self) {
        self.state.lock().stopped = true;
        self.changed.notify_all();
        self.work.notify_all();
    }

    /// Asks the dispatcher thread to stop (ending its pause); waiters go on waiting, for the
    /// caller dispatches the rest itself.
    pub(crate) fn halt(&self) {
        let _state = self.state.lock();
        self.halting.store(true, Ordering::SeqCst);
        self.changed.notify_all();
        self.work.notify_all();
    }

    /// Whether the dispatcher thread was asked to stop.
    pub(crate) fn is_halting(&self) -> bool {
        self.halting.load(Ordering::SeqCst)
    }

    /// Sleeps up to `duration`, or less if the dispatcher is asked to stop meanwhile (a retry's
    /// pause).
    pub(crate) fn pause(&self, duration: Duration) {
        let deadline = Instant::now() + duration;
        let mut state = self.state.lock();
        while !self.is_halting() && !state.stopped {
            if self.changed.wait_until(&mut state, deadline).timed_out() {
                return;
            }
        }
    }

    /// Waits until the message at `log_offset` is dispatched, up to `timeout` (`None`: no limit).
    /// `Ok(false)` at the timeout. `Error::DispatchFailed` if dispatch is stuck before it,
    /// `Error::Closed` if the dispatcher stopped first.
    pub(crate) fn wait_past(&self, log_offset: u64, timeout: Option<Duration>) -> Result<bool> {
        if self.dispatched() > log_offset {
            return Ok(true);
        }
        // A timeout too long to add to now (`Duration::MAX`) is no limit, not a panic.
        let deadline = timeout.and_then(|timeout| Instant::now().checked_add(timeout));
        let mut state = self.state.lock();
        loop {
            if state.dispatched > log_offset {
                return Ok(true);
            }
            if let Some(reason) = &state.failure {
                return Err(Error::DispatchFailed { log_offset, reason: reason.clone() });
            }
            if state.stopped {
                return Err(Error::Closed);
            }
            match deadline {
                None => self.changed.wait(&mut state),
                Some(deadline) => {
                    if self.changed.wait_until(&mut state, deadline).timed_out() {
                        return Ok(state.dispatched > log_offset);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_waiter_wakes_on_progress_failure_and_stop() {
        let progress = Arc::new(Progress::new(5));
        assert!(progress.wait_past(4, None).expect("dispatched already"));
        assert!(!progress.wait_past(5, Some(Duration::from_millis(10))).expect("times out"));

        let waiter = {
            let progress = Arc::clone(&progress);
            std::thread::spawn(move || progress.wait_past(7, None))
        };
        progress.advance(8);
        assert!(waiter.join().expect("waiter").expect("woken by progress"));

        progress.fail("disk full".into());
        assert!(matches!(progress.wait_past(9, None), Err(Error::DispatchFailed { log_offset: 9, .. })));
        assert!(progress.wait_past(7, None).expect("below the failure"), "what was dispatched stays dispatched");
        progress.advance(9);
        progress.stop();
        assert!(matches!(progress.wait_past(20, None), Err(Error::Closed)));
        let started = Instant::now();
        progress.pause(Duration::from_secs(10));
        assert!(started.elapsed() < Duration::from_secs(5), "a stopped dispatcher does not pause");
    }
}
