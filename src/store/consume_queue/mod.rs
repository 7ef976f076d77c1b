//! The ConsumeQueue of one topic and queue (docs/DESIGN.md §11; RocketMQ's `ConsumeQueue`): one
//! 20-byte entry `[log_offset u64][size u32][tag_hash u64]` per message of the queue, in files of
//! `entries_per_file` entries named by their first queue offset
//! (`<consumequeue>/<topic>/<queue_id>/00000000000000300000.cq`); entry `i` of file `F` is queue
//! offset `F + i`. The queue holds `[min, max)`. It is derived: the commit log is the truth, and
//! recovery cuts whatever does not fit it (docs/FORMAT.md, "Consume queue").
//!
//! One writer (the dispatcher; the writer lock serialises every operation that changes files) and
//! any number of readers, who take only a short read lock of the file list and each file's own
//! read lock around a copy:
//! - Files are created at full size with fallocate (a full disk fails the creation with
//!   `Error::DiskFull`, never a write), and their length and name are made durable before any
//!   entry goes in.
//! - The active (last) file is appended to by stores into its writable map (`pwrite` if it has holes) and published by its length
//!   (`MappedFile`). `max` moves past an entry only after its file published it, and a new file is
//!   in the list before `max` reaches it; readers load `max` (Acquire) before they look a file up,
//!   so they never see a partly written entry (docs/DESIGN.md §5).
//! - A full file is sealed at the roll (fdatasync, its map and descriptor dropped): it holds no
//!   descriptor, and is mapped again at its first read.
//! - Bounds move before files change: a cut lowers `max` first, then waits for the readers of the
//!   bytes it zeroes (`MappedFile::limit_len`); retention raises `min` first, then retires (waiting
//!   for readers) and unlinks whole files. A reader whose file was retired, or whose read failed
//!   across a cut (a count of cuts tells), looks again: the bounds answer `None`, or the list
//!   gives the file now holding the entry.
//! - Opening reads a few slots per queue (a binary search for the active file's end) and syncs
//!   nothing; then, at every open, `recover` checks the queue's tail against the commit log.
//! - A failed fdatasync, or a failure in the middle of a cut, poisons the queue: its state on disk
//!   is unknown, so every later write is `Error::Poisoned` (reopen, and recover).
//!
//! The files, each a room of the queue:
//! - `layout.rs`: the `.cq` format in one place: the entry's codec, the files' names, and
//!   `Entry::check`, the rules every entry inside a queue keeps (recovery, checked reads and
//!   `strata verify` share it).
//! - `file.rs`: `QueueFile`, one `.cq` file, and where a file's entries end.
//! - this file: `ConsumeQueue`, its owners (the writer's state, the file list, the bounds, the cut
//!   count, the poison flag) and their lock order.
//! - `open.rs`: opening: the directory listed, files that do not continue the queue deleted, the
//!   rest loaded.
//! - `append.rs`: appends, rolls, file creation, placeholder entries over a gap, flushes.
//! - `read.rs`: `get`, `entries`, the search by log offset: reads that look again when the files
//!   change under them.
//! - `recover.rs`: the check at open against the commit log, and its cut.
//! - `cut.rs`: removing entries: a cut at the end (a truncation, recovery), retention at the front.
//! - `read_only.rs`: `ReadOnlyQueue`, the queue as a process that does not own it reads it (no
//!   lock, no file changed, `pread`, its end found from the bytes).
//! - `tests.rs`: the queue's unit tests (the format's are in `layout.rs`).
//!
//! Lock order: 1 the writer lock (`writer`) → 2 the file list (`files`) → 3 a file's own locks
//! (`MappedFile`). Readers take 2 and 3, never together.

mod append;
mod cut;
mod file;
mod layout;
mod open;
mod read;
mod read_only;
mod recover;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::config::ReadPath;
use crate::error::{Error, Result};
use crate::storage::map_budget::MapBudget;
pub(crate) use append::Appended;
use file::QueueFile;
/// The entry layout and its check (for `strata dump` and `verify` too, `inspect/store.rs`).
pub(crate) use layout::Entry;
pub(crate) use read_only::ReadOnlyQueue;

/// How far a queue's entries are durable ([`ConsumeQueue::flush`]). The store's checkpoint takes
/// the log offset it has dispatched up to *before* flushing every queue, and records it once all
/// flushes succeeded (docs/DESIGN.md §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FlushedUpTo {
    /// Every entry below this queue offset is durable.
    pub(crate) queue_offset: u64,
    /// The log offset of the last of them (`None`: there is none).
    pub(crate) last_log_offset: Option<u64>,
}

/// The writer's state, under the writer lock.
#[derive(Debug)]
struct Writer {
    /// The log offset of the entry at `max - 1`: appends not beyond it are skipped (dispatch is
    /// idempotent). `None` if the queue has no entry.
    last_log_offset: Option<u64>,
    /// Entry slots of the active file, from its first, that may hold non-zero bytes (at least its
    /// entries; more after an open found garbage past them): what a cut must zero.
    dirty_end: u64,
    flushed: FlushedUpTo,
}

/// The consume queue of one topic and queue: `Send + Sync`, one writer, many readers.
#[derive(Debug)]
pub(crate) struct ConsumeQueue {
    /// `<consumequeue>/<topic>/<queue_id>`, created with the first file.
    dir: PathBuf,
    /// Capacity of the files this queue creates.
    entries_per_file: u64,
    reads: ReadPath,
    /// The map budget its files are under (`StoreConfig::log.map_budget`).
    budget: Option<MapBudget>,
    writer: Mutex<Writer>,
    /// Contiguous: each file begins where the one before it ends. All but the last are full and
    /// sealed; the last is the active file.
    files: RwLock<Vec<Arc<QueueFile>>>,
    /// `min ≤ max` at every store (Release; readers Acquire, `max` first).
    min: AtomicU64,
    max: AtomicU64,
    /// Cuts so far, counted before a cut changes anything: a read that failed across one looks
    /// again (the queue may have grown back past it since), and a flush across one claims nothing.
    cuts: AtomicU64,
    poisoned: AtomicBool,
    /// The first entry's log offset as last read, with the `min` and the cut count it was read
    /// at: the store checkpoint asks every turn, and reading it would map each queue's oldest
    /// file.
    first_seen: Mutex<Option<(u64, u64, u64)>>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ConsumeQueue>();
};

impl ConsumeQueue {
    /// The first queue offset the queue holds.
    pub(crate) fn min_offset(&self) -> u64 {
        self.min.load(Ordering::Acquire)
    }

    /// The queue offset the next entry gets: the queue holds `[min_offset, max_offset)`.
    pub(crate) fn max_offset(&self) -> u64 {
        self.max.load(Ordering::Acquire)
    }

    /// The log offset of the queue's first entry (`None`: it has none, or it does not read now),
    /// read again only when `min` moved or a cut ran.
    pub(crate) fn first_log_offset(&self) -> Option<u64> {
        let cuts = self.cuts.load(Ordering::Acquire);
        let (min, max) = (self.min_offset(), self.max_offset());
        if min >= max {
            return None;
        }
        let mut seen = self.first_seen.lock();
        if let Some((at, at_cuts, log_offset)) = *seen
            && (at, at_cuts) == (min, cuts)
        {
            return Some(log_offset);
        }
        let log_offset = self.get(min).ok().flatten()?.log_offset;
        *seen = Some((min, cuts, log_offset));
        Some(log_offset)
    }

    fn check_not_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) { Err(Error::Poisoned) } else { Ok(()) }
    }

    /// Poisons the queue after `error` left its files in an unknown state, and returns `error`.
    fn poison(&self, error: Error) -> Error {
        tracing::error!(queue = %self.dir.display(), %error, "consume queue poisoned: reopen it and recover");
        self.poisoned.store(true, Ordering::Release);
        error
    }
}
