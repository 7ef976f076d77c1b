//! Reading: `get`, `entries` and the search by log offset, all through `read_run`, which checks
//! the bounds first and looks again (up to [`READ_ATTEMPTS`] times) when a cut or retention
//! changed the files under it; and `stored_entry`, the unchecked read the writer makes under its
//! lock. Readers take only the file list's read lock, briefly, and a file's own read lock around
//! each copy.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::ConsumeQueue;
use super::file::QueueFile;
use super::layout::{Entry, first_bad_entry};
use crate::error::{Error, Result};

/// How many times a read looks again when the queue's files change under it.
const READ_ATTEMPTS: usize = 16;

impl ConsumeQueue {
    /// The entry at `queue_offset`; `None` outside `[min_offset, max_offset)`.
    pub(crate) fn get(&self, queue_offset: u64) -> Result<Option<Entry>> {
        Ok(self.read_run(queue_offset, 1, true)?.first().copied())
    }

    /// Up to `max_count` entries in order from `from` (from `min_offset` if `from` is below it),
    /// with their queue offsets; fewer at the queue's end. Each file's part is one copy, checked
    /// on its own (a cut between two parts may have replaced what follows the first).
    pub(crate) fn entries(&self, from: u64, max_count: usize) -> Result<Vec<(u64, Entry)>> {
        let mut queue_offset = from.max(self.min_offset());
        let mut found = Vec::with_capacity(max_count.min(self.max_offset().saturating_sub(queue_offset) as usize));
        while found.len() < max_count {
            let run = self.read_run(queue_offset, (max_count - found.len()) as u64, true)?;
            if run.is_empty() {
                break;
            }
            let next = queue_offset + run.len() as u64;
            found.extend((queue_offset..next).zip(run));
            queue_offset = next;
        }
        Ok(found)
    }

    /// Entries from `queue_offset` on, at most `limit` and none past the end of its file, if
    /// `checked` checked (none zero, log offsets increasing); empty outside `[min, max)`. Looks
    /// again when the files change under it.
    fn read_run(&self, queue_offset: u64, limit: u64, checked: bool) -> Result<Vec<Entry>> {
        for _ in 0..READ_ATTEMPTS {
            let cuts = self.cuts.load(Ordering::Acquire);
            let max = self.max.load(Ordering::Acquire);
            if queue_offset >= max || queue_offset < self.min.load(Ordering::Acquire) {
                return Ok(Vec::new());
            }
            let Some(file) = self.file_for(queue_offset) else { continue };
            let count = limit.min(max - queue_offset).min(file.end() - queue_offset);
            match file.read(queue_offset, count) {
                Ok(Some(entries)) => {
                    let bad = if checked { first_bad_entry(queue_offset, None, &entries, None) } else { None };
                    if let Some((at, reason)) = bad {
                        return Err(Error::corrupt(file.path(), file.position(at), reason));
                    }
                    return Ok(entries);
                }
                Ok(None) => continue,
                // A cut lowered the file's length after we loaded `max` (if the read saw the new
                // length, its read lock ordered it after the count went up): look again.
                Err(_) if self.cuts.load(Ordering::Acquire) != cuts => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Unsettled { attempts: READ_ATTEMPTS })
    }

    /// The file whose slots hold `queue_offset`.
    pub(super) fn file_for(&self, queue_offset: u64) -> Option<Arc<QueueFile>> {
        let files = self.files.read();
        let i = files.partition_point(|f| f.first <= queue_offset).checked_sub(1)?;
        files.get(i).filter(|f| queue_offset < f.end()).cloned()
    }

    /// The entry stored at `queue_offset` whatever the bounds say (below `min` too), unchecked;
    /// `None` for `None` or an offset no file holds. Under the writer lock (no file is retired).
    pub(super) fn stored_entry(&self, queue_offset: Option<u64>) -> Result<Option<Entry>> {
        let Some(queue_offset) = queue_offset else { return Ok(None) };
        let Some(file) = self.file_for(queue_offset) else { return Ok(None) };
        Ok(file.read(queue_offset, 1)?.and_then(|entries| entries.first().copied()))
    }

    /// The first queue offset in `[min, max)` whose entry's log offset is at least `log_offset`,
    /// or `max` if there is none: where a consumer starting at a log offset (found by time) begins,
    /// and where recovery starts checking from the store checkpoint's log offset. A binary search
    /// (log offsets increase along the queue), one entry read per step. A zero entry counts as
    /// not below: after a crash the holes are past the entries the checkpoint covers, so the
    /// search still finds where they end.
    pub(crate) fn queue_offset_for_log_offset(&self, log_offset: u64) -> Result<u64> {
        let (mut low, mut high) = (self.min_offset(), self.max_offset());
        while low < high {
            let middle = low + (high - low) / 2;
            match self.read_run(middle, 1, false)?.first() {
                Some(entry) if !entry.is_zero() && entry.log_offset < log_offset => low = middle + 1,
                // Not below it, a hole, or gone (a cut or retention moved the bounds meanwhile).
                _ => high = middle,
            }
        }
        Ok(low.clamp(self.min_offset(), self.max_offset().max(self.min_offset())))
    }
}
