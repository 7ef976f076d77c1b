//! `strata bench`: the figures a user wants first, measured in one run so they are comparable —
//! the physical baselines (raw sequential write, raw write + fdatasync, raw `pread` + CRC of the
//! log's files), appends without fsync, reads (copied, in place, `pread`), durable appends (one thread, then many sharing fsyncs), the producer, and the recovery
//! scan — each with its ratio to the baseline it should be judged against — then the message
//! store's puts (against `Log::append` of the same records), dispatch lag, gets, key queries and
//! recovery. Phases run interleaved
//! (run 1 of every phase, then run 2, …) with a `sync` between them, and the median run is
//! reported. Library code returning values; `strata bench` (`cmd`) renders them.

mod budget;
mod channel;
mod commitlog;
mod maintenance;
mod phases;
mod store;

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_log::internals::format::BATCH_HEADER_LEN;
use strata_log::internals::io_error;
use strata_log::{Error, FlushPolicy, LogConfig, Result};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Where to put the logs (a temporary directory inside it); `None` for the system temp dir.
    pub dir: Option<PathBuf>,
    /// Records per no-fsync phase (append, read, producer) of 100-byte values; 1 KiB phases use a
    /// quarter as many.
    pub records: u64,
    /// Records per append call in the batched phases.
    pub batch: usize,
    /// Value size of the "large" phases (the 1 KiB ones by default).
    pub large_value_bytes: usize,
    /// Threads of the multi-threaded durable phase.
    pub threads: usize,
    /// Producer threads.
    pub producer_threads: usize,
    /// Flush policy of the append/read phases (the durable phases always use `Always`).
    pub flush_policy: FlushPolicy,
    /// Durable phases stop after this many operations or `durable_seconds`, whichever is first.
    pub durable_ops: u64,
    /// Time box of a durable phase.
    pub durable_seconds: f64,
    /// Runs of every phase; the median is reported.
    pub runs: usize,
    /// Which phases run.
    pub sections: Sections,
    /// Time box of each store throughput phase (puts, their `Log::append` baselines, dispatch
    /// lag, key queries).
    pub store_seconds: f64,
    /// Messages of the store that the get, key-query and recovery phases use.
    pub store_messages: u64,
}

/// The phases `strata bench` runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sections {
    /// Every phase.
    #[default]
    All,
    /// The log's phases (raw baselines, appends, reads, durable appends, producer, recovery,
    /// maintenance).
    Log,
    /// The message store's phases.
    Store,
    /// The map budget's phases (random reads over a log ten times the budget).
    Budget,
    /// The channel's phases (put-commit and take-commit against `Log::append`).
    Channel,
}

impl Sections {
    fn log(self) -> bool {
        matches!(self, Sections::All | Sections::Log)
    }

    fn store(self) -> bool {
        matches!(self, Sections::All | Sections::Store)
    }

    fn budget(self) -> bool {
        matches!(self, Sections::All | Sections::Budget)
    }

    fn channel(self) -> bool {
        matches!(self, Sections::All | Sections::Channel)
    }
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            dir: None,
            records: 2_000_000,
            batch: 100,
            large_value_bytes: 1024,
            threads: 8,
            producer_threads: 4,
            flush_policy: FlushPolicy::Never,
            durable_ops: 4000,
            durable_seconds: 2.0,
            runs: 3,
            sections: Sections::All,
            store_seconds: 2.0,
            store_messages: 200_000,
        }
    }
}

impl BenchOptions {
    /// The full mode: median of 5, bigger phases.
    pub fn full() -> BenchOptions {
        BenchOptions {
            records: 5_000_000,
            durable_ops: 20_000,
            durable_seconds: 5.0,
            runs: 5,
            store_seconds: 5.0,
            store_messages: 1_000_000,
            ..BenchOptions::default()
        }
    }
}

impl BenchOptions {
    /// Checks the options before any work, naming the `strata bench` flag at fault: zero counts,
    /// a value larger than a batch may be, and a batch (`batch` × `large_value_bytes`) larger
    /// than the log accepts.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let at_least_one = [
            ("--records", self.records),
            ("--batch", self.batch as u64),
            ("--threads", self.threads as u64),
            ("--producer-threads", self.producer_threads as u64),
            ("--durable-ops", self.durable_ops),
            ("--runs", self.runs as u64),
            ("--value-size", self.large_value_bytes as u64),
            ("--store-messages", self.store_messages),
        ];
        if let Some((flag, _)) = at_least_one.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{flag} must be at least 1"));
        }
        let max_batch = LogConfig::default().max_batch_bytes;
        // A record costs its value and at most ~30 bytes of framing (varints); a batch adds a header.
        let record_bytes = |value: usize| value as u64 + 30;
        if record_bytes(self.large_value_bytes) + BATCH_HEADER_LEN as u64 > max_batch {
            return Err(format!(
                "--value-size {} is larger than a batch may be ({max_batch} bytes with framing)",
                self.large_value_bytes
            ));
        }
        let batch_bytes = (self.batch as u64).saturating_mul(record_bytes(self.large_value_bytes));
        if batch_bytes.saturating_add(BATCH_HEADER_LEN as u64) > max_batch {
            let most = (max_batch - BATCH_HEADER_LEN as u64) / record_bytes(self.large_value_bytes);
            return Err(format!(
                "--batch {} of --value-size {} makes batches of about {batch_bytes} bytes, more than the log's \
                 max_batch_bytes ({max_batch}); use --batch {most} or less, or a smaller --value-size",
                self.batch, self.large_value_bytes
            ));
        }
        let threads = [("--threads", self.threads), ("--producer-threads", self.producer_threads)];
        if let Some((flag, n)) = threads.iter().find(|(_, n)| *n > 1024) {
            return Err(format!("{flag} {n} is more than 1024 threads"));
        }
        let counts = [
            ("--records", self.records, MAX_RECORDS),
            ("--durable-ops", self.durable_ops, MAX_DURABLE_OPS),
            ("--store-messages", self.store_messages, MAX_RECORDS),
        ];
        if let Some((flag, n, most)) = counts.iter().find(|(_, n, most)| n > most) {
            return Err(format!("{flag} {n} is more than the bench measures (at most {most})"));
        }
        if !(self.store_seconds > 0.0 && self.store_seconds <= 3600.0) {
            return Err(format!("--store-seconds {} is not in (0, 3600]", self.store_seconds));
        }
        if self.runs > 1000 {
            return Err(format!("--runs {} is more than 1000 runs", self.runs));
        }
        self.check_room()
    }

    /// Checks that a run fits: the memory its latencies take and the disk its logs take, against
    /// what is available now (where that can be read).
    fn check_room(&self) -> std::result::Result<(), String> {
        let human = |bytes: u64| format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30));
        // Every append, read and send keeps its latency (16 bytes), some phases at once.
        let memory = self.records.saturating_mul(48);
        if let Some(available) = available_memory()
            && memory > available
        {
            return Err(format!(
                "--records {} needs about {} of memory for its latencies; {} is available",
                self.records,
                human(memory),
                human(available)
            ));
        }
        // The logs of one run: the 100-byte phases (append, producer, compaction, three keyed, the
        // peer's append) and the large-value one, plus the warm-up segments.
        let large = (self.large_value_bytes as u64).saturating_add(30);
        let log_disk = self
            .records
            .saturating_mul(7 * 130)
            .saturating_add((self.records / 4).saturating_mul(large))
            .saturating_add(64 << 20);
        // The store's: five no-fsync phases (two puts, two appends, dispatch lag) of at most
        // `records` messages of ~250 bytes with their queue entries, the filled store, and the
        // six stores' preallocated index files (420 MB each by default).
        let store_disk = self
            .records
            .saturating_mul(5 * 250)
            .saturating_add(self.store_messages.saturating_mul(300))
            .saturating_add(6 * 420_000_000);
        // The channel's: two thread counts of an append baseline and a channel, each of at most
        // `durable_ops` transactions of 100 events of ~130 bytes, in 64 MiB segments (one more
        // preallocated).
        let channel_disk = self.durable_ops.saturating_mul(100 * 130 * 4).saturating_add(16 * (64 << 20));
        let disk = match self.sections {
            Sections::All => log_disk.saturating_add(store_disk).saturating_add(channel_disk),
            Sections::Log => log_disk,
            Sections::Store => store_disk,
            // A log of `store_messages` 1 KiB records, at least 64 MiB.
            Sections::Budget => self.store_messages.saturating_mul(1100).max(80 << 20),
            Sections::Channel => channel_disk,
        };
        let parent = self.dir.clone().unwrap_or_else(std::env::temp_dir);
        if let Ok(fs) = rustix::fs::statvfs(&parent) {
            let available = fs.f_bavail.saturating_mul(fs.f_frsize);
            if disk > available {
                return Err(format!(
                    "--records {} needs about {} of disk in {}; {} is free (--dir chooses another place)",
                    self.records,
                    human(disk),
                    parent.display(),
                    human(available)
                ));
            }
        }
        Ok(())
    }
}

/// The most records a phase appends (`--records`): its latencies are kept in memory.
pub const MAX_RECORDS: u64 = 100_000_000;
/// The most operations of a durable phase (`--durable-ops`; each is also time-boxed).
pub const MAX_DURABLE_OPS: u64 = 10_000_000;

/// `MemAvailable` from `/proc/meminfo`, if it can be read.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// One measured figure (the median of the runs by throughput).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchResult {
    /// Phase name, e.g. `append_100B`.
    pub name: String,
    /// Records processed.
    pub records: u64,
    /// Operations (append calls, fsyncs, reads, sends).
    pub ops: u64,
    /// Payload bytes processed (values only).
    pub bytes: u64,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Records per second.
    pub records_per_sec: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Payload megabytes (10⁶ bytes) per second.
    pub mb_per_sec: f64,
    /// Latency percentiles of one operation, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// The phase this one is judged against, and this one's figure as a fraction of it (MB/s for
    /// raw write, operations/s for fsync-bound phases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// See `baseline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The peer's phase on the same workload (the `commitlog` crate), and this one's records per
    /// second as a multiple of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// See `peer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_ratio: Option<f64>,
    /// Appends per fsync (group commit), for durable phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub appends_per_fsync: Option<f64>,
    /// Anything else worth saying (the fsync-latency regime).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The store's largest lag between a message's append and its dispatch, milliseconds (store
    /// put and dispatch-lag phases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dispatch_lag_ms: Option<i64>,
    /// The most messages stored but not yet dispatched, sampled every millisecond (the
    /// dispatch-lag phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dispatch_lag_offsets: Option<u64>,
}

/// Runs every phase `options.runs` times, interleaved; `progress(phase, done, total)` reports.
pub fn run(options: &BenchOptions, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Vec<BenchResult>> {
    options.validate().map_err(|reason| Error::InvalidConfig { field: "bench options", reason })?;
    let parent = options.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut runs: Vec<Vec<BenchResult>> = Vec::new();
    for _ in 0..options.runs.max(1) {
        let dir = tempfile::Builder::new()
            .prefix("strata-bench-")
            .tempdir_in(&parent)
            .map_err(io_error("create", &parent))?;
        let results = phases::run_all(dir.path(), options, progress)?;
        for (i, result) in results.into_iter().enumerate() {
            if runs.len() <= i {
                runs.push(Vec::new());
            }
            runs[i].push(result);
        }
    }
    let mut medians: Vec<BenchResult> = runs.into_iter().map(median).collect();
    add_ratios(&mut medians);
    Ok(medians)
}

/// Each figure against its baseline.
fn add_ratios(results: &mut [BenchResult]) {
    let find = |results: &[BenchResult], name: &str| results.iter().find(|r| r.name == name).cloned();
    let raw_writes: Vec<BenchResult> = results
        .iter()
        .filter(|r| r.name.starts_with("raw_write") && r.name != "raw_write_fdatasync")
        .cloned()
        .collect();
    let peers: Vec<BenchResult> = results.iter().filter(|r| r.name.starts_with("commitlog_")).cloned().collect();
    let raw_sync = find(results, "raw_write_fdatasync");
    let durable_single = find(results, "durable_1t_100B_x1");
    let keyed_idle = find(results, "append_keyed_idle");
    let raw_reads: Vec<BenchResult> = results.iter().filter(|r| r.name.starts_with("raw_read_")).cloned().collect();
    let appends: Vec<BenchResult> = results.iter().filter(|r| r.name.starts_with("store_append_")).cloned().collect();
    let channel_appends: Vec<BenchResult> =
        results.iter().filter(|r| r.name.starts_with("channel_append_")).cloned().collect();
    for r in results.iter_mut() {
        let against = |base: &Option<BenchResult>, mb: bool| {
            base.as_ref().map(|b| {
                let ratio = if mb { r.mb_per_sec / b.mb_per_sec } else { r.ops_per_sec / b.ops_per_sec };
                (b.name.clone(), ratio)
            })
        };
        // Each append against the raw write of records of its size.
        let raw_write = raw_writes.iter().find(|w| w.bytes / w.records.max(1) == r.bytes / r.records.max(1));
        let pair = if r.name.starts_with("append_") && !r.name.starts_with("append_keyed_") && raw_write.is_some() {
            against(&raw_write.cloned(), true)
        } else if let Some(size) = r.name.strip_prefix("read_").and_then(|rest| rest.split('_').next()) {
            // The same log's files read and CRC-checked raw; compared in records per second.
            let raw = raw_reads.iter().find(|b| b.name == format!("raw_read_{size}"));
            raw.map(|b| (b.name.clone(), r.records_per_sec / b.records_per_sec))
        } else if r.name.starts_with("durable_1t") && r.name.contains("x100") {
            against(&raw_sync, false)
        } else if r.name.starts_with("durable_") && !r.name.starts_with("durable_1t") {
            against(&durable_single, false)
        } else if r.name.starts_with("append_keyed_during") {
            against(&keyed_idle, false)
        } else if let Some(threads) =
            r.name.strip_prefix("channel_put_").or_else(|| r.name.strip_prefix("channel_take_"))
        {
            // The same bytes appended by the log alone, 100 records per call, same threads.
            // Compared in events (records) per second: a take transaction may hold fewer than 100.
            let append = channel_appends.iter().find(|a| a.name.strip_prefix("channel_append_") == Some(threads));
            append.map(|a| (a.name.clone(), r.records_per_sec / a.records_per_sec))
        } else if let Some(policy_threads) = r.name.strip_prefix("store_put_") {
            // The same records appended by the log alone, one per call, same policy and threads.
            let append = appends.iter().find(|a| a.name.strip_prefix("store_append_") == Some(policy_threads));
            against(&append.cloned(), false)
        } else {
            None
        };
        if let Some((baseline, ratio)) = pair.filter(|(_, ratio)| ratio.is_finite()) {
            r.baseline = Some(baseline);
            r.ratio = Some(ratio);
        }
        // The peer's phase of the same workload: `append_100B` ↔ `commitlog_append_100B`, each
        // one-pass read of 100-byte records (`read_100B`, `_in_place`, `_pread`) ↔
        // `commitlog_read_100B` (which reads with `pread`), in records per second.
        let workload =
            match r.name.strip_suffix("_in_place").or_else(|| r.name.strip_suffix("_pread")).unwrap_or(&r.name) {
                name if name.starts_with("append_") || name.starts_with("read_") => Some(name.to_owned()),
                _ => None,
            };
        let peer = workload.and_then(|w| peers.iter().find(|p| p.name == format!("commitlog_{w}")));
        if let Some(peer) = peer.filter(|p| p.records_per_sec > 0.0) {
            r.peer = Some(peer.name.clone());
            r.peer_ratio = Some(r.records_per_sec / peer.records_per_sec);
        }
    }
}

fn median(mut runs: Vec<BenchResult>) -> BenchResult {
    runs.sort_by(|a, b| a.records_per_sec.total_cmp(&b.records_per_sec));
    runs.swap_remove(runs.len() / 2)
}

/// Which regime the disk's fsync latency was in (this machine's disk switches between ~0.35 ms and
/// 4–12 ms per fsync).
pub(crate) fn fsync_regime(p50: Duration) -> String {
    let ms = p50.as_secs_f64() * 1e3;
    if ms < 1.5 {
        format!("fast fsync regime: median fdatasync {ms:.2} ms")
    } else {
        format!("slow fsync regime: median fdatasync {ms:.2} ms")
    }
}

/// Writes back the page cache's dirty pages (the `sync` command) so one phase's writeback does not
/// slow the next. A failure only makes the next phase noisier, so it is ignored.
fn sync_all(dir: &Path) {
    let _ = std::process::Command::new("sync").current_dir(dir).status();
}

/// The nearest-rank `q` quantile of sorted samples, in microseconds.
fn percentile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q - 1e-9).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_nanos() as f64 / 1e3
}

/// A result from counts and per-operation latencies.
fn result(name: &str, records: u64, bytes: u64, elapsed: Duration, mut latencies: Vec<Duration>) -> BenchResult {
    latencies.sort_unstable();
    let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    BenchResult {
        name: name.to_owned(),
        records,
        ops: latencies.len() as u64,
        bytes,
        seconds,
        records_per_sec: records as f64 / seconds,
        ops_per_sec: latencies.len() as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
        p50_us: percentile_us(&latencies, 0.50),
        p99_us: percentile_us(&latencies, 0.99),
        p999_us: percentile_us(&latencies, 0.999),
        baseline: None,
        ratio: None,
        peer: None,
        peer_ratio: None,
        appends_per_fsync: None,
        note: None,
        max_dispatch_lag_ms: None,
        max_dispatch_lag_offsets: None,
    }
}

fn size_name(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) { format!("{}KiB", size / 1024) } else { format!("{size}B") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<Duration> = (1..=1000).map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&samples, 0.5), 500.0);
        assert_eq!(percentile_us(&samples, 0.99), 990.0);
        assert_eq!(percentile_us(&samples, 0.999), 999.0);
        assert_eq!(percentile_us(&[], 0.5), 0.0);
    }

    #[test]
    fn options_are_checked_before_any_work() {
        let ok = BenchOptions::default();
        assert_eq!(ok.validate(), Ok(()));
        let zero_batch = BenchOptions { batch: 0, ..BenchOptions::default() };
        assert!(zero_batch.validate().is_err_and(|e| e.contains("--batch")));
        let huge = BenchOptions { large_value_bytes: 1_000_000_000_000, ..BenchOptions::default() };
        assert!(huge.validate().is_err_and(|e| e.contains("--value-size")));
        let oversized = BenchOptions { batch: 10_000, ..BenchOptions::default() };
        let e = oversized.validate().expect_err("too large");
        assert!(e.contains("--batch") && e.contains("--value-size"), "{e}");
        let no_time = BenchOptions { store_seconds: 0.0, ..BenchOptions::default() };
        assert!(no_time.validate().is_err_and(|e| e.contains("--store-seconds")));
        for zero in [
            BenchOptions { store_messages: 0, ..BenchOptions::default() },
            BenchOptions { threads: 0, ..BenchOptions::default() },
            BenchOptions { records: 0, ..BenchOptions::default() },
            BenchOptions { runs: 0, ..BenchOptions::default() },
        ] {
            assert!(zero.validate().is_err());
        }
    }

    #[test]
    fn a_tiny_run_measures_every_phase() {
        let options = BenchOptions {
            records: 2000,
            batch: 10,
            threads: 2,
            producer_threads: 2,
            durable_ops: 20,
            durable_seconds: 1.0,
            runs: 1,
            sections: Sections::Log,
            ..BenchOptions::default()
        };
        let results = run(&options, &mut |_, _, _| {}).expect("bench");
        assert!(!results.iter().any(|r| r.name.starts_with("store_")), "the log section alone");
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        for expected in [
            "raw_write",
            "raw_write_100B",
            "commitlog_append_100B",
            "commitlog_read_100B",
            "raw_write_fdatasync",
            "append_100B",
            "append_1KiB",
            "read_100B",
            "read_1KiB",
            "read_100B_pread",
            "read_1KiB_pread",
            "raw_read_100B",
            "raw_read_1KiB",
            "read_100B_in_place",
            "read_1KiB_in_place",
        ] {
            assert!(names.contains(&expected), "{names:?}");
        }
        // Every read reads every record, and is judged against the raw read of the same files.
        for read in results.iter().filter(|r| r.name.starts_with("read_")) {
            let size = read.name.split('_').nth(1).expect("size");
            assert_eq!(read.baseline, Some(format!("raw_read_{size}")), "{read:?}");
            assert_eq!(read.records, if size == "100B" { 2000 } else { 500 }, "{read:?}");
        }
        assert!(names.iter().any(|n| n.starts_with("durable_2t")), "{names:?}");
        assert!(names.contains(&"producer_2t_100B") && names.contains(&"recovery_scan"), "{names:?}");
        for expected in
            ["compaction", "append_keyed_idle", "append_keyed_during_deletion", "append_keyed_during_compaction"]
        {
            assert!(names.contains(&expected), "{names:?}");
        }
        let compaction = results.iter().find(|r| r.name == "compaction").expect("compaction");
        assert!(compaction.bytes > 0 && compaction.records >= 2000, "{compaction:?}");
        let append = results.iter().find(|r| r.name == "append_100B").expect("append");
        assert_eq!((append.records, append.bytes), (2000, 200_000));
        assert_eq!(append.baseline.as_deref(), Some("raw_write_100B"), "the raw write of its records' size");
        assert_eq!(append.peer.as_deref(), Some("commitlog_append_100B"));
        // The peer read every record it appended, and strata's one-pass reads are compared with it.
        let peer_read = results.iter().find(|r| r.name == "commitlog_read_100B").expect("peer read");
        assert_eq!((peer_read.records, peer_read.bytes), (2000, 200_000));
        for name in ["read_100B", "read_100B_in_place"] {
            let read = results.iter().find(|r| r.name == name).expect("read");
            assert_eq!(read.peer.as_deref(), Some("commitlog_read_100B"), "{read:?}");
            assert!(read.peer_ratio.is_some_and(|ratio| ratio > 0.0), "{read:?}");
        }
        let pread = results.iter().find(|r| r.name == "read_100B_pread").expect("pread");
        assert_eq!(pread.peer.as_deref(), Some("commitlog_read_100B"), "the peer reads with pread");
        let large = results.iter().find(|r| r.name == "read_1KiB").expect("read");
        assert_eq!(large.peer, None, "the peer reads 100-byte records only");
        let keyed = results.iter().find(|r| r.name == "append_keyed_during_deletion").expect("keyed");
        assert_eq!(keyed.baseline.as_deref(), Some("append_keyed_idle"));
        let large = results.iter().find(|r| r.name == "append_1KiB").expect("append");
        assert_eq!(large.baseline.as_deref(), Some("raw_write"));
        assert!(results.iter().find(|r| r.name == "raw_write_fdatasync").and_then(|r| r.note.as_ref()).is_some());
    }

    #[test]
    fn a_tiny_channel_run_measures_puts_and_takes_against_appends_of_the_same_bytes() {
        let options = BenchOptions {
            threads: 2,
            durable_ops: 5,
            durable_seconds: 1.0,
            runs: 1,
            sections: Sections::Channel,
            ..BenchOptions::default()
        };
        let results = run(&options, &mut |_, _, _| {}).expect("bench");
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert!(!names.contains(&"raw_write") && !names.iter().any(|n| n.starts_with("store_")), "{names:?}");
        for threads in [1, 2] {
            let put = results.iter().find(|r| r.name == format!("channel_put_{threads}t")).expect("put");
            let take = results.iter().find(|r| r.name == format!("channel_take_{threads}t")).expect("take");
            let baseline = format!("channel_append_{threads}t");
            assert_eq!((put.baseline.as_deref(), take.baseline.as_deref()), (Some(&*baseline), Some(&*baseline)));
            // At most 5 transactions of 100 events, and the take phase drains what was put.
            assert!(put.records > 0 && put.records <= 500 && put.records % 100 == 0, "{put:?}");
            assert_eq!((take.records, take.bytes), (put.records, put.records * 100), "{take:?}");
            let replay = results.iter().find(|r| r.name == format!("channel_replay_{threads}t")).expect("replay");
            assert_eq!(replay.records, put.records);
        }
    }

    #[test]
    fn a_tiny_store_run_measures_every_store_phase_against_its_log_baseline() {
        let options = BenchOptions {
            records: 500,
            threads: 2,
            durable_ops: 20,
            runs: 1,
            sections: Sections::Store,
            store_seconds: 0.2,
            store_messages: 300,
            ..BenchOptions::default()
        };
        let results = run(&options, &mut |_, _, _| {}).expect("bench");
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert!(!names.contains(&"raw_write"), "the store section alone: {names:?}");
        for (threads, policy) in [(1, "always"), (2, "always"), (1, "never"), (2, "never")] {
            let put = results.iter().find(|r| r.name == format!("store_put_{threads}t_{policy}")).expect("put");
            let baseline = format!("store_append_{threads}t_{policy}");
            assert!(names.contains(&baseline.as_str()), "{names:?}");
            assert_eq!(put.baseline.as_deref(), Some(baseline.as_str()));
            assert!(put.max_dispatch_lag_ms.is_some(), "{put:?}");
        }
        let lag = results.iter().find(|r| r.name == "store_dispatch_lag_2t").expect("dispatch lag");
        assert!(lag.max_dispatch_lag_offsets.is_some() && lag.records > 0, "{lag:?}");
        for batch in [32, 1024] {
            let get = results.iter().find(|r| r.name == format!("store_get_x{batch}")).expect("get");
            assert_eq!((get.records, get.bytes), (300, 30_000), "every message once");
        }
        let query = results.iter().find(|r| r.name == "store_query_by_key").expect("query");
        assert!(query.ops > 0 && query.note.is_none(), "every key found: {query:?}");
        for name in ["store_recovery_from_checkpoint", "store_recovery_from_start"] {
            let recovery = results.iter().find(|r| r.name == name).expect("recovery");
            assert_eq!(recovery.records, 300);
        }
    }
}
