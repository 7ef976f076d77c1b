//! `LogSegment`: one `.log` file of batches with its `.index` and `.timeindex`
//! (docs/DESIGN.md §5, §6). The active segment is writable; sealed segments are trimmed, hold no
//! descriptor and are mapped at their first read.

use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::failpoint::{crash_point, error_point};
use crate::format::{BATCH_HEADER_LEN, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_name};
use crate::log::batch::{self, BatchHeader, RecordIter};
use crate::log::index::{IndexEntry, SparseIndex, check_entries};
use crate::log::index_plan::{IndexPlanner, PlannedIndexes, write_index_files};
use crate::log::offset_index::{OffsetEntry, OffsetIndex};
use crate::log::positions::Positions;
use crate::log::time_index::{TimeEntry, TimeIndex};
use crate::log::walk::{BatchPos, Stop, WalkEnd, scan, walk_copied, walk_file, walk_file_in};
use crate::storage::{self, FileId, MappedFile, SEGMENT_ADVICE};

/// The three file paths of the segment starting at `base_offset`.
#[derive(Debug, Clone)]
pub(crate) struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    pub(crate) fn new(dir: &Path, base_offset: u64) -> SegmentPaths {
        SegmentPaths {
            log: dir.join(file_name(base_offset, LOG_SUFFIX)),
            index: dir.join(file_name(base_offset, INDEX_SUFFIX)),
            time_index: dir.join(file_name(base_offset, TIME_INDEX_SUFFIX)),
        }
    }
}

/// State only the appender of the active segment uses.
#[derive(Debug)]
struct SegmentWriter {
    planner: IndexPlanner,
    /// Max timestamp of the first batch: `segment_ms` counts from it.
    first_batch_timestamp: Option<i64>,
}

/// Bytes `LogSegment::locate` reads at a time while it walks from an index entry to its batch.
const LOCATE_WINDOW: u64 = 64 << 10;

/// One segment: a `.log` and its two indexes.
#[derive(Debug)]
pub(crate) struct LogSegment {
    base_offset: u64,
    log: MappedFile,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// The offset after the last batch, published after the batch's bytes.
    next_offset: AtomicU64,
    /// `Some` while the segment is active.
    writer: Mutex<Option<SegmentWriter>>,
    /// Held through a whole seal, and by flushes, so a flush never returns while a concurrent seal
    /// has not yet made the data durable. Appends never take it.
    seal_state: Mutex<SealState>,
    /// Mirrors `seal_state == Sealed`, readable without waiting for a seal or flush in progress.
    sealed: AtomicBool,
    /// An active segment opened without all of its preallocation (a full disk): appends
    /// re-extend its files first.
    short: AtomicBool,
    /// It was checked that this segment begins where the one before it ends (at its first read).
    continuity_checked: AtomicBool,
    /// Serialises the first-read index check (and rebuild), so it runs once.
    index_check: Mutex<()>,
    /// Largest timestamp and its batch's offset, once known for a sealed segment.
    sealed_max_timestamp: Mutex<Option<(i64, u64)>>,
    /// Whether the indexes passed the full sanity check (sealed segments check at first read).
    indexes_checked: AtomicBool,
    /// Read-only open: nothing is ever written, and indexes failing their check are not used.
    read_only: bool,
    /// Set on a read-only segment whose indexes failed their check: lookups scan from position 0.
    indexes_unusable: AtomicBool,
    index_interval_bytes: u64,
    /// Where each batch appended in this process starts (`positions.rs`): `Some` from creation
    /// (or reopening as the active segment) while the segment is one of the log's newest, `None`
    /// once the log drops it.
    positions: RwLock<Option<Positions>>,
}

impl LogSegment {
    /// Creates an empty active segment able to hold at least `min_bytes`.
    pub(crate) fn create(dir: &Path, base_offset: u64, config: &LogConfig, min_bytes: u64) -> Result<LogSegment> {
        let paths = SegmentPaths::new(dir, base_offset);
        let (reads, budget) = (config.read_path, config.map_budget.as_ref());
        // Leave nothing half-created behind (the next roll creates the same names again), but
        // remove only what this call created: a file already there (create_new fails) is not ours.
        let mut created: Vec<&Path> = Vec::new();
        let made = (|| {
            error_point!("create_segment", &paths.log);
            let log = MappedFile::create(&paths.log, config.segment_bytes.max(min_bytes), reads, SEGMENT_ADVICE)
                .inspect(|_| created.push(&paths.log))?
                .budgeted(budget)?;
            let offset_index = OffsetIndex::create(&paths.index, config.index_bytes, reads)
                .inspect(|_| created.push(&paths.index))?
                .budgeted(budget)?;
            // Recorded like the others: putting it under the budget can fail after it was created.
            let time_index = TimeIndex::create(&paths.time_index, config.index_bytes, reads)
                .inspect(|_| created.push(&paths.time_index))?
                .budgeted(budget)?;
            Ok((log, offset_index, time_index))
        })();
        let (log, offset_index, time_index) = made.inspect_err(|_| {
            for path in &created {
                let _ = storage::remove_if_exists(path);
            }
        })?;
        let writer = SegmentWriter { planner: IndexPlanner::default(), first_batch_timestamp: None };
        let segment =
            LogSegment::assemble(base_offset, log, offset_index, time_index, base_offset, Some(writer), config);
        // Written by this process from empty: nothing to check.
        segment.indexes_checked.store(true, Ordering::Release);
        Ok(segment)
    }

    /// An empty active segment over files that already exist, preallocated and zeroed (a
    /// preallocated segment just renamed into place).
    pub(crate) fn open_fresh(dir: &Path, base_offset: u64, config: &LogConfig) -> Result<LogSegment> {
        let paths = SegmentPaths::new(dir, base_offset);
        let (reads, budget) = (config.read_path, config.map_budget.as_ref());
        let log =
            MappedFile::open_writable(&paths.log, 0, config.segment_bytes, reads, SEGMENT_ADVICE)?.budgeted(budget)?;
        let offset_index = OffsetIndex::open_writable(&paths.index, 0, config.index_bytes, reads)?.budgeted(budget)?;
        let time_index = TimeIndex::open_writable(&paths.time_index, 0, config.index_bytes, reads)?.budgeted(budget)?;
        let writer = SegmentWriter { planner: IndexPlanner::default(), first_batch_timestamp: None };
        let segment =
            LogSegment::assemble(base_offset, log, offset_index, time_index, base_offset, Some(writer), config);
        segment.indexes_checked.store(true, Ordering::Release);
        Ok(segment)
    }

    /// Reopens the active segment after a clean shutdown: `log_len` bytes of batches ending at
    /// `next_offset`, with trimmed indexes that passed their sanity check.
    pub(crate) fn open_active(
        dir: &Path,
        base_offset: u64,
        log_len: u64,
        next_offset: u64,
        config: &LogConfig,
    ) -> Result<LogSegment> {
        let paths = SegmentPaths::new(dir, base_offset);
        let entries = |p: &Path, len| Ok::<_, Error>(storage::file_len(p)? / len as u64);
        let (reads, budget) = (config.read_path, config.map_budget.as_ref());
        // The `.log` first: on a nearly full disk the space goes to the data, not the indexes.
        let log = MappedFile::open_writable(&paths.log, log_len, config.segment_bytes, reads, SEGMENT_ADVICE)?
            .budgeted(budget)?;
        let index_entries = entries(&paths.index, OffsetEntry::LEN)?;
        let offset_index =
            OffsetIndex::open_writable(&paths.index, index_entries, config.index_bytes, reads)?.budgeted(budget)?;
        let time_entries = entries(&paths.time_index, TimeEntry::LEN)?;
        let time_index =
            TimeIndex::open_writable(&paths.time_index, time_entries, config.index_bytes, reads)?.budgeted(budget)?;
        let short = log.capacity() < config.segment_bytes || offset_index.is_short() || time_index.is_short();
        let mut segment = LogSegment::assemble(base_offset, log, offset_index, time_index, next_offset, None, config);
        *segment.short.get_mut() = short;
        *segment.writer.get_mut() = Some(segment.resume_writer()?);
        // A table for what this process appends (the batches already there are searched in the
        // index, as in any segment without one).
        *segment.positions.get_mut() = Some(Positions::new(config.segment_bytes.max(segment.log.capacity())));
        *segment.seal_state.get_mut() = SealState::Active;
        *segment.sealed.get_mut() = false;
        segment.indexes_checked = AtomicBool::new(true);
        Ok(segment)
    }

    /// A sealed segment of `log_len` bytes ending at `next_offset`. Nothing is opened, mapped or
    /// even stat'ed until its first read (opening 10,000 segments must not cost 30,000 syscalls):
    /// the index lengths are checked then, with the full sanity check (docs/DESIGN.md §7 step 3).
    pub(crate) fn open_sealed(
        dir: &Path,
        base_offset: u64,
        log_len: u64,
        next_offset: u64,
        config: &LogConfig,
    ) -> LogSegment {
        let paths = SegmentPaths::new(dir, base_offset);
        let (reads, budget) = (config.read_path, config.map_budget.as_ref());
        // Sealed files take no descriptor: putting them under a budget cannot fail.
        let under = |file: MappedFile| file.budgeted(budget).expect("a sealed file counts no descriptor");
        let offset_index = OffsetIndex::open_sealed(&paths.index, 0, reads);
        let time_index = TimeIndex::open_sealed(&paths.time_index, 0, reads);
        let (offset_index, time_index) = (offset_index.budgeted_sealed(under), time_index.budgeted_sealed(under));
        let log = under(MappedFile::open_sealed(&paths.log, log_len, reads));
        LogSegment::assemble(base_offset, log, offset_index, time_index, next_offset, None, config)
    }

    /// Learns the lengths of a sealed segment's index files: the cheap check (both exist, each a
    /// whole number of entries).
    fn load_index_lengths(&self) -> Result<()> {
        // The indexes' own paths: a segment renamed `.deleted` (or replaced by a compaction) while
        // a reader still uses it must never pick up another segment's index under its old name.
        let (index_path, time_path) = (self.offset_index.path(), self.time_index.path());
        let len = |path: &Path, entry: usize| {
            let len = storage::stat(path)?.len();
            let whole = len / entry as u64 * entry as u64;
            if whole != len {
                return Err(Error::corrupt(path, whole, Corruption::IndexLength { len, entry_len: entry as u64 }));
            }
            Ok(len)
        };
        let index_len = len(&index_path, OffsetEntry::LEN)?;
        let time_len = len(&time_path, TimeEntry::LEN)?;
        self.offset_index.replace_sealed(index_len);
        self.time_index.replace_sealed(time_len);
        Ok(())
    }

    /// A segment of a read-only open: every file read with `pread`, never mapped or written, and
    /// opened only for each read (a read-only open of thousands of segments holds no descriptor).
    pub(crate) fn open_read_only(
        dir: &Path,
        base_offset: u64,
        log_len: u64,
        next_offset: u64,
        id: Option<FileId>,
        config: &LogConfig,
    ) -> LogSegment {
        let paths = SegmentPaths::new(dir, base_offset);
        let offset_index = OffsetIndex::open_pread(&paths.index);
        let time_index = TimeIndex::open_pread(&paths.time_index);
        let log = MappedFile::open_viewed(&paths.log, log_len, id);
        let mut segment = LogSegment::assemble(base_offset, log, offset_index, time_index, next_offset, None, config);
        segment.read_only = true;
        segment
    }

    fn assemble(
        base_offset: u64,
        log: MappedFile,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        next_offset: u64,
        writer: Option<SegmentWriter>,
        config: &LogConfig,
    ) -> LogSegment {
        let (writable, log_bytes) = (writer.is_some(), log.capacity());
        LogSegment {
            base_offset,
            log,
            offset_index,
            time_index,
            next_offset: AtomicU64::new(next_offset),
            seal_state: Mutex::new(if writer.is_none() { SealState::Sealed } else { SealState::Active }),
            sealed: AtomicBool::new(writer.is_none()),
            short: AtomicBool::new(false),
            continuity_checked: AtomicBool::new(false),
            index_check: Mutex::new(()),
            writer: Mutex::new(writer),
            sealed_max_timestamp: Mutex::new(None),
            indexes_checked: AtomicBool::new(false),
            read_only: false,
            indexes_unusable: AtomicBool::new(false),
            index_interval_bytes: config.index_interval_bytes,
            positions: RwLock::new(writable.then(|| Positions::new(config.segment_bytes.max(log_bytes)))),
        }
    }

    /// Rebuilds the appender's state of a reopened active segment from its indexes and first batch.
    fn resume_writer(&self) -> Result<SegmentWriter> {
        let len = self.size();
        let last_entry = self.offset_index.last()?;
        let last_time = self.time_index.last()?;
        let mut planner = IndexPlanner {
            bytes_since_entry: len - last_entry.map_or(0, |e| u64::from(e.position)),
            max_timestamp: last_time
                .map(|e| (e.timestamp_ms, self.base_offset.saturating_add(u64::from(e.relative_offset)))),
            last_time_entry_ms: last_time.map_or(0, |e| e.timestamp_ms),
        };
        // Batches after the last index entry may hold a larger timestamp than the last time entry
        // (after a truncation, or an index rebuilt without its final entry): walk their headers,
        // at most an index interval and a batch.
        let start = last_entry.map_or(BatchPos { position: 0, expected: self.base_offset }, |e| BatchPos {
            position: u64::from(e.position),
            expected: self.base_offset.saturating_add(u64::from(e.relative_offset)),
        });
        self.walk(start, |_, header, _| {
            if planner.max_timestamp.is_none_or(|(max, _)| header.max_timestamp > max) {
                planner.max_timestamp = Some((header.max_timestamp, header.base_offset));
            }
            ControlFlow::<()>::Continue(())
        })?;
        let first = if len == 0 { None } else { Some(self.header_at(0, len)?.max_timestamp) };
        Ok(SegmentWriter { planner, first_batch_timestamp: first })
    }

    /// Whether the segment was sealed (trimmed, durable, immutable). Never waits for a seal or a
    /// flush in progress.
    pub(crate) fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    pub(crate) fn base_offset(&self) -> u64 {
        self.base_offset
    }

    /// The offset after this segment's last batch.
    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Acquire)
    }

    /// Published bytes in the `.log`.
    pub(crate) fn size(&self) -> u64 {
        self.log.len()
    }

    pub(crate) fn log_path(&self) -> PathBuf {
        self.log.path()
    }

    /// Whether a batch of `batch_bytes` ending at `last_offset`, appended at `now_ms`, must go to a
    /// new segment (docs/DESIGN.md §6).
    pub(crate) fn should_roll(&self, batch_bytes: u64, last_offset: u64, now_ms: i64, config: &LogConfig) -> bool {
        let size = self.size();
        if size == 0 {
            return false;
        }
        let too_old =
            self.writer.lock().as_ref().and_then(|w| w.first_batch_timestamp).is_some_and(|first| {
                now_ms.saturating_sub(first) > i64::try_from(config.segment_ms).unwrap_or(i64::MAX)
            });
        size + batch_bytes > config.segment_bytes.max(self.log.capacity().min(size))
            || self.offset_index.is_full(0)
            || self.time_index.is_full(1)
            || last_offset - self.base_offset > u64::from(u32::MAX)
            || too_old
    }

    /// Makes room for `bytes` more bytes: an empty segment taking a batch larger than it, or a
    /// segment opened on a full disk without its preallocation (`short`) taking an append: then
    /// the `.log` and both indexes are re-extended, every append until all three are. A failure
    /// here (`Error::DiskFull`) leaves nothing stored.
    pub(crate) fn reserve(&self, bytes: u64, segment_bytes: u64) -> Result<()> {
        let needed = self.size() + bytes;
        if needed > self.log.capacity() {
            self.log.grow(needed.max(segment_bytes))?;
        }
        if self.short.load(Ordering::Acquire) {
            self.log.grow(needed.max(segment_bytes))?;
            self.offset_index.ensure_capacity()?;
            self.time_index.ensure_capacity()?;
            self.short.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// Appends a validated, stamped batch and publishes it. The caller serialises appends.
    pub(crate) fn append(&self, batch: &[u8], header: &BatchHeader) -> Result<()> {
        let mut writer = self.writer.lock();
        let Some(writer) = writer.as_mut() else {
            return Err(Error::Io {
                op: "append to a sealed segment",
                path: self.log_path(),
                source: std::io::ErrorKind::InvalidInput.into(),
            });
        };
        debug_assert!(header.base_offset >= self.next_offset(), "batches must follow the segment end");
        let position = self.log.append(batch)?;
        error_point!("append_after_data", self.log_path());
        let (offset_entry, time_entry) =
            writer.planner.on_batch(self.base_offset, position, header, self.index_interval_bytes);
        if let Some(entry) = offset_entry {
            self.offset_index.append(entry)?;
        }
        if let Some(entry) = time_entry {
            self.time_index.append(entry)?;
        }
        writer.first_batch_timestamp.get_or_insert(header.max_timestamp);
        // Noted once nothing can fail: a batch whose append failed is never named.
        if let Some(positions) = &*self.positions.read() {
            let relative = |offset: u64| offset - self.base_offset;
            positions.note(relative(header.base_offset), relative(header.last_offset()), position);
        }
        self.next_offset.store(header.next_offset(), Ordering::Release);
        Ok(())
    }

    /// Bytes of the `.log` zeroed ahead of its data ([`LogSegment::zero_ahead`]).
    pub(crate) fn zeroed_ahead(&self) -> u64 {
        self.log.zeroed_ahead()
    }

    /// Zeros (written and fdatasynced) over the `.log`'s preallocated bytes up to `window` past
    /// its data, `chunk` bytes per hold of its append lock (`log/zero_ahead.rs`). Nothing once
    /// the segment is sealed or retired. Returns the bytes zeroed.
    pub(crate) fn zero_ahead(&self, window: u64, chunk: u64) -> Result<u64> {
        let zeroed = self.log.zero_ahead(self.size().saturating_add(window), chunk)?;
        if zeroed > 0 {
            // Under the seal state, as `flush`: this fdatasync also writes appended data and may
            // be the one told of its failed writeback (once per open file), so a failure fails the
            // segment, and the next round's flush poisons the log instead of claiming durability.
            let mut state = self.seal_state.lock();
            if *state == SealState::Active {
                self.log.sync_zeroed().inspect_err(|_| *state = SealState::Failed)?;
            }
        }
        Ok(zeroed)
    }

    /// fdatasync of the `.log` (the indexes are derived: recovery rebuilds them from the recovery
    /// point on, so only sealing flushes them).
    pub(crate) fn flush(&self) -> Result<()> {
        let mut state = self.seal_state.lock();
        match *state {
            SealState::Sealed => Ok(()),
            SealState::Failed => Err(Error::Poisoned),
            // A failed fdatasync may not fail again (Linux reports an error once): remember it.
            SealState::Active => self.log.flush().inspect_err(|_| *state = SealState::Failed),
        }
    }

    /// Seals the segment: final time entry, flush, trim every file, drop the writable maps.
    pub(crate) fn seal(&self) -> Result<()> {
        let mut state = self.seal_state.lock();
        match *state {
            SealState::Sealed => return Ok(()),
            SealState::Failed => return Err(Error::Poisoned),
            SealState::Active => {}
        }
        // Any failure leaves the segment Failed: a retry must not report a seal that did not happen.
        self.seal_steps().inspect_err(|_| *state = SealState::Failed)?;
        *state = SealState::Sealed;
        self.sealed.store(true, Ordering::Release);
        Ok(())
    }

    fn seal_steps(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        let Some(active) = writer.as_mut() else { return Ok(()) };
        if let Some(entry) = active.planner.time_entry(self.base_offset) {
            self.time_index.append(entry)?;
        }
        *self.sealed_max_timestamp.lock() = active.planner.max_timestamp;
        self.log.seal()?;
        crash_point!("before_index_flush");
        self.offset_index.seal()?;
        self.time_index.seal()?;
        *writer = None;
        // Written by this process and trimmed just now: nothing to check at first read.
        self.indexes_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// Releases maps and descriptors for good unless readers still hold the `.log` after `wait`
    /// (`false`: nothing released).
    pub(crate) fn retire_within(&self, wait: std::time::Duration) -> bool {
        if !self.log.retire_within(wait) {
            return false;
        }
        self.offset_index.retire();
        self.time_index.retire();
        true
    }

    /// The index entries that stay valid when the segment is cut at `position`, where `cut` is the
    /// offset of the batch there (for a truncation).
    pub(crate) fn indexes_before(&self, position: u64, cut: u64) -> Result<PlannedIndexes> {
        self.ensure_indexes_checked()?;
        let relative_cut = cut.saturating_sub(self.base_offset);
        let offsets = self.offset_index.all()?.into_iter().filter(|e| u64::from(e.position) < position).collect();
        let times =
            self.time_index.all()?.into_iter().filter(|e| u64::from(e.relative_offset) < relative_cut).collect();
        Ok(PlannedIndexes { offsets, times, planner: IndexPlanner::default() })
    }

    /// Renames the segment's files to unique `<name>.<pid>-<n>.deleted` names (never reused, so a
    /// later removal of a segment with the same base cannot replace files a reader of this one may
    /// still open) and returns them.
    pub(crate) fn rename_deleted(&self) -> Result<Vec<PathBuf>> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tag = format!(".{}-{}{DELETED_SUFFIX}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let with = |p: PathBuf| {
            let mut name = p.into_os_string();
            name.push(&tag);
            PathBuf::from(name)
        };
        let dir = self.log_path().parent().map(Path::to_path_buf).unwrap_or_default();
        let paths = SegmentPaths::new(&dir, self.base_offset);
        let mut renamed = vec![with(paths.log)];
        self.log.rename(&renamed[0])?;
        if paths.index.exists() {
            renamed.push(with(paths.index));
            self.offset_index.rename(&renamed[renamed.len() - 1])?;
        }
        if paths.time_index.exists() {
            renamed.push(with(paths.time_index));
            self.time_index.rename(&renamed[renamed.len() - 1])?;
        }
        Ok(renamed)
    }

    /// Whether it was checked that this segment begins where the one before it ends.
    pub(crate) fn continuity_checked(&self) -> bool {
        self.continuity_checked.load(Ordering::Acquire)
    }

    pub(crate) fn mark_continuity_checked(&self) {
        self.continuity_checked.store(true, Ordering::Release);
    }

    /// Gives back the preallocated space of an active (or rolled, unsealed) segment being removed:
    /// as `.deleted` it may wait `file_delete_delay_ms` with its reader, and a whole preallocated
    /// segment per reset would fill the disk.
    pub(crate) fn release_preallocation(&self) -> Result<()> {
        if self.is_sealed() {
            return Ok(());
        }
        self.log.release_preallocation()?;
        self.offset_index.release_preallocation()?;
        self.time_index.release_preallocation()
    }

    /// Whether the segment was retired: deleted, or being cut by a truncation.
    pub(crate) fn is_retired(&self) -> bool {
        self.log.is_retired()
    }

    /// Releases maps and descriptors for good (the segment was removed from the log).
    pub(crate) fn retire(&self) {
        self.log.retire();
        self.offset_index.retire();
        self.time_index.retire();
    }

    /// The header of the batch at `position`, which must be inside the first `len` bytes.
    fn header_at(&self, position: u64, len: u64) -> Result<BatchHeader> {
        let available = len.saturating_sub(position).min(BATCH_HEADER_LEN as u64) as usize;
        let header = self.log.read_with(position, available, BatchHeader::decode_from)?.flatten();
        header.ok_or_else(|| self.corrupt(position, Corruption::ShortHeader { available: available as u64 }))
    }

    pub(crate) fn corrupt(&self, position: u64, reason: Corruption) -> Error {
        Error::corrupt(self.log_path(), position, reason)
    }

    /// Walks batch headers from `start` over the published bytes, calling `visit` with each batch's
    /// position, header and bytes until it breaks. An invalid header is `Error::Corrupt`. Returns
    /// where the walk stopped and the visitor's break value (`None` at the end of the data), or
    /// `None` if the segment was retired.
    pub(crate) fn walk<B>(
        &self,
        start: BatchPos,
        visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
    ) -> Result<Option<(BatchPos, Option<B>)>> {
        let Some(end) = walk_file(&self.log, self.size(), start, visit)? else { return Ok(None) };
        match end.stop {
            Stop::End => Ok(Some((end.at, None))),
            Stop::Break(b) => Ok(Some((end.at, Some(b)))),
            Stop::Invalid(reason) => Err(self.corrupt(end.at.position, reason)),
        }
    }

    /// Where the data ends, walking from the last index entry and fully validating each batch on the
    /// way: the position after the last batch and the offset after it. `None` if retired.
    pub(crate) fn walk_to_end(&self) -> Result<Option<(u64, u64)>> {
        let base = self.base_offset;
        let start = self.offset_index.last()?.map_or(BatchPos { position: 0, expected: base }, |e| BatchPos {
            position: u64::from(e.position),
            expected: base.saturating_add(u64::from(e.relative_offset)),
        });
        let mut invalid = None;
        let end = self.walk(start, |at, _, bytes| match batch::validate(bytes, Some(at.expected)) {
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => {
                invalid = Some(self.corrupt(at.position, e));
                ControlFlow::Break(())
            }
        })?;
        match invalid {
            Some(e) => Err(e),
            None => Ok(end.map(|(at, _)| (at.position, at.expected))),
        }
    }

    /// The offset after the last batch, walking headers only from the last index entry (a damaged
    /// header ends the walk early: the end is then at most the true one). `None` if retired.
    pub(crate) fn data_end(&self) -> Result<Option<u64>> {
        let base = self.base_offset;
        let entry = if self.indexes_unusable() { None } else { self.offset_index.last()? };
        let start = entry.map_or(BatchPos { position: 0, expected: base }, |e| BatchPos {
            position: u64::from(e.position),
            expected: base.saturating_add(u64::from(e.relative_offset)),
        });
        let Some(end) = walk_file(&self.log, self.size(), start, |_, _, _| ControlFlow::<()>::Continue(()))? else {
            return Ok(None);
        };
        Ok(Some(end.at.expected))
    }

    /// Where the walk for `offset` may start: the greatest index entry at or before it.
    fn index_start(&self, offset: u64) -> Result<BatchPos> {
        self.ensure_indexes_checked()?;
        let entry = if self.indexes_unusable() { None } else { self.offset_index.lookup(self.base_offset, offset)? };
        Ok(entry.map_or(BatchPos { position: 0, expected: self.base_offset }, |(expected, position)| BatchPos {
            position,
            expected,
        }))
    }

    /// The batch holding `offset`, or the first batch after it (compaction leaves gaps), or where
    /// the data ends if no batch does. An invalid header on the way is `Error::Corrupt`.
    pub(crate) fn locate(&self, offset: u64) -> Result<Located> {
        if let Some(at) = self.noted_batch(offset) {
            return Ok(Located::At(at));
        }
        let start = self.index_start(offset)?;
        // Windows of `LOCATE_WINDOW`: the batch is usually within an index interval of the entry,
        // and a `pread` file's default window (1 MiB) read whole for a few headers cost a
        // one-pass `read_batches` under `Pread` twice its bytes.
        let end = walk_file_in(&self.log, self.size(), start, LOCATE_WINDOW, |at, header, _| {
            if header.last_offset() >= offset { ControlFlow::Break(at) } else { ControlFlow::Continue(()) }
        })?;
        Ok(match end.map(|end| (end.at, end.stop)) {
            None => Located::Retired,
            Some((_, Stop::Break(at))) => Located::At(at),
            Some((end, Stop::End)) => Located::End(end),
            Some((end, Stop::Invalid(reason))) => return Err(self.corrupt(end.position, reason)),
        })
    }

    /// The batch holding `offset` where the position table says it starts, if it says so and the
    /// header there agrees ([`LogSegment::noted_as`]); otherwise the caller searches the index.
    fn noted_batch(&self, offset: u64) -> Option<BatchPos> {
        let position = self.positions.read().as_ref()?.get(offset.checked_sub(self.base_offset)?)?;
        let header = self.header_at(position, self.size()).ok()?;
        self.noted_as(&header, offset, position).then_some(BatchPos { position, expected: header.base_offset })
    }

    /// Whether `header`, read at `position` where the table says `offset`'s batch starts, is that
    /// batch: it holds `offset`, and its base and last offsets are those noted at the append. Not
    /// so only for a damaged file (a base offset is outside the CRC; the index lookup's walk then
    /// tells it by the batch before) or a table dropped meanwhile: the caller searches the index.
    fn noted_as(&self, header: &BatchHeader, offset: u64, position: u64) -> bool {
        let holds = header.base_offset <= offset && offset <= header.last_offset();
        let relative = |offset: u64| offset.checked_sub(self.base_offset);
        let (Some(first), Some(last)) = (relative(header.base_offset), relative(header.last_offset())) else {
            return false;
        };
        holds && self.positions.read().as_ref().is_some_and(|table| table.noted_exactly(first, last, position))
    }

    /// Forgets where the batches start (the log keeps that for its newest segments only).
    pub(crate) fn drop_positions(&self) {
        self.positions.write().take();
    }

    /// The offset after the last batch before `at` (the segment's base offset if `at` is its first
    /// batch): where the log ends once it is cut at `at`. Not `at.expected`: a walk that started at
    /// an index entry takes a batch's own base as expected, and after compaction the batch before
    /// may end earlier (the records between were removed), and a normal batch may only follow the
    /// previous batch's end.
    pub(crate) fn end_before(&self, at: BatchPos) -> Result<u64> {
        if at.position == 0 {
            return Ok(self.base_offset);
        }
        self.ensure_indexes_checked()?;
        let entry = match self.indexes_unusable() {
            true => None,
            false => self.offset_index.floor(|e| u64::from(e.position) < at.position)?,
        };
        let start = entry.map_or(BatchPos { position: 0, expected: self.base_offset }, |e| BatchPos {
            position: u64::from(e.position),
            expected: self.base_offset.saturating_add(u64::from(e.relative_offset)),
        });
        let mut end = start.expected;
        self.walk(start, |pos, header, _| {
            if pos.position >= at.position {
                return ControlFlow::Break(());
            }
            end = header.next_offset();
            ControlFlow::Continue(())
        })?;
        debug_assert!(end <= at.expected, "the batch before ends at or before the batch at the cut");
        Ok(end)
    }

    /// Copies whole batches from `start` into `out`, stopping before a batch at or past `upper`, at
    /// the end of the data, or before the copy exceeds `chunk_limit` bytes. A batch larger than the
    /// limit is copied alone if it fits `budget` or if `at_least_one`. Returns where the next batch
    /// is, or `None` if the segment was retired. One pass: each batch is copied as the walk steps
    /// over it (for a `pread` file, the chunk is read once).
    pub(crate) fn copy_batches(
        &self,
        start: BatchPos,
        upper: u64,
        chunk_limit: u64,
        budget: u64,
        at_least_one: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<CopyEnd>> {
        let mut taken = 0u64;
        let copied_from = out.len();
        let window = chunk_limit.saturating_add(BATCH_HEADER_LEN as u64);
        // Read into `out` and walked there: a reader that keeps the bytes copies them once.
        // A first batch larger than the window is read only if it would be taken.
        let first_wanted =
            |header: &BatchHeader| header.base_offset < upper && (at_least_one || header.size() <= budget);
        let end = walk_copied(&self.log, self.size(), start, window, out, (), first_wanted, |_, header, _| {
            let size = header.size();
            let fits = if taken == 0 { at_least_one || size <= budget } else { taken + size <= chunk_limit };
            if header.base_offset >= upper || !fits {
                return ControlFlow::Break(());
            }
            taken += size;
            ControlFlow::Continue(())
        });
        let end = match end {
            Ok(Some(end)) => end,
            Ok(None) => {
                out.truncate(copied_from);
                return Ok(None);
            }
            Err(error) => {
                out.truncate(copied_from);
                return Err(error);
            }
        };
        let end_of_data = match end.stop {
            Stop::End => true,
            Stop::Break(()) => false,
            // The batches before an invalid header are returned; the next copy starts at it and
            // reports it.
            Stop::Invalid(_) if taken > 0 => false,
            Stop::Invalid(reason) => return Err(self.corrupt(end.at.position, reason)),
        };
        debug_assert_eq!(out.len() - copied_from, taken as usize, "every batch stepped over was copied");
        Ok(Some(CopyEnd { next: end.at, bytes: taken, end_of_data }))
    }

    /// Copies the batch holding `offset` into `out` where the position table says it starts, with
    /// one read of `window` bytes if it fits (two otherwise), if the table knows it and the header
    /// there agrees ([`LogSegment::noted_as`]). Returns where it is (`expected`: its own base), or
    /// `None` (nothing copied): the caller locates it through the index.
    pub(crate) fn copy_noted_batch(&self, offset: u64, window: u64, out: &mut Vec<u8>) -> Option<BatchPos> {
        let position = self.positions.read().as_ref()?.get(offset.checked_sub(self.base_offset)?)?;
        let available = self.size().checked_sub(position)?;
        let first = available.min(window.max(BATCH_HEADER_LEN as u64)) as usize;
        let copy = |bytes: &[u8], out: &mut Vec<u8>| -> std::result::Result<BatchHeader, u64> {
            let Some(header) = BatchHeader::decode_from(bytes) else { return Err(0) };
            if header.check(available, None).is_err() || !self.noted_as(&header, offset, position) {
                return Err(0);
            }
            match bytes.get(..header.size() as usize) {
                Some(batch) => {
                    out.extend_from_slice(batch);
                    Ok(header)
                }
                None => Err(header.size()),
            }
        };
        let header = match self.log.read_with(position, first, |bytes| copy(bytes, out)).ok()?? {
            Ok(header) => header,
            Err(0) => return None,
            Err(size) => self.log.read_with(position, size as usize, |bytes| copy(bytes, out)).ok()??.ok()?,
        };
        Some(BatchPos { position, expected: header.base_offset })
    }

    /// Copies the one batch at `start` into `out`, reading `window` bytes at first (a larger batch
    /// is read again whole). Returns its size (0 at the end of the data), or `None` if the
    /// segment was retired.
    pub(crate) fn copy_batch(&self, start: BatchPos, window: u64, out: &mut Vec<u8>) -> Result<Option<u64>> {
        let end = walk_file_in(&self.log, self.size(), start, window, |_, header, bytes| {
            out.extend_from_slice(bytes);
            ControlFlow::Break(header.size())
        })?;
        let Some(end) = end else { return Ok(None) };
        match end.stop {
            Stop::Break(size) => Ok(Some(size)),
            Stop::End => Ok(Some(0)),
            Stop::Invalid(reason) => Err(self.corrupt(end.at.position, reason)),
        }
    }

    /// Walks the published batches from `start` as [`walk_file_in`] does, `window` bytes under the
    /// file's read guard at a time: `visit` sees each batch's bytes in place (the mapping's, or a
    /// `pread` buffer's), and nothing that rewrites or unmaps them runs while it does.
    pub(crate) fn walk_in<B>(
        &self,
        start: BatchPos,
        window: u64,
        visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
    ) -> Result<Option<WalkEnd<B>>> {
        walk_file_in(&self.log, self.size(), start, window, visit)
    }

    /// The first offset in `[from, upper)` in this segment whose timestamp is ≥ `timestamp_ms`.
    pub(crate) fn offset_for_timestamp(&self, timestamp_ms: i64, from: u64, upper: u64) -> Result<Option<u64>> {
        self.ensure_indexes_checked()?;
        let indexed =
            if self.indexes_unusable() { None } else { self.time_index.lookup(self.base_offset, timestamp_ms)? };
        let indexed = indexed.unwrap_or(self.base_offset);
        let start = match self.locate(indexed.max(from))? {
            Located::At(start) => start,
            Located::End(end) if end.expected < self.next_offset().min(upper) => {
                let reason = Corruption::DataEndsEarly { end: end.expected, upper: self.next_offset().min(upper) };
                return Err(self.corrupt(end.position, reason));
            }
            Located::End(_) | Located::Retired => return Ok(None),
        };
        let mut found: Option<Result<Option<u64>>> = None;
        self.walk(start, |at, header, bytes| {
            if header.base_offset >= upper {
                return ControlFlow::Break(());
            }
            if header.max_timestamp < timestamp_ms {
                return ControlFlow::Continue(());
            }
            // The batch's matching records may all be below `from` (a prefix deletion inside it):
            // then the answer is in a later batch.
            match self.first_at_or_after(at, bytes, timestamp_ms, from..upper) {
                Ok(None) => ControlFlow::Continue(()),
                result => {
                    found = Some(result);
                    ControlFlow::Break(())
                }
            }
        })?;
        found.unwrap_or(Ok(None))
    }

    /// Validates one batch and returns its first record offset with a timestamp ≥ `timestamp_ms`.
    fn first_at_or_after(
        &self,
        at: BatchPos,
        bytes: &[u8],
        timestamp_ms: i64,
        offsets: Range<u64>,
    ) -> Result<Option<u64>> {
        let summary = batch::validate(bytes, Some(at.expected)).map_err(|e| self.corrupt(at.position, e))?;
        for record in RecordIter::new(bytes, &summary.header) {
            let record = record.map_err(|e| self.corrupt(at.position, e))?;
            let offset = summary.header.base_offset + u64::from(record.offset_delta);
            if offset >= offsets.end {
                return Ok(None);
            }
            if offset >= offsets.start && record.timestamp_ms >= timestamp_ms {
                return Ok(Some(offset));
            }
        }
        Ok(None)
    }

    /// The largest timestamp in the segment (0 if none is known).
    pub(crate) fn max_timestamp(&self) -> Result<i64> {
        if let Some(writer) = self.writer.lock().as_ref() {
            return Ok(writer.planner.max_timestamp.map_or(0, |(ts, _)| ts));
        }
        if self.read_only {
            // The last segment of a live log has no final time entry yet: never skip by time.
            return Ok(i64::MAX);
        }
        let mut cached = self.sealed_max_timestamp.lock();
        if let Some((ts, _)) = *cached {
            return Ok(ts);
        }
        self.ensure_indexes_checked()?;
        let ts = self.time_index.last_timestamp()?;
        *cached = Some((ts, self.base_offset));
        Ok(ts)
    }

    /// Runs the full index sanity check once (docs/DESIGN.md §6); a failed check rebuilds the
    /// indexes. Returns whether they were rebuilt now.
    pub(crate) fn ensure_indexes_checked(&self) -> Result<bool> {
        if self.indexes_checked.load(Ordering::Acquire) {
            return Ok(false);
        }
        let _once = self.index_check.lock();
        if self.indexes_checked.load(Ordering::Acquire) {
            return Ok(false);
        }
        let checked = if self.read_only { Ok(()) } else { self.load_index_lengths() };
        let mut rebuilt = false;
        if let Err(reason) = checked.and_then(|()| self.check_indexes()) {
            if self.read_only {
                tracing::debug!(segment = %self.log_path().display(), %reason, "index failed its sanity check; not using it");
                self.indexes_unusable.store(true, Ordering::Release);
            } else {
                tracing::warn!(segment = %self.log_path().display(), %reason, "index failed its sanity check; rebuilding");
                self.rebuild_sealed_indexes()?;
                rebuilt = true;
            }
        }
        self.indexes_checked.store(true, Ordering::Release);
        Ok(rebuilt)
    }

    fn indexes_unusable(&self) -> bool {
        self.indexes_unusable.load(Ordering::Acquire)
    }

    /// The cheap and the full index check of a sealed segment, without repairing anything.
    pub(crate) fn check_sealed_indexes(&self) -> Result<()> {
        self.load_index_lengths()?;
        self.check_indexes()
    }

    /// The full sanity check: both indexes well-formed, and the last offset entry pointing at a
    /// valid batch with that base offset. Damage is `Error::Corrupt` in the index file.
    pub(crate) fn check_indexes(&self) -> Result<()> {
        let (offsets, _times) = if self.read_only {
            self.view_indexes()?
        } else {
            (check_index(&self.offset_index)?, check_index(&self.time_index)?)
        };
        let Some(last) = offsets.last() else { return Ok(()) };
        let at = BatchPos {
            position: u64::from(last.position),
            expected: self.base_offset.saturating_add(u64::from(last.relative_offset)),
        };
        let index_damage = |reason| {
            let position = ((offsets.len() - 1) * OffsetEntry::LEN) as u64;
            Err(Error::corrupt(self.offset_index.path(), position, reason))
        };
        let data_len = self.size();
        if at.position >= data_len {
            return index_damage(Corruption::IndexPastData { position: at.position, data_len });
        }
        let not_at_batch = |reason: Option<Corruption>| Corruption::IndexEntryNotAtBatch {
            offset: at.expected,
            position: at.position,
            reason: reason.map(Box::new),
        };
        let first =
            self.walk(at, |at, _, bytes| ControlFlow::Break(batch::validate(bytes, Some(at.expected)).map(|_| ())));
        match first {
            Ok(Some((_, Some(Ok(()))))) | Ok(None) => Ok(()),
            // A whole batch of a newer format: the entry is right, this build cannot read it.
            Ok(Some((_, Some(Err(reason @ Corruption::BadAttributes(_)))))) => Err(self.corrupt(at.position, reason)),
            Ok(Some((_, Some(Err(reason))))) => index_damage(not_at_batch(Some(reason))),
            // Zeros where the entry points: the data ends there.
            Ok(Some((_, None))) => {
                index_damage(Corruption::IndexPastData { position: at.position, data_len: at.position })
            }
            Err(Error::Corrupt { position, reason, .. }) if position == at.position => {
                index_damage(not_at_batch(Some(reason)))
            }
            Err(e) => Err(e),
        }
    }

    /// The indexes of a read-only view, checked: the last segment of a live log has untrimmed
    /// indexes (zeros after the entries) and entries past the data the view has: a view uses the
    /// entries it can check, and only those.
    fn view_indexes(&self) -> Result<(Vec<OffsetEntry>, Vec<TimeEntry>)> {
        let offsets = self.offset_index.all()?;
        let used = check_entries(&offsets).map_err(|d| d.into_error(&self.offset_index.path()))?;
        let offsets: Vec<OffsetEntry> =
            offsets.into_iter().take(used).take_while(|e| u64::from(e.position) < self.size()).collect();
        let times = self.time_index.all()?;
        let used = check_entries(&times).map_err(|d| d.into_error(&self.time_index.path()))?;
        let end = self.next_offset().saturating_sub(self.base_offset);
        let times: Vec<TimeEntry> =
            times.into_iter().take(used).take_while(|e| u64::from(e.relative_offset) < end).collect();
        self.offset_index.limit_to(offsets.len() as u64);
        self.time_index.limit_to(times.len() as u64);
        Ok((offsets, times))
    }

    /// Rebuilds both indexes of a sealed segment from its `.log` and swaps them in.
    fn rebuild_sealed_indexes(&self) -> Result<()> {
        let scanned = scan(&self.log, self.size(), self.base_offset, self.index_interval_bytes)?;
        let Some(mut scanned) = scanned else { return Ok(()) };
        if let Some(reason) = &scanned.invalid {
            // Index what is valid, so the records before the damage stay readable; reads reaching
            // the damage report it.
            tracing::error!(segment = %self.log_path().display(), position = scanned.valid_len, %reason, "damaged segment: indexing only the data before the damage");
        }
        scanned.plan.finish(self.base_offset);
        let dir = self.log_path().parent().map(Path::to_path_buf).unwrap_or_default();
        if self.log_path() != SegmentPaths::new(&dir, self.base_offset).log {
            // Renamed away (deleted or compacted): its names belong to another segment now. Scan
            // from the start instead of writing an index.
            tracing::warn!(segment = %self.log_path().display(), "index of a removed segment is unusable; scanning");
            self.indexes_unusable.store(true, Ordering::Release);
            return Ok(());
        }
        let (index_len, time_len) = write_index_files(&dir, self.base_offset, &scanned.plan)?;
        self.offset_index.replace_sealed(index_len);
        self.time_index.replace_sealed(time_len);
        Ok(())
    }
}

/// Where a segment is in its life: appended to, sealed (trimmed, durable), or failed while being
/// flushed or sealed (the log is poisoned; nothing may claim it durable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SealState {
    Active,
    Sealed,
    Failed,
}

/// Result of [`LogSegment::locate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Located {
    /// The batch holding the offset, or the first after it.
    At(BatchPos),
    /// No batch holds the offset or follows it: the data ends here.
    End(BatchPos),
    /// The segment was retired (deleted) meanwhile.
    Retired,
}

/// Result of [`LogSegment::copy_batches`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct CopyEnd {
    /// Where the batch after the copied ones is.
    pub next: BatchPos,
    /// Bytes copied.
    pub bytes: u64,
    /// The walk reached the end of the segment's data.
    pub end_of_data: bool,
}

/// The entries of a sealed index, checked: well-formed and trimmed (no unused entries).
fn check_index<E: IndexEntry>(index: &SparseIndex<E>) -> Result<Vec<E>> {
    let entries = index.all()?;
    let used = check_entries(&entries).map_err(|d| d.into_error(&index.path()))?;
    if used != entries.len() {
        let (unused, total) = ((entries.len() - used) as u64, entries.len() as u64);
        let reason = Corruption::IndexNotTrimmed { unused, entries: total };
        return Err(Error::corrupt(index.path(), (used * E::LEN) as u64, reason));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{BatchEncoder, Record};

    /// A sealed segment at base 100 of three one-record batches, indexed at each batch after the
    /// first; returns it (reopened sealed) and its paths.
    fn sealed_segment(dir: &Path) -> (LogSegment, SegmentPaths) {
        let config = LogConfig { index_interval_bytes: 1, ..LogConfig::default() };
        let segment = LogSegment::create(dir, 100, &config, 0).expect("create");
        let mut encoder = BatchEncoder::default();
        for (offset, ts) in [(100, 1000), (101, 2000), (102, 3000)] {
            let batch = encoder.encode(offset, &[Record::new(b"value")], &[ts], 0).to_vec();
            let header = BatchHeader::decode_from(&batch).expect("header");
            segment.append(&batch, &header).expect("append");
        }
        segment.seal().expect("seal");
        let len = segment.size();
        segment.retire();
        (LogSegment::open_sealed(dir, 100, len, 103, &config), SegmentPaths::new(dir, 100))
    }

    fn index_damage(segment: &LogSegment) -> (PathBuf, u64, Corruption) {
        match segment.check_sealed_indexes() {
            Err(Error::Corrupt { path, position, reason }) => (path, position, reason),
            other => panic!("expected index damage, got {other:?}"),
        }
    }

    fn write_offset_entries(path: &Path, entries: &[(u32, u32)]) {
        let bytes: Vec<u8> = entries.iter().flat_map(|(r, p)| [r.to_be_bytes(), p.to_be_bytes()].concat()).collect();
        std::fs::write(path, bytes).expect("write index");
    }

    #[test]
    fn a_sealed_segments_indexes_pass_their_check() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (segment, paths) = sealed_segment(dir.path());
        assert_eq!(std::fs::metadata(&paths.index).expect("index").len(), 16, "two entries");
        segment.check_sealed_indexes().expect("healthy indexes");
    }

    #[test]
    fn index_damage_is_typed_and_placed_in_the_index_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (segment, paths) = sealed_segment(dir.path());
        let batch_len = segment.size() / 3;

        std::fs::write(&paths.index, [0u8; 12]).expect("write");
        let (path, position, reason) = index_damage(&segment);
        assert_eq!((path, position), (paths.index.clone(), 8));
        assert_eq!(reason, Corruption::IndexLength { len: 12, entry_len: 8 });

        write_offset_entries(&paths.index, &[(1, batch_len as u32), (0, 0)]);
        let (_, position, reason) = index_damage(&segment);
        assert_eq!((position, reason), (8, Corruption::IndexNotTrimmed { unused: 1, entries: 2 }));

        write_offset_entries(&paths.index, &[(1, batch_len as u32), (2, 10_000)]);
        let (_, position, reason) = index_damage(&segment);
        assert_eq!(position, 8, "the last entry");
        assert_eq!(reason, Corruption::IndexPastData { position: 10_000, data_len: 3 * batch_len });

        // Inside the first batch: no batch starts there.
        write_offset_entries(&paths.index, &[(1, 5)]);
        let (_, position, reason) = index_damage(&segment);
        assert_eq!(position, 0);
        assert!(
            matches!(reason, Corruption::IndexEntryNotAtBatch { offset: 101, position: 5, reason: Some(_) }),
            "{reason:?}"
        );

        // A batch starts there, with another offset.
        write_offset_entries(&paths.index, &[(1, 2 * batch_len as u32)]);
        let (_, _, reason) = index_damage(&segment);
        let expected = Corruption::UnexpectedOffset { expected: 101, found: 102 };
        assert_eq!(
            reason,
            Corruption::IndexEntryNotAtBatch { offset: 101, position: 2 * batch_len, reason: Some(Box::new(expected)) }
        );
        assert!(reason.to_string().starts_with("index entry (offset 101, position "), "{reason}");
    }

    #[test]
    fn rolls_before_a_relative_offset_would_overflow_u32() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() };
        let segment = LogSegment::create(dir.path(), 100, &config, 0).expect("create");
        let batch = BatchEncoder::default().encode(100, &[Record::new(b"x")], &[1], 0).to_vec();
        let header = BatchHeader::decode_from(&batch).expect("header");
        segment.append(&batch, &header).expect("append");
        let max_relative = 100 + u64::from(u32::MAX);
        assert!(!segment.should_roll(50, max_relative, 1, &config), "relative offset u32::MAX still fits");
        assert!(segment.should_roll(50, max_relative + 1, 1, &config));
    }
}
