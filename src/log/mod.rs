//! The Kafka-style `Log`: a skip-list map of segments, one appender at a time, many readers that
//! never block it (DESIGN.md §1–§9).

pub(crate) mod batch;
mod checkpoint;
pub(crate) mod index;
mod index_plan;
pub(crate) mod load;
mod offset_index;
mod reader;
mod recover;
pub(crate) mod segment;
mod swap;
mod time_index;
mod varint;
pub(crate) mod walk;

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_skiplist::SkipMap;
use fs2::FileExt;
use parking_lot::Mutex;

pub use batch::{BatchHeader, Header, Record, encode_batch};
pub use checkpoint::{Checkpoint, CleanShutdown};
pub use load::RecoveryReport;
pub use offset_index::OffsetEntry;
pub use reader::{LogReader, RecordView};
pub use time_index::TimeEntry;

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::{ATTR_CREATE_TIME, LOCK_FILE};
use crate::storage;
use batch::BatchEncoder;
use segment::{Located, LogSegment};
use walk::BatchPos;

/// What an append stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// Largest record timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// The log's clock when the batch was appended (the timestamp of append-time records).
    pub append_time_ms: i64,
}

/// A durable, segmented, append-only log of records in one directory.
///
/// One appender at a time (appends are serialised internally), any number of concurrent readers;
/// `Log` is `Send + Sync`, so share it with an `Arc`.
///
/// ```
/// use strata_log::{Log, LogConfig, Record};
/// # fn main() -> strata_log::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let log = Log::open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() })?;
/// let info = log.append(&[Record::new(b"hello"), Record::new(b"world").with_key(b"k")])?;
/// assert_eq!((info.base_offset, info.last_offset), (0, 1));
/// log.flush()?; // durable from here on
///
/// let values: Vec<Vec<u8>> = log
///     .read(0, 1 << 20)?
///     .map(|r| r.map(|record| record.value().unwrap_or_default().to_vec()))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(values, [b"hello".to_vec(), b"world".to_vec()]);
/// log.close()?;
/// # Ok(())
/// # }
/// ```
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: SkipMap<u64, Arc<LogSegment>>,
    appender: Mutex<Appender>,
    /// The offset the next record gets (published after its batch is stored).
    next_offset: AtomicU64,
    /// Readers see offsets below this.
    visible_end: AtomicU64,
    /// Every offset below this is fsynced, data and directory entries.
    durable_offset: AtomicU64,
    start_offset: AtomicU64,
    /// Segments rolled away from but not yet sealed, oldest first.
    rolled: Mutex<Vec<Arc<LogSegment>>>,
    /// Held while sealing rolled segments, so when one `seal_rolled` returns, every segment rolled
    /// before it was sealed (by it or by the call it waited for).
    seal_lock: Mutex<()>,
    /// The checkpoint as last written; its lock serialises checkpoint writes.
    checkpoint: Mutex<Checkpoint>,
    /// A segment was created since the directory was last fsynced. `dir_sync` serialises the fsync
    /// so nobody sees "clean" while another thread's directory fsync is still running.
    dir_dirty: AtomicBool,
    dir_sync: Mutex<()>,
    poisoned: AtomicBool,
    closed: AtomicBool,
    report: RecoveryReport,
    /// Opened with [`Log::open_read_only`]: no lock, no writes.
    read_only: bool,
    /// Holds the directory's exclusive lock until the log is dropped (`None` when read-only).
    _lock: Option<File>,
}

/// State only the appender uses, under the append lock.
struct Appender {
    active: Arc<LogSegment>,
    encoder: BatchEncoder,
    timestamps: Vec<i64>,
    /// Append time never goes backwards within an open log.
    clock_floor_ms: i64,
}

impl Appender {
    fn now_ms(&mut self, config: &LogConfig) -> i64 {
        self.clock_floor_ms = self.clock_floor_ms.max(config.clock.now_ms());
        self.clock_floor_ms
    }
}

impl Log {
    /// Opens the log in `dir`, creating the directory (and fsyncing its parent) if needed. Takes the
    /// directory lock, then loads and if necessary recovers the files (DESIGN.md §7); see
    /// [`Log::recovery_report`] for what that did.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        prepare_dir(&dir)?;
        let lock = lock_dir(&dir)?;
        let loaded = load::load(&dir, &config)?;
        tracing::info!(dir = %dir.display(), report = ?loaded.report, "log opened");
        Log::assemble(dir, config, loaded, Some(lock))
    }

    /// Opens the log in `dir` for reading only, as `strata dump`, `verify` and `consume` do: no lock
    /// is taken and nothing is changed, files are read with `pread` (never mapped, so a writer in
    /// another process trimming a file cannot crash this one), and a torn tail at the end of the
    /// last segment is treated as the end of the log (on a live log it is a batch being written).
    /// Appends and flushes return `Error::ReadOnly`.
    pub fn open_read_only(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        match fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(Error::NotADirectory { path: dir }),
            Err(e) => return Err(Error::io("open", &dir)(e)),
        }
        let loaded = load::load_read_only(&dir, &config)?;
        Log::assemble(dir, config, loaded, None)
    }

    fn assemble(dir: PathBuf, config: LogConfig, loaded: load::Loaded, lock: Option<File>) -> Result<Log> {
        let report = loaded.report;
        let segments = SkipMap::new();
        let mut last = None;
        for segment in loaded.segments {
            let segment = Arc::new(segment);
            segments.insert(segment.base_offset(), Arc::clone(&segment));
            last = Some(segment);
        }
        let active = last.ok_or_else(|| Error::io("load", &dir)(ErrorKind::NotFound.into()))?;
        let next = loaded.next_offset;
        let checkpoint = Checkpoint { log_start_offset: loaded.log_start_offset, recovery_point: next };
        Ok(Log {
            dir,
            segments,
            appender: Mutex::new(Appender {
                active,
                encoder: BatchEncoder::default(),
                timestamps: Vec::new(),
                clock_floor_ms: 0,
            }),
            next_offset: AtomicU64::new(next),
            visible_end: AtomicU64::new(next),
            durable_offset: AtomicU64::new(next),
            start_offset: AtomicU64::new(loaded.log_start_offset),
            rolled: Mutex::new(Vec::new()),
            seal_lock: Mutex::new(()),
            checkpoint: Mutex::new(checkpoint),
            dir_dirty: AtomicBool::new(false),
            dir_sync: Mutex::new(()),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            report,
            config,
            read_only: lock.is_none(),
            _lock: lock,
        })
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// What opening the log found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The first readable offset.
    pub fn start_offset(&self) -> u64 {
        self.start_offset.load(Ordering::Acquire)
    }

    /// The offset the next appended record will get.
    pub fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Acquire)
    }

    /// Every offset below this is durable (fsynced).
    pub fn durable_offset(&self) -> u64 {
        self.durable_offset.load(Ordering::Acquire)
    }

    /// Readers see offsets below this.
    pub fn visible_end(&self) -> u64 {
        self.visible_end.load(Ordering::Acquire)
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Appends `records` as one batch. Records without a timestamp get the log's append time; a
    /// caller timestamp must be within `max_timestamp_skew_ms` of the log's clock. The records are
    /// stored (visible to readers) when this returns, and durable after the next [`Log::flush`].
    pub fn append(&self, records: &[Record<'_>]) -> Result<AppendInfo> {
        if records.is_empty() {
            return Err(Error::EmptyBatch);
        }
        let mut rolled = None;
        let result = self.append_locked(records, &mut rolled);
        self.finish_roll(rolled)?;
        result
    }

    fn append_locked(&self, records: &[Record<'_>], rolled: &mut Option<u64>) -> Result<AppendInfo> {
        let mut app = self.appender.lock();
        self.check_writable()?;
        let now = app.now_ms(&self.config);
        let Appender { active, encoder, timestamps, .. } = &mut *app;
        let create_time = self.fill_timestamps(records, now, timestamps)?;
        let size = BatchEncoder::encoded_len(records, |i| timestamps[i] - timestamps[0]) as u64;
        if size > self.config.max_batch_bytes {
            return Err(Error::BatchTooLarge { size, max: self.config.max_batch_bytes });
        }
        let base = self.next_offset.load(Ordering::Relaxed);
        let attributes = if create_time { ATTR_CREATE_TIME } else { 0 };
        let bytes = encoder.encode(base, records, timestamps, attributes);
        self.store(active, bytes, now, rolled)
    }

    /// Appends a batch a producer encoded (DESIGN.md §4). It is checked as stored data is (CRC,
    /// structure), must not be a cleaner batch or compressed, its max_timestamp must match its
    /// records, and its timestamps must be within `max_timestamp_skew_ms` of the log's clock. The
    /// log assigns its base offset; the CRC does not cover it, so nothing is re-hashed.
    pub fn append_batch(&self, batch: &[u8]) -> Result<AppendInfo> {
        let size = batch.len() as u64;
        if size > self.config.max_batch_bytes {
            return Err(Error::BatchTooLarge { size, max: self.config.max_batch_bytes });
        }
        let invalid = |reason| Error::InvalidBatch { reason };
        let summary = batch::validate(batch, None).map_err(invalid)?;
        let header = summary.header;
        if header.size() != size {
            return Err(invalid(Corruption::BadLength { length: header.size(), available: size }));
        }
        if header.is_cleaner() {
            return Err(invalid(Corruption::CleanerBatch));
        }
        let (min_ts, max_ts) = summary.timestamps.ok_or(invalid(Corruption::BadOffsetDeltas("no records")))?;
        if max_ts != header.max_timestamp {
            return Err(invalid(Corruption::BadMaxTimestamp { stored: header.max_timestamp, computed: max_ts }));
        }
        let mut rolled = None;
        let result = (|| {
            let mut app = self.appender.lock();
            self.check_writable()?;
            let now = app.now_ms(&self.config);
            self.check_timestamp(min_ts, now)?;
            self.check_timestamp(max_ts, now)?;
            let base = self.next_offset.load(Ordering::Relaxed);
            let Appender { active, encoder, .. } = &mut *app;
            let bytes = encoder.restamp(batch, base);
            self.store(active, bytes, now, &mut rolled)
        })();
        self.finish_roll(rolled)?;
        result
    }

    /// Timestamps of each record into `out`; whether any was the caller's (create time).
    fn fill_timestamps(&self, records: &[Record<'_>], now: i64, out: &mut Vec<i64>) -> Result<bool> {
        out.clear();
        let mut create_time = false;
        for record in records {
            let ts = match record.timestamp_ms {
                None => now,
                Some(ts) => {
                    self.check_timestamp(ts, now)?;
                    create_time = true;
                    ts
                }
            };
            out.push(ts);
        }
        Ok(create_time)
    }

    fn check_timestamp(&self, timestamp_ms: i64, now_ms: i64) -> Result<()> {
        let max_skew_ms = self.config.max_timestamp_skew_ms;
        if timestamp_ms < 0 || timestamp_ms.abs_diff(now_ms) > max_skew_ms {
            return Err(Error::InvalidTimestamp { timestamp_ms, now_ms, max_skew_ms });
        }
        Ok(())
    }

    /// Stores an encoded batch stamped with the next offset, rolling first if needed. On a roll the
    /// new segment's base goes to `rolled`, for [`Log::finish_roll`] after the lock is released.
    fn store(
        &self,
        active: &mut Arc<LogSegment>,
        bytes: &[u8],
        now_ms: i64,
        rolled: &mut Option<u64>,
    ) -> Result<AppendInfo> {
        let header = BatchHeader::decode_from(bytes).ok_or(Error::EmptyBatch)?;
        let size = header.size();
        let base = header.base_offset;
        let next = base.checked_add(u64::from(header.last_offset_delta) + 1);
        let next = next.ok_or(Error::InvalidBatch { reason: Corruption::BadOffsetDeltas("offsets overflow u64") })?;
        if active.should_roll(size, header.last_offset(), now_ms, &self.config) {
            let segment = Arc::new(LogSegment::create(&self.dir, base, &self.config, size)?);
            self.dir_dirty.store(true, Ordering::Release);
            self.segments.insert(base, Arc::clone(&segment));
            self.rolled.lock().push(std::mem::replace(active, segment));
            *rolled = Some(base);
            crash_point!("after_roll");
        }
        active.reserve(size)?;
        // From here a failure may leave part of the batch stored: the log is poisoned.
        active.append(bytes, &header).map_err(|e| self.poison(e))?;
        self.next_offset.store(next, Ordering::Release);
        self.visible_end.store(next, Ordering::Release);
        Ok(AppendInfo {
            base_offset: base,
            last_offset: next - 1,
            max_timestamp_ms: header.max_timestamp,
            append_time_ms: now_ms,
        })
    }

    /// After a roll to `new_base`, outside the append lock: seals every segment below it (fsync,
    /// trim, final time entry), fsyncs the directory, advances the durable offset and writes the
    /// checkpoint.
    fn finish_roll(&self, new_base: Option<u64>) -> Result<()> {
        let Some(new_base) = new_base else { return Ok(()) };
        self.seal_rolled()?;
        crash_point!("after_seal");
        self.sync_dir_if_dirty()?;
        self.advance_durable(new_base)?;
        self.write_checkpoint()
    }

    /// Moves the durable offset to `to` — unless a failure poisoned the log meanwhile (another
    /// thread's fsync may have failed over data this caller's sync did not cover).
    fn advance_durable(&self, to: u64) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        self.durable_offset.fetch_max(to, Ordering::AcqRel);
        Ok(())
    }

    /// Seals every segment rolled away from so far, oldest first.
    fn seal_rolled(&self) -> Result<()> {
        let _sealing = self.seal_lock.lock();
        loop {
            let next = {
                let rolled = self.rolled.lock();
                rolled.first().cloned()
            };
            let Some(segment) = next else { return Ok(()) };
            segment.seal().map_err(|e| self.poison(e))?;
            self.rolled.lock().remove(0);
        }
    }

    /// Base offset of the segment holding the durable offset: nothing below it needs a flush.
    fn durable_floor(&self) -> u64 {
        let durable = self.durable_offset();
        self.segments.upper_bound(Bound::Included(&durable)).map_or(0, |e| *e.key())
    }

    /// Makes every record appended so far durable: fdatasync of each segment written since the
    /// last flush, and of the directory if a segment was created.
    pub fn flush(&self) -> Result<()> {
        self.check_writable()?;
        self.flush_all()?;
        // An explicit flush also moves the recovery point, so what it made durable is protected at
        // the next open: damage there is reported, never cut as a torn tail.
        self.write_checkpoint()
    }

    fn flush_all(&self) -> Result<()> {
        let target = self.next_offset();
        for entry in self.segments.range(self.durable_floor()..) {
            entry.value().flush().map_err(|e| self.poison(e))?;
        }
        self.sync_dir_if_dirty()?;
        self.advance_durable(target)
    }

    fn sync_dir_if_dirty(&self) -> Result<()> {
        let _serialised = self.dir_sync.lock();
        if self.dir_dirty.swap(false, Ordering::AcqRel)
            && let Err(e) = storage::sync_dir(&self.dir)
        {
            self.dir_dirty.store(true, Ordering::Release);
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// Writes the checkpoint with the durable offset as recovery point (never moving it back).
    fn write_checkpoint(&self) -> Result<()> {
        let mut checkpoint = self.checkpoint.lock();
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        let next = Checkpoint {
            log_start_offset: self.start_offset(),
            recovery_point: checkpoint.recovery_point.max(self.durable_offset()),
        };
        next.write(&self.dir).map_err(|e| self.poison(e))?;
        *checkpoint = next;
        Ok(())
    }

    /// Reads records from `offset` on: whole batches, at most `max_bytes` of them, except that at
    /// least one batch is always returned. Every batch is verified (CRC, structure, offsets) before
    /// any of its records is returned. `offset` must be in `[start_offset, visible end)`.
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<LogReader<'_>> {
        let start = self.start_offset();
        let end = self.visible_end();
        if offset < start || offset >= end {
            return Err(Error::OffsetOutOfRange { requested: offset, start, next: end });
        }
        Ok(LogReader::new(self, offset, end, max_bytes as u64))
    }

    /// The segment and batch where a read of `offset` starts, below `upper`. The segment holding
    /// `offset` must have a batch at or after it: if its data ends first, records below `upper` are
    /// missing and that is `Error::Corrupt`, never a silent skip to the next segment.
    pub(crate) fn locate(&self, offset: u64, upper: u64) -> Result<Option<(Arc<LogSegment>, BatchPos)>> {
        // A segment deleted under us by retention is retried once the map no longer holds it.
        for _ in 0..16 {
            let start = self.start_offset();
            let entry = self.segments.upper_bound(Bound::Included(&offset)).filter(|_| offset >= start);
            let Some(entry) = entry else {
                return Err(Error::OffsetOutOfRange { requested: offset, start, next: upper });
            };
            let segment = entry.value();
            match segment.locate(offset)? {
                Located::At(at) => return Ok(Some((Arc::clone(segment), at))),
                Located::Retired => continue,
                Located::End(end) if end.expected >= upper => return Ok(None),
                Located::End(end) => {
                    let reason = Corruption::DataEndsEarly { end: end.expected, upper };
                    return Err(segment.corrupt(end.position, reason));
                }
            }
        }
        Err(Error::OffsetOutOfRange { requested: offset, start: self.start_offset(), next: upper })
    }

    /// The first visible offset whose record timestamp is ≥ `timestamp_ms`, if any.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<u64>> {
        let start = self.start_offset();
        let upper = self.visible_end();
        for entry in self.segments.iter() {
            let segment = entry.value();
            if segment.base_offset() >= upper {
                break;
            }
            if segment.next_offset() <= start || segment.max_timestamp()? < timestamp_ms {
                continue;
            }
            if let Some(offset) = segment.offset_for_timestamp(timestamp_ms, start, upper)? {
                return Ok(Some(offset));
            }
        }
        Ok(None)
    }

    /// Closes the log cleanly: flushes everything, trims the active segment, writes the checkpoint
    /// and, last, the clean-shutdown marker, so the next open does not scan. Dropping a `Log` does
    /// the same but can only log a failure.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) || self.read_only {
            return Ok(());
        }
        let app = self.appender.lock();
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        self.flush_all()?;
        self.seal_rolled()?;
        app.active.seal().map_err(|e| self.poison(e))?;
        self.write_checkpoint()?;
        let marker = CleanShutdown {
            next_offset: self.next_offset(),
            active_base: app.active.base_offset(),
            active_len: app.active.size() as u32,
        };
        crash_point!("before_clean_marker");
        marker.write(&self.dir).map_err(|e| self.poison(e))?;
        tracing::info!(dir = %self.dir.display(), next_offset = marker.next_offset, "log closed cleanly");
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnly)
        } else if self.poisoned.load(Ordering::Acquire) {
            Err(Error::Poisoned)
        } else if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Marks the log unusable for writes after a failure that may have left partial state.
    fn poison(&self, error: Error) -> Error {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %self.dir.display(), %error, "log poisoned: reopen it to recover");
        }
        error
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            tracing::error!(dir = %self.dir.display(), %error, "closing the log on drop failed");
        }
        // Release every map and descriptor now, not whenever the skip map's epoch reclamation
        // gets to them.
        for entry in self.segments.iter() {
            entry.value().retire();
        }
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("start_offset", &self.start_offset())
            .field("next_offset", &self.next_offset())
            .field("segments", &self.segments.len())
            .finish()
    }
}

/// Creates the log directory if needed, fsyncing each parent whose entries changed.
fn prepare_dir(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) if e.kind() == ErrorKind::NotADirectory => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) => return Err(Error::io("stat", dir)(e)),
    }
    let mut missing = vec![dir];
    while let Some(parent) =
        missing.last().and_then(|d| d.parent()).filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        missing.push(parent);
    }
    fs::create_dir_all(dir).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory => Error::NotADirectory { path: dir.to_path_buf() },
        _ => Error::io("create directory", dir)(e),
    })?;
    for created in missing.iter().rev() {
        let parent = created.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        storage::sync_dir(parent)?;
    }
    Ok(())
}

/// Takes the directory's exclusive lock (held as long as the returned file is open).
pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(Error::io("create lock file", &path))?;
    match file.try_lock_exclusive() {
        Ok(()) => Ok(file),
        Err(e)
            if e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == fs2::lock_contended_error().raw_os_error() =>
        {
            Err(Error::Locked { path })
        }
        Err(e) => Err(Error::io("lock", &path)(e)),
    }
}
