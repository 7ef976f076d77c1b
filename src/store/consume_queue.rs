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
//! - The active (last) file is appended to with `pwrite` and published by its length
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
//!   nothing; after an unclean shutdown `recover` checks what the last process may have torn.
//! - A failed fdatasync, or a failure in the middle of a cut, poisons the queue: its state on disk
//!   is unknown, so every later write is `Error::Poisoned` (reopen, and recover).
//!
//! Lock order: 1 the writer lock (`writer`) → 2 the file list (`files`) → 3 a file's own locks
//! (`MappedFile`). Readers take 2 and 3, never together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use byteorder::{BigEndian, ByteOrder};
use parking_lot::{Mutex, RwLock};

use crate::config::ReadPath;
use crate::error::{Corruption, Error, Result};
use crate::format::{CQ_ENTRY_LEN, CQ_LOG_OFFSET_POS, CQ_SIZE_POS, CQ_SUFFIX, CQ_TAG_HASH_POS, file_name};
use crate::map_budget::MapBudget;
use crate::storage::{self, MappedFile};

/// What lowers the space a new `.cq` file needs.
const CQ_ADVICE: &str = "lower queue_entries_per_file or free space";
/// How many times a read looks again when the queue's files change under it.
const READ_ATTEMPTS: usize = 16;
/// Entries a walk over the queue (recovery) copies at once.
const WALK_ENTRIES: u64 = 1 << 16;
/// [`CQ_ENTRY_LEN`] as a byte count.
const ENTRY_LEN: u64 = CQ_ENTRY_LEN as u64;

/// One consume-queue entry: where the message is in the commit log, its encoded size, its tag's
/// hash (`store::hash::tag_hash`; 0 = no tag). Never all zero: `size` is never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The message's offset in the commit log.
    pub(crate) log_offset: u64,
    /// The record's encoded size in bytes.
    pub(crate) size: u32,
    /// FNV-1a 64 of the message's tag, 0 for none.
    pub(crate) tag_hash: u64,
}

impl Entry {
    /// Decodes an entry from the first [`CQ_ENTRY_LEN`] bytes.
    pub(crate) fn decode_from(bytes: &[u8]) -> Entry {
        Entry {
            log_offset: BigEndian::read_u64(&bytes[CQ_LOG_OFFSET_POS..]),
            size: BigEndian::read_u32(&bytes[CQ_SIZE_POS..]),
            tag_hash: BigEndian::read_u64(&bytes[CQ_TAG_HASH_POS..]),
        }
    }

    /// Encodes the entry into the first [`CQ_ENTRY_LEN`] bytes.
    pub(crate) fn encode_into(&self, out: &mut [u8]) {
        BigEndian::write_u64(&mut out[CQ_LOG_OFFSET_POS..], self.log_offset);
        BigEndian::write_u32(&mut out[CQ_SIZE_POS..], self.size);
        BigEndian::write_u64(&mut out[CQ_TAG_HASH_POS..], self.tag_hash);
    }

    /// An entry of all-zero bytes: never written, so it marks the unused tail of a file.
    pub(crate) fn is_zero(&self) -> bool {
        self.log_offset == 0 && self.size == 0 && self.tag_hash == 0
    }
}

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

/// One `.cq` file: `capacity` entries from queue offset `first`.
#[derive(Debug)]
struct QueueFile {
    first: u64,
    capacity: u64,
    file: MappedFile,
}

impl QueueFile {
    /// The queue offset after the file's last slot.
    fn end(&self) -> u64 {
        self.first + self.capacity
    }

    /// Byte position of `queue_offset`'s entry in the file.
    fn position(&self, queue_offset: u64) -> u64 {
        debug_assert!(queue_offset >= self.first, "queue offset {queue_offset} below the file's first {}", self.first);
        (queue_offset - self.first) * ENTRY_LEN
    }

    /// The published entries `[queue_offset, queue_offset + count)` as stored; `None` if the file
    /// was retired (removed or replaced since it was looked up).
    fn read(&self, queue_offset: u64, count: u64) -> Result<Option<Vec<Entry>>> {
        debug_assert!(queue_offset + count <= self.end(), "a read past the file's last slot");
        // A file's slots were allocated whole, so their bytes fit in memory.
        let len = (count * ENTRY_LEN) as usize;
        self.file.read_with(self.position(queue_offset), len, |bytes| {
            bytes.chunks_exact(CQ_ENTRY_LEN).map(Entry::decode_from).collect()
        })
    }

    fn path(&self) -> PathBuf {
        self.file.path()
    }
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
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ConsumeQueue>();
};

/// A file found in a queue's directory.
#[derive(Debug)]
struct Listed {
    first: u64,
    path: PathBuf,
    len: u64,
}

impl Listed {
    /// Whole entry slots in the file.
    fn capacity(&self) -> u64 {
        self.len / ENTRY_LEN
    }
}

impl ConsumeQueue {
    /// Opens the queue of `topic` and `queue_id` under `dir` (the store's `consumequeue/`),
    /// loading its files; a queue without a directory is empty (its directory is created with
    /// its first file). New files get `entries_per_file` entries. Files whose name is not a
    /// queue file's are ignored (logged); files that cannot belong to the queue (empty, or after a
    /// gap in the queue offsets) are deleted (logged). Entries are trusted as found: after an
    /// unclean shutdown, call [`ConsumeQueue::recover`].
    #[cfg(test)]
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        queue_id: u32,
        entries_per_file: u64,
        reads: ReadPath,
    ) -> Result<ConsumeQueue> {
        ConsumeQueue::open_budgeted(dir, topic, queue_id, entries_per_file, reads, None)
    }

    /// [`ConsumeQueue::open`] with its files under `budget`: sealed files' maps are charged and
    /// reclaimable, the active file counts against `max_open_files`.
    pub(crate) fn open_budgeted(
        dir: &Path,
        topic: &str,
        queue_id: u32,
        entries_per_file: u64,
        reads: ReadPath,
        budget: Option<MapBudget>,
    ) -> Result<ConsumeQueue> {
        assert!(is_plain_name(topic), "topic {topic:?} reached the consume queue unvalidated");
        assert!(entries_per_file > 0, "a consume-queue file holds at least one entry");
        let dir = dir.join(topic).join(queue_id.to_string());
        let listed = contiguous(&dir, list_files(&dir)?)?;
        let queue = ConsumeQueue {
            dir,
            entries_per_file,
            reads,
            budget,
            writer: Mutex::new(Writer { last_log_offset: None, dirty_end: 0, flushed: FlushedUpTo::default() }),
            files: RwLock::new(Vec::new()),
            min: AtomicU64::new(0),
            max: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
        };
        if let Some((last, sealed)) = listed.split_last() {
            queue.load(sealed, last)?;
        }
        Ok(queue)
    }

    /// Loads the sealed files (trusted whole, opened at first read) and the active one (its
    /// entries end at its first zero slot). Nothing is read whole and nothing is synced, so an
    /// open costs a few reads per queue however many there are: a crash's damage is found by
    /// `recover`, and what the last process left unsynced by the first `flush`.
    fn load(&self, sealed: &[Listed], last: &Listed) -> Result<()> {
        let mut files: Vec<Arc<QueueFile>> = sealed
            .iter()
            .map(|f| {
                let file = MappedFile::open_sealed(&f.path, f.capacity() * ENTRY_LEN, self.reads);
                let file = file.budgeted(self.budget.as_ref()).expect("a sealed file counts no descriptor");
                Arc::new(QueueFile { first: f.first, capacity: f.capacity(), file })
            })
            .collect();
        // Published whole while nobody else has the queue, to find where its entries end.
        let capacity = last.capacity() * ENTRY_LEN;
        let file = MappedFile::open_writable(&last.path, capacity, capacity, self.reads, CQ_ADVICE)?
            .budgeted(self.budget.as_ref())?;
        let entries = count_entries(&file, last.capacity())?;
        file.limit_len(entries * ENTRY_LEN);
        files.push(Arc::new(QueueFile { first: last.first, capacity: last.capacity(), file }));
        let (min, max) = (files[0].first, last.first + entries);
        *self.files.write() = files;
        self.max.store(max, Ordering::Release);
        self.min.store(min, Ordering::Release);
        let log_offset_before = |q: u64| -> Result<Option<u64>> {
            Ok(self.stored_entry(q.checked_sub(1).filter(|&q| q >= min))?.map(|e| e.log_offset))
        };
        let mut writer = self.writer.lock();
        writer.last_log_offset = log_offset_before(max)?;
        writer.dirty_end = entries;
        // Sealed files were synced when they were sealed; the active one may hold entries the
        // last process wrote and never synced: the next flush syncs it.
        writer.flushed = FlushedUpTo { queue_offset: last.first, last_log_offset: log_offset_before(last.first)? };
        Ok(())
    }

    /// The first queue offset the queue holds.
    pub(crate) fn min_offset(&self) -> u64 {
        self.min.load(Ordering::Acquire)
    }

    /// The queue offset the next entry gets: the queue holds `[min_offset, max_offset)`.
    pub(crate) fn max_offset(&self) -> u64 {
        self.max.load(Ordering::Acquire)
    }

    /// Appends the entry for the message at `log_offset` (`size` bytes, tag hash `tag_hash`) as
    /// queue offset `queue_offset`. Idempotent, as dispatch must be (docs/DESIGN.md §11): an entry
    /// whose log offset is not beyond the last entry's is skipped (`Ok(false)`). Otherwise
    /// `queue_offset` must be the queue's end (`max_offset`; any offset starts a queue that has no
    /// file yet: a queue rebuilt after retention keeps its numbering), else `Error::Corrupt` with
    /// `Corruption::QueueOffsetMismatch`. A full file rolls to a new one; a full disk fails that
    /// creation with `Error::DiskFull`, storing nothing, and the next append tries again.
    pub(crate) fn append(&self, queue_offset: u64, log_offset: u64, size: u32, tag_hash: u64) -> Result<bool> {
        assert!(size > 0, "a record's encoded size is never 0 (an all-zero entry marks unused space)");
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        if writer.last_log_offset.is_some_and(|last| log_offset <= last) {
            return Ok(false);
        }
        let active = self.active_for(&mut writer, queue_offset)?;
        let mut bytes = [0u8; CQ_ENTRY_LEN];
        Entry { log_offset, size, tag_hash }.encode_into(&mut bytes);
        // Counted before the write: a failed `pwrite` may have stored part of the entry.
        writer.dirty_end = writer.dirty_end.max(queue_offset + 1 - active.first);
        let position = active.file.append(&bytes)?;
        debug_assert_eq!(position, active.position(queue_offset), "the entry must land in its slot");
        writer.last_log_offset = Some(log_offset);
        debug_assert!(self.min.load(Ordering::Relaxed) <= queue_offset, "min ≤ max");
        self.max.store(queue_offset + 1, Ordering::Release);
        Ok(true)
    }

    /// The file the entry for `queue_offset` goes into: the active file, a new file after it when
    /// it is full, or the queue's first file when it has none.
    fn active_for(&self, writer: &mut Writer, queue_offset: u64) -> Result<Arc<QueueFile>> {
        let Some(active) = self.files.read().last().cloned() else {
            return self.start_at(writer, queue_offset);
        };
        let max = self.max.load(Ordering::Relaxed);
        if queue_offset != max {
            let reason = Corruption::QueueOffsetMismatch { expected: max, found: queue_offset };
            return Err(Error::corrupt(active.path(), active.position(max), reason));
        }
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
    fn start_at(&self, writer: &mut Writer, queue_offset: u64) -> Result<Arc<QueueFile>> {
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
        let path = self.dir.join(file_name(first, CQ_SUFFIX));
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
        let file = match file.budgeted(self.budget.as_ref()) {
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
            self.append(max + i, first + i, 1, 0)?;
        }
        Ok(gap)
    }

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
    fn file_for(&self, queue_offset: u64) -> Option<Arc<QueueFile>> {
        let files = self.files.read();
        let i = files.partition_point(|f| f.first <= queue_offset).checked_sub(1)?;
        files.get(i).filter(|f| queue_offset < f.end()).cloned()
    }

    /// The entry stored at `queue_offset` whatever the bounds say (below `min` too), unchecked;
    /// `None` for `None` or an offset no file holds. Under the writer lock (no file is retired).
    fn stored_entry(&self, queue_offset: Option<u64>) -> Result<Option<Entry>> {
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
            return Err(Error::OffsetOutOfRange { requested: queue_offset, start: min, next: max });
        }
        self.cut(&mut writer, queue_offset)
    }

    /// Recovery, at every open (docs/DESIGN.md §11): checks the entries from
    /// `from_queue_offset` (the entry for the store checkpoint: those below it were durable) and
    /// cuts the queue at the first one that is all zero or of size 0, whose log offset is not
    /// above the previous entry's, or that points at or past `log_next_offset` (the commit log,
    /// recovered first, does not hold it); a last entry kept that crosses a 512-byte sector
    /// boundary goes too (it may be torn; the redispatch writes it again). Zeroes what follows durably, also garbage past the queue's end,
    /// and logs what it cut.
    pub(crate) fn recover(&self, from_queue_offset: u64, log_next_offset: u64) -> Result<QueueRecovery> {
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
        // it, unless it was durable (below `checked_from`); the redispatch writes it again.
        if end > checked_from && self.file_for(end - 1).is_some_and(|f| straddles_a_sector(f.position(end - 1))) {
            bad =
                Some((end - 1, Corruption::BadFile("the last entry crosses a sector boundary a crash may have torn")));
        }
        let end = bad.as_ref().map_or(max, |(at, _)| *at);
        writer.dirty_end = dirty_end(active, writer.dirty_end)?;
        let zeroed_tail = writer.dirty_end > max - active.first;
        let reason = bad.map(|(_, reason)| reason);
        if let Some(reason) = &reason {
            tracing::warn!(
                queue = %self.dir.display(), checked_from, end, removed = max - end, %reason,
                "consume queue cut at its first bad entry after an unclean shutdown"
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
    fn cut(&self, writer: &mut Writer, queue_offset: u64) -> Result<()> {
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

/// The first entry of `entries` (queue offsets from `first`) that is all zero, of size 0, whose log offset
/// is not above the one before it (`previous` for the first), or that points at or past
/// `log_next`, with why.
fn first_bad_entry(
    first: u64,
    mut previous: Option<u64>,
    entries: &[Entry],
    log_next: Option<u64>,
) -> Option<(u64, Corruption)> {
    // Not `(first..).zip(entries)`: that steps past the last entry's offset, which may be
    // `u64::MAX - 1`.
    for (entry, i) in entries.iter().zip(0u64..) {
        let queue_offset = first + i;
        if entry.is_zero() {
            return Some((queue_offset, Corruption::QueueEntryUnused { queue_offset }));
        }
        if entry.size == 0 {
            return Some((queue_offset, Corruption::BadFile("consume-queue entry of size 0 (torn)")));
        }
        if let Some(previous) = previous.filter(|&p| entry.log_offset <= p) {
            let found = entry.log_offset;
            return Some((queue_offset, Corruption::QueueLogOffsetNotIncreasing { queue_offset, previous, found }));
        }
        if let Some(log_next) = log_next.filter(|&next| entry.log_offset >= next) {
            let log_offset = entry.log_offset;
            return Some((queue_offset, Corruption::QueueEntryPastLogEnd { queue_offset, log_offset, log_next }));
        }
        previous = Some(entry.log_offset);
    }
    None
}

/// The smallest unit a crash writes whole: a disk sector (pages are multiples of it).
const TEAR_UNIT: u64 = 512;

/// Whether the entry at byte `position` of its file crosses a [`TEAR_UNIT`] boundary.
fn straddles_a_sector(position: u64) -> bool {
    position / TEAR_UNIT != (position + ENTRY_LEN - 1) / TEAR_UNIT
}

/// Whether `name` is one plain path component (the store validates topics; this only keeps a
/// path from leaving the queue's directory).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The `.cq` files of a queue's directory, ascending by first queue offset (none if it does not
/// exist). Other names are logged and left alone.
fn list_files(dir: &Path) -> Result<Vec<Listed>> {
    let names = match storage::list_dir(dir) {
        Ok(names) => names,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut listed = Vec::new();
    for name in names {
        let path = dir.join(&name);
        match crate::format::parse_file_name(&name) {
            Some((first, CQ_SUFFIX)) => listed.push(Listed { first, len: storage::file_len(&path)?, path }),
            _ => tracing::warn!(file = %path.display(), "not a consume-queue file name; ignored"),
        }
    }
    listed.sort_by_key(|f| f.first);
    Ok(listed)
}

/// The files that form one run of queue offsets, each beginning where the one before it ends
/// (a file's capacity is its length in whole entries). From the first that does not (an empty
/// file, a gap or an overlap) on, files are deleted, logged: they cannot be part of the queue,
/// and a new file may need one of their names.
fn contiguous(dir: &Path, listed: Vec<Listed>) -> Result<Vec<Listed>> {
    let mut kept: Vec<Listed> = Vec::with_capacity(listed.len());
    let mut rest = listed.into_iter();
    let mut dropped = Vec::new();
    for file in rest.by_ref() {
        if file.len % ENTRY_LEN != 0 {
            let ignored = file.len % ENTRY_LEN;
            tracing::warn!(file = %file.path.display(), len = file.len, ignored, "not a whole number of entries: the partial one at the end is ignored");
        }
        let expected = kept.last().map(|f| f.first + f.capacity());
        let problem = if file.capacity() == 0 {
            Some("holds no entry (cut short, or created by a crash)".to_owned())
        } else if file.first.checked_add(file.capacity()).is_none() {
            Some("its queue offsets overflow".to_owned())
        } else {
            expected.filter(|&e| e != file.first).map(|e| format!("the file before it ends at queue offset {e}"))
        };
        if let Some(problem) = problem {
            tracing::warn!(file = %file.path.display(), %problem, "consume-queue file does not continue the queue: it and every later file are deleted");
            dropped.push(file);
            break;
        }
        kept.push(file);
    }
    dropped.extend(rest);
    for file in dropped.iter().rev() {
        storage::remove_if_exists(&file.path)?;
    }
    if !dropped.is_empty() {
        storage::sync_dir(dir)?;
    }
    Ok(kept)
}

/// The entries of an active file: they end at its first all-zero slot, found by a binary search
/// (entries, then zeros, as appends leave a file; a crash may have written pages out of order,
/// and `recover` then checks the entries and the slots past them).
fn count_entries(file: &MappedFile, capacity: u64) -> Result<u64> {
    let (mut low, mut high) = (0, capacity);
    while low < high {
        let middle = low + (high - low) / 2;
        let used = file.read_with(middle * ENTRY_LEN, CQ_ENTRY_LEN, |bytes| !Entry::decode_from(bytes).is_zero())?;
        if used.unwrap_or(false) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    Ok(low)
}

/// The slots of `file` (reading all of it) up to its last non-zero one, at least `from`.
fn dirty_end(file: &QueueFile, from: u64) -> Result<u64> {
    let bytes = storage::read_if_exists(&file.path())?.unwrap_or_default();
    let slots = (bytes.len() as u64 / ENTRY_LEN).min(file.capacity) as usize;
    let last_used =
        bytes[..slots * CQ_ENTRY_LEN].chunks_exact(CQ_ENTRY_LEN).rposition(|slot| slot.iter().any(|&b| b != 0));
    Ok(last_used.map_or(0, |i| i as u64 + 1).max(from))
}

#[cfg(test)]
mod tests {
    use std::ops::Range;
    use std::os::unix::fs::FileExt as _;
    use std::sync::atomic::AtomicBool;

    use proptest::prelude::*;

    use super::*;

    const BOTH: [ReadPath; 2] = [ReadPath::Mmap, ReadPath::Pread];
    const TOPIC: &str = "orders";
    const QUEUE: u32 = 3;

    /// The entry every test stores at queue offset `q`: log offsets 5, 15, 25, ...
    fn entry(q: u64) -> Entry {
        Entry { log_offset: q * 10 + 5, size: 100 + q as u32, tag_hash: q % 3 }
    }

    fn open(root: &Path, per_file: u64) -> ConsumeQueue {
        open_with(root, per_file, ReadPath::Mmap)
    }

    fn open_with(root: &Path, per_file: u64, reads: ReadPath) -> ConsumeQueue {
        ConsumeQueue::open(root, TOPIC, QUEUE, per_file, reads).expect("open")
    }

    fn append(queue: &ConsumeQueue, q: u64, e: Entry) -> Result<bool> {
        queue.append(q, e.log_offset, e.size, e.tag_hash)
    }

    fn fill(queue: &ConsumeQueue, range: Range<u64>) {
        for q in range {
            assert!(append(queue, q, entry(q)).expect("append"), "entry {q} appended");
        }
    }

    fn queue_dir(root: &Path) -> PathBuf {
        root.join(TOPIC).join(QUEUE.to_string())
    }

    fn cq_path(root: &Path, first: u64) -> PathBuf {
        queue_dir(root).join(file_name(first, CQ_SUFFIX))
    }

    /// The queue files' first offsets, and every other name, sorted.
    fn names(root: &Path) -> Vec<String> {
        let mut names = storage::list_dir(&queue_dir(root)).expect("list");
        names.sort();
        names
    }

    fn cq_names(firsts: &[u64]) -> Vec<String> {
        firsts.iter().map(|&first| file_name(first, CQ_SUFFIX)).collect()
    }

    /// Checks the queue holds exactly `entry(q)` for `q` in `range`, by `get` and by `entries`.
    fn assert_holds(queue: &ConsumeQueue, range: Range<u64>) {
        assert_eq!((queue.min_offset(), queue.max_offset()), (range.start, range.end), "bounds");
        for q in range.clone() {
            assert_eq!(queue.get(q).expect("get"), Some(entry(q)), "entry {q}");
        }
        assert_eq!(queue.get(range.end).expect("get"), None, "nothing at the end");
        let all = queue.entries(0, usize::MAX).expect("entries");
        assert_eq!(all, range.map(|q| (q, entry(q))).collect::<Vec<_>>());
    }

    fn encode(e: Entry) -> [u8; CQ_ENTRY_LEN] {
        let mut bytes = [0u8; CQ_ENTRY_LEN];
        e.encode_into(&mut bytes);
        bytes
    }

    /// Writes `bytes` over the slot of queue offset `q` in the file starting at `first`.
    fn overwrite_slot(root: &Path, first: u64, q: u64, bytes: &[u8]) {
        let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
        file.write_all_at(bytes, (q - first) * ENTRY_LEN).expect("write");
    }

    /// Writes `bytes` at byte `position` of the file starting at `first`.
    fn overwrite_slot_bytes(root: &Path, first: u64, position: u64, bytes: &[u8]) {
        let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
        file.write_all_at(bytes, position).expect("write");
    }

    fn file_bytes(root: &Path, first: u64) -> Vec<u8> {
        std::fs::read(cq_path(root, first)).expect("read")
    }

    fn set_len(root: &Path, first: u64, len: u64) {
        let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
        file.set_len(len).expect("set_len");
    }

    #[test]
    fn entry_layout_and_round_trip() {
        let e = Entry { log_offset: 0x0102_0304_0506_0708, size: 0x090a_0b0c, tag_hash: 0x0d0e_0f10_1112_1314 };
        let bytes = encode(e);
        assert_eq!(bytes.to_vec(), (1..=20).collect::<Vec<u8>>(), "big-endian, in field order");
        assert_eq!(Entry::decode_from(&bytes), e);
        assert!(!e.is_zero());
        assert!(Entry::decode_from(&[0; CQ_ENTRY_LEN]).is_zero());
        assert!(!Entry { log_offset: 0, size: 1, tag_hash: 0 }.is_zero(), "log offset 0 is data");
    }

    #[test]
    fn appends_and_gets_across_file_rolls() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let queue = open_with(dir.path(), 4, reads);
            assert_holds(&queue, 0..0);
            assert!(!queue_dir(dir.path()).exists(), "no directory before the first entry");
            fill(&queue, 0..10);
            assert_holds(&queue, 0..10);
            assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
            for first in [0, 4, 8] {
                assert_eq!(file_bytes(dir.path(), first).len(), 80, "created at full size");
            }
            let batch = |from, max| queue.entries(from, max).expect("entries");
            assert_eq!(batch(2, 5), (2..7).map(|q| (q, entry(q))).collect::<Vec<_>>(), "across a file boundary");
            assert_eq!(batch(8, 100), (8..10).map(|q| (q, entry(q))).collect::<Vec<_>>(), "stops at the end");
            assert!(batch(10, 5).is_empty() && batch(0, 0).is_empty() && batch(u64::MAX, 5).is_empty());
        }
    }

    #[test]
    fn an_entry_not_beyond_the_last_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 0..3);
        for (q, log_offset) in [(3, entry(2).log_offset), (3, 0), (0, entry(0).log_offset), (9, 1)] {
            let skipped = Entry { log_offset, size: 1, tag_hash: 0 };
            assert!(!append(&queue, q, skipped).expect("append"), "{q} at log offset {log_offset} skipped");
        }
        assert_holds(&queue, 0..3);
        for found in [2, 5] {
            let error = append(&queue, found, Entry { log_offset: 1000, size: 1, tag_hash: 0 }).expect_err("mismatch");
            let mismatch = Corruption::QueueOffsetMismatch { expected: 3, found };
            assert!(matches!(&error, Error::Corrupt { reason, position: 60, .. } if *reason == mismatch), "{error:?}");
        }
        assert!(append(&queue, 3, entry(3)).expect("append"));
        assert_holds(&queue, 0..4);
    }

    #[test]
    fn a_queue_starts_at_any_offset_and_keeps_it_across_reopens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 1000..1002);
        assert_eq!(names(dir.path()), cq_names(&[1000]));
        assert_eq!(queue.get(999).expect("get"), None);
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 1000..1002);
        fill(&queue, 1002..1005);
        assert_eq!(names(dir.path()), cq_names(&[1000, 1004]));
    }

    /// A queue offset comes from the message's header: one near `u64::MAX` (a damaged record, or
    /// a queue rebuilt from one) used to panic the dispatcher at the file's creation, and a read
    /// of the entry at `u64::MAX - 1` overflowed while checking it.
    #[test]
    fn a_queue_offset_without_room_for_a_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        let error = append(&queue, u64::MAX - 2, entry(0)).expect_err("no room for a first file");
        assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
        assert_holds(&queue, 0..0);
        let start = u64::MAX - 4;
        for (i, q) in (start..u64::MAX).enumerate() {
            assert!(append(&queue, q, entry(i as u64)).expect("append"));
        }
        let error = append(&queue, u64::MAX, entry(9)).expect_err("no room for the next file");
        assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
        assert_eq!((queue.min_offset(), queue.max_offset()), (start, u64::MAX));
        assert_eq!(queue.get(u64::MAX - 1).expect("get"), Some(entry(3)));
        assert_eq!(queue.entries(start, 10).expect("entries").len(), 4);
        assert_eq!(queue.queue_offset_for_log_offset(u64::MAX).expect("search"), u64::MAX);
        assert_eq!(queue.recover(start, u64::MAX).expect("recover").removed, 0);
        queue.truncate_to(u64::MAX - 1).expect("truncate");
        assert_eq!(queue.max_offset(), u64::MAX - 1);
    }

    #[test]
    fn reopen_keeps_the_entries_and_the_last_log_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 0..6);
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..6);
        assert!(!append(&queue, 6, entry(5)).expect("append"), "the last log offset survived the reopen");
        fill(&queue, 6..8);
        drop(queue);
        // The active file is full: the next append rolls.
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..8);
        fill(&queue, 8..9);
        assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
    }

    #[test]
    fn the_last_log_offset_is_found_in_the_sealed_file_when_the_active_one_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 0..8);
        queue.truncate_to(4).expect("truncate");
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..4);
        assert!(!append(&queue, 4, entry(3)).expect("append"), "entry 3 is in the sealed file");
        fill(&queue, 4..5);
    }

    /// A known pitfall: an index that looked for its first zero entry mistook a legitimate 0 for
    /// empty, and could not reopen after one record. Log offset 0 is data; a size never is 0.
    #[test]
    fn one_entry_at_log_offset_zero_survives_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        let first = Entry { log_offset: 0, size: 1, tag_hash: 0 };
        assert!(append(&queue, 0, first).expect("append"));
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_eq!((queue.max_offset(), queue.get(0).expect("get")), (1, Some(first)));
        assert!(!append(&queue, 1, first).expect("append"), "not beyond the last");
        assert_eq!(queue.recover(0, 1).expect("recover").removed, 0);
    }

    #[test]
    fn recovery_cuts_at_a_zero_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..10);
        overwrite_slot(dir.path(), 4, 5, &[0; CQ_ENTRY_LEN]);
        let queue = open(dir.path(), 4);
        assert_eq!(queue.max_offset(), 10, "sealed files are trusted until recovery");
        let read = queue.get(5);
        let unused = Corruption::QueueEntryUnused { queue_offset: 5 };
        assert!(matches!(&read, Err(Error::Corrupt { reason, position: 20, .. }) if *reason == unused), "{read:?}");
        let report = queue.recover(0, 1000).expect("recover");
        let expected = QueueRecovery { checked_from: 0, end: 5, removed: 5, reason: Some(unused), zeroed_tail: false };
        assert_eq!(report, expected);
        assert_holds(&queue, 0..5);
        assert_eq!(names(dir.path()), cq_names(&[0, 4]), "later files deleted");
        assert!(file_bytes(dir.path(), 4)[20..].iter().all(|&b| b == 0), "the rest of the cut file zeroed");
        fill(&queue, 5..10);
        drop(queue);
        assert_holds(&open(dir.path(), 4), 0..10);
    }

    #[test]
    fn recovery_cuts_at_a_hole_in_the_active_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 8), 0..6);
        // A crash wrote the pages of entries 3..6 and not the one of entry 2.
        overwrite_slot(dir.path(), 0, 2, &[0; CQ_ENTRY_LEN]);
        let queue = open(dir.path(), 8);
        assert_eq!(queue.max_offset(), 6, "the open's binary search stepped over the hole");
        assert!(matches!(queue.get(2), Err(Error::Corrupt { .. })));
        let from = queue.queue_offset_for_log_offset(entry(2).log_offset).expect("search");
        assert_eq!(from, 2, "the search for the checkpoint's entry counts the hole as not below");
        let report = queue.recover(from, 1000).expect("recover");
        let reason = Corruption::QueueEntryUnused { queue_offset: 2 };
        assert_eq!((report.end, report.removed, report.reason), (2, 4, Some(reason)));
        assert!(file_bytes(dir.path(), 0)[40..].iter().all(|&b| b == 0));
        assert_holds(&queue, 0..2);
    }

    #[test]
    fn recovery_cuts_at_a_log_offset_not_above_the_previous() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..10);
        overwrite_slot(dir.path(), 4, 6, &encode(entry(2)));
        let queue = open(dir.path(), 4);
        let report = queue.recover(0, 1000).expect("recover");
        let reason = Corruption::QueueLogOffsetNotIncreasing { queue_offset: 6, previous: 55, found: 25 };
        assert_eq!((report.end, report.removed, report.reason), (6, 4, Some(reason)));
        assert_holds(&queue, 0..6);
        assert_eq!(names(dir.path()), cq_names(&[0, 4]));
    }

    #[test]
    fn recovery_cuts_at_an_entry_past_the_log_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..10);
        let queue = open(dir.path(), 4);
        let report = queue.recover(2, entry(7).log_offset).expect("recover");
        let reason = Corruption::QueueEntryPastLogEnd { queue_offset: 7, log_offset: 75, log_next: 75 };
        assert_eq!((report.checked_from, report.end, report.reason), (2, 7, Some(reason)));
        assert_holds(&queue, 0..7);
        fill(&queue, 7..10);
        assert_holds(&queue, 0..10);
    }

    /// A crash (power loss) writes a file's sectors independently, so an entry that straddles a
    /// sector boundary can be torn: its head written, its tail (its tag hash, or its size and tag
    /// hash) still zero. Recovery used to keep it (its log offset is fine), and the redispatch then
    /// skipped the message as already queued: a tag filter missed it for good.
    #[test]
    fn recovery_drops_a_last_entry_torn_at_a_sector_boundary() {
        // Entry 25 spans bytes 500..520 (the tag hash past 512); entry 102 spans 2040..2060 (size
        // and tag hash past 2048).
        for (torn, lost_from) in [(25u64, 512u64), (102, 2048)] {
            let dir = tempfile::tempdir().expect("tempdir");
            fill(&open(dir.path(), 200), 0..torn + 5);
            let zeros = vec![0u8; (torn + 5) as usize * CQ_ENTRY_LEN - lost_from as usize];
            overwrite_slot_bytes(dir.path(), 0, lost_from, &zeros);
            let queue = open(dir.path(), 200);
            let report = queue.recover(torn - 3, 1 << 20).expect("recover");
            assert_eq!((report.end, report.removed), (torn, 1), "{report:?}");
            assert_holds(&queue, 0..torn);
            fill(&queue, torn..torn + 5);
            assert_holds(&queue, 0..torn + 5);
        }
        // Below the entries recovery checks (durable at the checkpoint), nothing is dropped.
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 200), 0..26);
        let queue = open(dir.path(), 200);
        assert_eq!(queue.recover(26, 1 << 20).expect("recover").removed, 0);
    }

    #[test]
    fn an_entry_of_size_zero_is_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 8), 0..6);
        overwrite_slot(dir.path(), 0, 3, &encode(Entry { log_offset: entry(3).log_offset, size: 0, tag_hash: 0 }));
        let queue = open(dir.path(), 8);
        assert!(matches!(queue.get(3), Err(Error::Corrupt { position: 60, .. })), "{:?}", queue.get(3));
        let report = queue.recover(0, 1 << 20).expect("recover");
        assert_eq!((report.end, report.removed), (3, 3), "{report:?}");
        assert_holds(&queue, 0..3);
    }

    #[test]
    fn recovery_trusts_the_entries_below_its_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..10);
        let queue = open(dir.path(), 4);
        let clean = queue.recover(0, 1000).expect("recover");
        assert_eq!(clean, QueueRecovery { checked_from: 0, end: 10, removed: 0, reason: None, zeroed_tail: false });
        overwrite_slot(dir.path(), 0, 1, &[0; CQ_ENTRY_LEN]);
        assert_eq!(queue.recover(4, 1000).expect("recover").removed, 0, "entry 1 is below the start");
        assert_eq!(queue.recover(50, 1000).expect("recover").checked_from, 10, "a start past the end checks nothing");
    }

    #[test]
    fn recovery_zeroes_garbage_past_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 8), 0..3);
        // Entry 6 written and entries 3..6 not: pages a crash tore off.
        overwrite_slot(dir.path(), 0, 6, &encode(entry(6)));
        let queue = open(dir.path(), 8);
        assert_holds(&queue, 0..3);
        let report = queue.recover(0, 1000).expect("recover");
        assert_eq!(report, QueueRecovery { checked_from: 0, end: 3, removed: 0, reason: None, zeroed_tail: true });
        assert!(file_bytes(dir.path(), 0)[60..].iter().all(|&b| b == 0));
        drop(queue);
        let queue = open(dir.path(), 8);
        assert!(!queue.recover(0, 1000).expect("recover").zeroed_tail, "nothing left to zero");
        fill(&queue, 3..8);
        assert_holds(&queue, 0..8);
    }

    #[test]
    fn names_that_are_not_queue_files_are_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..6);
        let others = ["00000000000000000004.cq.bak", "123.cq", "notes.txt"];
        for name in others {
            std::fs::write(queue_dir(dir.path()).join(name), b"x").expect("write");
        }
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..6);
        let mut expected = cq_names(&[0, 4]);
        expected.extend(others.map(str::to_owned));
        expected.sort();
        assert_eq!(names(dir.path()), expected);
    }

    #[test]
    fn a_short_last_file_holds_the_whole_entries_it_has() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..6);
        // One whole entry and half of the next.
        set_len(dir.path(), 4, 30);
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..5);
        assert_eq!(queue.recover(0, 1000).expect("recover").removed, 0);
        // The file is full at one entry: the next append rolls and seals it, trimmed.
        fill(&queue, 5..7);
        assert_eq!(names(dir.path()), cq_names(&[0, 4, 5]));
        assert_eq!(file_bytes(dir.path(), 4).len(), 20);
        drop(queue);
        assert_holds(&open(dir.path(), 4), 0..7);
    }

    #[test]
    fn files_after_a_gap_are_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..10);
        set_len(dir.path(), 0, 40);
        let queue = open(dir.path(), 4);
        assert_eq!(names(dir.path()), cq_names(&[0]), "file 4 no longer continues file 0");
        assert_holds(&queue, 0..2);
        fill(&queue, 2..7);
        assert_eq!(names(dir.path()), cq_names(&[0, 2, 6]));
        drop(queue);
        assert_holds(&open(dir.path(), 4), 0..7);
    }

    #[test]
    fn an_empty_file_left_by_a_crash_at_its_creation_is_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 4), 0..8);
        std::fs::write(cq_path(dir.path(), 8), b"").expect("write");
        let queue = open(dir.path(), 4);
        assert_eq!(names(dir.path()), cq_names(&[0, 4]));
        assert_holds(&queue, 0..8);
        fill(&queue, 8..9);
        assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
    }

    #[test]
    fn a_file_of_garbage_recovers_without_a_panic() {
        for seed in 1..40u64 {
            let dir = tempfile::tempdir().expect("tempdir");
            std::fs::create_dir_all(queue_dir(dir.path())).expect("mkdir");
            let mut state = seed;
            // Small random fields, so entries increase, repeat, go back, pass the log's end or
            // are zero, in every order; then a partial entry.
            let mut garbage = Vec::new();
            for _ in 0..12 {
                let mut random = |n| next_random(&mut state) % n;
                let e = if random(5) == 0 {
                    Entry { log_offset: 0, size: 0, tag_hash: 0 }
                } else {
                    Entry { log_offset: random(50), size: random(3) as u32, tag_hash: random(2) }
                };
                garbage.extend(encode(e));
            }
            garbage.extend([7; 7]);
            std::fs::write(cq_path(dir.path(), 0), &garbage).expect("write");
            let queue = open(dir.path(), 4);
            let report = queue.recover(0, 40).expect("recover");
            let end = queue.max_offset();
            assert_eq!(report.end, end, "seed {seed}: {report:?}");
            let rest = &file_bytes(dir.path(), 0)[end as usize * CQ_ENTRY_LEN..12 * CQ_ENTRY_LEN];
            assert!(rest.iter().all(|&b| b == 0), "seed {seed}: every slot past the end zeroed");
            let kept = queue.entries(0, usize::MAX).expect("what recovery kept reads back");
            assert_eq!(kept.len() as u64, end, "seed {seed}");
            assert!(kept.iter().all(|(_, e)| e.log_offset < 40), "seed {seed}");
            let last = kept.last().map_or(0, |(_, e)| e.log_offset);
            assert!(append(&queue, end, Entry { log_offset: last + 1, size: 1, tag_hash: 0 }).expect("append"));
            drop(queue);
            let queue = open(dir.path(), 4);
            assert_eq!(queue.max_offset(), end + 1, "seed {seed}");
            assert_eq!(queue.recover(0, 1 << 20).expect("recover").removed, 0, "seed {seed}");
        }
    }

    #[test]
    fn retention_deletes_whole_files_and_moves_min() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 0..10);
        assert_eq!(queue.delete_files_below(entry(0).log_offset).expect("retention"), 0);
        assert_eq!(queue.delete_files_below(entry(6).log_offset).expect("retention"), 1);
        assert_eq!(names(dir.path()), cq_names(&[4, 8]));
        assert_holds(&queue, 6..10);
        let error = queue.truncate_to(5).expect_err("below min");
        assert!(matches!(error, Error::OffsetOutOfRange { requested: 5, start: 6, next: 10 }), "{error:?}");
        assert_eq!(queue.delete_files_below(u64::MAX).expect("retention"), 1);
        assert_eq!(names(dir.path()), cq_names(&[8]), "the active file stays: it carries the numbering");
        assert_holds(&queue, 10..10);
        fill(&queue, 10..12);
        assert_holds(&queue, 10..12);
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_eq!(queue.min_offset(), 8, "after a reopen, min is the first file's until retention runs");
        assert_eq!(queue.delete_files_below(entry(10).log_offset).expect("retention"), 0);
        assert_holds(&queue, 10..12);
    }

    #[test]
    fn truncation_cuts_the_active_file_and_sealed_ones() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let queue = open_with(dir.path(), 4, reads);
            fill(&queue, 0..10);
            queue.truncate_to(10).expect("at the end: nothing");
            queue.truncate_to(9).expect("truncate");
            assert_holds(&queue, 0..9);
            assert!(file_bytes(dir.path(), 8)[20..].iter().all(|&b| b == 0));
            queue.truncate_to(6).expect("into a sealed file");
            assert_holds(&queue, 0..6);
            assert_eq!(names(dir.path()), cq_names(&[0, 4]));
            assert!(file_bytes(dir.path(), 4)[40..].iter().all(|&b| b == 0));
            fill(&queue, 6..10);
            queue.truncate_to(4).expect("at a file's first entry");
            assert_holds(&queue, 0..4);
            fill(&queue, 4..6);
            drop(queue);
            let queue = open_with(dir.path(), 4, reads);
            assert_holds(&queue, 0..6);
            queue.truncate_to(0).expect("everything");
            assert_holds(&queue, 0..0);
            assert_eq!(names(dir.path()), cq_names(&[0]));
            fill(&queue, 0..2);
            assert_holds(&queue, 0..2);
        }
    }

    #[test]
    fn queue_offset_for_log_offset_finds_the_first_entry_at_or_above() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        assert_eq!(queue.queue_offset_for_log_offset(7).expect("search"), 0, "empty");
        fill(&queue, 0..10);
        for (log_offset, expected) in
            [(0, 0), (5, 0), (6, 1), (15, 1), (44, 4), (45, 4), (95, 9), (96, 10), (u64::MAX, 10)]
        {
            assert_eq!(queue.queue_offset_for_log_offset(log_offset).expect("search"), expected, "{log_offset}");
        }
        queue.delete_files_below(entry(4).log_offset).expect("retention");
        assert_eq!(queue.queue_offset_for_log_offset(0).expect("search"), 4, "never below min");
    }

    #[test]
    fn flush_reports_what_is_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        assert_eq!(queue.flushed_up_to(), FlushedUpTo::default());
        fill(&queue, 0..6);
        assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 0, last_log_offset: None });
        let flushed = FlushedUpTo { queue_offset: 6, last_log_offset: Some(55) };
        assert_eq!(queue.flush().expect("flush"), flushed);
        assert_eq!(queue.flushed_up_to(), flushed);
        queue.truncate_to(3).expect("truncate");
        assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 3, last_log_offset: Some(25) });
        fill(&queue, 3..5);
        assert_eq!(queue.flush().expect("flush"), FlushedUpTo { queue_offset: 5, last_log_offset: Some(45) });
        drop(queue);
        // After an open only the sealed files count: the active one may hold entries a crashed
        // process never synced, until the next flush syncs it.
        let queue = open(dir.path(), 4);
        assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 4, last_log_offset: Some(35) });
        assert_eq!(queue.flush().expect("flush"), FlushedUpTo { queue_offset: 5, last_log_offset: Some(45) });
    }

    /// Configures failpoint `name` for the paths under one directory while it lives (so the
    /// tests running beside this one are unaffected).
    #[cfg(feature = "failpoints")]
    struct Failpoint(&'static str);

    #[cfg(feature = "failpoints")]
    impl Failpoint {
        fn under(name: &'static str, dir: &Path) -> Failpoint {
            fail::cfg(name, &format!("return({})", dir.display())).expect("failpoint");
            Failpoint(name)
        }
    }

    #[cfg(feature = "failpoints")]
    impl Drop for Failpoint {
        fn drop(&mut self) {
            fail::remove(self.0);
        }
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_full_disk_fails_the_file_creation_never_a_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        let full = Failpoint::under("fallocate_enospc", dir.path());
        let first = append(&queue, 0, entry(0));
        assert!(matches!(first, Err(Error::DiskFull { .. })), "{first:?}");
        assert!(names(dir.path()).is_empty(), "nothing left behind");
        drop(full);
        fill(&queue, 0..4);
        let full = Failpoint::under("fallocate_enospc", dir.path());
        let roll = append(&queue, 4, entry(4));
        assert!(matches!(roll, Err(Error::DiskFull { .. })), "{roll:?}");
        assert_eq!(names(dir.path()), cq_names(&[0]));
        assert_holds(&queue, 0..4);
        drop(full);
        fill(&queue, 4..6);
        assert_holds(&queue, 0..6);
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_failed_fdatasync_poisons_the_queue() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 4);
        fill(&queue, 0..2);
        let failing = Failpoint::under("fdatasync", dir.path());
        let flushed = queue.flush();
        assert!(matches!(flushed, Err(Error::Io { op: "fdatasync", .. })), "{flushed:?}");
        drop(failing);
        assert!(matches!(queue.flush(), Err(Error::Poisoned)), "a retry proves nothing");
        assert!(matches!(append(&queue, 2, entry(2)), Err(Error::Poisoned)));
        assert!(matches!(queue.truncate_to(1), Err(Error::Poisoned)));
        assert!(matches!(queue.recover(0, 1000), Err(Error::Poisoned)));
        assert!(matches!(queue.delete_files_below(1000), Err(Error::Poisoned)));
        assert_holds(&queue, 0..2);
        assert_eq!(queue.flushed_up_to(), FlushedUpTo::default(), "nothing claimed durable");
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_holds(&queue, 0..2);
        fill(&queue, 2..3);
    }

    /// A small deterministic generator for the reader threads.
    fn next_random(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        *state >> 33
    }

    /// Reads `q` and a batch from it; whatever comes back must be the entries stored there.
    fn check_reads(queue: &ConsumeQueue, q: u64) {
        if let Some(found) = queue.get(q).expect("get") {
            assert_eq!(found, entry(q), "entry {q}");
        }
        let batch = queue.entries(q, 40).expect("entries");
        for (i, (at, found)) in batch.iter().enumerate() {
            assert_eq!((*at, *found), (batch[0].0 + i as u64, entry(*at)), "batch from {q}");
        }
    }

    #[test]
    fn readers_never_see_a_partial_entry_while_the_writer_appends_and_rolls() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let queue = open_with(dir.path(), 128, reads);
            let done = AtomicBool::new(false);
            std::thread::scope(|scope| {
                for reader in 0..3u64 {
                    let (queue, done) = (&queue, &done);
                    scope.spawn(move || {
                        let mut state = reader + 1;
                        while !done.load(Ordering::Acquire) {
                            let max = queue.max_offset();
                            if max == 0 {
                                continue;
                            }
                            assert_eq!(queue.get(max - 1).expect("get"), Some(entry(max - 1)), "the newest entry");
                            check_reads(queue, next_random(&mut state) % max);
                        }
                    });
                }
                fill(&queue, 0..10_000);
                done.store(true, Ordering::Release);
            });
            assert_holds(&queue, 0..10_000);
        }
    }

    #[test]
    fn readers_see_an_entry_or_nothing_while_the_queue_is_cut_and_trimmed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open(dir.path(), 16);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for reader in 0..3u64 {
                let (queue, done) = (&queue, &done);
                scope.spawn(move || {
                    let mut state = reader + 7;
                    while !done.load(Ordering::Acquire) {
                        let low = queue.min_offset().saturating_sub(5);
                        check_reads(queue, low + next_random(&mut state) % (queue.max_offset() + 10 - low));
                    }
                });
            }
            let mut state = 99;
            for round in 0..60 {
                let max = queue.max_offset();
                fill(&queue, max..max + 40);
                let cut = queue.max_offset() - next_random(&mut state) % 30;
                queue.truncate_to(cut.max(queue.min_offset())).expect("truncate");
                if round % 6 == 5 {
                    let below = queue.max_offset().saturating_sub(50);
                    queue.delete_files_below(entry(below).log_offset).expect("retention");
                }
            }
            done.store(true, Ordering::Release);
        });
        let (min, max) = (queue.min_offset(), queue.max_offset());
        assert!(min > 0, "retention ran");
        assert_holds(&queue, min..max);
    }

    /// How long the race tests run per case: `STRATA_RACE_SECS` (seconds), else 300 ms.
    fn race_time() -> std::time::Duration {
        std::env::var("STRATA_RACE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(std::time::Duration::from_millis(300), std::time::Duration::from_secs)
    }

    /// Tiny files (3 entries) so rolls, cuts at file boundaries, sealed-file reopens and
    /// retention all happen under readers; every read is the entry stored there, nothing, or
    /// `Error::Unsettled`.
    #[test]
    fn readers_race_appends_cuts_retention_recovery_and_flushes() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let queue = open_with(dir.path(), 3, reads);
            let done = AtomicBool::new(false);
            std::thread::scope(|scope| {
                for reader in 0..3u64 {
                    let (queue, done) = (&queue, &done);
                    scope.spawn(move || {
                        let mut state = reader + 11;
                        while !done.load(Ordering::Acquire) {
                            let (min, max) = (queue.min_offset(), queue.max_offset());
                            let q = min.saturating_sub(3) + next_random(&mut state) % (max - min + 8);
                            match queue.get(q) {
                                Ok(found) => assert!(found.is_none_or(|e| e == entry(q)), "get {q}: {found:?}"),
                                Err(error) => assert!(matches!(error, Error::Unsettled { .. }), "get {q}: {error:?}"),
                            }
                            match queue.entries(q, 1 + (next_random(&mut state) % 10) as usize) {
                                Ok(batch) => {
                                    for (i, (at, found)) in batch.iter().enumerate() {
                                        assert_eq!((*at, *found), (batch[0].0 + i as u64, entry(*at)), "from {q}");
                                    }
                                }
                                Err(error) => assert!(matches!(error, Error::Unsettled { .. }), "{q}: {error:?}"),
                            }
                        }
                    });
                }
                let mut state = 5;
                let start = std::time::Instant::now();
                while start.elapsed() < race_time() {
                    let max = queue.max_offset();
                    fill(&queue, max..max + next_random(&mut state) % 9);
                    let (min, max) = (queue.min_offset(), queue.max_offset());
                    match next_random(&mut state) % 5 {
                        0 => queue.truncate_to(max.saturating_sub(next_random(&mut state) % 7).max(min)).expect("cut"),
                        1 => {
                            queue.delete_files_below(entry(max.saturating_sub(10)).log_offset).expect("retention");
                        }
                        2 => {
                            queue.recover(min, entry(max.saturating_sub(2)).log_offset).expect("recover");
                        }
                        3 => assert!(queue.flush().expect("flush").queue_offset <= queue.max_offset()),
                        _ => {}
                    }
                }
                done.store(true, Ordering::Release);
            });
            let (min, max) = (queue.min_offset(), queue.max_offset());
            assert_holds(&queue, min..max);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Append this many entries, each this far past the previous log offset.
        Append(u8, u8),
        /// Append an entry at an old log offset (skipped).
        Duplicate,
        /// Truncate this many entries from the end.
        Truncate(u8),
        Reopen,
        Recover,
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (1..12u8, 1..4u8).prop_map(|(n, gap)| Op::Append(n, gap)),
            1 => Just(Op::Duplicate),
            2 => any::<u8>().prop_map(|back| Op::Truncate(back % 16)),
            2 => Just(Op::Reopen),
            1 => Just(Op::Recover),
            1 => Just(Op::Flush),
        ]
    }

    /// Applies `op` to the queue and to the model (the entries in queue-offset order).
    fn apply(queue: &mut ConsumeQueue, model: &mut Vec<Entry>, op: &Op, reopen: &dyn Fn() -> ConsumeQueue) {
        let end = model.len() as u64;
        match *op {
            Op::Append(n, gap) => {
                for _ in 0..n {
                    let log_offset = model.last().map_or(0, |e| e.log_offset + u64::from(gap));
                    let e = Entry { log_offset, size: 1 + (log_offset % 1000) as u32, tag_hash: log_offset % 7 };
                    assert!(append(queue, model.len() as u64, e).expect("append"));
                    model.push(e);
                }
            }
            Op::Duplicate => {
                if let Some(&last) = model.last() {
                    assert!(!append(queue, end, last).expect("append"));
                }
            }
            Op::Truncate(back) => {
                let cut = end.saturating_sub(u64::from(back));
                queue.truncate_to(cut).expect("truncate");
                model.truncate(cut as usize);
            }
            Op::Reopen => *queue = reopen(),
            Op::Recover => assert_eq!(queue.recover(0, u64::MAX).expect("recover").removed, 0),
            Op::Flush => assert_eq!(queue.flush().expect("flush").queue_offset, end),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        #[test]
        fn the_queue_matches_a_vec_model(
            per_file in 1..6u64,
            pread in any::<bool>(),
            ops in proptest::collection::vec(op(), 1..30),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let reads = if pread { ReadPath::Pread } else { ReadPath::Mmap };
            let reopen = || open_with(dir.path(), per_file, reads);
            let mut queue = reopen();
            let mut model = Vec::new();
            for op in &ops {
                apply(&mut queue, &mut model, op, &reopen);
                let all: Vec<_> = (0..).zip(model.iter().copied()).collect();
                prop_assert_eq!(queue.entries(0, usize::MAX).expect("entries"), all, "after {:?}", op);
                prop_assert_eq!((queue.min_offset(), queue.max_offset()), (0, model.len() as u64));
                prop_assert_eq!(queue.get(model.len() as u64).expect("get"), None);
                if let Some(&last) = model.last() {
                    let found = queue.queue_offset_for_log_offset(last.log_offset).expect("search");
                    prop_assert_eq!(found, model.len() as u64 - 1);
                }
            }
        }
    }
}
