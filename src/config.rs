//! Configuration with documented defaults, validated once at open.

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::{
    BATCH_HEADER_LEN, MAX_BATCH_LEN, MAX_SEGMENT_BYTES, MIN_SEGMENT_BYTES, OFFSET_INDEX_ENTRY_LEN, TIME_INDEX_ENTRY_LEN,
};
pub use crate::storage::ReadPath;
use crate::storage::map_budget::MapBudget;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// How a [`Log`](crate::Log) lays out and checks its files.
///
/// Build one with struct-update syntax over the defaults:
/// ```
/// use strata_log::LogConfig;
/// let config = LogConfig { segment_bytes: 64 << 20, ..LogConfig::default() };
/// assert_eq!(config.index_interval_bytes, 4096);
/// ```
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Size a segment is preallocated to and rolled at. Default 128 MiB; at most 2 GiB, at least
    /// 128 B. A batch larger than this gets a segment of its own.
    ///
    /// Preallocation reserves real blocks (a full disk is then an error at a roll, never a fault
    /// in a mapped read), so an open log holds this much disk for its active segment, and up to
    /// as much again for the next one, preallocated in the background as the active one fills
    /// (`preallocate`). 128 MiB rather than Kafka's 1 GiB: an embedded process often opens several
    /// logs, and a log of many segments is cheap here (sealed segments hold no descriptor, and
    /// their maps are budgeted).
    pub segment_bytes: u64,
    /// Size each `.index` and `.timeindex` is preallocated to; a full index rolls the segment.
    /// Default 1 MiB: room for 87,000 time-index entries, so with the default
    /// `index_interval_bytes` (an entry at most every 4 KiB) segments of up to about 340 MiB never
    /// roll early; raise it with `segment_bytes` (Kafka's default ratio is 1 to 100).
    pub index_bytes: u64,
    /// Bytes of batches between two sparse index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// A segment whose first batch is older than this rolls at the next append. Default 7 days.
    pub segment_ms: u64,
    /// Largest encoded batch (`12 + batch_length`) `append` and `append_batch` accept.
    /// Default 1 MiB; at most 64 MiB (`MAX_BATCH_LEN`).
    pub max_batch_bytes: u64,
    /// How far a caller-supplied (create-time) timestamp may be from the log's clock, either way.
    /// Default 1 hour.
    pub max_timestamp_skew_ms: u64,
    /// The clock append times come from. Default: the system clock.
    pub clock: Clock,
    /// What opening does about damage below the recovery point. Default `Strict`.
    pub recovery: RecoveryMode,
    /// When appended records become durable. Default `Always`: an append returns once its records
    /// are fsynced (group commit shares one fsync among concurrent appenders).
    pub flush_policy: FlushPolicy,
    /// How often the checkpoint (the recovery point) is written, besides at each roll, each
    /// explicit flush and at close. Default 60 s.
    pub checkpoint_interval_ms: u64,
    /// A roll fails with `Error::DiskFull` (leaving the log usable) if creating the next segment
    /// would leave less free space than this. Default 0: only a failing fallocate stops it.
    pub min_free_bytes: u64,
    /// Preallocate the next segment in the background, so a roll does not wait for fallocate.
    /// Default true.
    pub preallocate: bool,
    /// Under the policies that fsync (`Always`, `EveryInterval`), bytes of the active segment kept
    /// written with zeros and synced ahead of the appends, in the background, so the fdatasync of
    /// an append only writes its data: blocks fallocate reserved are *unwritten* extents, and the
    /// first fdatasync of each also commits its conversion to the file system's journal
    /// (measured: about twice the durable appends per second with it). The cost: each segment is
    /// written twice (zeros, then data). 0 turns it off; ignored under `Never`. Default 8 MiB.
    pub zero_ahead_bytes: u64,
    /// Delete the oldest sealed segments while the log is larger than this. Default `None`
    /// (unlimited); `Some(0)` is refused.
    pub retention_bytes: Option<u64>,
    /// Delete sealed segments whose newest record is older than this (by the segment's final
    /// time-index entry). Default `None` (forever); `Some(0)` is refused.
    pub retention_ms: Option<u64>,
    /// How often retention is checked. Default 5 minutes.
    pub retention_check_ms: u64,
    /// How long a deleted segment stays as `.deleted` (readers may still be in it) before its files
    /// are unlinked. Default 60 s; 0 is valid.
    pub file_delete_delay_ms: u64,
    /// How long a truncation waits for readers of the segment it cuts before giving up with
    /// `Error::Busy`. Default 10 s.
    pub truncate_wait_ms: u64,
    /// `Delete` (the default: only retention removes records) or `Compact` (a cleaner thread also
    /// keeps just the latest record per key in sealed segments). Retention applies
    /// under both when set.
    pub cleanup_policy: CleanupPolicy,
    /// How long a tombstone (a key with no value) survives compaction, counted from its timestamp,
    /// so consumers have time to see the delete. Default 24 hours.
    pub delete_retention_ms: u64,
    /// Memory the cleaner's key → latest-offset map may use; a pass cleans as many dirty segments
    /// as the map covers. Default 128 MiB, at least 64 KiB.
    pub cleaner_dedupe_bytes: u64,
    /// The cleaner starts a pass once the dirty part (after the last cleaned offset) is at least
    /// this share of the sealed segments' bytes, in percent. Default 50.
    pub min_cleanable_dirty_percent: u8,
    /// How often the cleaner thread looks for work. Default 15 s.
    pub cleaner_backoff_ms: u64,
    /// The cleaner reads and writes at most this many bytes per second. Default `None` (unthrottled).
    pub cleaner_io_bytes_per_sec: Option<u64>,
    /// How records are read: through a shared read-only mapping (`Mmap`, the default: no copy
    /// into the kernel and back) or with `pread` (`Pread`: a read can never fault). Choose
    /// `Pread` when other tools may truncate files in the log's directory: a mapped read past
    /// the end of a file someone else cut kills the process with SIGBUS, while under `Pread` it
    /// is `Error::Corrupt` naming the file. (Files are checked against the log's idea of their
    /// length whenever they are mapped, under both.)
    pub read_path: ReadPath,
    /// A budget for the memory the log's sealed files keep mapped, shared with any other log or
    /// store given the same budget ([`MapBudget`]): least-recently-read sealed files are unmapped
    /// to stay within it, and the log's active files count against its `max_open_files`. `None`
    /// (the default): the process's shared default budget, [`MapBudget::process_default`], which
    /// keeps every log opened without one under half of `vm.max_map_count`.
    pub map_budget: Option<MapBudget>,
}

/// What removes records besides explicit calls: retention, and under `Compact` compaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// Records leave only by retention, `delete_records_before` or truncation.
    #[default]
    Delete,
    /// A background cleaner also compacts sealed segments to the latest record per key.
    Compact,
}

/// When appended records are made durable.
///
/// `Always` is the default: an append returns once fsynced, and concurrent appenders share each
/// fsync (group commit). To trade durability for throughput, choose `EveryInterval` (at most `ms`
/// milliseconds or `messages` records at risk in a power cut) or `Never` (call [`Log::flush`]
/// yourself). Under `Always` readers see only durable records; under the others they see every
/// stored record.
///
/// [`Log::flush`]: crate::Log::flush
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Every append waits until its records are fsynced.
    #[default]
    Always,
    /// A background thread fsyncs at least every `ms` milliseconds, or as soon as `messages`
    /// records are waiting.
    EveryInterval {
        /// Longest time records wait to be fsynced.
        ms: u64,
        /// Most records waiting to be fsynced.
        messages: u64,
    },
    /// Nothing is fsynced until [`Log::flush`](crate::Log::flush), a roll or close.
    Never,
}

/// What `Log::open` does when data below the recovery point (acknowledged as durable) is damaged or
/// missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecoveryMode {
    /// Fail with `Error::Corrupt` and change nothing (the default): a human decides.
    #[default]
    Strict,
    /// Keep a copy of the damaged segment as `.corrupt`, cut the log at the damage, and report the
    /// acknowledged records lost (`strata recover --force`).
    TruncateCorrupt,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 128 * MIB,
            index_bytes: MIB,
            index_interval_bytes: 4 * KIB,
            segment_ms: 7 * DAY_MS,
            max_batch_bytes: MIB,
            max_timestamp_skew_ms: 60 * 60 * 1000,
            clock: Clock::system(),
            recovery: RecoveryMode::Strict,
            flush_policy: FlushPolicy::Always,
            checkpoint_interval_ms: 60_000,
            min_free_bytes: 0,
            preallocate: true,
            zero_ahead_bytes: 8 * MIB,
            retention_bytes: None,
            retention_ms: None,
            retention_check_ms: 5 * 60 * 1000,
            file_delete_delay_ms: 60_000,
            truncate_wait_ms: 10_000,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: DAY_MS,
            cleaner_dedupe_bytes: 128 * MIB,
            min_cleanable_dirty_percent: 50,
            cleaner_backoff_ms: 15_000,
            cleaner_io_bytes_per_sec: None,
            read_path: ReadPath::Mmap,
            map_budget: None,
        }
    }
}

impl LogConfig {
    /// The map budget the log is under: its own, or the process's default.
    pub(crate) fn budget_or_default(self) -> LogConfig {
        let budget = self.map_budget.unwrap_or_else(MapBudget::process_default);
        LogConfig { map_budget: Some(budget), ..self }
    }

    /// Checks every field; called by `Log::open`.
    pub fn validate(&self) -> Result<()> {
        check("segment_bytes", self.segment_bytes, MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES)?;
        // Room for at least one entry in each index, plus the time index's reserved final slot.
        let min_index = 2 * TIME_INDEX_ENTRY_LEN.max(OFFSET_INDEX_ENTRY_LEN) as u64;
        check("index_bytes", self.index_bytes, min_index, u64::from(u32::MAX))?;
        check("index_interval_bytes", self.index_interval_bytes, 0, u64::from(u32::MAX))?;
        check("segment_ms", self.segment_ms, 1, u64::MAX)?;
        check("max_batch_bytes", self.max_batch_bytes, BATCH_HEADER_LEN as u64 + 1, MAX_BATCH_LEN as u64)?;
        check("max_timestamp_skew_ms", self.max_timestamp_skew_ms, 0, i64::MAX as u64)?;
        check("checkpoint_interval_ms", self.checkpoint_interval_ms, 1, u64::MAX)?;
        check("zero_ahead_bytes", self.zero_ahead_bytes, 0, GIB)?;
        if let Some(bytes) = self.retention_bytes {
            check("retention_bytes", bytes, 1, i64::MAX as u64)?;
        }
        if let Some(ms) = self.retention_ms {
            check("retention_ms", ms, 1, i64::MAX as u64)?;
        }
        check("retention_check_ms", self.retention_check_ms, 1, 365 * DAY_MS)?;
        check("file_delete_delay_ms", self.file_delete_delay_ms, 0, 365 * DAY_MS)?;
        check("truncate_wait_ms", self.truncate_wait_ms, 0, 365 * DAY_MS)?;
        check("delete_retention_ms", self.delete_retention_ms, 0, i64::MAX as u64)?;
        check("cleaner_dedupe_bytes", self.cleaner_dedupe_bytes, 64 * KIB, 1 << 40)?;
        check("min_cleanable_dirty_percent", u64::from(self.min_cleanable_dirty_percent), 0, 100)?;
        check("cleaner_backoff_ms", self.cleaner_backoff_ms, 1, 365 * DAY_MS)?;
        if let Some(rate) = self.cleaner_io_bytes_per_sec {
            check("cleaner_io_bytes_per_sec", rate, 1, u64::MAX)?;
        }
        if let FlushPolicy::EveryInterval { ms, messages } = self.flush_policy {
            check("flush_policy.ms", ms, 1, u64::MAX)?;
            check("flush_policy.messages", messages, 1, u64::MAX)?;
        }
        Ok(())
    }
}

pub(crate) fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<()> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(Error::InvalidConfig { field, reason: format!("{value} is outside [{min}, {max}]") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        LogConfig::default().validate().expect("defaults validate");
    }

    #[test]
    fn out_of_range_values_name_the_field() {
        let too_big = LogConfig { segment_bytes: 3 * GIB, ..LogConfig::default() };
        assert!(matches!(too_big.validate(), Err(Error::InvalidConfig { field: "segment_bytes", .. })));
        let batch = LogConfig { max_batch_bytes: 65 * MIB, ..LogConfig::default() };
        assert!(matches!(batch.validate(), Err(Error::InvalidConfig { field: "max_batch_bytes", .. })));
        let index = LogConfig { index_bytes: 8, ..LogConfig::default() };
        assert!(matches!(index.validate(), Err(Error::InvalidConfig { field: "index_bytes", .. })));
        for (config, field) in [
            (LogConfig { retention_bytes: Some(0), ..LogConfig::default() }, "retention_bytes"),
            (LogConfig { retention_ms: Some(0), ..LogConfig::default() }, "retention_ms"),
            (LogConfig { retention_ms: Some(u64::MAX), ..LogConfig::default() }, "retention_ms"),
            (LogConfig { retention_check_ms: 0, ..LogConfig::default() }, "retention_check_ms"),
        ] {
            assert!(matches!(config.validate(), Err(Error::InvalidConfig { field: f, .. }) if f == field), "{field}");
        }
        LogConfig { file_delete_delay_ms: 0, ..LogConfig::default() }.validate().expect("0 is a valid delay");
    }
}
