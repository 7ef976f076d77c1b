//! What the store's background work remembers between its turns: the last store checkpoint
//! written and the commit-log start the last retention sweep saw, so a turn with nothing new to
//! do writes and deletes nothing.

use std::sync::atomic::{AtomicU64, Ordering};

/// The background work's memory (see the module documentation).
pub(crate) struct Maintenance {
    last_checkpoint: AtomicU64,
    last_swept_start: AtomicU64,
}

impl Default for Maintenance {
    fn default() -> Maintenance {
        // No checkpoint written yet by this open: the first turn writes one.
        Maintenance { last_checkpoint: AtomicU64::new(u64::MAX), last_swept_start: AtomicU64::new(0) }
    }
}

impl Maintenance {
    /// Whether a checkpoint at `dispatched` would say anything the last one did not.
    pub(crate) fn checkpoint_is_new(&self, dispatched: u64) -> bool {
        self.last_checkpoint.load(Ordering::Acquire) != dispatched
    }

    /// What the checkpoint summarises changed without dispatch moving (retention deleted files):
    /// the next checkpoint is written whatever `dispatched` is.
    pub(crate) fn summaries_changed(&self) {
        self.last_checkpoint.store(u64::MAX, Ordering::Release);
    }

    /// A checkpoint at `dispatched` was written.
    pub(crate) fn checkpointed(&self, dispatched: u64) {
        self.last_checkpoint.store(dispatched, Ordering::Release);
    }

    /// Whether the log's start moved past what the last sweep saw.
    pub(crate) fn sweep_is_due(&self, log_start: u64) -> bool {
        log_start > self.last_swept_start.load(Ordering::Acquire)
    }

    /// Everything below `log_start` was swept.
    pub(crate) fn swept(&self, log_start: u64) {
        self.last_swept_start.fetch_max(log_start, Ordering::AcqRel);
    }
}
