//! Recovery (docs/DESIGN.md §11): the entries from the store checkpoint's on, which the last
//! process may have left torn, are checked with [`Entry::check`](super::layout::Entry::check),
//! against the commit log's end too; the last one kept goes as well if it crosses a sector
//! boundary; the queue is cut at the first bad one (`cut.rs`) and non-zero bytes past its end are
//! zeroed durably.

use super::ConsumeQueue;
use super::file::dirty_end;
use super::layout::{ENTRY_LEN, first_bad_entry};
use crate::error::{Corruption, Result};

/// Entries a walk over the queue (recovery) copies at once.
const WALK_ENTRIES: u64 = 1 << 16;

/// What [`ConsumeQueue::recover`] checked and cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueRecovery {
    /// The first queue offset checked (entries below it were trusted).
    pub(crate) checked_from: u64,
    /// The queue's end after recovery.
    pub(crate) end: u64,
    /// Entries removed, from `end` on.
    pub(crate) removed: u64,
    /// The first bad entry's fault, if entries were removed.
    pub(crate) reason: Option<Corruption>,
    /// Whether non-zero bytes past the end (garbage, or entries a crash tore off) were zeroed.
    pub(crate) zeroed_tail: bool,
}

impl ConsumeQueue {
    /// Recovery, at every open (docs/DESIGN.md §11): checks the entries from
    /// `from_queue_offset` (the entry for the store checkpoint: those below it were durable) and
    /// cuts the queue at the first one that is all zero or of size 0, whose log offset is not
    /// above the previous entry's, or that points at or past `log_next_offset` (the commit log,
    /// recovered first, does not hold it); a last entry kept that crosses a 512-byte sector
    /// boundary goes too (it may be torn; the redispatch writes it again). Zeroes what follows durably, also garbage past the queue's end,
    /// and logs what it cut.
    #[cfg(test)]
    pub(crate) fn recover(&self, from_queue_offset: u64, log_next_offset: u64) -> Result<QueueRecovery> {
        self.recover_from(from_queue_offset, from_queue_offset, log_next_offset)
    }

    /// [`ConsumeQueue::recover`], checking from `from_queue_offset` while only entries at or past
    /// `durable_end` (the entry for the store checkpoint: those below it were fdatasynced, and
    /// after a clean close that is every entry) may be torn: the sector rule drops a last entry
    /// only there, so a clean open cuts nothing that fits the log.
    pub(crate) fn recover_from(
        &self,
        from_queue_offset: u64,
        durable_end: u64,
        log_next_offset: u64,
    ) -> Result<QueueRecovery> {
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        let files = self.files.read().clone();
        let (Some(first), Some(active)) = (files.first(), files.last()) else {
            let nothing = QueueRecovery { checked_from: 0, end: 0, removed: 0, reason: None, zeroed_tail: false };
            return Ok(nothing);
        };
        let max = self.max_offset();
        let checked_from = from_queue_offset.clamp(first.first, max);
        let mut bad = self.find_bad_entry(checked_from, max, log_next_offset)?;
        let end = bad.as_ref().map_or(max, |(at, _)| *at);
        // The last entry kept may be torn: a crash writes a file's sectors independently, and an
        // entry across a sector boundary can have its head and not its tail (size, tag hash).
        // Nothing in the entry tells, and the redispatch would skip its message as queued: drop
        // it, unless it was durable (below `checked_from` or `durable_end`); the redispatch
        // writes it again.
        let may_be_torn = end > checked_from.max(durable_end);
        if may_be_torn && self.file_for(end - 1).is_some_and(|f| straddles_a_sector(f.position(end - 1))) {
            let reason = "the last entry, past the store checkpoint, crosses a sector boundary a crash may have torn";
            bad = Some((end - 1, Corruption::BadFile(reason)));
        }
        let end = bad.as_ref().map_or(max, |(at, _)| *at);
        writer.dirty_end = dirty_end(active, writer.dirty_end)?;
        let zeroed_tail = writer.dirty_end > max - active.first;
        let reason = bad.map(|(_, reason)| reason);
        if let Some(reason) = &reason {
            tracing::warn!(
                queue = %self.dir.display(), checked_from, end, removed = max - end, %reason,
                "consume queue cut at its first bad entry (the queues are checked at every open)"
            );
        } else if zeroed_tail {
            tracing::warn!(queue = %self.dir.display(), end, "non-zero bytes past the consume queue's end zeroed");
        }
        if end < max || zeroed_tail {
            self.cut(&mut writer, end)?;
        }
        Ok(QueueRecovery { checked_from, end, removed: max - end, reason, zeroed_tail })
    }

    /// The first entry in `[from, max)` that breaks the queue's rules (see `recover`), reading
    /// whole runs of entries. Under the writer lock.
    fn find_bad_entry(&self, from: u64, max: u64, log_next: u64) -> Result<Option<(u64, Corruption)>> {
        let mut previous = self.stored_entry(from.checked_sub(1))?.filter(|e| !e.is_zero()).map(|e| e.log_offset);
        let mut queue_offset = from;
        while queue_offset < max {
            let Some(file) = self.file_for(queue_offset) else { break };
            let count = (max.min(file.end()) - queue_offset).min(WALK_ENTRIES);
            let entries = file.read(queue_offset, count)?.unwrap_or_default();
            assert_eq!(entries.len() as u64, count, "no file is retired under the writer lock");
            if let Some(bad) = first_bad_entry(queue_offset, previous, &entries, Some(log_next)) {
                return Ok(Some(bad));
            }
            previous = entries.last().map(|e| e.log_offset);
            queue_offset += count;
        }
        Ok(None)
    }
}

/// The smallest unit a crash writes whole: a disk sector (pages are multiples of it).
const TEAR_UNIT: u64 = 512;

/// Whether the entry at byte `position` of its file crosses a [`TEAR_UNIT`] boundary.
fn straddles_a_sector(position: u64) -> bool {
    position / TEAR_UNIT != (position + ENTRY_LEN - 1) / TEAR_UNIT
}
