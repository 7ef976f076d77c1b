//! The Kafka-style `Log`: a skip-list map of segments, one appender at a time, many readers that
//! never block it, a syncer thread for durability (docs/DESIGN.md §1–§9).
//!
//! # Lock order
//!
//! Every lock of the log, in the one order a thread may take them (a thread holding lock *n* takes
//! only locks numbered above *n*). The state they guard is in `state.rs` and the files it names.
//!
//! 1. `CleanerState::pass`: one compaction pass at a time, held for the whole pass.
//! 2. the append lock (`LogState::appender`): appends, truncation, reset, close; retention and
//!    the cleaner take it briefly to read the active segment.
//! 3. the structure lock (`Segments::lock`): every change of the segment map but a roll
//!    (truncation, reset, retention, the cleaner's swap, a read-only view's refresh).
//! 4. the sync rounds (`Durability::try_take_rounds` / `hold_rounds`, a flag used as a lock): one
//!    round at a time; truncation and reset hold them so no round reads an old next offset.
//! 5. the checkpoint lock (`CheckpointWriter`): serialises checkpoint writes and the offset moves
//!    they publish.
//! 6. the seal lock (`Segments::lock_sealing`): sealing rolled segments, oldest first; removal
//!    (`remove_whole`, under the structure lock) takes it too, so no seal races a removal.
//! 7. the preallocator's lock (a roll takes the preallocated segment under the append lock).
//! 8. a segment's own locks (its data file's and indexes' read/write locks).
//! 9. the directory fsync (`Durability::sync_dir_if_dirty`).
//! 10. leaves, which take nothing else: the rolled list, the truncation cuts, the syncer's state
//!     (`Durability::sync`, which with its condition variables wakes waiters), a read-only view's
//!     live tail, the directory-lock slot, the event thread's queue, the cleaner's sleep, the
//!     durability callbacks' queue (which reads the cuts).
//!
//! Durability callbacks run holding none of these (only their own run lock, `callbacks.rs`):
//! they are run where the thread holds no lock of the log, so a callback may call the log.
//!
//! **Readers** take none of these while they read, only a segment's read lock (8) around each
//! copy. When a lookup finds a segment retired, or data ending early, it takes the append lock (2)
//! and drops it at once, holding nothing: a barrier that waits for a truncation in progress to put
//! its new segment in the map (truncation holds the append lock until then). A cursor whose
//! position is outside the log takes the same barrier before it says so, so that a truncation in
//! progress is reported as one.

mod append;
mod appender;
mod arrivals;
pub(crate) mod batch;
mod callbacks;
mod checkpoint;
mod checkpoint_writer;
mod cleaner;
mod cursor;
mod durability;
mod gather;
mod group_commit;
mod in_place;
pub(crate) mod index;
mod index_plan;
mod locate;
pub(crate) mod meta;
mod metrics;
mod offset_index;
mod offsets;
pub(crate) mod open;
mod positions;
mod prealloc;
mod reader;
mod retention;
pub(crate) mod segment;
mod segments;
mod state;
mod syncer;
mod time_index;
mod truncate;
pub(crate) mod varint;
pub(crate) mod walk;
mod zero_ahead;

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use append::AppendInfo;
pub use batch::{BatchBuffer, BatchBuilder, Header, Record};
pub use checkpoint::CleanShutdown;
pub use cleaner::CompactionReport;
pub use cursor::{Cursor, CursorInterrupt};
pub use in_place::{BatchRef, RecordRef, RecordRefs};
pub use metrics::LogMetrics;
pub use open::report::RecoveryReport;
pub use reader::{BatchView, Batches, LogReader, RecordView};
// The on-disk structs, for `crate::internals` only (not in the API).
#[cfg(feature = "internals")]
pub(crate) use cleaner::checkpoint::decode as cleaner_checkpoint_decode;
#[cfg(feature = "internals")]
pub use {batch::BatchHeader, checkpoint::Checkpoint};
#[cfg(feature = "internals")]
pub use {offset_index::OffsetEntry, time_index::TimeEntry};

use crate::config::{FlushPolicy, LogConfig};
use crate::error::{Error, Result};
use crate::events::EventManager;
use crate::failpoint::crash_point;
use crate::storage;
use state::LogState;

/// A durability wait without a deadline, for [`Log::wait_batch_durable`] (which takes one): as
/// `Log::append` waits, until the batch is durable or the log fails. For the layers that append
/// under a lock of their own and wait after releasing it (the channel's commit, the store's put).
pub(crate) const FOREVER: Duration = Duration::from_secs(u32::MAX as u64);

/// A durable, segmented, append-only log of records in one directory.
///
/// One appender at a time (appends are serialised internally), any number of concurrent readers;
/// `Log` is `Send + Sync`, so share it with an `Arc`. Durability follows
/// [`LogConfig::flush_policy`]: by default (`FlushPolicy::Always`) `append` returns once its records
/// are fsynced, and concurrent appenders share each fsync.
///
/// ```
/// use strata_log::{Log, LogConfig, Record};
/// # fn main() -> strata_log::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let log = Log::open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() })?;
/// let info = log.append(&[Record::new(b"hello"), Record::new(b"world").with_key(b"k")])?;
/// assert_eq!((info.base_offset, info.last_offset), (0, 1));
/// assert_eq!(log.durable_offset(), 2); // FlushPolicy::Always: durable when append returns
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
    shared: Arc<LogState>,
    /// The syncer thread (none for a read-only log).
    threads: Vec<JoinHandle<()>>,
    /// Short background work: preallocation, checkpoints, retention, delayed deletion.
    events: Option<EventManager>,
}

impl Log {
    /// Opens the log in `dir`, creating the directory (and fsyncing its parent) if needed. Takes the
    /// directory lock, then loads and if necessary recovers the files (after a crash a torn tail
    /// is cut; damage to acknowledged records is `Error::Corrupt` under the default
    /// `RecoveryMode::Strict`); see [`Log::recovery_report`] for what that did. Starts the syncer
    /// thread (and the preallocator).
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        config.validate()?;
        let config = config.budget_or_default();
        let dir = dir.as_ref().to_path_buf();
        // The format guard, before anything is created or touched (not even the lock file): a
        // directory of a newer format is left exactly as it is.
        if dir.is_dir() {
            meta::check(&dir)?;
        }
        storage::prepare_dir(&dir)?;
        let lock = storage::lock_dir(&dir)?;
        // Again under the lock: a writer may have recorded something else since.
        let meta = meta::check(&dir)?;
        let loaded = open::load(&dir, &config)?;
        meta::record(&dir, meta, &config)?;
        let report = &loaded.report;
        tracing::info!(
            dir = %dir.display(),
            clean = report.clean_shutdown,
            segments = report.segments_loaded,
            scanned = report.segments_scanned,
            indexes_rebuilt = report.indexes_rebuilt,
            bytes_truncated = report.bytes_truncated,
            acknowledged_records_lost = report.acknowledged_records_lost,
            duration_us = report.duration_us,
            "log opened"
        );
        let events = EventManager::start("strata-events")?;
        let shared = Arc::new(LogState::new(dir, config, loaded, Some(lock), Some(events.handle()))?);
        let cleaned_up_to = cleaner::checkpoint::read(&shared.dir)?.min(shared.offsets.next());
        shared.cleaner.cleaned_up_to.store(cleaned_up_to, std::sync::atomic::Ordering::Release);
        let threads = start_threads(&shared)?;
        schedule_background(&shared);
        Ok(Log { shared, threads, events: Some(events) })
    }

    /// Opens the log in `dir` for reading only, as `strata dump`, `verify` and `consume` do: no lock
    /// is taken and nothing is changed, files are read with `pread` (never mapped, so a writer in
    /// another process trimming a file cannot crash this one), and a torn tail at the end of the
    /// last segment is treated as the end of the log (on a live log it is a batch being written).
    /// Appends and flushes return `Error::ReadOnly`.
    pub fn open_read_only(dir: impl AsRef<Path>, config: LogConfig) -> Result<Log> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        storage::require_dir(&dir)?;
        meta::check(&dir)?;
        let loaded = open::load_read_only(&dir, &config)?;
        let config = LogConfig { flush_policy: FlushPolicy::Never, ..config };
        let shared = Arc::new(LogState::new(dir, config, loaded, None, None)?);
        Ok(Log { shared, threads: Vec::new(), events: None })
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The configuration the log was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }

    /// What opening the log found and repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.shared.report
    }

    /// The first readable offset.
    pub fn start_offset(&self) -> u64 {
        self.shared.offsets.start()
    }

    /// The offset the next appended record will get.
    pub fn next_offset(&self) -> u64 {
        self.shared.offsets.next()
    }

    /// Every offset below this is durable (fsynced, with the directory entries of its segments).
    pub fn durable_offset(&self) -> u64 {
        self.shared.offsets.durable()
    }

    /// Readers see offsets below this: the durable offset under `FlushPolicy::Always` (nothing a
    /// reader saw can vanish in a power cut), the next offset under the other policies.
    pub fn visible_end(&self) -> u64 {
        self.shared.offsets.visible()
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.shared.segments.len()
    }

    /// A snapshot of the log's offsets and counters (appends, fsyncs, appends per sync round, fsync
    /// latency, rolls, checkpoints, what recovery did). Cheap: atomic loads.
    pub fn metrics(&self) -> LogMetrics {
        self.shared.metrics()
    }

    /// The log's background event thread: queue length, queue and processing times, failures,
    /// idle ratio (`None` for a read-only log, which has none).
    pub fn event_metrics(&self) -> Option<crate::events::EventMetrics> {
        self.events.as_ref().map(EventManager::metrics)
    }

    /// Appends `records` as one batch and returns once they are as durable as the flush policy
    /// promises: fsynced under `Always` (the default), stored under the others. Records without a
    /// timestamp get the log's append time; a caller timestamp must be within
    /// `max_timestamp_skew_ms` of the log's clock.
    ///
    /// An error after the batch was stored (a failed fsync) poisons the log, and the batch's fate
    /// is unknown until the log is reopened; an error before (bad input, a failed roll, a full
    /// disk) leaves the log usable.
    pub fn append(&self, records: &[Record<'_>]) -> Result<AppendInfo> {
        let stored = self.settle(self.shared.append_records(records))?;
        self.after_store(stored)
    }

    /// Appends `records` and returns as soon as they are stored, without waiting for durability;
    /// pair it with [`Log::wait_durable`]. A layer that numbers records under its own lock (the
    /// message store's queue offsets) appends under it and waits after releasing it, so concurrent
    /// callers still share one fsync.
    pub fn append_nowait(&self, records: &[Record<'_>]) -> Result<AppendInfo> {
        let stored = self.settle(self.shared.append_records(records))?;
        Ok(self.after_store_nowait(stored))
    }

    /// Appends a batch a producer encoded (with a [`BatchBuilder`], or read whole from another log
    /// as [`BatchRef::as_bytes`]), with the same durability as [`Log::append`]. It is checked as
    /// stored data is (CRC, structure), must not be a cleaner batch or compressed, its
    /// max_timestamp must match its records, and its timestamps must be within
    /// `max_timestamp_skew_ms` of the log's clock. The log assigns its base offset; the CRC
    /// does not cover it, so nothing is re-hashed.
    pub fn append_batch(&self, batch: &[u8]) -> Result<AppendInfo> {
        let stored = self.settle(self.shared.append_encoded(batch))?;
        self.after_store(stored)
    }

    /// [`Log::append_batch`] without waiting for durability, like [`Log::append_nowait`].
    pub fn append_batch_nowait(&self, batch: &[u8]) -> Result<AppendInfo> {
        let stored = self.settle(self.shared.append_encoded(batch))?;
        Ok(self.after_store_nowait(stored))
    }

    /// Hands a stored batch to the syncer without waiting: a roll to seal, and data to sync when
    /// the policy calls for it — under `Always` now (no appender waits to lead the round), under
    /// `EveryInterval` once `messages` records wait (the syncer's timer covers the rest: waking it
    /// at every append would cost a context switch each).
    fn after_store_nowait(&self, stored: append::Stored) -> AppendInfo {
        if stored.rolled {
            self.shared.durability.request_seal();
        }
        self.request_sync_if_due();
        stored.info
    }

    /// Asks the syncer for a round if the flush policy calls for one after an append.
    fn request_sync_if_due(&self) {
        let due = match self.shared.config.flush_policy {
            FlushPolicy::Always => true,
            FlushPolicy::EveryInterval { messages, .. } => {
                self.shared.offsets.next().saturating_sub(self.shared.offsets.durable()) >= messages
            }
            FlushPolicy::Never => false,
        };
        if due {
            self.shared.durability.request_sync();
        }
    }

    /// Waits without a deadline until the batch `info` describes is durable (the producer's sender).
    pub(crate) fn wait_batch_durable_until(&self, info: &AppendInfo) -> Result<()> {
        self.shared.wait_durable(info.last_offset, None, info.truncation_epoch)
    }

    fn after_store(&self, stored: append::Stored) -> Result<AppendInfo> {
        if stored.rolled {
            self.shared.durability.request_seal();
        }
        match self.shared.config.flush_policy {
            FlushPolicy::Always => {
                self.shared.wait_durable(stored.info.last_offset, None, stored.info.truncation_epoch)?
            }
            FlushPolicy::EveryInterval { .. } => self.request_sync_if_due(),
            FlushPolicy::Never => {}
        }
        Ok(stored.info)
    }

    /// Waits until `offset` is durable (the syncer is asked for a round), up to `timeout`
    /// (`Error::Timeout`). Returns `Error::Poisoned` or `Error::Closed` instead of hanging, and
    /// `Error::Truncated` if a truncation removes `offset` while it waits. After
    /// [`Log::append_nowait`] prefer [`Log::wait_batch_durable`], which also reports a truncation
    /// between the append and the wait.
    pub fn wait_durable(&self, offset: u64, timeout: Duration) -> Result<()> {
        self.shared.wait_durable(offset, Some(timeout), self.shared.durability.truncations())
    }

    /// Waits until the batch an `append_nowait` (or `append_batch_nowait`) stored is durable, up to
    /// `timeout`: `Error::Truncated` if a truncation removed it at any time after it was stored.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let info = log.append_nowait(&[Record::new(b"queued")])?;
    /// log.wait_batch_durable(&info, Duration::from_secs(5))?;
    /// assert!(log.durable_offset() > info.last_offset);
    /// # Ok(()) }
    /// ```
    pub fn wait_batch_durable(&self, info: &AppendInfo, timeout: Duration) -> Result<()> {
        self.shared.wait_durable(info.last_offset, Some(timeout), info.truncation_epoch)
    }

    /// Calls `callback` once the batch `info` describes (from [`Log::append_nowait`] or
    /// [`Log::append_batch_nowait`]) is durable, with `Ok(())`, or with the error that stopped it:
    /// `Error::Truncated` if a truncation removed it (at any time after it was stored),
    /// `Error::Poisoned`, `Error::Closed` if the log closed first, `Error::ReadOnly` on a
    /// read-only log. Called exactly once, without blocking the caller: durability without a
    /// waiting thread, as openraft asks of its log storage.
    ///
    /// Callbacks run in offset order, by a thread holding no lock of the log: the one that finished
    /// the sync round covering them (the syncer, a `flush`, or an appender that led the round
    /// under `Always`), a truncation or reset, a call that failed and may have poisoned the log,
    /// the close, or this thread, for what is decided already (unless a callback of a lower
    /// offset still waits: order comes first). A successful `append_nowait` never runs them, so
    /// a caller may append under a lock of its own that its callbacks take. They must not block:
    /// hand the result to a channel or a task. They may call the log (even register another
    /// callback, or drop the last `Log`); a panic in one is logged and the others still run. Registering asks for a sync round under every flush policy (`Never` too); under
    /// `EveryInterval` the round comes when the policy calls for one.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::mpsc;
    /// use strata_log::{FlushPolicy, Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() })?;
    /// let (done, flushed) = mpsc::channel();
    /// let info = log.append_nowait(&[Record::new(b"entry")])?;
    /// log.on_durable(&info, move |result| done.send(result).expect("receiver alive"));
    /// flushed.recv()??; // the syncer ran a round for it
    /// assert!(log.durable_offset() > info.last_offset);
    /// # Ok(()) }
    /// ```
    pub fn on_durable(&self, info: &AppendInfo, callback: impl FnOnce(Result<()>) + Send + 'static) {
        if self.shared.is_read_only() {
            return callback(Err(Error::ReadOnly));
        }
        let shared = &self.shared;
        shared.callbacks.register(info.last_offset, info.truncation_epoch, Box::new(callback));
        // Decided already (durable, or cut by a truncation): runs here. Else the round asked for
        // runs it.
        shared.run_callbacks_as(true);
        if shared.offsets.durable() <= info.last_offset {
            shared.durability.request_sync();
        }
    }

    /// Whether the log was opened read-only (`Log::open_read_only`).
    pub(crate) fn is_read_only(&self) -> bool {
        self.shared.is_read_only()
    }

    /// The records at `offsets` (best ascending), each read straight from the batch that holds it,
    /// `None` for each the log does not hold (docs/DESIGN.md §8, "gathered reads"). Not on a
    /// read-only log. `bytes_hint`: about the bytes of their batches.
    pub(crate) fn gather(&self, offsets: &[u64], bytes_hint: usize) -> Result<Vec<Option<RecordView>>> {
        self.shared.gather(offsets, bytes_hint)
    }

    /// Waits, without polling, until `offset` is visible to readers (for a consumer tailing the
    /// log), up to `timeout` (`Error::Timeout`). Returns `Error::Poisoned` or `Error::Closed`
    /// instead of hanging.
    pub fn wait_visible(&self, offset: u64, timeout: Duration) -> Result<()> {
        self.shared.wait_visible(offset, Some(timeout))
    }

    /// Makes every record appended so far durable now, whatever the flush policy: fdatasync of each
    /// segment written since the durable offset (sealing rolled ones) and of the directory if a
    /// segment was created, then writes the checkpoint, so damage to what it made durable is
    /// reported at the next open, never cut as a torn tail.
    pub fn flush(&self) -> Result<()> {
        self.shared.check_writable()?;
        let round = self.settle_always(self.shared.run_round());
        round?;
        self.settle(self.shared.write_checkpoint())
    }

    /// Reads records from `offset` on: whole batches, at most `max_bytes` of them, except that at
    /// least one batch is always returned. Every batch is verified (CRC, structure, offsets) before
    /// any of its records is returned.
    ///
    /// `offset` may be anything in `[start_offset, next_offset]`. From the visible end on (a
    /// consumer that caught up, or an offset `append_nowait` stored that is not durable yet under
    /// `FlushPolicy::Always`) the reader is empty and its `next_offset` stays `offset`, as a Kafka
    /// fetch at the high watermark is: poll again, or wait until it is visible. Only an offset below
    /// the start or past the next offset is `Error::OffsetOutOfRange`.
    ///
    /// ```
    /// # fn main() -> strata_log::Result<()> {
    /// use strata_log::{Error, Log, LogConfig, Record};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"a"), Record::new(b"b")])?;
    /// let mut reader = log.read(0, 1 << 20)?;
    /// assert_eq!(reader.by_ref().count(), 2);
    /// // Caught up: a read at the end is empty and stays where it is.
    /// let mut at_end = log.read(reader.next_offset(), 1 << 20)?;
    /// assert!(at_end.next().is_none());
    /// assert_eq!(at_end.next_offset(), 2);
    /// assert!(matches!(log.read(3, 1 << 20), Err(Error::OffsetOutOfRange { requested: 3, next: 2, .. })));
    /// # Ok(()) }
    /// ```
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<LogReader<'_>> {
        let (epoch, end) = self.read_bounds(offset)?;
        // At or past `end` the reader returns nothing: its cursor is already at its upper bound.
        Ok(LogReader::new(&self.shared, offset, end, max_bytes as u64, epoch))
    }

    /// The truncation epoch and visible end a read from `offset` starts with (the epoch first: a
    /// truncation after it is the reader's to catch up with); `offset` must be in `[start, next]`.
    fn read_bounds(&self, offset: u64) -> Result<(u64, u64)> {
        let epoch = self.shared.durability.truncations();
        let start = self.start_offset();
        let end = self.visible_end();
        let next = self.next_offset();
        if offset < start || offset > next {
            return Err(Error::OffsetOutOfRange { requested: offset, start, next });
        }
        Ok((epoch, end))
    }

    /// A [`Cursor`] at `offset` (in `[start_offset, next_offset]`, as for [`Log::read`]): a reader
    /// that shares the log's state instead of borrowing the `Log`, so it can move to another thread
    /// (`Send + 'static`), and keeps its position across calls. It never holds the directory lock:
    /// after `close` every call of it returns `Error::Closed`, and the directory may be opened
    /// again while it lives.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use strata_log::{Error, Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"a"), Record::new(b"b")])?;
    /// let mut cursor = log.cursor(0)?;
    /// let tail = std::thread::spawn(move || -> strata_log::Result<Vec<u64>> {
    ///     let mut offsets = Vec::new();
    ///     while offsets.len() < 3 {
    ///         for batch in cursor.next_batch_wait(1 << 20, Duration::from_secs(10))? {
    ///             offsets.extend(batch.records().iter().map(|r| r.offset()));
    ///         }
    ///     }
    ///     // Caught up: nothing more is visible, which is not an error.
    ///     assert!(cursor.next_batch(1 << 20)?.is_empty());
    ///     Ok(offsets)
    /// });
    /// log.append(&[Record::new(b"c")])?;
    /// assert_eq!(tail.join().unwrap()?, [0, 1, 2]);
    /// # Ok(()) }
    /// ```
    pub fn cursor(&self, offset: u64) -> Result<Cursor> {
        Cursor::new(Arc::clone(&self.shared), offset)
    }

    /// The first visible offset whose record timestamp is ≥ `timestamp_ms`, if any.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<u64>> {
        let mut refreshes = 0;
        loop {
            let error = match self.lookup_time(timestamp_ms) {
                Ok(found) => return Ok(found),
                Err(error) => error,
            };
            let Some(error) = self.shared.judge_read_error(error) else { return Ok(None) };
            // A read-only view of a live log may be stale: look again at the files as they are.
            if !self.shared.is_read_only() || refreshes == reader::READ_ONLY_REFRESHES {
                return Err(error);
            }
            refreshes += 1;
            reader::pause_before_refresh(refreshes);
            if self.shared.refresh_read_only().is_err() {
                return Err(error);
            }
        }
    }

    fn lookup_time(&self, timestamp_ms: i64) -> Result<Option<u64>> {
        for _ in 0..locate::LOCATE_ATTEMPTS {
            // A segment replaced by a compaction swap or removed meanwhile must not be skipped: the
            // walk runs again if the segments changed under it.
            let found = self.shared.segments.stable(|| {
                let start = self.start_offset();
                let upper = self.visible_end();
                for segment in self.shared.segments.all() {
                    if segment.base_offset() >= upper {
                        break;
                    }
                    let skip = segment.next_offset() <= start || segment.max_timestamp()? < timestamp_ms;
                    if !skip {
                        self.shared.check_continuity(&segment)?;
                    }
                    let found = if skip { None } else { segment.offset_for_timestamp(timestamp_ms, start, upper)? };
                    // Retired before or while it was searched (deleted, or being cut by a truncation
                    // that has not yet put the cut copy in the map): its answer meant "nothing
                    // here", which may be false. Retirement is for good, so checking after is
                    // enough.
                    if segment.is_retired() {
                        return Ok(None);
                    }
                    if found.is_some() {
                        return Ok(Some(found));
                    }
                }
                Ok(Some(None))
            })?;
            match found {
                Some(found) => return Ok(found),
                // A truncation holds the append lock until the map holds the new segment.
                None => drop(self.shared.appender.lock()),
            }
        }
        Err(Error::Unsettled { attempts: locate::LOCATE_ATTEMPTS })
    }

    /// Removes every record at or after `offset` and returns the new next offset: `offset` itself,
    /// or the base of the batch holding it (a batch is removed whole), or, after compaction, the
    /// end of the last record kept before it (the offsets of a compaction gap hold no records and
    /// are reused). Never below the log start offset: if the batch holding `offset` starts below
    /// it, the log restarts empty at the start offset. An `offset` at or past the next offset
    /// changes nothing.
    ///
    /// Durable and non-resurrecting: the recovery point is lowered in the checkpoint before any
    /// file changes, and no crash brings a removed record back, even when records of the same size
    /// are appended over them. The cost does not depend on the segment size. Readers in the cut
    /// segment are waited for up to `truncate_wait_ms`, then it gives up with `Error::Busy`: no
    /// record is removed and no segment changed, and what is left is the checkpoint's recovery
    /// point, lowered to the cut until the next checkpoint write raises it again (harmless: the
    /// records above it were made durable first, and a crash meanwhile only makes the next open
    /// scan them). Appenders waiting for removed offsets get
    /// `Error::Truncated`, and so do readers positioned past the cut.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// for i in 0..10u32 {
    ///     log.append(&[Record::new(&i.to_be_bytes())])?;
    /// }
    /// assert_eq!(log.truncate_to(6)?, 6);
    /// assert_eq!(log.next_offset(), 6);
    /// assert_eq!(log.append(&[Record::new(b"new six")])?.base_offset, 6);
    /// # Ok(()) }
    /// ```
    pub fn truncate_to(&self, offset: u64) -> Result<u64> {
        self.settle_always(self.shared.truncate_to(offset))
    }

    /// Drops every record and restarts the log, empty, at `offset` (any offset, also past the end:
    /// a Raft follower installing a snapshot). Old segments are renamed `.deleted` and unlinked
    /// after `file_delete_delay_ms`; readers in them finish.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"old")])?;
    /// log.reset_at(1000)?;
    /// assert_eq!((log.start_offset(), log.next_offset()), (1000, 1000));
    /// assert_eq!(log.append(&[Record::new(b"new")])?.base_offset, 1000);
    /// # Ok(()) }
    /// ```
    pub fn reset_at(&self, offset: u64) -> Result<()> {
        self.settle_always(self.shared.reset_at(offset))
    }

    /// Moves the log start offset to `offset` (at most the next offset) and returns the new start:
    /// reads below it are `Error::OffsetOutOfRange` from now on, also after a crash (the checkpoint
    /// is written first). Sealed segments wholly below it are renamed `.deleted` and unlinked after
    /// `file_delete_delay_ms` and their last reader; the active segment never is.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// for _ in 0..5 {
    ///     log.append(&[Record::new(b"consumed")])?;
    /// }
    /// assert_eq!(log.delete_records_before(3)?, 3);
    /// assert!(log.read(2, 1 << 20).is_err());
    /// assert_eq!(log.read(3, 1 << 20)?.next().unwrap()?.offset(), 3);
    /// # Ok(()) }
    /// ```
    pub fn delete_records_before(&self, offset: u64) -> Result<u64> {
        self.settle(self.shared.delete_records_before(offset))
    }

    /// Applies `retention_bytes` and `retention_ms` now (the log does so itself every
    /// `retention_check_ms`): deletes the oldest sealed segments while the log is larger than
    /// `retention_bytes` or their newest record is older than `retention_ms`. Returns how many
    /// segments were deleted.
    pub fn enforce_retention(&self) -> Result<u64> {
        self.shared.check_writable()?;
        self.settle(self.shared.enforce_retention())
    }

    /// Checks the indexes of every sealed segment now (lazily done at each segment's first read)
    /// and rebuilds those that fail, as `strata recover` does. Returns how many were rebuilt.
    #[cfg(feature = "internals")]
    pub(crate) fn check_all_indexes(&self) -> Result<u64> {
        let mut rebuilt = 0;
        for segment in self.shared.segments.all() {
            rebuilt += u64::from(segment.ensure_indexes_checked()?);
        }
        Ok(rebuilt)
    }

    /// Runs one compaction pass now, whatever the cleanup policy and the dirty
    /// share: the latest record per key is kept in sealed segments, older ones (and tombstones
    /// older than `delete_retention_ms`) are removed, offsets are kept. Returns what it did, or
    /// `None` if no sealed segment was dirty. Under `CleanupPolicy::Compact` a cleaner thread does
    /// this by itself every `cleaner_backoff_ms`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig { segment_bytes: 4096, ..LogConfig::default() })?;
    /// for i in 0..200u32 {
    ///     let key = format!("key-{}", i % 10);
    ///     log.append(&[Record::new(&i.to_be_bytes()).with_key(key.as_bytes())])?;
    /// }
    /// let report = log.compact()?.expect("sealed segments were dirty");
    /// assert!(report.records_removed > 0);
    /// // Offset 0 was superseded by offset 10 (same key): a read from 0 starts at the next record
    /// // still there.
    /// assert!(log.read(0, 1 << 20)?.next().unwrap()?.offset() > 0);
    /// # Ok(()) }
    /// ```
    pub fn compact(&self) -> Result<Option<CompactionReport>> {
        self.settle(self.shared.compact(true))
    }

    /// After an operation that failed (it may have poisoned the log): runs the durability
    /// callbacks that decided, now that it holds no lock, and passes the result on. A successful
    /// append runs none: its caller may hold a lock of its own that a callback takes.
    fn settle<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.shared.run_callbacks();
        }
        result
    }

    /// After a truncation or reset (which decides the callbacks of the batches it removed) or a
    /// flush (whose round this thread finished): runs the callbacks that decided.
    fn settle_always<T>(&self, result: Result<T>) -> Result<T> {
        self.shared.run_callbacks();
        result
    }

    /// Closes the log cleanly: stops the background threads, makes everything durable, seals the
    /// active segment, writes the checkpoint and, last, the clean-shutdown marker, so the next open
    /// does not scan. Dropping a `Log` does the same but can only log a failure.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    /// Closes (see [`Log::close`]), then ends every durability callback still pending: what the
    /// final round made durable gets `Ok`, the rest `Error::Closed` (or `Error::Poisoned`).
    fn shutdown(&mut self) -> Result<()> {
        let closed = self.close_files();
        self.shared.callbacks.close();
        self.shared.run_callbacks();
        closed
    }

    fn close_files(&mut self) -> Result<()> {
        self.stop_threads();
        let shared = &self.shared;
        if shared.durability.mark_closed() || shared.is_read_only() {
            return Ok(());
        }
        let app = shared.appender.lock();
        if shared.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        shared.run_round()?;
        app.active.seal().map_err(|e| shared.durability.poison(e))?;
        shared.write_checkpoint()?;
        // Segments deleted but not yet unlinked (their delay had not run out): no reader is left.
        shared.unlink_deleted_now();
        let marker = CleanShutdown {
            next_offset: shared.offsets.next(),
            active_base: app.active.base_offset(),
            active_len: app.active.size() as u32,
        };
        crash_point!("before_clean_marker");
        marker.write(&shared.dir).map_err(|e| shared.durability.poison(e))?;
        tracing::info!(dir = %shared.dir.display(), next_offset = marker.next_offset, "log closed cleanly");
        Ok(())
    }

    fn stop_threads(&mut self) {
        if let Some(events) = self.events.take()
            && let Err(error) = events.shutdown(Duration::from_secs(30))
        {
            tracing::error!(%error, "the log's event thread did not stop");
        }
        self.shared.prealloc.shutdown();
        if self.threads.is_empty() {
            return;
        }
        self.shared.cleaner.stop();
        syncer::stop(&self.shared);
        for thread in self.threads.drain(..) {
            // The last `Log` dropped by a callback running on a background thread: that thread
            // cannot wait for itself; it ends once the callback returns (it was told to stop).
            if thread.thread().id() == std::thread::current().id() {
                continue;
            }
            if thread.join().is_err() {
                tracing::error!("a background thread of the log panicked");
            }
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            tracing::error!(dir = %self.shared.dir.display(), %error, "closing the log on drop failed");
        }
        // Release every map and descriptor now, not whenever the skip map's epoch reclamation
        // gets to them.
        self.shared.segments.for_each(|segment| segment.retire());
        // Last: the directory is another `Log`'s to open from here, even while something still
        // holds this state.
        self.shared.release_lock();
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.shared.dir)
            .field("start_offset", &self.start_offset())
            .field("next_offset", &self.next_offset())
            .field("durable_offset", &self.durable_offset())
            .field("segments", &self.segment_count())
            .finish()
    }
}

/// Starts the syncer thread.
fn start_threads(shared: &Arc<LogState>) -> Result<Vec<JoinHandle<()>>> {
    let syncer_shared = Arc::clone(shared);
    let syncer = std::thread::Builder::new()
        .name("strata-syncer".to_owned())
        .spawn(move || {
            // A bug in a round must not leave appenders waiting forever for a syncer that is gone:
            // the log is poisoned, which wakes every waiter with `Error::Poisoned`.
            if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| syncer::run(&syncer_shared)))
            {
                syncer_shared.durability.poison(Error::panicked("the syncer thread", payload.as_ref()));
                syncer_shared.run_callbacks();
            }
        })
        .map_err(Error::io("spawn syncer thread", &shared.dir))?;
    let mut threads = vec![syncer];
    threads.extend(cleaner::spawn(shared)?);
    Ok(threads)
}

/// The periodic events: the checkpoint every `checkpoint_interval_ms`, retention every
/// `retention_check_ms` (if retention is configured).
fn schedule_background(shared: &Arc<LogState>) {
    let config = &shared.config;
    every(shared, Duration::from_millis(config.checkpoint_interval_ms), "checkpoint", LogState::write_checkpoint);
    if config.retention_bytes.is_some() || config.retention_ms.is_some() {
        let retention = |shared: &LogState| shared.enforce_retention().map(|_| ());
        every(shared, Duration::from_millis(config.retention_check_ms), "retention check", retention);
    }
}

/// Runs `work` on the log's event thread every `period`, for as long as the log lives.
fn every(shared: &Arc<LogState>, period: Duration, name: &'static str, work: fn(&LogState) -> Result<()>) {
    let Some(events) = &shared.events else { return };
    let weak = Arc::downgrade(shared);
    let scheduled = events.put_after(period, name, move || {
        let Some(shared) = weak.upgrade() else { return Ok(()) };
        let result = work(&shared);
        if shared.durability.is_poisoned() {
            shared.run_callbacks();
        }
        every(&shared, period, name, work);
        result
    });
    if scheduled.is_err() {
        tracing::debug!(name, "event thread stopped; periodic work ends");
    }
}
