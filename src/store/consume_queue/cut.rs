//! Removing entries, bounds first and files after: a cut at the end (`truncate_to`, and
//! recovery's cut) lowers `max`, deletes the later files and zeroes the cut file's rest durably;
//! retention (`delete_files_below`) raises `min`, then retires and unlinks whole files at the
//! front. A failure once files change poisons the queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::file::{CQ_ADVICE, QueueFile};
use super::layout::ENTRY_LEN;
use super::{ConsumeQueue, Writer};
use crate::error::Result;
use crate::storage::{self, MappedFile};

impl ConsumeQueue {
    /// Removes the entries from `queue_offset` on (nothing if it is at or past `max_offset`;
    /// `Error::OffsetOutOfRange` below `min_offset`). Files after the cut are deleted (directory
    /// fsynced) first, then the cut file's rest is zeroed and fdatasynced, so no removed entry can
    /// pass for data after a crash. A crash in between leaves removed entries in the cut file:
    /// the caller lowers its checkpoint below the cut first, so recovery checks them again.
    #[cfg(test)]
    pub(crate) fn truncate_to(&self, queue_offset: u64) -> Result<()> {
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        let (min, max) = (self.min_offset(), self.max_offset());
        if queue_offset >= max {
            return Ok(());
        }
        if queue_offset < min {
            return Err(crate::error::Error::OffsetOutOfRange { requested: queue_offset, start: min, next: max });
        }
        self.cut(&mut writer, queue_offset)
    }

    /// Retention (docs/DESIGN.md §11): deletes whole files whose entries all point below
    /// `log_start_offset` (records the commit log no longer holds), oldest first, never the
    /// active file (it carries the queue's numbering), and moves `min_offset` to the first entry
    /// at or above `log_start_offset`. Returns the number of files deleted. `min_offset` is not
    /// stored: after a reopen it is the first file's first entry until this runs again.
    pub(crate) fn delete_files_below(&self, log_start_offset: u64) -> Result<usize> {
        let _writer = self.writer.lock();
        self.check_not_poisoned()?;
        let files = self.files.read().clone();
        let mut doomed = 0;
        for file in files.iter().take(files.len().saturating_sub(1)) {
            match self.stored_entry(Some(file.end() - 1))? {
                Some(last) if !last.is_zero() && last.log_offset < log_start_offset => doomed += 1,
                _ => break,
            }
        }
        let new_min = self.queue_offset_for_log_offset(log_start_offset)?;
        if new_min > self.min_offset() {
            self.min.store(new_min, Ordering::Release);
        }
        let removed: Vec<_> = self.files.write().drain(..doomed).collect();
        debug_assert!(self.files.read().first().is_none_or(|f| f.first <= self.min_offset()), "min is in a file");
        self.delete_files(&removed)
    }

    /// Cuts the queue at `queue_offset` (in `[first file's first, max]`): bounds first, then the
    /// files. A failure once files change poisons the queue.
    pub(super) fn cut(&self, writer: &mut Writer, queue_offset: u64) -> Result<()> {
        let files = self.files.read().clone();
        let Some(k) = files.iter().rposition(|f| f.first <= queue_offset) else {
            unreachable!("a cut at {queue_offset} below the queue's first file");
        };
        self.cuts.fetch_add(1, Ordering::AcqRel);
        if queue_offset < self.min_offset() {
            self.min.store(queue_offset, Ordering::Release);
        }
        self.max.store(queue_offset, Ordering::Release);
        writer.flushed.queue_offset = writer.flushed.queue_offset.min(queue_offset);
        self.cut_files(writer, &files, k, queue_offset).map_err(|error| self.poison(error))?;
        writer.last_log_offset = self.stored_entry(queue_offset.checked_sub(1))?.map(|e| e.log_offset);
        if writer.flushed.queue_offset == queue_offset {
            writer.flushed.last_log_offset = writer.last_log_offset;
        }
        Ok(())
    }

    /// The file part of a cut at `queue_offset` in `files[k]`: later files deleted (newest
    /// first), then the cut file's published length lowered (waiting for its readers), reopened
    /// for appends if it was sealed, and its rest zeroed and fdatasynced.
    fn cut_files(&self, writer: &mut Writer, files: &[Arc<QueueFile>], k: usize, queue_offset: u64) -> Result<()> {
        self.files.write().truncate(k + 1);
        let later: Vec<_> = files[k + 1..].iter().rev().cloned().collect();
        self.delete_files(&later)?;
        let target = &files[k];
        let keep = queue_offset - target.first;
        target.file.limit_len(keep * ENTRY_LEN);
        // A sealed file's slots are all written; the active file's up to `dirty_end`.
        let (active, dirty_end) = if target.file.capacity() > 0 {
            (Arc::clone(target), writer.dirty_end.max(keep))
        } else {
            let file = MappedFile::open_writable(
                &target.path(),
                keep * ENTRY_LEN,
                target.capacity * ENTRY_LEN,
                self.reads,
                CQ_ADVICE,
            )?
            .budgeted(self.budget.as_ref())?;
            let reopened = Arc::new(QueueFile { first: target.first, capacity: target.capacity, file });
            self.files.write()[k] = Arc::clone(&reopened);
            target.file.retire();
            (reopened, target.capacity)
        };
        active.file.zero_unpublished(dirty_end * ENTRY_LEN)?;
        writer.dirty_end = keep;
        Ok(())
    }

    /// Retires `files` (waiting for their readers), unlinks them in order, fsyncs the directory.
    fn delete_files(&self, files: &[Arc<QueueFile>]) -> Result<usize> {
        for file in files {
            file.file.retire();
            storage::remove_if_exists(&file.path())?;
        }
        if !files.is_empty() {
            storage::sync_dir(&self.dir)?;
        }
        Ok(files.len())
    }
}
