//! `LogSegment`: one `.log` file of batches with its `.index` and `.timeindex` (DESIGN.md §5, §6).
//! The active segment is writable; sealed segments are trimmed, hold no descriptor and are mapped
//! at their first read.

use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::format::{BATCH_HEADER_LEN, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_name};
use crate::log::batch::{self, BatchHeader, RecordIter};
use crate::log::index::{IndexEntry, SparseIndex, check_entries};
use crate::log::offset_index::{OffsetEntry, OffsetIndex};
use crate::log::time_index::{TimeEntry, TimeIndex};
use crate::storage::{self, MappedFile};

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

/// Where a batch is: its byte position and the offset it must start at (DESIGN.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchPos {
    pub position: u64,
    pub expected: u64,
}

/// Decides the sparse index entries, the same way for appends and for rebuilds.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexPlanner {
    bytes_since_entry: u64,
    /// Largest timestamp so far and the base offset of the first batch that reached it.
    max_timestamp: Option<(i64, u64)>,
    last_time_entry_ms: i64,
}

impl IndexPlanner {
    /// The entries to add for the batch at `position`, before counting its bytes.
    fn on_batch(
        &mut self,
        base: u64,
        position: u64,
        header: &BatchHeader,
        interval: u64,
    ) -> (Option<OffsetEntry>, Option<TimeEntry>) {
        if self.max_timestamp.is_none_or(|(max, _)| header.max_timestamp > max) {
            self.max_timestamp = Some((header.max_timestamp, header.base_offset));
        }
        let due = position > 0 && self.bytes_since_entry >= interval;
        self.bytes_since_entry += header.size();
        if !due {
            return (None, None);
        }
        self.bytes_since_entry = header.size();
        let relative_offset = (header.base_offset - base) as u32;
        let offset_entry = OffsetEntry { relative_offset, position: position as u32 };
        (Some(offset_entry), self.time_entry(base))
    }

    /// A time entry for the largest timestamp so far, if it grew since the last entry.
    fn time_entry(&mut self, base: u64) -> Option<TimeEntry> {
        let (timestamp_ms, offset) = self.max_timestamp?;
        if timestamp_ms <= self.last_time_entry_ms {
            return None;
        }
        self.last_time_entry_ms = timestamp_ms;
        Some(TimeEntry { timestamp_ms, relative_offset: (offset - base) as u32 })
    }
}

/// State only the appender of the active segment uses.
#[derive(Debug)]
struct SegmentWriter {
    planner: IndexPlanner,
    /// Max timestamp of the first batch: `segment_ms` counts from it.
    first_batch_timestamp: Option<i64>,
}

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
    /// has not yet made the data durable. `true` once sealed. Appends never take it.
    sealed: Mutex<bool>,
    /// Largest timestamp and its batch's offset, once known for a sealed segment.
    sealed_max_timestamp: Mutex<Option<(i64, u64)>>,
    /// Whether the indexes passed the full sanity check (sealed segments check at first read).
    indexes_checked: AtomicBool,
    index_interval_bytes: u64,
}

impl LogSegment {
    /// Creates an empty active segment able to hold at least `min_bytes`.
    pub(crate) fn create(dir: &Path, base_offset: u64, config: &LogConfig, min_bytes: u64) -> Result<LogSegment> {
        let paths = SegmentPaths::new(dir, base_offset);
        let created = (|| {
            let log = MappedFile::create(&paths.log, config.segment_bytes.max(min_bytes))?;
            let offset_index = OffsetIndex::create(&paths.index, config.index_bytes)?;
            let time_index = TimeIndex::create(&paths.time_index, config.index_bytes)?;
            Ok((log, offset_index, time_index))
        })();
        let (log, offset_index, time_index) = created.inspect_err(|_| {
            // Leave nothing half-created behind: the next roll creates the same names again.
            for path in [&paths.log, &paths.index, &paths.time_index] {
                let _ = storage::remove_if_exists(path);
            }
        })?;
        let writer = SegmentWriter { planner: IndexPlanner::default(), first_batch_timestamp: None };
        Ok(LogSegment::assemble(base_offset, log, offset_index, time_index, base_offset, Some(writer), config))
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
        let entries = |p: &Path, len| Ok::<_, Error>(file_len(p)? / len as u64);
        let offset_index =
            OffsetIndex::open_writable(&paths.index, entries(&paths.index, OffsetEntry::LEN)?, config.index_bytes)?;
        let time_index = TimeIndex::open_writable(
            &paths.time_index,
            entries(&paths.time_index, TimeEntry::LEN)?,
            config.index_bytes,
        )?;
        let log = MappedFile::open_writable(&paths.log, log_len, config.segment_bytes)?;
        let mut segment = LogSegment::assemble(base_offset, log, offset_index, time_index, next_offset, None, config);
        *segment.writer.get_mut() = Some(segment.resume_writer()?);
        *segment.sealed.get_mut() = false;
        segment.indexes_checked = AtomicBool::new(true);
        Ok(segment)
    }

    /// A sealed segment of `log_len` bytes ending at `next_offset`; nothing is mapped until read.
    pub(crate) fn open_sealed(
        dir: &Path,
        base_offset: u64,
        log_len: u64,
        next_offset: u64,
        config: &LogConfig,
    ) -> Result<LogSegment> {
        let paths = SegmentPaths::new(dir, base_offset);
        let offset_index = OffsetIndex::open_sealed(&paths.index, file_len(&paths.index)? / OffsetEntry::LEN as u64);
        let time_index =
            TimeIndex::open_sealed(&paths.time_index, file_len(&paths.time_index)? / TimeEntry::LEN as u64);
        let log = MappedFile::open_sealed(&paths.log, log_len);
        Ok(LogSegment::assemble(base_offset, log, offset_index, time_index, next_offset, None, config))
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
        LogSegment {
            base_offset,
            log,
            offset_index,
            time_index,
            next_offset: AtomicU64::new(next_offset),
            sealed: Mutex::new(writer.is_none()),
            writer: Mutex::new(writer),
            sealed_max_timestamp: Mutex::new(None),
            indexes_checked: AtomicBool::new(false),
            index_interval_bytes: config.index_interval_bytes,
        }
    }

    /// Rebuilds the appender's state of a reopened active segment from its indexes and first batch.
    fn resume_writer(&self) -> Result<SegmentWriter> {
        let len = self.size();
        let last_entry_position = self.offset_index.last()?.map_or(0, |e| u64::from(e.position));
        let last_time = self.time_index.last()?;
        let planner = IndexPlanner {
            bytes_since_entry: len - last_entry_position,
            max_timestamp: last_time.map(|e| (e.timestamp_ms, self.base_offset + u64::from(e.relative_offset))),
            last_time_entry_ms: last_time.map_or(0, |e| e.timestamp_ms),
        };
        let first = if len == 0 { None } else { Some(self.header_at(0, len)?.max_timestamp) };
        Ok(SegmentWriter { planner, first_batch_timestamp: first })
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
    /// new segment (DESIGN.md §6).
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

    /// Makes room for `bytes` more bytes (an empty segment taking a batch larger than it). A failure
    /// here leaves nothing stored.
    pub(crate) fn reserve(&self, bytes: u64) -> Result<()> {
        let needed = self.size() + bytes;
        if needed > self.log.capacity() { self.log.grow(needed) } else { Ok(()) }
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
        let (offset_entry, time_entry) =
            writer.planner.on_batch(self.base_offset, position, header, self.index_interval_bytes);
        if let Some(entry) = offset_entry {
            self.offset_index.append(entry)?;
        }
        if let Some(entry) = time_entry {
            self.time_index.append(entry)?;
        }
        writer.first_batch_timestamp.get_or_insert(header.max_timestamp);
        self.next_offset.store(header.next_offset(), Ordering::Release);
        Ok(())
    }

    /// fdatasync of the `.log` (the indexes are derived: recovery rebuilds them from the recovery
    /// point on, so only sealing flushes them).
    pub(crate) fn flush(&self) -> Result<()> {
        let sealed = self.sealed.lock();
        if *sealed { Ok(()) } else { self.log.flush() }
    }

    /// Seals the segment: final time entry, flush, trim every file, drop the writable maps.
    pub(crate) fn seal(&self) -> Result<()> {
        let mut sealed = self.sealed.lock();
        if *sealed {
            return Ok(());
        }
        let Some(mut writer) = self.writer.lock().take() else {
            return Ok(());
        };
        if let Some(entry) = writer.planner.time_entry(self.base_offset) {
            self.time_index.append(entry)?;
        }
        *self.sealed_max_timestamp.lock() = writer.planner.max_timestamp;
        self.log.seal()?;
        self.offset_index.seal()?;
        self.time_index.seal()?;
        *sealed = true;
        Ok(())
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
        header.ok_or_else(|| {
            self.corrupt(
                position,
                Corruption::BadLength { length: BATCH_HEADER_LEN as u64, available: available as u64 },
            )
        })
    }

    fn corrupt(&self, position: u64, reason: Corruption) -> Error {
        Error::corrupt(self.log_path(), position, reason)
    }

    /// Walks batch headers from `start` over the published bytes, calling `visit` with each batch's
    /// position and header until it breaks. Checks each header (magic, length, expected offset).
    /// Returns where the walk stopped; `None` if the segment was retired.
    pub(crate) fn walk<B>(
        &self,
        start: BatchPos,
        mut visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
    ) -> Result<Option<WalkEnd<B>>> {
        let len = self.size();
        let remaining = len.saturating_sub(start.position) as usize;
        let walked = self.log.read_with(start.position, remaining, |bytes| {
            let mut at = start;
            loop {
                let rest = &bytes[(at.position - start.position) as usize..];
                if rest.is_empty() {
                    return Ok(WalkEnd { at, stop: None });
                }
                let header = BatchHeader::decode_from(rest)
                    .ok_or(Corruption::BadLength { length: BATCH_HEADER_LEN as u64, available: rest.len() as u64 });
                let header = header.map_err(|e| (at.position, e))?;
                if header.is_zero() {
                    return Ok(WalkEnd { at, stop: None });
                }
                header.check(rest.len() as u64, Some(at.expected)).map_err(|e| (at.position, e))?;
                if let ControlFlow::Break(b) = visit(at, &header, &rest[..header.size() as usize]) {
                    return Ok(WalkEnd { at, stop: Some(b) });
                }
                at = BatchPos { position: at.position + header.size(), expected: header.next_offset() };
            }
        })?;
        walked.map(|r| r.map_err(|(position, reason)| self.corrupt(position, reason))).transpose()
    }

    /// Where the data ends, walking from the last index entry and fully validating each batch on the
    /// way: the position after the last batch and the offset after it. `None` if retired.
    pub(crate) fn walk_to_end(&self) -> Result<Option<(u64, u64)>> {
        let base = self.base_offset;
        let start = self.offset_index.last()?.map_or(BatchPos { position: 0, expected: base }, |e| BatchPos {
            position: u64::from(e.position),
            expected: base + u64::from(e.relative_offset),
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
            None => Ok(end.map(|e| (e.at.position, e.at.expected))),
        }
    }

    /// Where the walk for `offset` may start: the greatest index entry at or before it.
    fn index_start(&self, offset: u64) -> Result<BatchPos> {
        self.ensure_indexes_checked()?;
        let entry = self.offset_index.lookup(self.base_offset, offset)?;
        Ok(entry.map_or(BatchPos { position: 0, expected: self.base_offset }, |(expected, position)| BatchPos {
            position,
            expected,
        }))
    }

    /// The batch holding `offset`, or the first batch after it (compaction leaves gaps). `None` if
    /// the segment has no batch at or after `offset` (or was retired).
    pub(crate) fn locate(&self, offset: u64) -> Result<Option<BatchPos>> {
        let start = self.index_start(offset)?;
        let end = self.walk(start, |at, header, _| {
            if header.last_offset() >= offset { ControlFlow::Break(at) } else { ControlFlow::Continue(()) }
        })?;
        Ok(end.and_then(|e| e.stop))
    }

    /// Copies whole batches from `start` into `out`, stopping before a batch at or past `upper`, at
    /// the end of the data, or before the copy exceeds `chunk_limit` bytes. A batch larger than the
    /// limit is copied alone if it fits `budget` or if `at_least_one`. Returns where the next batch
    /// is, or `None` if the segment was retired.
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
        let end = self.walk(start, |_, header, _| {
            let size = header.size();
            let fits = if taken == 0 { at_least_one || size <= budget } else { taken + size <= chunk_limit };
            if header.base_offset >= upper || !fits {
                return ControlFlow::Break(());
            }
            taken += size;
            ControlFlow::Continue(())
        })?;
        let Some(end) = end else { return Ok(None) };
        let copied = self.log.read_with(start.position, taken as usize, |bytes| out.extend_from_slice(bytes))?;
        Ok(copied.map(|()| CopyEnd { next: end.at, bytes: taken, end_of_data: end.stop.is_none() }))
    }

    /// The first offset in `[from, upper)` in this segment whose timestamp is ≥ `timestamp_ms`.
    pub(crate) fn offset_for_timestamp(&self, timestamp_ms: i64, from: u64, upper: u64) -> Result<Option<u64>> {
        self.ensure_indexes_checked()?;
        let indexed = self.time_index.lookup(self.base_offset, timestamp_ms)?.unwrap_or(self.base_offset);
        let Some(start) = self.locate(indexed.max(from))? else { return Ok(None) };
        let mut found: Option<Result<Option<u64>>> = None;
        self.walk(start, |at, header, bytes| {
            if header.base_offset >= upper {
                return ControlFlow::Break(());
            }
            if header.max_timestamp < timestamp_ms {
                return ControlFlow::Continue(());
            }
            found = Some(self.first_at_or_after(at, bytes, timestamp_ms, from..upper));
            ControlFlow::Break(())
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
        let mut cached = self.sealed_max_timestamp.lock();
        if let Some((ts, _)) = *cached {
            return Ok(ts);
        }
        self.ensure_indexes_checked()?;
        let ts = self.time_index.last_timestamp()?;
        *cached = Some((ts, self.base_offset));
        Ok(ts)
    }

    /// Runs the full index sanity check once (DESIGN.md §6); a failed check rebuilds the indexes.
    pub(crate) fn ensure_indexes_checked(&self) -> Result<()> {
        if self.indexes_checked.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Err(reason) = self.check_indexes() {
            tracing::warn!(segment = %self.log_path().display(), %reason, "index failed its sanity check; rebuilding");
            self.rebuild_sealed_indexes()?;
        }
        self.indexes_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// The full sanity check: both indexes well-formed, and the last offset entry pointing at a
    /// valid batch with that base offset.
    pub(crate) fn check_indexes(&self) -> Result<(), String> {
        let offsets = check_index(&self.offset_index)?;
        check_index(&self.time_index)?;
        let Some(last) = offsets.last() else { return Ok(()) };
        let position = u64::from(last.position);
        let expected = self.base_offset + u64::from(last.relative_offset);
        if position >= self.size() {
            return Err(format!("last entry points at {position}, past the data end {}", self.size()));
        }
        let available = (self.size() - position) as usize;
        let valid = self.log.read_with(position, available, |bytes| batch::validate(bytes, Some(expected)).map(|_| ()));
        match valid {
            Ok(Some(Ok(()))) | Ok(None) => Ok(()),
            Ok(Some(Err(e))) => Err(format!("batch at the last entry ({position}): {e}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Rebuilds both indexes of a sealed segment from its `.log` and swaps them in.
    fn rebuild_sealed_indexes(&self) -> Result<()> {
        let scanned =
            self.log.read_with(0, self.size() as usize, |b| scan(b, self.base_offset, self.index_interval_bytes))?;
        let Some(mut scanned) = scanned else { return Ok(()) };
        if let Some(reason) = scanned.invalid {
            return Err(self.corrupt(scanned.valid_len, reason));
        }
        scanned.plan.finish(self.base_offset);
        let entries = scanned.plan;
        let dir = self.log_path().parent().map(Path::to_path_buf).unwrap_or_default();
        let (index_len, time_len) = write_index_files(&dir, self.base_offset, &entries)?;
        self.offset_index.replace_sealed(index_len);
        self.time_index.replace_sealed(time_len);
        Ok(())
    }
}

/// Where a header walk stopped: at `at`, with the visitor's break value, or `None` at the end of data.
#[derive(Debug)]
pub(crate) struct WalkEnd<B> {
    pub at: BatchPos,
    pub stop: Option<B>,
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

fn check_index<E: IndexEntry>(index: &SparseIndex<E>) -> Result<Vec<E>, String> {
    let entries = index.all().map_err(|e| e.to_string())?;
    let used = check_entries(&entries)?;
    if used != entries.len() {
        return Err(format!("{} of {} entries are unused (index not trimmed)", entries.len() - used, entries.len()));
    }
    Ok(entries)
}

/// The index entries of a segment's valid batches, and where its valid data ends.
#[derive(Debug, Default)]
pub(crate) struct PlannedIndexes {
    pub offsets: Vec<OffsetEntry>,
    pub times: Vec<TimeEntry>,
    pub planner: IndexPlanner,
}

/// What a full-validation scan of a segment's bytes found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Index entries of the valid batches.
    pub plan: PlannedIndexes,
    /// Bytes of valid batches from position 0.
    pub valid_len: u64,
    /// The offset after the last valid batch (the segment base if none).
    pub next_offset: u64,
    /// Number of valid batches and records.
    pub batches: u64,
    pub records: u64,
    /// Bytes from the invalid batch to the last non-zero byte (set by the caller that cuts them).
    pub garbage_bytes: u64,
    /// Why the scan stopped before the end of `bytes`: an invalid batch (a zero header or the end
    /// of the bytes is a normal end, `None`).
    pub invalid: Option<Corruption>,
}

/// Validates batch after batch (DESIGN.md §4) from the start of a segment's bytes, planning index
/// entries as it goes, and stops at the first invalid batch, a zero header or the end.
pub(crate) fn scan(bytes: &[u8], base_offset: u64, interval: u64) -> Scan {
    let mut scan = Scan { next_offset: base_offset, ..Scan::default() };
    loop {
        let rest = &bytes[scan.valid_len as usize..];
        if rest.is_empty() || BatchHeader::decode_from(rest).is_some_and(|h| h.is_zero()) {
            return scan;
        }
        match batch::validate(rest, Some(scan.next_offset)) {
            Err(e) => {
                scan.invalid = Some(e);
                return scan;
            }
            Ok(summary) => {
                let header = summary.header;
                scan.plan.add(base_offset, scan.valid_len, &header, interval);
                scan.valid_len += header.size();
                scan.next_offset = header.next_offset();
                scan.batches += 1;
                scan.records += u64::from(header.record_count);
            }
        }
    }
}

impl PlannedIndexes {
    pub(crate) fn add(&mut self, base: u64, position: u64, header: &BatchHeader, interval: u64) {
        let (offset_entry, time_entry) = self.planner.on_batch(base, position, header, interval);
        self.offsets.extend(offset_entry);
        self.times.extend(time_entry);
    }

    /// Adds the final time entry of a sealed segment.
    pub(crate) fn finish(&mut self, base: u64) {
        let last = self.planner.time_entry(base);
        self.times.extend(last);
    }
}

/// Writes planned index files atomically; returns their lengths.
pub(crate) fn write_index_files(dir: &Path, base_offset: u64, plan: &PlannedIndexes) -> Result<(u64, u64)> {
    let index_bytes = encode_entries(&plan.offsets);
    let time_bytes = encode_entries(&plan.times);
    storage::write_atomically(dir, &file_name(base_offset, INDEX_SUFFIX), &index_bytes)?;
    storage::write_atomically(dir, &file_name(base_offset, TIME_INDEX_SUFFIX), &time_bytes)?;
    Ok((index_bytes.len() as u64, time_bytes.len() as u64))
}

fn encode_entries<E: IndexEntry>(entries: &[E]) -> Vec<u8> {
    let mut bytes = vec![0u8; entries.len() * E::LEN];
    for (entry, out) in entries.iter().zip(bytes.chunks_exact_mut(E::LEN)) {
        entry.encode_into(out);
    }
    bytes
}

fn file_len(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path).map_err(Error::io("stat", path))?.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{BatchEncoder, Record};

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

    #[test]
    fn the_planner_never_indexes_position_zero() {
        let mut planner = IndexPlanner::default();
        let header = BatchHeader {
            base_offset: 0,
            batch_length: 100,
            magic: 1,
            crc: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 5,
            max_timestamp: 5,
            record_count: 1,
        };
        assert_eq!(planner.on_batch(0, 0, &header, 0), (None, None), "position 0 is implied");
        let next = BatchHeader { base_offset: 1, max_timestamp: 9, ..header };
        let (offset_entry, time_entry) = planner.on_batch(0, 112, &next, 0);
        assert_eq!(offset_entry, Some(OffsetEntry { relative_offset: 1, position: 112 }));
        assert_eq!(time_entry, Some(TimeEntry { timestamp_ms: 9, relative_offset: 1 }));
    }
}
