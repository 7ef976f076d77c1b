//! The state a `Log` shares with its background threads (the syncer, the cleaner, the
//! preallocator, the event thread) and with its cursors: one owner per piece, composed here.
//!
//! | part | owns |
//! |---|---|
//! | [`Offsets`] | start, durable, visible and next offsets, and their invariant |
//! | [`Durability`] | poisoning, closing, the sync-round gate, waiters, the directory fsync, truncation epochs |
//! | [`Segments`] | the skip map, the structure lock, the rolled segments and the seal lock |
//! | [`CheckpointWriter`] | the checkpoint on disk and its writes |
//! | `Mutex<Appender>` | the active segment and the append path's buffers (the append lock) |
//! | [`CleanerState`] | the cleaner's progress, its pass lock and its thread's stop signal |
//!
//! The operations on them (append, group commit, truncation, retention, compaction, reads) are
//! `impl LogState` blocks in their own files. The lock order is in `log/mod.rs`.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::config::{FlushPolicy, LogConfig};
use crate::error::{Error, Result};
use crate::events::EventHandle;
use crate::log::appender::Appender;
use crate::log::arrivals::Arrivals;
use crate::log::callbacks::Callbacks;
use crate::log::checkpoint::Checkpoint;
use crate::log::checkpoint_writer::{CheckpointWriter, Parts};
use crate::log::cleaner::control::CleanerState;
use crate::log::durability::Durability;
use crate::log::metrics::{Counters, LogMetrics};
use crate::log::offsets::Offsets;
use crate::log::open::loaded::{LiveTail, Loaded};
use crate::log::open::report::RecoveryReport;
use crate::log::prealloc::Preallocator;
use crate::log::segment::LogSegment;
use crate::log::segments::Segments;
use crate::log::zero_ahead::ZeroAhead;

/// Everything a `Log`, its threads and its cursors share (see the module documentation).
pub(crate) struct LogState {
    pub(super) dir: PathBuf,
    pub(super) config: LogConfig,
    pub(super) offsets: Offsets,
    pub(super) durability: Durability,
    pub(super) segments: Segments,
    pub(super) checkpoint: CheckpointWriter,
    pub(super) appender: Mutex<Appender>,
    pub(super) cleaner: CleanerState,
    /// Durability callbacks waiting for their batch (`Log::on_durable`).
    pub(super) callbacks: Callbacks,
    pub(super) counters: Counters,
    pub(super) prealloc: Arc<Preallocator>,
    /// Keeps the active segment's next blocks written and synced (durable policies only).
    pub(super) zero_ahead: ZeroAhead,
    /// Appends between their start and their store: a sync round gathers them (`Always`).
    pub(super) arrivals: Arrivals,
    /// The log's background event thread (none for a read-only log).
    pub(super) events: Option<EventHandle>,
    pub(super) report: RecoveryReport,
    /// A read-only log: where its last segment's valid data ended when the files were last read
    /// (`None` for a writable log).
    live_tail: Option<Mutex<Option<LiveTail>>>,
    corruption_seen: AtomicBool,
    /// Holds the directory's exclusive lock until the log is closed or dropped (`None` when
    /// read-only). Cursors keep the state alive, never the lock: `Log::close` releases it.
    lock: Mutex<Option<File>>,
}

impl LogState {
    pub(crate) fn new(
        dir: PathBuf,
        config: LogConfig,
        initial: Loaded,
        lock: Option<File>,
        events: Option<EventHandle>,
    ) -> Result<LogState> {
        let segments: Vec<Arc<LogSegment>> = initial.segments.into_iter().map(Arc::new).collect();
        let active = segments.last().cloned();
        let active = active.ok_or_else(|| Error::io("load", &dir)(std::io::ErrorKind::NotFound.into()))?;
        let next = initial.next_offset;
        // What the file holds, as far as the next write must know: a stale one is rewritten then.
        let recovery_point = if initial.checkpoint_stale { 0 } else { next };
        let on_disk = Checkpoint { log_start_offset: initial.log_start_offset, recovery_point };
        let read_only = lock.is_none();
        Ok(LogState {
            prealloc: Arc::new(Preallocator::new(&dir, &config, events.clone())),
            zero_ahead: ZeroAhead::new(&config, events.clone()),
            arrivals: Arrivals::default(),
            events,
            cleaner: CleanerState::default(),
            callbacks: Callbacks::default(),
            offsets: Offsets::new(initial.log_start_offset, next),
            durability: Durability::new(dir.clone()),
            segments: Segments::new(segments),
            checkpoint: CheckpointWriter::new(dir.clone(), on_disk),
            appender: Mutex::new(Appender::new(active)),
            corruption_seen: AtomicBool::new(!initial.report.corrupt_copies.is_empty()),
            report: initial.report,
            live_tail: read_only.then(|| Mutex::new(initial.live_tail)),
            lock: Mutex::new(lock),
            counters: Counters::default(),
            config,
            dir,
        })
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.live_tail.is_some()
    }

    /// Gives back the directory lock (at close: a new `Log` may open the directory while cursors
    /// of this one still hold its state).
    pub(crate) fn release_lock(&self) {
        drop(self.lock.lock().take());
    }

    /// What the checkpoint writer reads and moves.
    pub(crate) fn checkpoint_parts(&self) -> Parts<'_> {
        Parts { offsets: &self.offsets, durability: &self.durability, counters: &self.counters }
    }

    /// Writes the checkpoint with the durable offset as recovery point.
    pub(crate) fn write_checkpoint(&self) -> Result<()> {
        self.checkpoint.write(&self.checkpoint_parts())
    }

    /// What a read that failed with `error` reports: `None` (the end of the data) if it is the
    /// end of a read-only log of a live writer — damage at the end of the last segment's valid
    /// data that the checkpoint, read again now, does not claim durable (a batch being written, or
    /// a tail a truncation is cutting) — else the error. Corruption is remembered
    /// (`metrics().corruption_seen`) and logged the first time.
    pub(crate) fn judge_read_error(&self, error: Error) -> Option<Error> {
        if let Some(tail) = &self.live_tail
            && tail.lock().as_ref().is_some_and(|tail| tail.is_end(&self.dir, &error))
        {
            return None;
        }
        if let Error::Corrupt { .. } = &error
            && !self.corruption_seen.swap(true, Ordering::AcqRel)
        {
            tracing::warn!(dir = %self.dir.display(), %error, "damage found by a read: run `strata verify` on the log");
        }
        Some(error)
    }

    /// A read-only log sees the files as they were at open; a live writer then seals (trims),
    /// compacts (swaps files), deletes and cuts segments under it. Before a read reports an error,
    /// the view is taken again from the files as they are now (the segments, their lengths, the
    /// offsets) and the read retried: damage shows again, a writer's change does not.
    pub(crate) fn refresh_read_only(&self) -> Result<()> {
        let Some(tail) = &self.live_tail else {
            debug_assert!(false, "only a read-only log re-reads its files");
            return Ok(());
        };
        let loaded = crate::log::open::load_read_only(&self.dir, &self.config)?;
        let fresh: Vec<Arc<LogSegment>> = loaded.segments.into_iter().map(Arc::new).collect();
        let structure = self.segments.lock();
        let old = self.segments.all();
        self.segments.edit(&structure, |map| {
            old.iter().for_each(|segment| map.remove(segment));
            fresh.into_iter().for_each(|segment| map.insert(segment));
        });
        // Under the structure lock: two refreshes that read the files at different times must not
        // interleave their offsets (a start from one, an end from the other).
        self.offsets.set_all(loaded.log_start_offset, loaded.next_offset);
        *tail.lock() = loaded.live_tail;
        drop(structure);
        for segment in &old {
            segment.retire();
        }
        Ok(())
    }

    /// Whether this log is known damaged: a `.corrupt` copy was in its directory at open, or a
    /// read in this process returned `Error::Corrupt`.
    pub(crate) fn corruption_seen(&self) -> bool {
        self.corruption_seen.load(Ordering::Acquire)
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            Err(Error::ReadOnly)
        } else if self.durability.is_poisoned() {
            Err(Error::Poisoned)
        } else if self.durability.is_closed() {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Runs the durability callbacks whose fate is decided (`callbacks.rs`). Called where the
    /// caller holds no lock of the log: after a sync round it led, after a truncation, at close,
    /// after an operation that may have poisoned the log, and at registration.
    pub(crate) fn run_callbacks(&self) {
        self.run_callbacks_as(false);
    }

    /// [`LogState::run_callbacks`] by a thread that just registered one (it may wait briefly for
    /// the run to be handed over: `callbacks.rs`).
    pub(crate) fn run_callbacks_as(&self, registrant: bool) {
        if !self.callbacks.any() {
            return;
        }
        self.callbacks.run(registrant, |epoch, last_offset| {
            // The durable offset read before the cuts: a reset past the end notes its cut, then
            // raises the offsets, so an offset raised by it is seen with its cut, never alone.
            let durable = self.offsets.durable();
            if self.durability.lowest_cut_since(epoch).is_some_and(|cut| last_offset >= cut) {
                return Some(Err(Error::Truncated { next_offset: self.offsets.next() }));
            }
            if durable > last_offset {
                Some(Ok(()))
            } else if self.durability.is_poisoned() {
                Some(Err(Error::Poisoned))
            } else if self.callbacks.is_closed() {
                Some(Err(Error::Closed))
            } else {
                None
            }
        });
    }

    /// Publishes a stored batch ending at `next` to readers, unless they only see durable data.
    pub(crate) fn publish_stored(&self, next: u64) {
        if self.config.flush_policy != FlushPolicy::Always {
            self.offsets.raise_visible(next);
            self.durability.notify_progress(false);
        }
    }

    /// Bytes of batches in all segments.
    pub(crate) fn bytes_on_disk(&self) -> u64 {
        let mut bytes = 0;
        self.segments.for_each(|s| bytes += s.size());
        bytes
    }

    /// Segments other than the last (the active one) that are not sealed yet.
    fn unsealed_segments(&self) -> u64 {
        let mut unsealed = 0u64;
        self.segments.for_each(|s| unsealed += u64::from(!s.is_sealed()));
        unsealed.saturating_sub(1)
    }

    /// A snapshot of the counters and offsets.
    pub(crate) fn metrics(&self) -> LogMetrics {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (appends, rounds) = (load(&c.appends), load(&c.sync_rounds));
        LogMetrics {
            segments: self.segments.len() as u64,
            bytes_on_disk: self.bytes_on_disk(),
            start_offset: self.offsets.start(),
            next_offset: self.offsets.next(),
            durable_offset: self.offsets.durable(),
            visible_end: self.offsets.visible(),
            appends,
            records: load(&c.records),
            bytes_appended: load(&c.bytes),
            sync_rounds: rounds,
            fsyncs: load(&c.fsyncs),
            appends_per_sync: if rounds == 0 { 0.0 } else { appends as f64 / rounds as f64 },
            fsync_latency: c.fsync_latency.snapshot(),
            rolls: load(&c.rolls),
            preallocated_rolls: load(&c.preallocated_rolls),
            zeroed_ahead_bytes: self.zero_ahead.zeroed_bytes(),
            unsealed_segments: self.unsealed_segments(),
            inline_seals: load(&c.inline_seals),
            checkpoints: load(&c.checkpoints),
            checkpoint_failures: load(&c.checkpoint_failures),
            retention_deletions: load(&c.segments_deleted),
            compaction_passes: load(&c.compaction_passes),
            compaction_bytes_before: load(&c.compaction_bytes_before),
            compaction_bytes_after: load(&c.compaction_bytes_after),
            compaction_ratio: match load(&c.compaction_bytes_before) {
                0 => 1.0,
                before => load(&c.compaction_bytes_after) as f64 / before as f64,
            },
            records_compacted_away: load(&c.compaction_records_removed),
            corruption_seen: self.corruption_seen(),
            compaction_failures: load(&c.compaction_failures),
            truncations: load(&c.truncations),
            recovery: self.report.clone(),
        }
    }
}
