//! Counters the log keeps as it works, and the plain snapshot `Log::metrics` returns: cheap to
//! take (relaxed atomic loads), no registry, feed it to any exporter.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::histogram::{Histogram, LatencySummary};
use crate::log::open::report::RecoveryReport;

/// Counters updated as the log works.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub appends: AtomicU64,
    pub records: AtomicU64,
    pub bytes: AtomicU64,
    pub sync_rounds: AtomicU64,
    pub fsyncs: AtomicU64,
    pub fsync_latency: Histogram,
    pub rolls: AtomicU64,
    pub preallocated_rolls: AtomicU64,
    pub checkpoints: AtomicU64,
    pub segments_deleted: AtomicU64,
    pub compaction_passes: AtomicU64,
    pub compaction_bytes_before: AtomicU64,
    pub compaction_bytes_after: AtomicU64,
    pub compaction_records_removed: AtomicU64,
    pub compaction_failures: AtomicU64,
    pub truncations: AtomicU64,
    pub checkpoint_failures: AtomicU64,
    pub inline_seals: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A snapshot of a log's state and counters since it was opened.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LogMetrics {
    /// Segments in the log.
    pub segments: u64,
    /// Bytes of batches in all segments.
    pub bytes_on_disk: u64,
    /// First readable offset.
    pub start_offset: u64,
    /// The offset the next record gets.
    pub next_offset: u64,
    /// Every offset below it is durable.
    pub durable_offset: u64,
    /// Readers see offsets below it.
    pub visible_end: u64,
    /// Batches appended (append and append_batch calls that succeeded).
    pub appends: u64,
    /// Records appended.
    pub records: u64,
    /// Bytes of batches appended.
    pub bytes_appended: u64,
    /// Sync rounds that made data durable (one group commit each).
    pub sync_rounds: u64,
    /// fdatasync calls (segment data, sealing included).
    pub fsyncs: u64,
    /// Appends per sync round: how well group commit batched concurrent appenders.
    pub appends_per_sync: f64,
    /// Latency of each sync round's fdatasyncs.
    pub fsync_latency: LatencySummary,
    /// Segment rolls, and how many took a preallocated segment.
    pub rolls: u64,
    /// Rolls that used the background-preallocated segment.
    pub preallocated_rolls: u64,
    /// Bytes written as zeros ahead of the appends (`LogConfig::zero_ahead_bytes`): the extra
    /// disk writes that make durable appends cheaper.
    pub zeroed_ahead_bytes: u64,
    /// Segments rolled away from and not yet sealed (the syncer seals them in the background;
    /// past a small bound the appender seals inline, so this stays small).
    pub unsealed_segments: u64,
    /// Rolls after which the appender sealed the backlog itself (back-pressure on a fast appender).
    pub inline_seals: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Checkpoint writes that failed (the recovery point stayed lower; the next write retries).
    pub checkpoint_failures: u64,
    /// Segments removed by retention or `delete_records_before`.
    pub retention_deletions: u64,
    /// Suffix removals (`truncate_to`, `reset_at`).
    pub truncations: u64,
    /// Compaction passes completed.
    pub compaction_passes: u64,
    /// Bytes of the segments compaction rewrote, and what they became.
    pub compaction_bytes_before: u64,
    /// Bytes compaction wrote.
    pub compaction_bytes_after: u64,
    /// `compaction_bytes_after / compaction_bytes_before` (1.0 before any pass): lower is better.
    pub compaction_ratio: f64,
    /// Records compaction removed (superseded, or expired tombstones).
    pub records_compacted_away: u64,
    /// Compaction passes that failed or panicked and were abandoned before changing any segment.
    pub compaction_failures: u64,
    /// The log is known damaged: a `.corrupt` copy of a damaged segment was in its directory at
    /// open, or a read returned `Error::Corrupt` (logged once).
    pub corruption_seen: bool,
    /// What opening the log did.
    pub recovery: RecoveryReport,
}
