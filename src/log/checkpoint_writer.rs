//! The checkpoint as last written, and every write of it (docs/DESIGN.md §3, the file; §8, when
//! it is written): the recovery point after sync rounds, a lower one before a truncation, a new
//! log start, and the two steps of a reset.
//! Its lock serialises writes, so no concurrent write can store an older start after a newer one.

use std::path::PathBuf;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::log::checkpoint::Checkpoint;
use crate::log::durability::Durability;
use crate::log::metrics::Counters;
use crate::log::offsets::Offsets;

/// See the module documentation.
pub(crate) struct CheckpointWriter {
    dir: PathBuf,
    /// The checkpoint on disk, and the reset in progress it records.
    written: Mutex<(Checkpoint, Option<u64>)>,
}

/// What a write reads and moves besides the file.
pub(crate) struct Parts<'a> {
    pub offsets: &'a Offsets,
    pub durability: &'a Durability,
    pub counters: &'a Counters,
}

/// What a checkpoint write does to the reset-in-progress mark it carries.
enum ResetMark {
    /// Writes the mark as it stands (a periodic checkpoint during a reset must not clear it).
    Keep,
    /// A reset to this offset begins.
    Set(u64),
    /// The reset is complete.
    Clear,
}

impl CheckpointWriter {
    /// `on_disk` is what the file holds (a recovery point of 0 if it is older than the log:
    /// the next write rewrites it).
    pub(crate) fn new(dir: PathBuf, on_disk: Checkpoint) -> CheckpointWriter {
        CheckpointWriter { dir, written: Mutex::new((on_disk, None)) }
    }

    /// Writes the checkpoint with the durable offset as recovery point (never moving it back).
    pub(crate) fn write(&self, parts: &Parts<'_>) -> Result<()> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: current.log_start_offset,
            recovery_point: current.recovery_point.max(durable),
        };
        self.store(parts, next, ResetMark::Keep, || {})
    }

    /// Writes the checkpoint with the recovery point at most `cap`, then runs `then` (a truncation
    /// moving the durable offset down to the cut) under the checkpoint lock: a truncation lowers
    /// the recovery point before it changes any file, so no crash can claim the removed records
    /// durable, and no concurrent checkpoint can raise it again from the old durable offset.
    pub(crate) fn write_capped<T>(&self, parts: &Parts<'_>, cap: u64, then: impl FnOnce() -> T) -> Result<T> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: current.log_start_offset,
            recovery_point: current.recovery_point.max(durable).min(cap),
        };
        self.store(parts, next, ResetMark::Keep, then)
    }

    /// Writes the checkpoint with a new log start offset, then publishes the start to readers:
    /// from here no crash brings the records below the start back.
    pub(crate) fn write_new_start(&self, parts: &Parts<'_>, start: u64) -> Result<()> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: start,
            recovery_point: current.recovery_point.max(durable),
        };
        self.store(parts, next, ResetMark::Keep, || {})
    }

    /// The first step of `reset_at(offset)`: the checkpoint says start = recovery point = `offset`
    /// and that a reset to it is in progress (an open after a crash completes it); then, under the
    /// checkpoint lock, the truncation from `cut` is noted and every offset moves to `offset`.
    /// Noted first: a reset past the end raises the durable offset, and a waiter or callback
    /// that saw it raised before the new epoch would take its removed, never synced batch for
    /// durable.
    pub(crate) fn write_reset(&self, parts: &Parts<'_>, offset: u64, cut: u64) -> Result<()> {
        let next = |_: &Checkpoint, _: u64| Checkpoint { log_start_offset: offset, recovery_point: offset };
        self.store(parts, next, ResetMark::Set(offset), || {
            parts.durability.note_truncation(cut);
            parts.offsets.set_all(offset, offset);
        })
    }

    /// The last step of a reset: the checkpoint no longer says a reset is in progress.
    pub(crate) fn write_reset_done(&self, parts: &Parts<'_>) -> Result<()> {
        self.store(parts, |current, _| *current, ResetMark::Clear, || {})
    }

    /// Writes the checkpoint `next(current, durable offset)` and, once it is durable, runs `then`
    /// and publishes its log start offset, all under the checkpoint lock (so no concurrent write
    /// can store an older start after a newer one, or a recovery point computed from offsets
    /// `then` moves). A failed write is an ordinary error (docs/DESIGN.md §8): nothing is poisoned,
    /// nothing moves, the file keeps the older checkpoint and the next write retries.
    fn store<T>(
        &self,
        parts: &Parts<'_>,
        next: impl FnOnce(&Checkpoint, u64) -> Checkpoint,
        reset: ResetMark,
        then: impl FnOnce() -> T,
    ) -> Result<T> {
        let mut written = self.written.lock();
        if parts.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let (checkpoint, pending) = &mut *written;
        let next = next(checkpoint, parts.offsets.durable());
        let next_pending = match reset {
            ResetMark::Keep => *pending,
            ResetMark::Set(offset) => Some(offset),
            ResetMark::Clear => None,
        };
        let changed = next != *checkpoint || next_pending != *pending;
        if changed && let Err(error) = next.write_with(&self.dir, next_pending) {
            Counters::add(&parts.counters.checkpoint_failures, 1);
            // Bytes written but a failed fsync: the file's state on disk is unknown, and the next
            // write, choosing its slot from what it reads back, could overwrite the last good one.
            // That is a failed fsync like any other.
            if let Error::Io { op: "fdatasync" | "fsync directory", .. } = error {
                return Err(parts.durability.poison(error));
            }
            tracing::warn!(dir = %self.dir.display(), %error, "writing the checkpoint failed; the recovery point stays lower until a write succeeds");
            return Err(error);
        }
        // `then` first: a reset below the start must lower the start before the end, one past the
        // end raise the end first (`Offsets::set_all`), and it stores both.
        let done = then();
        if changed {
            Counters::add(&parts.counters.checkpoints, 1);
            if parts.offsets.start() != next.log_start_offset {
                parts.offsets.store_start(next.log_start_offset);
            }
            *checkpoint = next;
            *pending = next_pending;
        }
        debug_assert!(
            checkpoint.recovery_point <= parts.offsets.durable().max(checkpoint.log_start_offset),
            "the recovery point covers only durable data"
        );
        Ok(done)
    }
}
