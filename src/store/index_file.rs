//! The IndexFile (docs/DESIGN.md §11; the bytes are in docs/FORMAT.md, "`.idx`"): RocketMQ's
//! hash-slot index from a message key to the log offsets of the messages carrying it, one
//! fixed-size file per stretch of the commit log, and [`IndexFiles`], the set of them in
//! `<root>/index/` (RocketMQ's `IndexService`).
//!
//! A put writes entry `n = index_count + 1` as `[key_hash][log_offset][time_diff_s][prev_entry]`,
//! `prev_entry` being what the key's hash slot held, then points the slot at `n`: every slot heads
//! a chain of its entries, newest first. A query walks the chain of its hash's slot and keeps the
//! entries with exactly that hash whose time is in its range. Log offsets and times never decrease
//! from one entry to the next, so the walk stops at the first entry older than the range, and it
//! takes at most `index_count` steps whatever the bytes say (a corrupt chain cannot loop). Hashes
//! collide (32 bits, and slots are shared): the caller re-reads each message and re-checks its key.
//!
//! Times are whole seconds since the file's `begin_timestamp`, so a query's time test is
//! conservative: it never drops an entry whose timestamp is in the range, and may return one up to
//! 999 ms outside it (the caller, which reads the message anyway, checks exactly if it cares). A
//! put whose timestamp is below an earlier put's second counts as that second.
//!
//! The active file keeps its slot table in memory (4 bytes a slot: 20 MB for RocketMQ's 5M slots)
//! and its newest entries too, up to `PENDING_ENTRIES`, then written with one `pwrite`: a put
//! costs no system call (measured: about 0.1 µs, against 2.3 µs with a `pwrite` for the entry and
//! one for the slot). A flush writes the entries and the changed pages of the slot table; the
//! seal writes all and drops the table.
//!
//! Concurrency (docs/DESIGN.md §5: bytes a reader may be reading are never modified while it reads
//! them): the active file's slots and newest entries change under puts, so a put and a query of
//! the active file exclude each other (the file's `active` lock, held for a put's memory writes,
//! or a query's walk). Entries are written to the file once, past those its queries read there.
//! A sealed file never changes: it is queried without that lock, holds no descriptor, and is
//! mapped at its first query (`MappedFile`). One writer (the dispatcher), any number of readers;
//! `IndexFiles` is `Send + Sync`.
//!
//! Durability: a new file is created at full size with fallocate (a full disk fails there, never
//! at a put), its header (with the begin timestamp every time is relative to) fdatasynced and the
//! directory fsynced. Puts sync nothing, and an entry not yet written is lost with the process;
//! [`IndexFile::flush`] writes the entries and changed slots, fdatasyncs, then writes the header
//! counting the entries and fdatasyncs again, so a header on disk never counts an entry that is
//! not. A failed fdatasync poisons the file (later puts, flushes and the seal are
//! `Error::Poisoned`): a retry that succeeds proves nothing. **Contract for the store**: it may record that every message below log offset X is
//! indexed (its checkpoint) only after a `flush` that returned after their puts. Then every entry
//! past a crashed file's header count is for a message at or past X, which dispatch redoes;
//! [`IndexFiles::recover`] validates the newest file entry by entry, cuts it, and rebuilds its
//! slots. A clean close is a `flush` (the slot table on disk is then whole).
//!
//! Lock order (a thread holding lock *n* takes only locks numbered above *n*): 1
//! `IndexFiles::writer` → 2 `IndexFiles::files` → 3 an `IndexFile`'s `flushing` → 4 its `active`
//! → 5 its `MappedFile`'s own locks.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};

use byteorder::{BigEndian, ByteOrder};
use parking_lot::{Mutex, RwLock};

use crate::config::ReadPath;
use crate::error::{Corruption, Error, Result};
use crate::format::{
    INDEX_ENTRY_KEY_HASH_POS, INDEX_ENTRY_LOG_OFFSET_POS, INDEX_ENTRY_PREV_POS, INDEX_ENTRY_TIME_DIFF_POS,
    INDEX_FILE_BEGIN_LOG_OFFSET_POS, INDEX_FILE_BEGIN_TIMESTAMP_POS, INDEX_FILE_END_LOG_OFFSET_POS,
    INDEX_FILE_END_TIMESTAMP_POS, INDEX_FILE_ENTRY_LEN, INDEX_FILE_HEADER_LEN, INDEX_FILE_INDEX_COUNT_POS,
    INDEX_FILE_MAX_SLOTS, INDEX_FILE_SLOT_COUNT_POS, INDEX_FILE_SLOT_LEN, INDEX_FILE_SUFFIX, file_name,
    parse_file_name,
};
use crate::map_budget::MapBudget;
use crate::storage::{self, MappedFile};
use crate::store::hash::fnv1a_64;

/// What lowers the space an index file needs.
const INDEX_FILE_ADVICE: &str = "lower index_slots or index_entries, or free space";

/// Entries a recovery scan decodes at once.
const SCAN_WINDOW_ENTRIES: u32 = 4096;

/// The hash a key is indexed under: the low 32 bits of FNV-1a 64 of `topic#key`.
pub(crate) fn key_hash(topic: &str, key: &str) -> u32 {
    fnv1a_64([topic, "#", key].concat().as_bytes()) as u32
}

/// An IndexFile's header as stored (docs/FORMAT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexHeader {
    /// Timestamp (ms) of the put that created the file; entry times are seconds since it.
    pub begin_timestamp_ms: i64,
    /// The largest timestamp put (ms); `begin_timestamp_ms` while empty.
    pub end_timestamp_ms: i64,
    /// The log offset the file was created for (its name); no entry is below it.
    pub begin_log_offset: u64,
    /// The largest log offset put; `begin_log_offset` while empty.
    pub end_log_offset: u64,
    /// Hash slots in the file.
    pub slot_count: u32,
    /// Entries used, numbered 1 to `index_count` (entry 0 is never used).
    pub index_count: u32,
}

impl IndexHeader {
    pub(crate) fn encode(&self) -> [u8; INDEX_FILE_HEADER_LEN] {
        let mut b = [0u8; INDEX_FILE_HEADER_LEN];
        BigEndian::write_i64(&mut b[INDEX_FILE_BEGIN_TIMESTAMP_POS..], self.begin_timestamp_ms);
        BigEndian::write_i64(&mut b[INDEX_FILE_END_TIMESTAMP_POS..], self.end_timestamp_ms);
        BigEndian::write_u64(&mut b[INDEX_FILE_BEGIN_LOG_OFFSET_POS..], self.begin_log_offset);
        BigEndian::write_u64(&mut b[INDEX_FILE_END_LOG_OFFSET_POS..], self.end_log_offset);
        BigEndian::write_u32(&mut b[INDEX_FILE_SLOT_COUNT_POS..], self.slot_count);
        BigEndian::write_u32(&mut b[INDEX_FILE_INDEX_COUNT_POS..], self.index_count);
        b
    }

    pub(crate) fn decode(b: &[u8; INDEX_FILE_HEADER_LEN]) -> IndexHeader {
        IndexHeader {
            begin_timestamp_ms: BigEndian::read_i64(&b[INDEX_FILE_BEGIN_TIMESTAMP_POS..]),
            end_timestamp_ms: BigEndian::read_i64(&b[INDEX_FILE_END_TIMESTAMP_POS..]),
            begin_log_offset: BigEndian::read_u64(&b[INDEX_FILE_BEGIN_LOG_OFFSET_POS..]),
            end_log_offset: BigEndian::read_u64(&b[INDEX_FILE_END_LOG_OFFSET_POS..]),
            slot_count: BigEndian::read_u32(&b[INDEX_FILE_SLOT_COUNT_POS..]),
            index_count: BigEndian::read_u32(&b[INDEX_FILE_INDEX_COUNT_POS..]),
        }
    }
}

/// An IndexFile entry as stored (docs/FORMAT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub key_hash: u32,
    pub log_offset: u64,
    /// Whole seconds from the file's begin timestamp.
    pub time_diff_s: u32,
    /// The entry the slot held before this one (0: the chain ends here).
    pub prev_entry: u32,
}

impl IndexEntry {
    pub(crate) fn encode(&self) -> [u8; INDEX_FILE_ENTRY_LEN] {
        let mut b = [0u8; INDEX_FILE_ENTRY_LEN];
        BigEndian::write_u32(&mut b[INDEX_ENTRY_KEY_HASH_POS..], self.key_hash);
        BigEndian::write_u64(&mut b[INDEX_ENTRY_LOG_OFFSET_POS..], self.log_offset);
        BigEndian::write_u32(&mut b[INDEX_ENTRY_TIME_DIFF_POS..], self.time_diff_s);
        BigEndian::write_u32(&mut b[INDEX_ENTRY_PREV_POS..], self.prev_entry);
        b
    }

    /// Decodes the first [`INDEX_FILE_ENTRY_LEN`] bytes of `b`.
    pub(crate) fn decode(b: &[u8]) -> IndexEntry {
        IndexEntry {
            key_hash: BigEndian::read_u32(&b[INDEX_ENTRY_KEY_HASH_POS..]),
            log_offset: BigEndian::read_u64(&b[INDEX_ENTRY_LOG_OFFSET_POS..]),
            time_diff_s: BigEndian::read_u32(&b[INDEX_ENTRY_TIME_DIFF_POS..]),
            prev_entry: BigEndian::read_u32(&b[INDEX_ENTRY_PREV_POS..]),
        }
    }

    fn is_zero(&self) -> bool {
        *self == IndexEntry { key_hash: 0, log_offset: 0, time_diff_s: 0, prev_entry: 0 }
    }
}

/// Bytes of an IndexFile with `slots` slots and room for `entries` entries (entry 0 included).
pub(crate) const fn index_file_len(slots: u32, entries: u32) -> u64 {
    INDEX_FILE_HEADER_LEN as u64
        + slots as u64 * INDEX_FILE_SLOT_LEN as u64
        + entries as u64 * INDEX_FILE_ENTRY_LEN as u64
}

/// `Error::InvalidConfig` unless a file of `slots` slots and `entries` entries can be made: at
/// least one slot, and room for one entry besides the unused entry 0.
fn check_sizes(slots: u32, entries: u32) -> Result<()> {
    if slots == 0 || slots > INDEX_FILE_MAX_SLOTS {
        let reason = format!("must be 1 to {INDEX_FILE_MAX_SLOTS} (the active file's slots are held in memory)");
        return Err(Error::InvalidConfig { field: "index_slots", reason });
    }
    if entries < 2 {
        let reason = "must be at least 2 (entry 0 is never used)".to_owned();
        return Err(Error::InvalidConfig { field: "index_entries", reason });
    }
    Ok(())
}

/// What recovering one file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileRecovery {
    /// Entries kept (numbered 1 to `kept`).
    pub kept: u32,
    /// Entries the header on disk counted.
    pub counted: u32,
    /// The first entry not kept and why, unless the scan simply reached the unused entries.
    pub cut_at: Option<(u32, &'static str)>,
}

/// Slots in a 4 KiB page of the slot table: the unit in which a flush writes changed slots.
const SLOTS_PER_PAGE: usize = 4096 / INDEX_FILE_SLOT_LEN;

/// Entries a put keeps in memory before writing them all with one `pwrite`.
const PENDING_ENTRIES: usize = 256;

/// Most slots a flush writes with one `pwrite` (64 KiB): each holds the file's state lock, which
/// the active file's queries wait for, for some microseconds only.
const SLOTS_PER_WRITE: usize = 16 * SLOTS_PER_PAGE;

/// What only the active file has: its slot table in memory (queries of the active file read it
/// here; the file's copy is written at flush and seal) and its newest entries, not yet written.
#[derive(Debug)]
struct ActiveState {
    slots: Vec<u32>,
    /// One bit per page of `slots` (`SLOTS_PER_PAGE` slots) changed since the last flush.
    dirty: Vec<u64>,
    /// Entries put but not yet written, encoded; the first is entry `pending_first`.
    pending: Vec<u8>,
    pending_first: u32,
    /// The last entry's `time_diff_s`: no later entry gets a smaller one.
    last_time_diff_s: u32,
}

impl ActiveState {
    fn new(slots: Vec<u32>, index_count: u32, last_time_diff_s: u32) -> ActiveState {
        let pages = slots.len().div_ceil(SLOTS_PER_PAGE);
        ActiveState {
            dirty: vec![0; pages.div_ceil(64)],
            slots,
            pending: Vec::with_capacity(PENDING_ENTRIES * INDEX_FILE_ENTRY_LEN),
            pending_first: index_count + 1,
            last_time_diff_s,
        }
    }

    fn set_slot(&mut self, slot: usize, n: u32) {
        self.slots[slot] = n;
        let page = slot / SLOTS_PER_PAGE;
        self.dirty[page / 64] |= 1 << (page % 64);
    }

    /// Entry `n` if it is one of the entries not yet written.
    fn pending_entry(&self, n: u32) -> Option<IndexEntry> {
        let at = n.checked_sub(self.pending_first)? as usize * INDEX_FILE_ENTRY_LEN;
        self.pending.get(at..at + INDEX_FILE_ENTRY_LEN).map(IndexEntry::decode)
    }

    /// The runs of pages marked in `dirty`, as slot ranges of at most `SLOTS_PER_WRITE`.
    fn runs(&self, dirty: &[u64]) -> Vec<std::ops::Range<usize>> {
        let pages = self.slots.len().div_ceil(SLOTS_PER_PAGE);
        let is_dirty = |page: usize| dirty[page / 64] & (1 << (page % 64)) != 0;
        let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
        for page in (0..pages).filter(|&p| is_dirty(p)) {
            let slots = page * SLOTS_PER_PAGE..((page + 1) * SLOTS_PER_PAGE).min(self.slots.len());
            match runs.last_mut() {
                Some(run) if run.end == slots.start && run.len() < SLOTS_PER_WRITE => run.end = slots.end,
                _ => runs.push(slots),
            }
        }
        runs
    }

    /// The stored bytes of `slots`.
    fn slot_bytes(&self, slots: std::ops::Range<usize>) -> Vec<u8> {
        let mut bytes = vec![0u8; slots.len() * INDEX_FILE_SLOT_LEN];
        BigEndian::write_u32_into(&self.slots[slots], &mut bytes);
        bytes
    }
}

/// Where a query reads: the active file's memory (its slots, its unwritten entries) before the
/// file, or the file alone (a sealed file).
#[derive(Clone, Copy)]
enum View<'a> {
    Active(&'a ActiveState),
    Sealed,
}

/// One `.idx` file. See the module docs.
#[derive(Debug)]
pub(crate) struct IndexFile {
    file: MappedFile,
    begin_log_offset: u64,
    begin_timestamp_ms: i64,
    slot_count: u32,
    /// Entries the file has room for, the unused entry 0 included.
    entry_capacity: u32,
    // The header's changing fields. Stored by the writer under `active` (Release), read by
    // queries under it or, once `sealed`, without it (Acquire): final by then.
    end_timestamp_ms: AtomicI64,
    end_log_offset: AtomicU64,
    index_count: AtomicU32,
    /// Set (Release) once the file is sealed and never changes again.
    sealed: AtomicBool,
    /// The active file's state (`None` once sealed). Puts hold it for writing, queries of the
    /// active file for reading: the slots and the newest entries change under puts.
    active: RwLock<Option<ActiveState>>,
    /// Serialises flushes, the seal and recovery (the header's writers).
    flushing: Mutex<()>,
    /// Set when an fdatasync failed: the kernel may have dropped the pages it was writing, and a
    /// later sync that succeeds proves nothing, so no later header may count them. Every later
    /// put, flush, seal and recovery is `Error::Poisoned` (reopen, and recover).
    poisoned: AtomicBool,
}

impl IndexFile {
    /// Creates `<dir>/<20-digit begin_log_offset>.idx` at full size (`index_file_len(slots,
    /// entries)`, fallocated: a full disk fails here with `Error::DiskFull`), for a first put at
    /// `begin_log_offset` and `begin_timestamp_ms`. Its header is durable, and its name (the
    /// directory is fsynced), before this returns; a failure leaves no file.
    pub(crate) fn create(
        dir: &Path,
        begin_log_offset: u64,
        begin_timestamp_ms: i64,
        slots: u32,
        entries: u32,
    ) -> Result<IndexFile> {
        check_sizes(slots, entries)?;
        let path = dir.join(file_name(begin_log_offset, INDEX_FILE_SUFFIX));
        let file = MappedFile::create_fixed(&path, index_file_len(slots, entries), ReadPath::Mmap, INDEX_FILE_ADVICE)?;
        let header = IndexHeader {
            begin_timestamp_ms,
            end_timestamp_ms: begin_timestamp_ms,
            begin_log_offset,
            end_log_offset: begin_log_offset,
            slot_count: slots,
            index_count: 0,
        };
        let durable = file.write_at(0, &header.encode()).and_then(|()| file.flush_detached());
        if let Err(error) = durable.and_then(|()| storage::sync_dir(dir)) {
            file.retire();
            let _ = storage::remove_if_exists(&path);
            return Err(error);
        }
        let state = ActiveState::new(vec![0; slots as usize], 0, 0);
        Ok(IndexFile::new(file, header, entries, Some(state)))
    }

    /// Opens an existing file as the active one (puts continue after its header's `index_count`),
    /// after checking its header (`Error::Corrupt` naming the file and field otherwise). Its slot
    /// table is read into memory. After an unclean shutdown, [`IndexFile::recover`] it before the
    /// first put.
    pub(crate) fn open(path: &Path) -> Result<IndexFile> {
        let (header, file_len, capacity) = read_header(path)?;
        let file = MappedFile::open_writable(path, file_len, file_len, ReadPath::Mmap, INDEX_FILE_ADVICE)?;
        let mut index = IndexFile::new(file, header, capacity, None);
        let table_len = header.slot_count as usize * INDEX_FILE_SLOT_LEN;
        let read_slots = |b: &[u8]| {
            let mut slots = vec![0u32; header.slot_count as usize];
            BigEndian::read_u32_into(b, &mut slots);
            slots
        };
        let slots = index.file.read_with(INDEX_FILE_HEADER_LEN as u64, table_len, read_slots)?;
        let last_time_diff_s = match header.index_count {
            0 => Some(0),
            n => index.read_entry(n)?.map(|last| last.time_diff_s),
        };
        let (Some(slots), Some(last_time_diff_s)) = (slots, last_time_diff_s) else {
            return Err(index.misuse("read a retired index file"));
        };
        index.active = RwLock::new(Some(ActiveState::new(slots, header.index_count, last_time_diff_s)));
        index.sealed = AtomicBool::new(false);
        Ok(index)
    }

    /// Opens an existing file as sealed: its header is read and checked now; the file is mapped at
    /// the first query, and no descriptor is held until then.
    pub(crate) fn open_sealed(path: &Path) -> Result<IndexFile> {
        let (header, file_len, capacity) = read_header(path)?;
        let file = MappedFile::open_sealed(path, file_len, ReadPath::Mmap);
        Ok(IndexFile::new(file, header, capacity, None))
    }

    /// Puts the file under `budget` (see `MappedFile::budgeted`): an active file counts against
    /// `max_open_files`, a sealed one's map is charged when it is made.
    pub(crate) fn under(self, budget: Option<&MapBudget>) -> Result<IndexFile> {
        Ok(IndexFile { file: self.file.budgeted(budget)?, ..self })
    }

    fn new(file: MappedFile, header: IndexHeader, entry_capacity: u32, active: Option<ActiveState>) -> Self {
        IndexFile {
            file,
            begin_log_offset: header.begin_log_offset,
            begin_timestamp_ms: header.begin_timestamp_ms,
            slot_count: header.slot_count,
            entry_capacity,
            end_timestamp_ms: AtomicI64::new(header.end_timestamp_ms),
            end_log_offset: AtomicU64::new(header.end_log_offset),
            index_count: AtomicU32::new(header.index_count),
            sealed: AtomicBool::new(active.is_none()),
            active: RwLock::new(active),
            flushing: Mutex::new(()),
            poisoned: AtomicBool::new(false),
        }
    }

    /// The file's path.
    pub(crate) fn path(&self) -> PathBuf {
        self.file.path()
    }

    /// The log offset the file was created for (its name); no entry is below it.
    pub(crate) fn begin_log_offset(&self) -> u64 {
        self.begin_log_offset
    }

    /// The largest log offset put (`begin_log_offset` while empty).
    pub(crate) fn end_log_offset(&self) -> u64 {
        self.end_log_offset.load(Ordering::Acquire)
    }

    /// The creating put's timestamp (ms).
    #[cfg(test)]
    pub(crate) fn begin_timestamp_ms(&self) -> i64 {
        self.begin_timestamp_ms
    }

    /// The largest timestamp put (ms; `begin_timestamp_ms` while empty). After a recovery, an
    /// upper bound (the end of the last entry's second).
    pub(crate) fn end_timestamp_ms(&self) -> i64 {
        self.end_timestamp_ms.load(Ordering::Acquire)
    }

    /// Entries used.
    pub(crate) fn index_count(&self) -> u32 {
        self.index_count.load(Ordering::Acquire)
    }

    /// Whether no entry is left: the next put returns `false`.
    #[cfg(test)]
    pub(crate) fn is_full(&self) -> bool {
        self.index_count() + 1 >= self.entry_capacity
    }

    /// Whether the file is sealed (no more puts).
    pub(crate) fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    /// The header as it stands in memory.
    fn header(&self) -> IndexHeader {
        IndexHeader {
            begin_timestamp_ms: self.begin_timestamp_ms,
            end_timestamp_ms: self.end_timestamp_ms(),
            begin_log_offset: self.begin_log_offset,
            end_log_offset: self.end_log_offset(),
            slot_count: self.slot_count,
            index_count: self.index_count(),
        }
    }

    /// Indexes the message at `log_offset` with timestamp `timestamp_ms` under `key_hash`.
    /// `false` when the file is full (the caller rolls to a new file). Log offsets must not go
    /// back (a message with several keys puts the same offset several times). The entry is kept
    /// in memory and written with the next `PENDING_ENTRIES` (or at the next flush); a failed put
    /// changes nothing.
    pub(crate) fn put(&self, key_hash: u32, log_offset: u64, timestamp_ms: i64) -> Result<bool> {
        let mut active = self.active.write();
        self.check_not_poisoned()?;
        let Some(state) = active.as_mut() else {
            return Err(self.misuse("put into a sealed index file"));
        };
        let count = self.index_count.load(Ordering::Relaxed);
        if count + 1 >= self.entry_capacity {
            return Ok(false);
        }
        let floor = if count == 0 { self.begin_log_offset } else { self.end_log_offset.load(Ordering::Relaxed) };
        if log_offset < floor {
            return Err(self.misuse("index put going back in log offset"));
        }
        if state.pending.len() >= PENDING_ENTRIES * INDEX_FILE_ENTRY_LEN {
            self.write_pending(state)?;
        }
        let n = count + 1;
        debug_assert_eq!(state.pending_first as usize + state.pending.len() / INDEX_FILE_ENTRY_LEN, n as usize);
        let slot = self.slot_of(key_hash);
        let prev_entry = match state.slots[slot] {
            prev if prev <= count => prev,
            prev => {
                tracing::warn!(file = %self.path().display(), slot, prev, count, "index slot points past the entries; its chain restarts");
                0
            }
        };
        let time_diff_s = self.time_diff_s(timestamp_ms).max(state.last_time_diff_s);
        let entry = IndexEntry { key_hash, log_offset, time_diff_s, prev_entry };
        state.pending.extend_from_slice(&entry.encode());
        state.set_slot(slot, n);
        state.last_time_diff_s = time_diff_s;
        self.end_log_offset.store(log_offset, Ordering::Release);
        self.end_timestamp_ms.fetch_max(timestamp_ms, Ordering::AcqRel);
        self.index_count.store(n, Ordering::Release);
        Ok(true)
    }

    /// Writes the entries kept in memory (one `pwrite`); queries then read them from the file.
    fn write_pending(&self, state: &mut ActiveState) -> Result<()> {
        if !state.pending.is_empty() {
            self.file.write_at(self.entry_position(state.pending_first), &state.pending)?;
            state.pending_first += (state.pending.len() / INDEX_FILE_ENTRY_LEN) as u32;
            state.pending.clear();
        }
        Ok(())
    }

    /// The log offsets indexed under `key_hash` whose time may be in `[begin_ms, end_ms]`, newest
    /// (largest) first, each once, at most `max` of them (the newest ones).
    #[cfg(test)]
    pub(crate) fn query(&self, key_hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        self.query_into(key_hash, begin_ms, end_ms, max, &mut found)?;
        Ok(found)
    }

    /// [`IndexFile::query`], appending to `found` until it holds `max` offsets. An offset equal to
    /// `found`'s last is not pushed again, so results of newer files can come first.
    pub(crate) fn query_into(
        &self,
        key_hash: u32,
        begin_ms: i64,
        end_ms: i64,
        max: usize,
        found: &mut Vec<u64>,
    ) -> Result<()> {
        if found.len() >= max || begin_ms > end_ms {
            return Ok(());
        }
        if self.sealed.load(Ordering::Acquire) {
            // A sealed file never changes: no lock.
            return self.walk(View::Sealed, key_hash, (begin_ms, end_ms), max, found);
        }
        let active = self.active.read();
        let view = active.as_ref().map_or(View::Sealed, View::Active);
        self.walk(view, key_hash, (begin_ms, end_ms), max, found)
    }

    /// Walks the chain of `key_hash`'s slot, at most `index_count` steps, each to a lower entry.
    fn walk(
        &self,
        view: View<'_>,
        key_hash: u32,
        range_ms: (i64, i64),
        max: usize,
        found: &mut Vec<u64>,
    ) -> Result<()> {
        let (begin_ms, end_ms) = range_ms;
        let count = self.index_count.load(Ordering::Acquire);
        if count == 0 || !self.overlaps(begin_ms, end_ms) {
            return Ok(());
        }
        let Some(mut n) = self.slot_value(view, key_hash)? else { return Ok(()) };
        let mut steps = 0;
        while n != 0 && n <= count && steps < count && found.len() < max {
            steps += 1;
            let Some(entry) = self.entry_in(view, n)? else { return Ok(()) };
            let (from_ms, to_ms) = self.second_of(entry.time_diff_s);
            if to_ms < begin_ms {
                break; // every older entry is older still
            }
            if entry.key_hash == key_hash && from_ms <= end_ms && found.last() != Some(&entry.log_offset) {
                found.push(entry.log_offset);
            }
            if entry.prev_entry >= n {
                break; // a chain only points back: this one is corrupt
            }
            n = entry.prev_entry;
        }
        Ok(())
    }

    /// What `key_hash`'s slot holds; `None` if the file was retired (deleted by retention while a
    /// query held it).
    fn slot_value(&self, view: View<'_>, key_hash: u32) -> Result<Option<u32>> {
        match view {
            View::Active(state) => Ok(Some(state.slots[self.slot_of(key_hash)])),
            View::Sealed => self.file.read_with(self.slot_position(key_hash), INDEX_FILE_SLOT_LEN, BigEndian::read_u32),
        }
    }

    /// Entry `n`; `None` if the file was retired.
    fn entry_in(&self, view: View<'_>, n: u32) -> Result<Option<IndexEntry>> {
        if let View::Active(state) = view
            && let Some(entry) = state.pending_entry(n)
        {
            return Ok(Some(entry));
        }
        self.read_entry(n)
    }

    /// Whether a time in `[begin_ms, end_ms]` can be in the file (always `false` while empty).
    pub(crate) fn overlaps(&self, begin_ms: i64, end_ms: i64) -> bool {
        self.index_count() > 0 && self.begin_timestamp_ms <= end_ms && self.end_timestamp_ms() >= begin_ms
    }

    /// Makes every entry put so far durable, and the header counting them: writes the entries
    /// kept in memory and the slots changed since the last flush, fdatasyncs, writes the header,
    /// fdatasyncs (a header on disk never counts an entry that is not). Puts and queries go on
    /// during the syncs. A sealed file has nothing to flush.
    pub(crate) fn flush(&self) -> Result<()> {
        let _flushing = self.flushing.lock();
        self.flush_locked()
    }

    fn flush_locked(&self) -> Result<()> {
        self.check_not_poisoned()?;
        let (header, dirty) = {
            let mut active = self.active.write();
            let Some(state) = active.as_mut() else { return Ok(()) };
            self.write_pending(state)?;
            let clean = vec![0; state.dirty.len()];
            (self.header(), std::mem::replace(&mut state.dirty, clean))
        };
        if let Err(error) = self.write_slots(&dirty) {
            if let Some(state) = self.active.write().as_mut() {
                state.dirty.iter_mut().zip(&dirty).for_each(|(now, failed)| *now |= failed);
            }
            return Err(error);
        }
        self.sync()?;
        self.file.write_at(0, &header.encode())?;
        self.sync()
    }

    /// fdatasync; a failure poisons the file.
    fn sync(&self) -> Result<()> {
        self.file.flush_detached().map_err(|error| self.poison(error))
    }

    fn check_not_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) { Err(Error::Poisoned) } else { Ok(()) }
    }

    /// Poisons the file after a failed fdatasync (`error`), and returns `error`.
    fn poison(&self, error: Error) -> Error {
        tracing::error!(file = %self.path().display(), %error, "index file poisoned: reopen it and recover");
        self.poisoned.store(true, Ordering::Release);
        error
    }

    /// Writes the slot pages marked in `dirty`, each run copied under the read lock (puts wait
    /// for the copy, queries do not) and written in pieces short enough not to stall queries.
    fn write_slots(&self, dirty: &[u64]) -> Result<()> {
        let runs = match &*self.active.read() {
            Some(state) => state.runs(dirty),
            None => return Ok(()),
        };
        for run in runs {
            let position = self.slot_position_of(run.start);
            let Some(bytes) = self.active.read().as_ref().map(|state| state.slot_bytes(run)) else { return Ok(()) };
            self.file.write_at(position, &bytes)?;
        }
        Ok(())
    }

    /// Seals the file: flushed as by [`IndexFile::flush`], then its map, descriptor and slot table
    /// in memory are released; later queries map it again, lazily, and read it without the
    /// `active` lock.
    pub(crate) fn seal(&self) -> Result<()> {
        let _flushing = self.flushing.lock();
        self.flush_locked()?;
        let mut active = self.active.write();
        let Some(state) = active.as_mut() else { return Ok(()) };
        // Nothing was put since the flush (the caller is the only writer): this writes nothing.
        let dirty = std::mem::take(&mut state.dirty);
        if !state.pending.is_empty() || dirty.iter().any(|&bits| bits != 0) {
            self.write_pending(state)?;
            for run in state.runs(&dirty) {
                self.file.write_at(self.slot_position_of(run.start), &state.slot_bytes(run))?;
            }
            self.file.write_at(0, &self.header().encode())?;
        }
        self.file.seal_derived().map_err(|error| self.poison(error))?;
        *active = None;
        self.sealed.store(true, Ordering::Release);
        Ok(())
    }

    /// Releases the file for good (waiting for current readers): later queries find nothing. For a
    /// file being deleted.
    pub(crate) fn retire(&self) {
        self.file.retire();
    }

    /// After an unclean shutdown: validates the entries from the first on and keeps them up to the
    /// first that is not valid: a log offset at or past `log_next_offset` (the caller passes the
    /// offset its dispatch restarts from, at most the log's next offset, so everything cut is
    /// dispatched again), a log offset or time below the previous entry's, or a `prev_entry` other
    /// than its slot's latest kept entry. Past the header's count (entries a flush had not
    /// covered), an all-zero entry ends the entries. The slots are rebuilt from the kept entries,
    /// the entries past them zeroed, and the header written, all durably.
    pub(crate) fn recover(&self, log_next_offset: u64) -> Result<FileRecovery> {
        let _flushing = self.flushing.lock();
        self.check_not_poisoned()?;
        let mut active = self.active.write();
        let Some(state) = active.as_mut() else {
            return Err(self.misuse("recover a sealed index file"));
        };
        self.write_pending(state)?;
        let counted = self.index_count.load(Ordering::Relaxed);
        let mut heads = vec![0u32; self.slot_count as usize];
        let mut last: Option<IndexEntry> = None;
        let mut kept = 0;
        let mut cut_at = None;
        'scan: for first in (1..self.entry_capacity).step_by(SCAN_WINDOW_ENTRIES as usize) {
            for entry in self.read_entries(first, SCAN_WINDOW_ENTRIES.min(self.entry_capacity - first))? {
                let n = kept + 1;
                if n > counted && entry.is_zero() {
                    break 'scan;
                }
                if let Err(reason) = self.check_next(&entry, last.as_ref(), &heads, log_next_offset) {
                    cut_at = Some((n, reason));
                    break 'scan;
                }
                heads[self.slot_of(entry.key_hash)] = n;
                last = Some(entry);
                kept = n;
            }
        }
        *state = ActiveState::new(heads, kept, last.map_or(0, |l| l.time_diff_s));
        self.rewrite(state, (kept, counted), last)?;
        let recovery = FileRecovery { kept, counted, cut_at };
        if let Some((entry, reason)) = cut_at {
            tracing::warn!(file = %self.path().display(), kept, counted, entry, reason, "index file cut after an unclean shutdown");
        } else if kept != counted {
            tracing::info!(file = %self.path().display(), kept, counted, "index file recovered entries its header did not count");
        }
        Ok(recovery)
    }

    /// Why `entry` cannot follow `last` (the previous kept entry) with the slot heads `heads`.
    fn check_next(
        &self,
        entry: &IndexEntry,
        last: Option<&IndexEntry>,
        heads: &[u32],
        log_next_offset: u64,
    ) -> Result<(), &'static str> {
        if entry.log_offset >= log_next_offset {
            return Err("log offset at or past the recovered end");
        }
        if entry.log_offset < last.map_or(self.begin_log_offset, |l| l.log_offset) {
            return Err("log offset goes back");
        }
        if entry.time_diff_s < last.map_or(0, |l| l.time_diff_s) {
            return Err("time goes back");
        }
        if entry.prev_entry != heads[self.slot_of(entry.key_hash)] {
            return Err("chain link is not its slot's previous entry");
        }
        Ok(())
    }

    /// Writes what recovery kept (`kept` of the `counted` entries): the rebuilt slots of `state`,
    /// zeros over every entry past those kept, then the header, each durable before the next.
    fn rewrite(&self, state: &ActiveState, (kept, counted): (u32, u32), last: Option<IndexEntry>) -> Result<()> {
        self.file.write_at(INDEX_FILE_HEADER_LEN as u64, &state.slot_bytes(0..state.slots.len()))?;
        let stale = self.entry_position(kept + 1);
        self.file.zero_range(stale, self.file.len() - stale)?;
        let counted_end_ms = self.end_timestamp_ms.load(Ordering::Relaxed);
        let end_timestamp_ms = match last {
            // The end of the last entry's second bounds every time kept; so does the header's end
            // when no entry past its count was kept.
            Some(last) if kept <= counted => self.second_of(last.time_diff_s).1.min(counted_end_ms),
            Some(last) => self.second_of(last.time_diff_s).1,
            None => self.begin_timestamp_ms,
        };
        self.end_timestamp_ms.store(end_timestamp_ms, Ordering::Release);
        self.end_log_offset.store(last.map_or(self.begin_log_offset, |l| l.log_offset), Ordering::Release);
        self.index_count.store(kept, Ordering::Release);
        self.sync()?;
        self.file.write_at(0, &self.header().encode())?;
        self.sync()
    }

    fn slot_of(&self, key_hash: u32) -> usize {
        (key_hash % self.slot_count) as usize
    }

    fn slot_position(&self, key_hash: u32) -> u64 {
        self.slot_position_of(self.slot_of(key_hash))
    }

    fn slot_position_of(&self, slot: usize) -> u64 {
        INDEX_FILE_HEADER_LEN as u64 + slot as u64 * INDEX_FILE_SLOT_LEN as u64
    }

    fn entry_position(&self, n: u32) -> u64 {
        index_file_len(self.slot_count, n)
    }

    /// Seconds since the begin timestamp, 0 for an earlier time, saturating.
    fn time_diff_s(&self, timestamp_ms: i64) -> u32 {
        let seconds = timestamp_ms.saturating_sub(self.begin_timestamp_ms).max(0) / 1000;
        u32::try_from(seconds).unwrap_or(u32::MAX)
    }

    /// The first and last millisecond of the second `time_diff_s` stands for.
    fn second_of(&self, time_diff_s: u32) -> (i64, i64) {
        let from = self.begin_timestamp_ms.saturating_add(i64::from(time_diff_s) * 1000);
        (from, from.saturating_add(999))
    }

    /// Entry `n` as written in the file; `None` if the file was retired.
    fn read_entry(&self, n: u32) -> Result<Option<IndexEntry>> {
        self.file.read_with(self.entry_position(n), INDEX_FILE_ENTRY_LEN, IndexEntry::decode)
    }

    /// Entries `first` to `first + count - 1` as written in the file.
    fn read_entries(&self, first: u32, count: u32) -> Result<Vec<IndexEntry>> {
        let bytes = count as usize * INDEX_FILE_ENTRY_LEN;
        let decode = |b: &[u8]| b.chunks_exact(INDEX_FILE_ENTRY_LEN).map(IndexEntry::decode).collect();
        self.file
            .read_with(self.entry_position(first), bytes, decode)?
            .ok_or_else(|| self.misuse("read a retired index file"))
    }

    fn misuse(&self, what: &'static str) -> Error {
        debug_assert!(false, "{what}: {}", self.path().display());
        Error::Io { op: what, path: self.path(), source: std::io::ErrorKind::InvalidInput.into() }
    }
}

/// Reads and checks the header of the file at `path`: its header, length and entry capacity.
pub(crate) fn read_header(path: &Path) -> Result<(IndexHeader, u64, u32)> {
    let (head, file_len) = storage::read_head(path, INDEX_FILE_HEADER_LEN)?;
    let Ok(head) = <[u8; INDEX_FILE_HEADER_LEN]>::try_from(head.as_slice()) else {
        let reason = Corruption::ShortFile { len: file_len, expected: INDEX_FILE_HEADER_LEN as u64 };
        return Err(Error::corrupt(path, file_len, reason));
    };
    let header = IndexHeader::decode(&head);
    let capacity = check_header(path, &header, file_len)?;
    Ok((header, file_len, capacity))
}

/// The entries (entry 0 included) a file of `file_len` bytes with `header` holds, or why it is not
/// an index file.
fn check_header(path: &Path, header: &IndexHeader, file_len: u64) -> Result<u32> {
    let bad = |position: usize, what: &'static str| Error::corrupt(path, position as u64, Corruption::BadFile(what));
    let name = path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name);
    if name != Some((header.begin_log_offset, INDEX_FILE_SUFFIX)) {
        return Err(bad(INDEX_FILE_BEGIN_LOG_OFFSET_POS, "index file begin_log_offset differs from its name"));
    }
    if header.slot_count == 0 {
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file has hash_slot_count 0"));
    }
    if header.slot_count > INDEX_FILE_MAX_SLOTS {
        // The active file's slot table is held in memory: a hostile count must not exhaust it.
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file has more hash slots than an index file may have"));
    }
    let smallest = index_file_len(header.slot_count, 2);
    if file_len < smallest {
        return Err(Error::corrupt(path, file_len, Corruption::ShortFile { len: file_len, expected: smallest }));
    }
    let entry_bytes = file_len - index_file_len(header.slot_count, 0);
    if !entry_bytes.is_multiple_of(INDEX_FILE_ENTRY_LEN as u64) {
        let reason = Corruption::IndexLength { len: file_len, entry_len: INDEX_FILE_ENTRY_LEN as u64 };
        return Err(Error::corrupt(path, file_len, reason));
    }
    let Ok(capacity) = u32::try_from(entry_bytes / INDEX_FILE_ENTRY_LEN as u64) else {
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file holds more than 2^32 entries"));
    };
    if header.index_count >= capacity {
        return Err(bad(INDEX_FILE_INDEX_COUNT_POS, "index file index_count exceeds its entries"));
    }
    if header.end_log_offset < header.begin_log_offset {
        return Err(bad(INDEX_FILE_END_LOG_OFFSET_POS, "index file end_log_offset is below begin_log_offset"));
    }
    if header.end_timestamp_ms < header.begin_timestamp_ms {
        return Err(bad(INDEX_FILE_END_TIMESTAMP_POS, "index file end_timestamp is before begin_timestamp"));
    }
    Ok(capacity)
}

/// What [`IndexFiles::recover`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct IndexRecovery {
    /// Files removed whole: they began at or past the recovered end.
    pub removed: Vec<PathBuf>,
    /// The newest file's recovery, if there is a file.
    pub newest: Option<FileRecovery>,
}

/// The index files of a store (`<root>/index/`), oldest first, the last one active: RocketMQ's
/// `IndexService`. See the module docs.
#[derive(Debug)]
pub(crate) struct IndexFiles {
    dir: PathBuf,
    /// Slots and entries of the files this set creates (existing files keep their own).
    slot_count: u32,
    entry_count: u32,
    /// The map budget its files are under (`StoreConfig::log.map_budget`).
    budget: Option<MapBudget>,
    /// The writer's state: held by puts, rolls and recovery.
    writer: Mutex<Writer>,
    /// Sorted by begin log offset; changed by a roll (push), retention (a prefix) and recovery.
    files: RwLock<Vec<Arc<IndexFile>>>,
}

#[derive(Debug)]
struct Writer {
    /// The largest log offset indexed, in any file.
    end_log_offset: Option<u64>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<IndexFiles>();
};

impl IndexFiles {
    /// Opens `dir` (created if missing), loading every `<20 digits>.idx` in it: the newest as the
    /// active file, the others sealed (headers read now, mapped at their first query). New files
    /// get `slots` slots and room for `entries` entries. A file failing its header check is
    /// `Error::Corrupt` naming it: the index is derived, so the caller [`IndexFiles::discard`]s it
    /// and dispatches the commit log into an empty set again. After an unclean shutdown, call
    /// [`IndexFiles::recover`] before the first put.
    #[cfg(test)]
    pub(crate) fn open(dir: &Path, slots: u32, entries: u32) -> Result<IndexFiles> {
        IndexFiles::open_budgeted(dir, slots, entries, None)
    }

    /// [`IndexFiles::open`] with its files under `budget`.
    pub(crate) fn open_budgeted(dir: &Path, slots: u32, entries: u32, budget: Option<MapBudget>) -> Result<IndexFiles> {
        check_sizes(slots, entries)?;
        storage::prepare_dir(dir)?;
        let bases = list_bases(dir)?;
        let mut files = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let path = dir.join(file_name(base, INDEX_FILE_SUFFIX));
            let newest = i + 1 == bases.len();
            let file = if newest { IndexFile::open(&path)? } else { IndexFile::open_sealed(&path)? };
            files.push(Arc::new(file.under(budget.as_ref())?));
        }
        let end_log_offset = last_end(&files);
        Ok(IndexFiles {
            dir: dir.to_path_buf(),
            slot_count: slots,
            entry_count: entries,
            budget,
            writer: Mutex::new(Writer { end_log_offset }),
            files: RwLock::new(files),
        })
    }

    /// Deletes every index file in `dir` (the directory fsynced), for a rebuild: after a file
    /// failed its check, or when the caller wants the index built again. Returns how many went. The
    /// caller opens the empty set and dispatches the commit log from its start into it.
    pub(crate) fn discard(dir: &Path) -> Result<usize> {
        let bases = match list_bases(dir) {
            Ok(bases) => bases,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(error),
        };
        for &base in &bases {
            storage::remove_if_exists(&dir.join(file_name(base, INDEX_FILE_SUFFIX)))?;
        }
        if !bases.is_empty() {
            storage::sync_dir(dir)?;
            tracing::warn!(dir = %dir.display(), files = bases.len(), "index files discarded: the index is rebuilt from the commit log");
        }
        Ok(bases.len())
    }

    /// The directory.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many files there are.
    pub(crate) fn file_count(&self) -> usize {
        self.files.read().len()
    }

    /// The largest log offset indexed (`None`: nothing is). Dispatch into the set resumes after it.
    #[cfg(test)]
    pub(crate) fn end_log_offset(&self) -> Option<u64> {
        self.writer.lock().end_log_offset
    }

    /// Indexes the message at `log_offset` under `key_hash` in the newest file, rolling to a new
    /// file (`<log_offset>.idx`) when it is full. A message below the largest offset indexed is
    /// skipped (`false`): it is a redispatch after recovery, already indexed; a redispatched last
    /// message may repeat entries, which queries report once. A message with more keys than a file
    /// holds entries is `Error::InvalidConfig` (its file would need its own name twice).
    pub(crate) fn put(&self, key_hash: u32, log_offset: u64, timestamp_ms: i64) -> Result<bool> {
        let mut writer = self.writer.lock();
        if writer.end_log_offset.is_some_and(|end| log_offset < end) {
            return Ok(false);
        }
        let active = self.files.read().last().cloned();
        let put = match &active {
            Some(file) if !file.is_sealed() => file.put(key_hash, log_offset, timestamp_ms)?,
            _ => false,
        };
        if !put {
            let file = self.roll(active.as_deref(), log_offset, timestamp_ms)?;
            let put = file.put(key_hash, log_offset, timestamp_ms)?;
            assert!(put, "a new index file has room for an entry");
        }
        writer.end_log_offset = Some(log_offset);
        Ok(true)
    }

    /// Seals `active` (if any) and creates the next file for a put at `log_offset`.
    fn roll(&self, active: Option<&IndexFile>, log_offset: u64, timestamp_ms: i64) -> Result<Arc<IndexFile>> {
        if let Some(active) = active {
            if active.begin_log_offset() >= log_offset {
                let reason = format!("a message at log offset {log_offset} has more keys than an index file holds");
                return Err(Error::InvalidConfig { field: "index_entries", reason });
            }
            active.seal()?;
        }
        let created = IndexFile::create(&self.dir, log_offset, timestamp_ms, self.slot_count, self.entry_count)?;
        let path = created.path();
        let file = match created.under(self.budget.as_ref()) {
            Ok(file) => Arc::new(file),
            Err(error) => {
                let _ = storage::remove_if_exists(&path);
                return Err(error);
            }
        };
        self.files.write().push(Arc::clone(&file));
        tracing::debug!(file = %file.path().display(), "new index file");
        Ok(file)
    }

    /// The log offsets indexed under `key_hash` whose time may be in `[begin_ms, end_ms]` (whole
    /// seconds: see the module docs), in ascending order, each once: the newest `max` of them.
    /// Files are searched newest first and only those whose time range overlaps. Hashes collide:
    /// the caller re-checks the key (and the exact time) on each message.
    pub(crate) fn query(&self, key_hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Result<Vec<u64>> {
        let files: Vec<Arc<IndexFile>> =
            self.files.read().iter().rev().filter(|f| f.overlaps(begin_ms, end_ms)).cloned().collect();
        let mut found = Vec::new();
        for file in files {
            if found.len() >= max {
                break;
            }
            file.query_into(key_hash, begin_ms, end_ms, max, &mut found)?;
        }
        found.reverse();
        Ok(found)
    }

    /// Makes every put so far durable ([`IndexFile::flush`] of the active file; sealed files were
    /// flushed when sealed). Puts and queries go on meanwhile.
    pub(crate) fn flush(&self) -> Result<()> {
        let active = self.files.read().last().cloned();
        active.map_or(Ok(()), |file| file.flush())
    }

    /// Deletes the files whose every entry is below `log_start_offset` (their `end_log_offset` is),
    /// except the active one. Queries holding one finish without its entries. Returns how many.
    pub(crate) fn delete_files_below(&self, log_start_offset: u64) -> Result<usize> {
        let removed: Vec<Arc<IndexFile>> = {
            let mut files = self.files.write();
            let sealed = files.len().saturating_sub(1);
            let below = files[..sealed].iter().take_while(|f| f.end_log_offset() < log_start_offset).count();
            files.drain(..below).collect()
        };
        for file in &removed {
            delete(file)?;
        }
        if !removed.is_empty() {
            storage::sync_dir(&self.dir)?;
            tracing::info!(dir = %self.dir.display(), files = removed.len(), log_start_offset, "index files below the log start deleted");
        }
        Ok(removed.len())
    }

    /// After an unclean shutdown, before the first put: files beginning at or past
    /// `log_next_offset` are deleted (the log lost their messages), and the newest remaining one
    /// is validated entry by entry and cut ([`IndexFile::recover`]), its slots rebuilt. The
    /// caller then dispatches from `log_next_offset` on, which it passes as at most the log's next
    /// offset and at most where its checkpoint says the index is complete.
    pub(crate) fn recover(&self, log_next_offset: u64) -> Result<IndexRecovery> {
        let mut writer = self.writer.lock();
        let mut files = self.files.write();
        let mut recovery = IndexRecovery::default();
        while let Some(file) = files.pop_if(|f| f.begin_log_offset() >= log_next_offset) {
            delete(&file)?;
            tracing::warn!(file = %file.path().display(), log_next_offset, "index file past the recovered end deleted");
            recovery.removed.push(file.path());
        }
        if !recovery.removed.is_empty() {
            storage::sync_dir(&self.dir)?;
        }
        if let Some(newest) = files.last_mut() {
            if newest.is_sealed() {
                // It was opened sealed because a newer file existed; it is the active one now.
                newest.retire();
                *newest = Arc::new(IndexFile::open(&newest.path())?.under(self.budget.as_ref())?);
            }
            recovery.newest = Some(newest.recover(log_next_offset)?);
        }
        writer.end_log_offset = last_end(&files);
        Ok(recovery)
    }
}

/// The begin offsets of the `.idx` files in `dir`, ascending.
fn list_bases(dir: &Path) -> Result<Vec<u64>> {
    let mut bases: Vec<u64> = storage::list_dir(dir)?
        .iter()
        .filter_map(|name| parse_file_name(name))
        .filter(|(_, suffix)| *suffix == INDEX_FILE_SUFFIX)
        .map(|(base, _)| base)
        .collect();
    bases.sort_unstable();
    Ok(bases)
}

/// The largest log offset in `files` (`None` if they are empty).
fn last_end(files: &[Arc<IndexFile>]) -> Option<u64> {
    files.iter().rev().find(|f| f.index_count() > 0).map(|f| f.end_log_offset())
}

/// Retires `file` (waiting for its readers) and unlinks it; the caller fsyncs the directory.
fn delete(file: &IndexFile) -> Result<()> {
    file.retire();
    storage::remove_if_exists(&file.path()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::fs::FileExt as _;

    use super::*;

    /// A timestamp on a whole second, so whole-second times are exact in tests.
    const T0: i64 = 1_700_000_000_000;

    fn tempdir() -> tempfile::TempDir {
        tempfile::tempdir().expect("tempdir")
    }

    fn patch(path: &Path, position: u64, bytes: &[u8]) {
        let file = std::fs::OpenOptions::new().write(true).open(path).expect("open");
        file.write_all_at(bytes, position).expect("patch");
    }

    fn read_raw(path: &Path, position: u64, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        std::fs::File::open(path).expect("open").read_exact_at(&mut bytes, position).expect("read");
        bytes
    }

    /// Writes the entries a put keeps in memory, and nothing else (no header, no slots).
    fn write_entries_only(file: &IndexFile) {
        let mut active = file.active.write();
        file.write_pending(active.as_mut().expect("active")).expect("write");
    }

    fn all(file: &IndexFile, key_hash: u32) -> Vec<u64> {
        file.query(key_hash, i64::MIN, i64::MAX, usize::MAX).expect("query")
    }

    fn all_in(files: &IndexFiles, key_hash: u32) -> Vec<u64> {
        files.query(key_hash, i64::MIN, i64::MAX, usize::MAX).expect("query")
    }

    #[test]
    fn a_header_claiming_too_many_slots_is_damage_not_an_allocation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let slots = INDEX_FILE_MAX_SLOTS + 1;
        let header = IndexHeader {
            begin_timestamp_ms: 0,
            end_timestamp_ms: 0,
            begin_log_offset: 0,
            end_log_offset: 0,
            slot_count: slots,
            index_count: 0,
        };
        let path = dir.path().join(file_name(0, INDEX_FILE_SUFFIX));
        std::fs::write(&path, header.encode()).expect("write");
        // Sparse: the length a file of that many slots would have, without its blocks.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open")
            .set_len(index_file_len(slots, 2))
            .expect("len");
        assert!(matches!(IndexFile::open(&path), Err(Error::Corrupt { .. })));
        assert!(matches!(
            IndexFiles::open(dir.path(), slots, 4),
            Err(Error::InvalidConfig { field: "index_slots", .. })
        ));
    }

    #[test]
    fn key_hash_is_the_low_half_of_fnv1a_64() {
        // Reference vectors of FNV-1a 64.
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(key_hash("orders", "id-7"), fnv1a_64(b"orders#id-7") as u32);
        assert_ne!(key_hash("orders", "id-7"), key_hash("order", "sid-7"), "the separator is hashed");
    }

    #[test]
    fn header_and_entry_round_trip() {
        let header = IndexHeader {
            begin_timestamp_ms: -5,
            end_timestamp_ms: i64::MAX,
            begin_log_offset: 7,
            end_log_offset: u64::MAX,
            slot_count: 3,
            index_count: u32::MAX,
        };
        assert_eq!(IndexHeader::decode(&header.encode()), header);
        let entry = IndexEntry { key_hash: 0xdead_beef, log_offset: 1 << 40, time_diff_s: 9, prev_entry: 2 };
        assert_eq!(IndexEntry::decode(&entry.encode()), entry);
        // Big-endian, in the documented order.
        assert_eq!(&entry.encode()[..4], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&header.encode()[INDEX_FILE_SLOT_COUNT_POS..INDEX_FILE_INDEX_COUNT_POS], &[0, 0, 0, 3]);
    }

    #[test]
    fn a_new_file_has_its_full_size_and_a_durable_header() {
        let dir = tempdir();
        let file = IndexFile::create(dir.path(), 42, T0, 8, 16).expect("create");
        let path = dir.path().join("00000000000000000042.idx");
        assert_eq!(file.path(), path);
        assert_eq!(std::fs::metadata(&path).expect("stat").len(), 40 + 4 * 8 + 20 * 16);
        let header = IndexHeader::decode(&read_raw(&path, 0, 40).try_into().expect("40 bytes"));
        assert_eq!(header, file.header());
        assert_eq!((header.begin_log_offset, header.end_log_offset, header.index_count), (42, 42, 0));
        assert!(matches!(IndexFile::create(dir.path(), 42, T0, 8, 16), Err(Error::Io { .. })), "exists");
        assert!(matches!(IndexFile::create(dir.path(), 1, T0, 0, 16), Err(Error::InvalidConfig { .. })));
        assert!(matches!(IndexFile::create(dir.path(), 1, T0, 8, 1), Err(Error::InvalidConfig { .. })));
        assert!(!dir.path().join("00000000000000000001.idx").exists(), "a refused file is not created");
    }

    #[test]
    fn many_keys_are_found_at_their_offsets() {
        let dir = tempdir();
        let file = IndexFile::create(dir.path(), 0, T0, 1024, 20_001).expect("create");
        let keys: Vec<u32> = (0..997).map(|k| key_hash("topic", &format!("key-{k}"))).collect();
        for offset in 0..20_000u64 {
            assert!(file.put(keys[offset as usize % keys.len()], offset, T0).expect("put"));
        }
        assert!(file.is_full());
        for (k, &hash) in keys.iter().enumerate() {
            let expected: Vec<u64> = (0..20_000u64).rev().filter(|o| *o as usize % keys.len() == k).collect();
            assert_eq!(all(&file, hash), expected, "key {k}: every offset, newest first");
        }
        assert_eq!(all(&file, key_hash("topic", "never put")), Vec::<u64>::new());
    }

    #[test]
    fn colliding_hashes_share_chains_and_only_the_asked_hash_is_returned() {
        let dir = tempdir();
        // 4 slots for 40 hashes: every slot's chain interleaves 10 of them.
        let file = IndexFile::create(dir.path(), 0, T0, 4, 1000).expect("create");
        let mut model: HashMap<u32, Vec<u64>> = HashMap::new();
        for offset in 0..800u64 {
            let hash = (offset * 7 % 40) as u32;
            file.put(hash, offset, T0).expect("put");
            model.entry(hash).or_default().insert(0, offset);
        }
        for (hash, offsets) in &model {
            assert_eq!(&all(&file, *hash), offsets, "hash {hash}");
            assert_eq!(file.query(*hash, i64::MIN, i64::MAX, 3).expect("query"), offsets[..3], "the newest 3");
        }
        assert_eq!(all(&file, 40), Vec::<u64>::new(), "slot 0's chain holds other hashes only");
        // One message with several keys of the same hash is reported once.
        file.put(5, 900, T0).expect("put");
        file.put(5, 900, T0).expect("put");
        assert_eq!(all(&file, 5)[..2], [900, model[&5][0]]);
    }

    #[test]
    fn time_filtering_is_by_whole_seconds_and_never_drops_a_match() {
        let dir = tempdir();
        let file = IndexFile::create(dir.path(), 0, T0 + 250, 16, 100).expect("create");
        let puts = [(0, 250), (1, 900), (2, 1_400), (3, 3_249), (4, 3_250), (5, 10_000)];
        for (offset, ms) in puts {
            file.put(9, offset, T0 + ms).expect("put");
        }
        let query = |from: i64, to: i64| file.query(9, T0 + from, T0.saturating_add(to), usize::MAX).expect("query");
        // Entry seconds from T0+250: [250,1249] holds 0 and 1, [1250,2249] holds 2, [2250,3249]
        // holds 3, [3250,4249] holds 4, [9250,10249] holds 5.
        assert_eq!(query(0, 249), Vec::<u64>::new(), "before the file's begin");
        assert_eq!(query(1_000, 1_100), [1, 0], "a second's entries are all returned");
        assert_eq!(query(1_300, 1_300), [2]);
        assert_eq!(query(3_249, 3_249), [3]);
        assert_eq!(query(3_250, 9_249), [4]);
        assert_eq!(query(10_000, i64::MAX), [5]);
        assert_eq!(query(5, 4), Vec::<u64>::new(), "an empty range");
        assert_eq!((file.begin_timestamp_ms(), file.end_timestamp_ms()), (T0 + 250, T0 + 10_000));
        // A timestamp going back counts as the latest second so far: times never decrease.
        file.put(9, 6, T0).expect("put");
        assert_eq!(query(9_250, 9_250), [6, 5]);
        assert_eq!(file.end_timestamp_ms(), T0 + 10_000);
    }

    #[test]
    fn changed_slot_pages_are_written_in_bounded_runs() {
        const PAGE: usize = SLOTS_PER_PAGE;
        let mut state = ActiveState::new(vec![0; 40 * PAGE + 3], 0, 0);
        for slot in [0, 5, PAGE, 3 * PAGE + 7, 40 * PAGE + 2].into_iter().chain((10 * PAGE..30 * PAGE).step_by(PAGE)) {
            state.set_slot(slot, 1);
        }
        let runs = state.runs(&state.dirty);
        assert_eq!(
            runs,
            [0..2 * PAGE, 3 * PAGE..4 * PAGE, 10 * PAGE..26 * PAGE, 26 * PAGE..30 * PAGE, 40 * PAGE..40 * PAGE + 3]
        );
        assert_eq!(state.slot_bytes(5..7), [0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn a_full_file_refuses_and_the_set_rolls() {
        let dir = tempdir();
        let file = IndexFile::create(dir.path(), 10, T0, 2, 4).expect("create");
        for offset in 10..13 {
            assert!(file.put(1, offset, T0).expect("put"), "entries 1 to 3");
        }
        assert!(file.is_full());
        assert!(!file.put(1, 13, T0).expect("put"), "full: entry 0 is never used");
        assert_eq!(all(&file, 1), [12, 11, 10]);

        let files = IndexFiles::open(&dir.path().join("index"), 2, 4).expect("open");
        for offset in 0..20u64 {
            assert!(files.put((offset % 2) as u32, offset, T0 + offset as i64 * 1000).expect("put"));
        }
        assert_eq!(files.file_count(), 7, "3 entries a file");
        let names = storage::list_dir(files.dir()).expect("list");
        assert!(names.contains(&"00000000000000000018.idx".to_owned()), "{names:?}");
        assert_eq!(all_in(&files, 0), (0..20).step_by(2).collect::<Vec<_>>(), "ascending, across files");
        assert_eq!(files.query(1, i64::MIN, i64::MAX, 4).expect("query"), [13, 15, 17, 19], "the newest 4");
        assert_eq!(files.query(1, T0 + 5_000, T0 + 9_000, 10).expect("query"), [5, 7, 9]);
        assert_eq!(files.end_log_offset(), Some(19));
    }

    #[test]
    fn a_message_with_more_keys_than_a_file_holds_is_a_config_error() {
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 2, 3).expect("open");
        files.put(1, 5, T0).expect("put");
        files.put(2, 5, T0).expect("put");
        assert!(matches!(files.put(3, 5, T0), Err(Error::InvalidConfig { field: "index_entries", .. })));
        assert!(files.put(3, 6, T0).expect("the next message rolls"));
        assert_eq!(all_in(&files, 2), [5]);
    }

    #[test]
    fn redispatched_messages_are_skipped_and_reported_once() {
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 4, 100).expect("open");
        files.put(1, 3, T0).expect("put");
        files.put(1, 4, T0).expect("put");
        assert!(!files.put(1, 3, T0).expect("put"), "below the end: already indexed");
        assert!(files.put(1, 4, T0).expect("put"), "the last message may be half indexed: put again");
        assert_eq!(all_in(&files, 1), [3, 4]);
    }

    #[test]
    fn reopen_keeps_every_entry_and_continues() {
        let dir = tempdir();
        let expected: Vec<u64>;
        {
            let files = IndexFiles::open(dir.path(), 3, 5).expect("open");
            for offset in 0..10 {
                files.put(7, offset, T0 + offset as i64).expect("put");
            }
            files.flush().expect("flush");
            expected = all_in(&files, 7);
        }
        let files = IndexFiles::open(dir.path(), 3, 5).expect("reopen");
        assert_eq!(all_in(&files, 7), expected);
        assert_eq!(files.end_log_offset(), Some(9));
        {
            let list = files.files.read();
            assert!(list[..list.len() - 1].iter().all(|f| f.is_sealed()) && !list[list.len() - 1].is_sealed());
            let newest = &list[list.len() - 1];
            assert_eq!((newest.index_count(), newest.end_log_offset(), newest.end_timestamp_ms()), (2, 9, T0 + 9));
        }
        files.put(7, 10, T0 + 10).expect("put after reopen");
        assert_eq!(all_in(&files, 7), (0..=10).collect::<Vec<_>>());
    }

    #[test]
    fn sealed_files_hold_no_descriptor_until_queried() {
        let dir = tempdir();
        let descriptors = || {
            let fds = std::fs::read_dir("/proc/self/fd").expect("list fds");
            fds.filter_map(|fd| std::fs::read_link(fd.expect("fd").path()).ok())
                .filter(|target| target.starts_with(dir.path()))
                .count()
        };
        {
            let files = IndexFiles::open(dir.path(), 3, 5).expect("open");
            for offset in 0..12 {
                files.put(1, offset, T0).expect("put");
            }
            files.flush().expect("flush");
        }
        let files = IndexFiles::open(dir.path(), 3, 5).expect("reopen");
        assert_eq!(files.file_count(), 3);
        assert_eq!(descriptors(), 1, "only the active file is open");
        assert_eq!(all_in(&files, 1).len(), 12, "sealed files mapped at the query");
        assert_eq!(descriptors(), 1, "and closed again: a map needs no descriptor");
    }

    #[test]
    fn corrupt_chains_end_the_walk() {
        let dir = tempdir();
        let path = {
            let file = IndexFile::create(dir.path(), 0, T0, 1, 8).expect("create");
            for offset in 0..5 {
                file.put(3, offset, T0).expect("put");
            }
            file.flush().expect("flush");
            file.path()
        };
        let link =
            |n: u32, to: u32| patch(&path, index_file_len(1, n) + INDEX_ENTRY_PREV_POS as u64, &to.to_be_bytes());
        let walk = || all(&IndexFile::open_sealed(&path).expect("open"), 3);
        assert_eq!(walk(), [4, 3, 2, 1, 0]);
        link(3, 5);
        assert_eq!(walk(), [4, 3, 2], "entry 3 points forward: the walk stops after it");
        link(5, 5);
        assert_eq!(walk(), [4], "entry 5 points at itself");
        link(5, 4);
        link(4, 5);
        assert_eq!(walk(), [4, 3], "a loop between 5 and 4 ends at 4, whose link points forward");
        patch(&path, INDEX_FILE_HEADER_LEN as u64, &6u32.to_be_bytes());
        assert_eq!(walk(), Vec::<u64>::new(), "a slot past the entries used leads nowhere");
    }

    #[test]
    fn truncated_or_garbage_files_are_corrupt_errors() {
        let dir = tempdir();
        let good = IndexFile::create(dir.path(), 0, T0, 4, 8).expect("create");
        good.put(1, 0, T0).expect("put");
        good.flush().expect("flush");
        let good_bytes = std::fs::read(good.path()).expect("read");
        drop(good);
        let header_with = |pos: usize, bytes: &[u8]| {
            let mut b = good_bytes.clone();
            b[pos..pos + bytes.len()].copy_from_slice(bytes);
            b
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("shorter than a header", good_bytes[..30].to_vec()),
            ("header only", good_bytes[..40].to_vec()),
            ("cut inside an entry", good_bytes[..good_bytes.len() - 7].to_vec()),
            ("garbage", (0..good_bytes.len()).map(|i| (i * 131 % 251) as u8).collect()),
            ("no slots", header_with(INDEX_FILE_SLOT_COUNT_POS, &0u32.to_be_bytes())),
            ("more slots than bytes", header_with(INDEX_FILE_SLOT_COUNT_POS, &1000u32.to_be_bytes())),
            ("count past the entries", header_with(INDEX_FILE_INDEX_COUNT_POS, &8u32.to_be_bytes())),
            ("another name", header_with(INDEX_FILE_BEGIN_LOG_OFFSET_POS, &9u64.to_be_bytes())),
            ("end before begin", header_with(INDEX_FILE_END_TIMESTAMP_POS, &(T0 - 1).to_be_bytes())),
        ];
        let path = dir.path().join("00000000000000000000.idx");
        for (what, bytes) in cases {
            std::fs::write(&path, &bytes).expect("write");
            for opened in [IndexFile::open(&path).map(drop), IndexFile::open_sealed(&path).map(drop)] {
                match opened {
                    Err(Error::Corrupt { path: named, .. }) => assert_eq!(named, path, "{what}"),
                    other => panic!("{what}: {other:?}"),
                }
            }
            let opened = IndexFiles::open(dir.path(), 4, 8);
            assert!(matches!(opened, Err(Error::Corrupt { .. })), "{what}: {opened:?}");
        }
        assert_eq!(IndexFiles::discard(dir.path()).expect("discard"), 1);
        let files = IndexFiles::open(dir.path(), 4, 8).expect("an empty set to rebuild into");
        assert_eq!((files.file_count(), files.end_log_offset()), (0, None));
        assert_eq!(IndexFiles::discard(&dir.path().join("missing")).expect("discard"), 0);
    }

    #[test]
    fn recover_cuts_entries_past_the_log_end_and_rebuilds_the_slots() {
        let dir = tempdir();
        let path = {
            let files = IndexFiles::open(dir.path(), 8, 1000).expect("open");
            for offset in 0..200u64 {
                files.put((offset % 13) as u32, offset, T0 + offset as i64 * 100).expect("put");
                if offset == 99 {
                    files.flush().expect("flush");
                }
            }
            // A crash after the kernel had the entries past the flush, not the header.
            write_entries_only(&files.files.read()[0]);
            files.files.read()[0].path()
        };
        let files = IndexFiles::open(dir.path(), 8, 1000).expect("reopen");
        assert_eq!(files.end_log_offset(), Some(99), "the header as last flushed");
        let recovery = files.recover(150).expect("recover");
        let newest = recovery.newest.expect("a file");
        assert_eq!((newest.kept, newest.counted), (150, 100), "entries past the header's count kept");
        assert_eq!(newest.cut_at, Some((151, "log offset at or past the recovered end")));
        for hash in 0..13u32 {
            let expected: Vec<u64> = (0..150).filter(|o| o % 13 == u64::from(hash)).collect();
            assert_eq!(all_in(&files, hash), expected, "hash {hash}");
        }
        assert_eq!(files.end_log_offset(), Some(149));
        let stale = index_file_len(8, 151);
        assert!(read_raw(&path, stale, 50 * 20).iter().all(|&b| b == 0), "the cut entries are zeroed");
        let header = IndexHeader::decode(&read_raw(&path, 0, 40).try_into().expect("40 bytes"));
        assert_eq!((header.index_count, header.end_log_offset), (150, 149), "the header is written");
        assert!(header.end_timestamp_ms >= T0 + 14_900);
        // Dispatch resumes at 150.
        for offset in 150..160u64 {
            files.put((offset % 13) as u32, offset, T0 + offset as i64 * 100).expect("put");
        }
        assert_eq!(all_in(&files, 3), (0..160).filter(|o| o % 13 == 3).collect::<Vec<_>>());
        // Recovering again changes nothing.
        let again = files.recover(160).expect("recover").newest.expect("a file");
        assert_eq!((again.kept, again.cut_at), (160, None));
    }

    #[test]
    fn recover_cuts_at_damage_and_ignores_the_slots_on_disk() {
        let dir = tempdir();
        let path = {
            let file = IndexFile::create(dir.path(), 0, T0, 4, 100).expect("create");
            for offset in 0..50u64 {
                file.put((offset % 6 + 1) as u32, offset, T0 + offset as i64 * 1000).expect("put");
            }
            file.flush().expect("flush");
            file.path()
        };
        // Entry 31's log offset goes back; the slots are garbage.
        patch(&path, index_file_len(4, 31) + INDEX_ENTRY_LOG_OFFSET_POS as u64, &3u64.to_be_bytes());
        patch(&path, INDEX_FILE_HEADER_LEN as u64, &[0xff; 16]);
        let file = IndexFile::open(&path).expect("open");
        let recovery = file.recover(u64::MAX).expect("recover");
        assert_eq!(recovery, FileRecovery { kept: 30, counted: 50, cut_at: Some((31, "log offset goes back")) });
        assert_eq!(all(&file, 3), [26, 20, 14, 8, 2]);
        assert_eq!((file.end_log_offset(), file.end_timestamp_ms()), (29, T0 + 29_999));
        // A chain link that is not its slot's previous entry, and time going back.
        for (n, pos, bytes, reason) in [
            (10, INDEX_ENTRY_PREV_POS, 1u32.to_be_bytes(), "chain link is not its slot's previous entry"),
            (5, INDEX_ENTRY_TIME_DIFF_POS, 0u32.to_be_bytes(), "time goes back"),
        ] {
            patch(&path, index_file_len(4, n) + pos as u64, &bytes);
            let recovery = file.recover(u64::MAX).expect("recover");
            assert_eq!((recovery.kept, recovery.cut_at), (n - 1, Some((n, reason))));
        }
    }

    /// An all-zero entry is what an unused one looks like. Past the header's count it ends the
    /// entries, even when it was a put (key hash 0 at log offset 0 in the first second, the
    /// first entry of a log's first file): the store dispatches again everything past the count.
    #[test]
    fn past_the_count_an_all_zero_entry_ends_the_entries() {
        let dir = tempdir();
        let file = IndexFile::create(dir.path(), 0, T0, 4, 100).expect("create");
        file.put(0, 0, T0).expect("put");
        file.put(1, 1, T0).expect("put");
        write_entries_only(&file);
        let path = file.path();
        drop(file);
        let file = IndexFile::open(&path).expect("open");
        assert_eq!(
            read_raw(&path, index_file_len(4, 2), 20),
            IndexEntry::encode(&IndexEntry { key_hash: 1, log_offset: 1, time_diff_s: 0, prev_entry: 0 })
        );
        assert_eq!(file.recover(u64::MAX).expect("recover").kept, 0);
        file.put(0, 0, T0).expect("put");
        file.put(1, 1, T0).expect("put");
        file.flush().expect("flush");
        assert_eq!(file.recover(u64::MAX).expect("recover").kept, 2, "counted by the header: kept");
    }

    #[test]
    fn entries_lost_in_a_crash_come_back_with_the_redispatch() {
        let dir = tempdir();
        {
            let files = IndexFiles::open(dir.path(), 4, 100).expect("open");
            for offset in 0..20u64 {
                files.put((offset % 3) as u32, offset, T0).expect("put");
                if offset == 9 {
                    files.flush().expect("flush");
                }
            }
        } // 10 to 19 were never written
        let files = IndexFiles::open(dir.path(), 4, 100).expect("reopen");
        let recovery = files.recover(20).expect("recover").newest.expect("a file");
        assert_eq!((recovery.kept, recovery.cut_at), (10, None));
        assert_eq!(files.end_log_offset(), Some(9));
        // The store's checkpoint said 5 (flushes were behind): dispatch redoes 5 to 19.
        let indexed: Vec<u64> = (5..20).filter(|&o| files.put((o % 3) as u32, o, T0).expect("put")).collect();
        assert_eq!(indexed, (9..20).collect::<Vec<_>>(), "5 to 8 are skipped, 9 may have been half indexed");
        for hash in 0..3u32 {
            let expected: Vec<u64> = (0..20).filter(|o| o % 3 == u64::from(hash)).collect();
            assert_eq!(all_in(&files, hash), expected, "each once");
        }
    }

    #[test]
    fn recover_deletes_files_past_the_end_and_reopens_the_newest_writable() {
        let dir = tempdir();
        {
            let files = IndexFiles::open(dir.path(), 2, 5).expect("open");
            for offset in 0..20u64 {
                files.put(1, offset, T0).expect("put");
            }
        }
        let files = IndexFiles::open(dir.path(), 2, 5).expect("reopen");
        assert_eq!(files.file_count(), 5);
        let recovery = files.recover(6).expect("recover");
        assert_eq!(recovery.removed.len(), 3, "the files beginning at 8, 12 and 16");
        assert_eq!(recovery.newest.map(|r| r.kept), Some(2), "4 and 5 kept");
        assert_eq!(files.file_count(), 2);
        assert_eq!(all_in(&files, 1), (0..6).collect::<Vec<_>>());
        files.put(1, 6, T0).expect("put into the reopened file");
        files.put(1, 7, T0).expect("put into the reopened file");
        assert_eq!(files.file_count(), 2);
        assert_eq!(all_in(&files, 1), (0..8).collect::<Vec<_>>());
        let empty = files.recover(0).expect("recover everything away");
        assert_eq!((empty.removed.len(), empty.newest, files.end_log_offset()), (2, None, None));
    }

    #[test]
    fn delete_files_below_keeps_the_active_file() {
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 2, 5).expect("open");
        for offset in 0..14u64 {
            files.put(1, offset, T0).expect("put");
        }
        assert_eq!(files.file_count(), 4, "ends 3, 7, 11; the active one 12..13");
        assert_eq!(files.delete_files_below(7).expect("delete"), 1, "end 7 is not below 7");
        assert_eq!(files.delete_files_below(100).expect("delete"), 2);
        assert_eq!(files.file_count(), 1);
        assert_eq!(storage::list_dir(dir.path()).expect("list"), ["00000000000000000012.idx"]);
        assert_eq!(all_in(&files, 1), [12, 13]);
    }

    /// A known pitfall: a failed fsync followed by one that succeeds proves nothing (the kernel may
    /// have dropped the pages, and reports the error once). A retried flush used to succeed and
    /// write a header counting the entries whose sync failed, and the store's checkpoint then
    /// skipped their redispatch after a crash.
    #[cfg(feature = "failpoints")]
    #[test]
    fn a_failed_fdatasync_poisons_the_index() {
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 4, 16).expect("open");
        files.put(1, 0, T0).expect("put");
        files.flush().expect("flush");
        files.put(1, 1, T0).expect("put");
        fail::cfg("fdatasync", &format!("return({})", dir.path().display())).expect("failpoint");
        let failed = files.flush();
        fail::remove("fdatasync");
        assert!(matches!(failed, Err(Error::Io { op: "fdatasync", .. })), "{failed:?}");
        assert!(matches!(files.flush(), Err(Error::Poisoned)), "a retry proves nothing");
        assert!(matches!(files.put(1, 2, T0), Err(Error::Poisoned)));
        let path = dir.path().join("00000000000000000000.idx");
        let header = read_raw(&path, INDEX_FILE_INDEX_COUNT_POS as u64, 4);
        assert_eq!(header, 1u32.to_be_bytes(), "the header on disk counts only the synced entry");
        assert_eq!(all_in(&files, 1), [0, 1], "queries go on");
        drop(files);
        let files = IndexFiles::open(dir.path(), 4, 16).expect("reopen");
        files.recover(2).expect("recover");
        files.put(1, 2, T0).expect("put after a reopen");
    }

    /// One writer puts (rolling files), readers query all the while: every result holds only
    /// offsets put under the hash asked, in order, and every offset put before the query began.
    #[test]
    fn queries_during_puts_see_whole_entries() {
        const KEYS: u64 = 37;
        const PUTS: u64 = 60_000;
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 16, 5_000).expect("open");
        let done = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for offset in 0..PUTS {
                    files.put((offset % KEYS) as u32, offset, T0 + offset as i64).expect("put");
                    done.store(offset + 1, Ordering::Release);
                    if offset % 20_000 == 0 {
                        files.flush().expect("flush");
                    }
                }
            });
            for reader in 0..3u64 {
                let (files, done) = (&files, &done);
                s.spawn(move || {
                    let mut queries = 0u64;
                    loop {
                        let before = done.load(Ordering::Acquire);
                        let key = (queries * 7 + reader) % KEYS;
                        let found = all_in(files, key as u32);
                        assert!(found.iter().all(|o| o % KEYS == key && *o < PUTS), "key {key}: {found:?}");
                        assert!(found.windows(2).all(|w| w[0] < w[1]), "ascending, each once");
                        let expected = (0..before).filter(|o| o % KEYS == key).count();
                        assert!(found.len() >= expected, "key {key}: {} of {expected} put before", found.len());
                        queries += 1;
                        if before == PUTS {
                            break;
                        }
                    }
                    assert!(queries > 10, "reader {reader} ran {queries} queries");
                });
            }
        });
        assert_eq!(files.file_count(), 13);
    }

    /// Tiny files (3 slots, 39 entries) under puts, rolls, flushes and retention: every query
    /// finds every offset put before it and not yet past retention, once, in order. Runs for
    /// `STRATA_RACE_SECS` seconds (else 300 ms).
    #[test]
    fn queries_race_puts_rolls_flushes_and_retention() {
        const KEYS: u64 = 11;
        let time = std::env::var("STRATA_RACE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(std::time::Duration::from_millis(300), std::time::Duration::from_secs);
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 3, 40).expect("open");
        let (done, put_up_to, deleted_below) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            for reader in 0..3u64 {
                let (files, done, put_up_to, deleted_below) = (&files, &done, &put_up_to, &deleted_below);
                s.spawn(move || {
                    let mut key = reader;
                    while !done.load(Ordering::Acquire) {
                        key = (key + 1) % KEYS;
                        let before = put_up_to.load(Ordering::Acquire);
                        let found = all_in(files, key as u32);
                        // Loaded after the query: retention before it deleted no more than this.
                        let low = deleted_below.load(Ordering::Acquire);
                        assert!(found.iter().all(|o| o % KEYS == key) && found.windows(2).all(|w| w[0] < w[1]));
                        for o in (low + 200..before).filter(|o| o % KEYS == key) {
                            assert!(found.contains(&o), "key {key}: {o} missing ({before} put, retention {low})");
                        }
                    }
                });
            }
            let start = std::time::Instant::now();
            let mut offset = 0u64;
            while start.elapsed() < time {
                files.put((offset % KEYS) as u32, offset, T0 + offset as i64 * 10).expect("put");
                offset += 1;
                put_up_to.store(offset, Ordering::Release);
                if offset.is_multiple_of(97) {
                    files.flush().expect("flush");
                }
                if offset.is_multiple_of(500) {
                    deleted_below.store(offset - 300, Ordering::Release);
                    files.delete_files_below(offset - 300).expect("retention");
                }
            }
            done.store(true, Ordering::Release);
        });
    }

    #[test]
    fn queries_during_retention_end_quietly() {
        let dir = tempdir();
        let files = IndexFiles::open(dir.path(), 4, 50).expect("open");
        for offset in 0..5_000u64 {
            files.put((offset % 5) as u32, offset, T0).expect("put");
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let found = all_in(&files, 2);
                    assert!(found.iter().all(|o| o % 5 == 2) && found.windows(2).all(|w| w[0] < w[1]));
                }
            });
            for start in (0..5_000).step_by(100) {
                files.delete_files_below(start).expect("delete");
            }
            stop.store(true, Ordering::Relaxed);
        });
        // 49 entries a file: the file holding 4_900 to 4_948 is the oldest left.
        assert_eq!(all_in(&files, 2), (4_900..5_000).filter(|o| o % 5 == 2).collect::<Vec<_>>());
    }

    mod model {
        use proptest::prelude::*;

        use super::*;

        #[derive(Debug, Clone)]
        enum Op {
            /// A key's hash (few, so chains collide), how far the offset moves (0: another key of
            /// the same message), how many seconds pass.
            Put {
                hash: u32,
                step: u64,
                seconds: i64,
            },
            Query {
                hash: u32,
                from_s: i64,
                len_s: i64,
                max: usize,
            },
            Flush,
            Reopen,
            /// Reopen after a crash that lost the log's last `lost` offsets.
            Crash {
                lost: u64,
            },
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (1..10u32, 0..3u64, 0..3i64).prop_map(|(hash, step, seconds)| Op::Put { hash, step, seconds }),
                4 => (0..10u32, 0..30i64, 0..30i64, 1..8usize)
                    .prop_map(|(hash, from_s, len_s, max)| Op::Query { hash, from_s, len_s, max }),
                1 => Just(Op::Flush),
                1 => Just(Op::Reopen),
                1 => (0..6u64).prop_map(|lost| Op::Crash { lost }),
            ]
        }

        /// The model: every entry put, in order.
        #[derive(Default)]
        struct Model {
            entries: Vec<(u32, u64, i64)>,
            next_offset: u64,
            now_ms: i64,
        }

        impl Model {
            /// The entries of the last message put.
            fn keys_of_last(&self) -> usize {
                let last = self.entries.last().map(|(_, offset, _)| *offset);
                self.entries.iter().rev().take_while(|(_, offset, _)| Some(*offset) == last).count()
            }

            fn query(&self, hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Vec<u64> {
                let mut found: Vec<u64> = self
                    .entries
                    .iter()
                    .rev()
                    .filter(|(h, _, ts)| *h == hash && (begin_ms..=end_ms).contains(ts))
                    .map(|(_, offset, _)| *offset)
                    .collect();
                found.dedup();
                found.truncate(max);
                found.reverse();
                found
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
            #[test]
            fn index_files_agree_with_a_model(ops in proptest::collection::vec(op(), 1..80)) {
                let dir = tempdir();
                let (slots, entries) = (3, 6);
                let mut files = IndexFiles::open(dir.path(), slots, entries).expect("open");
                let mut model = Model { now_ms: T0, ..Model::default() };
                for op in ops {
                    match op {
                        Op::Put { hash, step, seconds } => {
                            // A file holds 5 entries: a message (at most 4 keys) never fills one alone.
                            let step = if model.keys_of_last() >= 4 { 1 } else { step };
                            let offset = if model.entries.is_empty() { model.next_offset } else { model.next_offset - 1 + step };
                            model.now_ms += seconds * 1000;
                            prop_assert!(files.put(hash, offset, model.now_ms).expect("put"));
                            model.entries.push((hash, offset, model.now_ms));
                            model.next_offset = offset + 1;
                        }
                        Op::Query { hash, from_s, len_s, max } => {
                            let begin_ms = T0 + from_s * 1000;
                            let end_ms = begin_ms + len_s * 1000;
                            prop_assert_eq!(files.query(hash, begin_ms, end_ms, max).expect("query"), model.query(hash, begin_ms, end_ms, max));
                        }
                        Op::Flush => files.flush().expect("flush"),
                        Op::Reopen => {
                            files.flush().expect("flush");
                            drop(files);
                            files = IndexFiles::open(dir.path(), slots, entries).expect("reopen");
                        }
                        Op::Crash { lost } => {
                            // Entries past the last flush may be lost in a crash: the store
                            // dispatches them again. Here the log loses its last offsets.
                            files.flush().expect("flush");
                            drop(files);
                            files = IndexFiles::open(dir.path(), slots, entries).expect("reopen");
                            let cut = model.next_offset.saturating_sub(lost);
                            files.recover(cut).expect("recover");
                            model.entries.retain(|(_, offset, _)| *offset < cut);
                            model.next_offset = cut;
                            let end = model.entries.last().map(|(_, offset, _)| *offset);
                            prop_assert_eq!(files.end_log_offset(), end);
                        }
                    }
                }
                for hash in 0..10 {
                    prop_assert_eq!(all_in(&files, hash), model.query(hash, i64::MIN, i64::MAX, usize::MAX));
                }
            }
        }
    }

    /// Not a test: `cargo test --release --lib store::index_file::tests::measure -- --ignored
    /// --nocapture` times 1M puts and 100k key queries with the default sizes (5M slots, 20M
    /// entries: one 420 MB file): queries of the active file alone, while another thread puts, and
    /// of the file sealed.
    #[test]
    #[ignore = "a measurement, run by hand in release"]
    fn measure_puts_and_queries() {
        const PUTS: u64 = 1_000_000;
        const QUERIES: u64 = 100_000;
        let dir = tempdir();
        let hashes: Vec<u32> = (0..2 * PUTS).map(|i| key_hash("measure", &format!("key-{i}"))).collect();
        let started = std::time::Instant::now();
        let files = IndexFiles::open(dir.path(), 5_000_000, 20_000_000).expect("open");
        files.put(hashes[0], 0, T0).expect("put");
        let created = started.elapsed();
        let started = std::time::Instant::now();
        for offset in 1..PUTS {
            files.put(hashes[offset as usize], offset, T0 + offset as i64 / 10).expect("put");
        }
        let puts = started.elapsed();
        let started = std::time::Instant::now();
        files.flush().expect("flush");
        let flushed = started.elapsed();
        let query_all = |query: &dyn Fn(u32) -> Vec<u64>| {
            let mut latencies = Vec::with_capacity(QUERIES as usize);
            for i in 0..QUERIES {
                let offset = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % PUTS;
                let one = std::time::Instant::now();
                let found = query(hashes[offset as usize]);
                latencies.push(one.elapsed());
                assert!(found.contains(&offset));
            }
            latencies.sort_unstable();
            let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
            let total: std::time::Duration = latencies.iter().sum();
            format!(
                "{:.0}/s, p50 {:?} p99 {:?} p99.9 {:?} max {:?}",
                QUERIES as f64 / total.as_secs_f64(),
                at(0.5),
                at(0.99),
                at(0.999),
                at(1.0)
            )
        };
        let by_key = |hash| files.query(hash, T0, T0 + 1_000_000, 32).expect("query");
        let quiet = query_all(&by_key);
        let busy = std::thread::scope(|s| {
            s.spawn(|| {
                for offset in PUTS..2 * PUTS {
                    files.put(hashes[offset as usize], offset, T0 + offset as i64 / 10).expect("put");
                    if offset % 100_000 == 0 {
                        files.flush().expect("flush");
                    }
                }
            });
            query_all(&by_key)
        });
        files.flush().expect("flush");
        let path = files.files.read()[0].path();
        drop(files);
        let sealed = IndexFile::open_sealed(&path).expect("open sealed");
        let from_sealed = query_all(&|hash| sealed.query(hash, T0, T0 + 1_000_000, 32).expect("query"));
        println!(
            "create {created:?}; {PUTS} puts {puts:?} ({:.0}/s, {:?} each); flush {flushed:?}\n\
             {QUERIES} queries of the active file: {quiet}\n\
             {QUERIES} queries while another thread puts {PUTS} (a flush every 100k): {busy}\n\
             {QUERIES} queries of the file sealed: {from_sealed}",
            PUTS as f64 / puts.as_secs_f64(),
            puts / PUTS as u32,
        );
    }
}
