//! `strata bench`: throughput and latency of the main operations, measured in one run so the figures
//! are comparable. Library code returning values; the binary only renders them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::log::{Log, Record};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Where to put the logs (a temporary directory inside it); `None` for the system temp dir.
    pub dir: Option<PathBuf>,
    /// Records appended per value size.
    pub records: u64,
    /// Records per append call.
    pub batch: usize,
    /// Value sizes in bytes, one append and one read phase each.
    pub value_sizes: Vec<usize>,
    /// Repetitions of each phase; the median run is reported.
    pub runs: usize,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions { dir: None, records: 2_000_000, batch: 100, value_sizes: vec![100, 1024], runs: 3 }
    }
}

/// One measured figure (the median of the runs by throughput).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchResult {
    /// Phase name, e.g. `append_100B`.
    pub name: String,
    /// Records processed.
    pub records: u64,
    /// Payload bytes processed (values only).
    pub bytes: u64,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Records per second.
    pub records_per_sec: f64,
    /// Payload megabytes (10⁶ bytes) per second.
    pub mb_per_sec: f64,
    /// Latency percentiles of one operation (an append call or a read call), microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

/// Runs every phase; `progress(phase, done, total)` is called as work completes.
pub fn run(options: &BenchOptions, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<Vec<BenchResult>> {
    let parent = options.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut results = Vec::new();
    for &size in &options.value_sizes {
        let mut appends = Vec::new();
        let mut reads = Vec::new();
        for _ in 0..options.runs.max(1) {
            let dir = tempfile::Builder::new()
                .prefix("strata-bench-")
                .tempdir_in(&parent)
                .map_err(Error::io("create", &parent))?;
            let log = Log::open(dir.path(), LogConfig::default())?;
            appends.push(append_phase(&log, options, size, progress)?);
            reads.push(read_phase(&log, size, progress)?);
            log.close()?;
        }
        results.push(median(appends));
        results.push(median(reads));
    }
    Ok(results)
}

fn append_phase(
    log: &Log,
    options: &BenchOptions,
    size: usize,
    progress: &mut dyn FnMut(&str, u64, u64),
) -> Result<BenchResult> {
    let name = format!("append_{}", size_name(size));
    let value = vec![0xa5u8; size];
    let records: Vec<Record<'_>> = (0..options.batch.max(1)).map(|_| Record::new(&value)).collect();
    let calls = options.records.div_ceil(records.len() as u64);
    let mut latencies = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for call in 0..calls {
        let t = Instant::now();
        log.append(&records)?;
        latencies.push(t.elapsed());
        if call % 1000 == 0 {
            progress(&name, call, calls);
        }
    }
    let elapsed = started.elapsed();
    let count = calls * records.len() as u64;
    Ok(result(name, count, count * size as u64, elapsed, latencies))
}

fn read_phase(log: &Log, size: usize, progress: &mut dyn FnMut(&str, u64, u64)) -> Result<BenchResult> {
    let name = format!("read_{}", size_name(size));
    let end = log.next_offset();
    let (mut next, mut count, mut bytes) = (log.start_offset(), 0u64, 0u64);
    let mut latencies = Vec::new();
    let started = Instant::now();
    while next < end {
        let t = Instant::now();
        let mut reader = log.read(next, 1 << 20)?;
        for record in reader.by_ref() {
            bytes += record?.value().map_or(0, <[u8]>::len) as u64;
            count += 1;
        }
        latencies.push(t.elapsed());
        next = reader.next_offset();
        progress(&name, next, end);
    }
    Ok(result(name, count, bytes, started.elapsed(), latencies))
}

fn result(name: String, records: u64, bytes: u64, elapsed: Duration, mut latencies: Vec<Duration>) -> BenchResult {
    latencies.sort_unstable();
    let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    BenchResult {
        name,
        records,
        bytes,
        seconds,
        records_per_sec: records as f64 / seconds,
        mb_per_sec: bytes as f64 / seconds / 1e6,
        p50_us: percentile_us(&latencies, 0.50),
        p99_us: percentile_us(&latencies, 0.99),
        p999_us: percentile_us(&latencies, 0.999),
    }
}

/// The `q` quantile of sorted samples, in microseconds (nearest rank).
fn percentile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q - 1e-9).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_nanos() as f64 / 1e3
}

fn median(mut runs: Vec<BenchResult>) -> BenchResult {
    runs.sort_by(|a, b| a.records_per_sec.total_cmp(&b.records_per_sec));
    runs.swap_remove(runs.len() / 2)
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
    fn a_tiny_run_measures_every_phase() {
        let options = BenchOptions { records: 1000, batch: 10, value_sizes: vec![100], runs: 1, dir: None };
        let results = run(&options, &mut |_, _, _| {}).expect("bench");
        let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["append_100B", "read_100B"]);
        assert!(results.iter().all(|r| r.records == 1000 && r.bytes == 100_000));
    }
}
