//! One `.cq` file of a queue: [`QueueFile`], a [`MappedFile`] of `capacity` entry slots from queue
//! offset `first`, and the two ways to find where a file's entries end: a binary search for its
//! first all-zero slot at an open ([`count_entries`]), and a read of the whole file for its last
//! non-zero slot in recovery ([`dirty_end`]).

use std::path::PathBuf;

use super::layout::{ENTRY_LEN, Entry};
use crate::error::Result;
use crate::format::CQ_ENTRY_LEN;
use crate::storage::{self, MappedFile};

/// What lowers the space a new `.cq` file needs.
pub(super) const CQ_ADVICE: &str = "lower queue_entries_per_file or free space";

/// One `.cq` file: `capacity` entries from queue offset `first`.
#[derive(Debug)]
pub(super) struct QueueFile {
    pub(super) first: u64,
    pub(super) capacity: u64,
    pub(super) file: MappedFile,
}

impl QueueFile {
    /// The queue offset after the file's last slot.
    pub(super) fn end(&self) -> u64 {
        self.first + self.capacity
    }

    /// Byte position of `queue_offset`'s entry in the file.
    pub(super) fn position(&self, queue_offset: u64) -> u64 {
        debug_assert!(queue_offset >= self.first, "queue offset {queue_offset} below the file's first {}", self.first);
        (queue_offset - self.first) * ENTRY_LEN
    }

    /// The published entries `[queue_offset, queue_offset + count)` as stored; `None` if the file
    /// was retired (removed or replaced since it was looked up).
    pub(super) fn read(&self, queue_offset: u64, count: u64) -> Result<Option<Vec<Entry>>> {
        debug_assert!(queue_offset + count <= self.end(), "a read past the file's last slot");
        // A file's slots were allocated whole, so their bytes fit in memory.
        let len = (count * ENTRY_LEN) as usize;
        self.file.read_with(self.position(queue_offset), len, |bytes| {
            bytes.chunks_exact(CQ_ENTRY_LEN).map(Entry::decode).collect()
        })
    }

    pub(super) fn path(&self) -> PathBuf {
        self.file.path()
    }
}

/// The entries of an active file: they end at its first all-zero slot, found by a binary search
/// (entries, then zeros, as appends leave a file; a crash may have written pages out of order,
/// and `recover` then checks the entries and the slots past them).
pub(super) fn count_entries(file: &MappedFile, capacity: u64) -> Result<u64> {
    let (mut low, mut high) = (0, capacity);
    while low < high {
        let middle = low + (high - low) / 2;
        let used = file.read_with(middle * ENTRY_LEN, CQ_ENTRY_LEN, |bytes| !Entry::decode(bytes).is_zero())?;
        if used.unwrap_or(false) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    Ok(low)
}

/// The slots of `file` (reading all of it) up to its last non-zero one, at least `from`.
pub(super) fn dirty_end(file: &QueueFile, from: u64) -> Result<u64> {
    let bytes = storage::read_if_exists(&file.path())?.unwrap_or_default();
    let slots = (bytes.len() as u64 / ENTRY_LEN).min(file.capacity) as usize;
    let last_used =
        bytes[..slots * CQ_ENTRY_LEN].chunks_exact(CQ_ENTRY_LEN).rposition(|slot| slot.iter().any(|&b| b != 0));
    Ok(last_used.map_or(0, |i| i as u64 + 1).max(from))
}
