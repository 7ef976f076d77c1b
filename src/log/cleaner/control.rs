//! The cleaner's state on a log, shared with the log's other operations: how far it has cleaned,
//! one pass at a time, and the stop signal and sleep of its thread.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::log::cleaner::checkpoint;

/// The cleaner's state on a log.
#[derive(Debug, Default)]
pub(crate) struct CleanerState {
    /// Everything below this offset was cleaned by the last pass.
    pub cleaned_up_to: AtomicU64,
    /// One pass at a time (the thread's, or an explicit `Log::compact`).
    pub(super) pass: Mutex<()>,
    /// Set at close: the running pass stops at its next step, the thread exits.
    stop: AtomicBool,
    wake: Condvar,
    sleeping: Mutex<()>,
}

impl CleanerState {
    /// Sleeps up to `period`, returning early (true) when the cleaner is stopped.
    pub(super) fn sleep(&self, period: Duration) -> bool {
        let mut guard = self.sleeping.lock();
        if !self.stop.load(Ordering::Acquire) {
            self.wake.wait_for(&mut guard, period);
        }
        self.stop.load(Ordering::Acquire)
    }

    /// A truncation or reset cut the log at `cut`: the cleaner's checkpoint may not claim records
    /// past it clean (new records will be appended there). Only compaction work depends on it,
    /// so a failed write is logged.
    pub(crate) fn lower_to(&self, dir: &Path, cut: u64) {
        if self.cleaned_up_to.fetch_min(cut, Ordering::AcqRel) > cut
            && let Err(error) = checkpoint::write(dir, cut)
        {
            tracing::warn!(%error, "lowering the cleaner checkpoint failed; compaction may skip some records");
        }
    }

    /// Whether the cleaner was stopped (the log is closing).
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn stop(&self) {
        let _guard = self.sleeping.lock();
        self.stop.store(true, Ordering::Release);
        self.wake.notify_all();
    }
}
