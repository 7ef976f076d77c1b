//! Appending, under the writer lock: an entry into the active file's next slot (idempotent: an
//! entry not beyond the last is skipped), a roll to a new file when the active one is full (the
//! full one sealed first), file creation (at full size, durably), and placeholder entries over a
//! gap retention left. And `flush`, which makes the entries appended so far durable, holding the
//! writer lock only before and after its fdatasync.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::file::{CQ_ADVICE, QueueFile};
use super::layout::{ENTRY_LEN, Entry, file_name};
use super::{ConsumeQueue, FlushedUpTo, Writer};
use crate::error::{Corruption, Error, Result};
use crate::storage::{self, MappedFile};

/// What [`ConsumeQueue::append`] did with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// The entry is the queue's new last.
    Stored,
    /// The queue holds the message already (its log offset is not beyond the last entry's: a
    /// redispatch): nothing was written.
    AlreadyHeld,
    /// The entry's queue offset `found` does not continue the queue, which ends at `expected`:
    /// nothing was written. Past the end, retention removed messages before dispatch reached
    /// them ([`ConsumeQueue::fill_gap`]); otherwise the queue and the message disagree.
    Gap {
        /// The queue's end.
        expected: u64,
        /// The entry's queue offset.
        found: u64,
    },
}

impl ConsumeQueue {
    /// Appends the entry for the message at `log_offset` (`size` bytes, tag hash `tag_hash`) as
    /// queue offset `queue_offset`. Idempotent, as dispatch must be (docs/DESIGN.md §11): an entry
    /// whose log offset is not beyond the last entry's is `AlreadyHeld`. Otherwise `queue_offset`
    /// must be the queue's end (`max_offset`; any offset starts a queue that has no file yet: a
    /// queue rebuilt after retention keeps its numbering), else it is a `Gap`. A full file rolls
    /// to a new one; a full disk fails that creation with `Error::DiskFull`, storing nothing, and
    /// the next append tries again. Errors are the files' only.
    pub(crate) fn append(&self, queue_offset: u64, log_offset: u64, size: u32, tag_hash: u64) -> Result<Appended> {
        assert!(size > 0, "a record's encoded size is never 0 (an all-zero entry marks unused space)");
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        if writer.last_log_offset.is_some_and(|last| log_offset <= last) {
            return Ok(Appended::AlreadyHeld);
        }
        let last_file = self.files.read().last().cloned();
        let max = self.max.load(Ordering::Relaxed);
        if last_file.is_some() && queue_offset != max {
            return Ok(Appended::Gap { expected: max, found: queue_offset });
        }
        let active = self.active_for(&mut writer, last_file, queue_offset)?;
        let bytes = Entry { log_offset, size, tag_hash }.encode();
        // Counted before the write: a failed `pwrite` may have stored part of the entry.
        writer.dirty_end = writer.dirty_end.max(queue_offset + 1 - active.first);
        let position = active.file.append(&bytes)?;
        debug_assert_eq!(position, active.position(queue_offset), "the entry must land in its slot");
        writer.last_log_offset = Some(log_offset);
        debug_assert!(self.min.load(Ordering::Relaxed) <= queue_offset, "min ≤ max");
        self.max.store(queue_offset + 1, Ordering::Release);
        Ok(Appended::Stored)
    }

    /// The file the entry for `queue_offset` goes into: `last_file` (the active file, read under
    /// the writer lock by the caller), a new file after it when it is full, or the queue's first
    /// file when it has none. The caller checked that `queue_offset` continues a queue that has
    /// files.
    fn active_for(
        &self,
        writer: &mut Writer,
        last_file: Option<Arc<QueueFile>>,
        queue_offset: u64,
    ) -> Result<Arc<QueueFile>> {
        let Some(active) = last_file else {
            return self.start_at(writer, queue_offset);
        };
        let max = self.max.load(Ordering::Relaxed);
        debug_assert_eq!(queue_offset, max, "append checks that the entry continues the queue");
        if max < active.end() {
            return Ok(active);
        }
        // The entries of a file are durable before the next file exists (recovery trusts sealed
        // files to be whole).
        active.file.seal().map_err(|error| self.poison(error))?;
        let next = self.create_file(active.end())?;
        crate::failpoint::crash_point!("store_after_queue_roll");
        writer.dirty_end = 0;
        Ok(next)
    }

    /// Creates the queue's first file, at `queue_offset`.
    pub(super) fn start_at(&self, writer: &mut Writer, queue_offset: u64) -> Result<Arc<QueueFile>> {
        let file = self.create_file(queue_offset)?;
        // `max` first, so `min ≤ max` holds at every step.
        self.max.store(queue_offset, Ordering::Release);
        self.min.store(queue_offset, Ordering::Release);
        writer.dirty_end = 0;
        writer.flushed = FlushedUpTo { queue_offset, last_log_offset: None };
        Ok(file)
    }

    /// Creates `<first>.cq` at full size, durably (its length and its directory entry), and adds
    /// it to the list. On failure nothing is left behind.
    fn create_file(&self, first: u64) -> Result<Arc<QueueFile>> {
        let path = self.dir.join(file_name(first));
        if first.checked_add(self.entries_per_file).is_none() {
            // A queue offset from a damaged or hostile record: an error, not a panic in dispatch.
            return Err(Error::corrupt(
                path,
                0,
                Corruption::BadFile("queue offset leaves no room for a consume-queue file"),
            ));
        }
        storage::prepare_dir(&self.dir)?;
        let file = MappedFile::create(&path, self.entries_per_file * ENTRY_LEN, self.reads, CQ_ADVICE)?;
        // Entries are stored into the map: a `pwrite` per 20-byte entry cost as much as the
        // commit log's own per put.
        let file = match file.with_mapped_appends().and_then(|file| file.budgeted(self.budget.as_ref())) {
            Ok(file) => file,
            Err(error) => {
                let _ = storage::remove_if_exists(&path);
                return Err(error);
            }
        };
        if let Err(error) = file.flush().and_then(|()| storage::sync_dir(&self.dir)) {
            file.retire();
            let _ = storage::remove_if_exists(&path);
            return Err(error);
        }
        let file = Arc::new(QueueFile { first, capacity: self.entries_per_file, file });
        self.files.write().push(Arc::clone(&file));
        Ok(file)
    }

    /// Retention removed messages of this queue before dispatch reached them, and the next message
    /// dispatched has queue offset `to`: the offsets `[max, to)` get placeholder entries (size 1,
    /// no tag) pointing at the log offsets just below `below` — the log's start, which passed the
    /// removed messages, so those offsets held them or other removed records — and the queue's
    /// numbering goes on; a read skips them as removed. Returns how many were written: 0 if `to`
    /// is not past the end, or if the placeholders would not be above the last entry's log
    /// offset (then the gap is not retention's doing).
    pub(crate) fn fill_gap(&self, to: u64, below: u64) -> Result<u64> {
        let (max, last) = (self.max_offset(), self.writer.lock().last_log_offset);
        let Some(gap) = to.checked_sub(max).filter(|&gap| gap > 0) else { return Ok(0) };
        let Some(first) = below.checked_sub(gap) else { return Ok(0) };
        if last.is_some_and(|last| first <= last) {
            return Ok(0);
        }
        for i in 0..gap {
            // Never otherwise (checked above, under this queue's only writer): counted honestly
            // if it were.
            if self.append(max + i, first + i, 1, 0)? != Appended::Stored {
                debug_assert!(false, "a placeholder continues the queue above its last entry");
                return Ok(i);
            }
        }
        Ok(gap)
    }

    /// Makes every entry appended so far durable: fdatasync of the active file (a file is synced
    /// when it is sealed at a roll, and created durably). Runs without blocking appends. A failed
    /// fdatasync poisons the queue (the kernel may have dropped the pages: a retry proves nothing).
    pub(crate) fn flush(&self) -> Result<FlushedUpTo> {
        let (target, active, cuts) = {
            let writer = self.writer.lock();
            self.check_not_poisoned()?;
            let target = FlushedUpTo { queue_offset: self.max_offset(), last_log_offset: writer.last_log_offset };
            if writer.flushed == target {
                return Ok(target);
            }
            (target, self.files.read().last().cloned(), self.cuts.load(Ordering::Acquire))
        };
        if let Some(active) = active {
            active.file.flush().map_err(|error| self.poison(error))?;
        }
        let mut writer = self.writer.lock();
        if self.cuts.load(Ordering::Acquire) == cuts && target.queue_offset > writer.flushed.queue_offset {
            writer.flushed = target;
        }
        Ok(writer.flushed)
    }

    /// How far the entries were durable at the last [`ConsumeQueue::flush`] (or open).
    #[cfg(test)]
    pub(crate) fn flushed_up_to(&self) -> FlushedUpTo {
        self.writer.lock().flushed
    }
}
