//! One `.idx` file, [`IndexFile`]: created at full size, put into while active (its
//! `ActiveState` in memory), queried by walking a slot's chain, flushed, sealed, retired. Its
//! recovery after an unclean shutdown is in `recover.rs`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};

use byteorder::{BigEndian, ByteOrder};
use parking_lot::{Mutex, RwLock};

use crate::config::ReadPath;
use crate::error::{Error, Result};
use crate::format::{INDEX_FILE_ENTRY_LEN, INDEX_FILE_SLOT_LEN, INDEX_FILE_SUFFIX, file_name};
use crate::storage::map_budget::MapBudget;
use crate::storage::{self, MappedFile, U32Table};
use crate::store::index::active::{ActiveState, PENDING_ENTRIES};
use crate::store::index::layout::{
    IndexFileEntry, IndexHeader, check_sizes, entry_position, index_file_len, read_header, slot_of, slot_position,
};

/// A put an index file is asked to take: `key_hash` for the message at `log_offset`, stored at
/// `timestamp_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexPut {
    pub(crate) key_hash: u32,
    pub(crate) log_offset: u64,
    pub(crate) timestamp_ms: i64,
}

/// What lowers the space an index file needs.
const INDEX_FILE_ADVICE: &str = "lower index_slots or index_entries, or free space";

/// Where a query reads: the active file's memory (its slots, its unwritten entries) before the
/// file, or the file alone (a sealed file).
#[derive(Clone, Copy)]
enum View<'a> {
    Active(&'a ActiveState),
    Sealed,
}

/// One `.idx` file. See the module docs of `store::index`. The fields `recover.rs` needs are
/// `pub(super)`: recovery is an `impl IndexFile` block of its own there.
#[derive(Debug)]
pub(crate) struct IndexFile {
    pub(super) file: MappedFile,
    pub(super) begin_log_offset: u64,
    pub(super) begin_timestamp_ms: i64,
    pub(super) slot_count: u32,
    /// Entries the file has room for, the unused entry 0 included.
    pub(super) entry_capacity: u32,
    // The header's changing fields. Stored by the writer under `active` (Release), read by
    // queries under it or, once `sealed`, without it (Acquire): final by then.
    pub(super) end_timestamp_ms: AtomicI64,
    pub(super) end_log_offset: AtomicU64,
    pub(super) index_count: AtomicU32,
    /// Set (Release) once the file is sealed and never changes again.
    sealed: AtomicBool,
    /// The active file's state (`None` once sealed). Puts hold it for writing, queries of the
    /// active file for reading: the slots and the newest entries change under puts.
    pub(super) active: RwLock<Option<ActiveState>>,
    /// Serialises flushes, the seal and recovery (the header's writers).
    pub(super) flushing: Mutex<()>,
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
        // The table first: a failure to get it leaves no file behind.
        let table = U32Table::zeroed(slots as usize)?;
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
        Ok(IndexFile::new(file, header, entries, Some(ActiveState::new(table, 0, 0))))
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
        let mut slots = U32Table::zeroed(header.slot_count as usize)?;
        let read = index.file.read_with(slot_position(0), table_len, |b| BigEndian::read_u32_into(b, &mut slots))?;
        let last_time_diff_s = match header.index_count {
            0 => Some(0),
            n => index.read_entry(n)?.map(|last| last.time_diff_s),
        };
        let (Some(()), Some(last_time_diff_s)) = (read, last_time_diff_s) else {
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

    /// How many more puts the file takes: none once it is sealed or poisoned.
    pub(crate) fn room(&self) -> usize {
        if self.is_sealed() || self.poisoned.load(Ordering::Acquire) {
            return 0;
        }
        self.entry_capacity.saturating_sub(1).saturating_sub(self.index_count()) as usize
    }

    /// The header as it stands in memory.
    pub(super) fn header(&self) -> IndexHeader {
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
    #[cfg(test)]
    pub(crate) fn put(&self, key_hash: u32, log_offset: u64, timestamp_ms: i64) -> Result<bool> {
        let (taken, result) = self.put_many(&[IndexPut { key_hash, log_offset, timestamp_ms }]);
        result.map(|()| taken == 1)
    }

    /// Indexes `puts` in order, each as [`IndexFile::put`] would, under one hold of the file's
    /// lock. Returns how many it took — all, or fewer when the file fills (the caller rolls) —
    /// and the error that stopped it, if one did (the puts before it stay taken). The slots of
    /// all are loaded first: in a table of megabytes each is a cache miss, and loaded one after
    /// another they overlap instead of following each other.
    pub(crate) fn put_many(&self, puts: &[IndexPut]) -> (usize, Result<()>) {
        let mut active = self.active.write();
        if let Err(error) = self.check_not_poisoned() {
            return (0, Err(error));
        }
        let Some(state) = active.as_mut() else {
            return (0, Err(self.misuse("put into a sealed index file")));
        };
        let loaded = puts.iter().fold(0u32, |acc, put| acc ^ state.slots[self.slot_of(put.key_hash)]);
        std::hint::black_box(loaded);
        for (taken, put) in puts.iter().enumerate() {
            match self.put_locked(state, put) {
                Ok(true) => {}
                Ok(false) => return (taken, Ok(())),
                Err(error) => return (taken, Err(error)),
            }
        }
        (puts.len(), Ok(()))
    }

    /// One put, under the file's lock (`state` is the active state it guards).
    fn put_locked(&self, state: &mut ActiveState, put: &IndexPut) -> Result<bool> {
        let IndexPut { key_hash, log_offset, timestamp_ms } = *put;
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
        let entry = IndexFileEntry { key_hash, log_offset, time_diff_s, prev_entry };
        state.pending.extend_from_slice(&entry.encode());
        state.set_slot(slot, n);
        state.last_time_diff_s = time_diff_s;
        self.end_log_offset.store(log_offset, Ordering::Release);
        // Most puts share their millisecond with the one before: no read-modify-write for them.
        if timestamp_ms > self.end_timestamp_ms.load(Ordering::Acquire) {
            self.end_timestamp_ms.fetch_max(timestamp_ms, Ordering::AcqRel);
        }
        self.index_count.store(n, Ordering::Release);
        Ok(true)
    }

    /// Writes the entries kept in memory (one `pwrite`); queries then read them from the file.
    pub(super) fn write_pending(&self, state: &mut ActiveState) -> Result<()> {
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

    /// Whether the file holds an entry for exactly (`key_hash`, `log_offset`): a redispatch of the
    /// last message indexed must not index its keys twice, but must index those a crash kept it
    /// from. Walks `key_hash`'s chain down to the entries below `log_offset`.
    pub(crate) fn holds(&self, key_hash: u32, log_offset: u64) -> Result<bool> {
        let active = self.active.read();
        let view = active.as_ref().map_or(View::Sealed, View::Active);
        let count = self.index_count.load(Ordering::Acquire);
        let Some(mut n) = self.slot_value(view, key_hash)? else { return Ok(false) };
        let mut steps = 0;
        while n != 0 && n <= count && steps < count {
            steps += 1;
            let Some(entry) = self.entry_in(view, n)? else { return Ok(false) };
            if entry.log_offset < log_offset {
                return Ok(false); // every older entry is older still
            }
            if entry.key_hash == key_hash && entry.log_offset == log_offset {
                return Ok(true);
            }
            if entry.prev_entry >= n {
                return Ok(false); // a chain only points back: this one is corrupt
            }
            n = entry.prev_entry;
        }
        Ok(false)
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
    fn entry_in(&self, view: View<'_>, n: u32) -> Result<Option<IndexFileEntry>> {
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
    /// during the syncs. A sealed file has nothing to flush. Returns the header now durable.
    pub(crate) fn flush(&self) -> Result<IndexHeader> {
        let _flushing = self.flushing.lock();
        self.flush_locked()
    }

    fn flush_locked(&self) -> Result<IndexHeader> {
        self.check_not_poisoned()?;
        let (header, dirty) = {
            let mut active = self.active.write();
            // Sealed: its header is final, and was made durable by the seal.
            let Some(state) = active.as_mut() else { return Ok(self.header()) };
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
        self.sync()?;
        Ok(header)
    }

    /// fdatasync; a failure poisons the file.
    pub(super) fn sync(&self) -> Result<()> {
        self.file.flush_detached().map_err(|error| self.poison(error))
    }

    pub(super) fn check_not_poisoned(&self) -> Result<()> {
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

    pub(super) fn slot_of(&self, key_hash: u32) -> usize {
        slot_of(key_hash, self.slot_count) as usize
    }

    fn slot_position(&self, key_hash: u32) -> u64 {
        self.slot_position_of(self.slot_of(key_hash))
    }

    fn slot_position_of(&self, slot: usize) -> u64 {
        slot_position(slot as u64)
    }

    pub(super) fn entry_position(&self, n: u32) -> u64 {
        entry_position(self.slot_count, u64::from(n))
    }

    /// Seconds since the begin timestamp, 0 for an earlier time, saturating.
    fn time_diff_s(&self, timestamp_ms: i64) -> u32 {
        let seconds = timestamp_ms.saturating_sub(self.begin_timestamp_ms).max(0) / 1000;
        u32::try_from(seconds).unwrap_or(u32::MAX)
    }

    /// The first and last millisecond of the second `time_diff_s` stands for.
    pub(super) fn second_of(&self, time_diff_s: u32) -> (i64, i64) {
        let from = self.begin_timestamp_ms.saturating_add(i64::from(time_diff_s) * 1000);
        (from, from.saturating_add(999))
    }

    /// Entry `n` as written in the file; `None` if the file was retired.
    pub(super) fn read_entry(&self, n: u32) -> Result<Option<IndexFileEntry>> {
        self.file.read_with(self.entry_position(n), INDEX_FILE_ENTRY_LEN, IndexFileEntry::decode)
    }

    /// Entries `first` to `first + count - 1` as written in the file.
    pub(super) fn read_entries(&self, first: u32, count: u32) -> Result<Vec<IndexFileEntry>> {
        let bytes = count as usize * INDEX_FILE_ENTRY_LEN;
        let decode = |b: &[u8]| b.chunks_exact(INDEX_FILE_ENTRY_LEN).map(IndexFileEntry::decode).collect();
        self.file
            .read_with(self.entry_position(first), bytes, decode)?
            .ok_or_else(|| self.misuse("read a retired index file"))
    }

    pub(super) fn misuse(&self, what: &'static str) -> Error {
        debug_assert!(false, "{what}: {}", self.path().display());
        Error::Io { op: what, path: self.path(), source: std::io::ErrorKind::InvalidInput.into() }
    }
}
