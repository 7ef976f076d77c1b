//! The map budget's phases of `strata bench`: random reads over a log ten times larger than the
//! budget's bytes, against the same reads unlimited (in the same run: under the process's default
//! budget, far larger than this log, so nothing is unmapped), and what one direct reclaim (a
//! reader unmapping before it maps) costs.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{BenchOptions, BenchResult, result};
use strata_log::{FlushPolicy, Log, LogConfig, MapBudget, MapBudgetConfig, Record, Result};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);
type Phase<'a> = &'a mut dyn FnMut(Result<BenchResult>) -> Result<()>;

const SEGMENT_BYTES: u64 = 1 << 20;
const VALUE_BYTES: usize = 1024;
/// Reader threads.
const READERS: u64 = 4;

/// One run of the budget's phases.
pub(super) fn run_all(dir: &Path, options: &BenchOptions, phase: Phase<'_>, progress: Progress<'_>) -> Result<()> {
    let log_dir = dir.join("budget_log");
    let records = fill(&log_dir, options)?;
    let log_bytes = records * VALUE_BYTES as u64;
    phase(read(&log_dir, records, None, options, "budget_read_unlimited", progress))?;
    let budget = MapBudget::new(MapBudgetConfig {
        max_mapped_bytes: (log_bytes / 10).max(SEGMENT_BYTES * 2),
        max_maps: 4_096,
        ..MapBudgetConfig::default()
    })?;
    phase(read(&log_dir, records, Some(budget), options, "budget_read_10x", progress))?;
    Ok(())
}

/// A log of `store_messages` 1 KiB records (at least 64 segments).
fn fill(dir: &Path, options: &BenchOptions) -> Result<u64> {
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Log::open(dir, config)?;
    let records = options.store_messages.max(64 * SEGMENT_BYTES / VALUE_BYTES as u64);
    let value = vec![7u8; VALUE_BYTES];
    let batch: Vec<Record> = (0..64).map(|_| Record::new(&value)).collect();
    while log.next_offset() < records {
        log.append(&batch)?;
    }
    let records = log.next_offset();
    log.close()?;
    Ok(records)
}

/// Random single-record reads from `READERS` threads for `store_seconds`.
fn read(
    dir: &Path,
    records: u64,
    budget: Option<MapBudget>,
    options: &BenchOptions,
    name: &str,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        flush_policy: FlushPolicy::Never,
        map_budget: budget.clone(),
        ..LogConfig::default()
    };
    let log = Log::open(dir, config)?;
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let started = Instant::now();
    let latencies = std::thread::scope(|scope| -> Result<Vec<Duration>> {
        let readers: Vec<_> = (0..READERS)
            .map(|thread| {
                let (log, stop, reads) = (&log, &stop, &reads);
                scope.spawn(move || -> Result<Vec<Duration>> {
                    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ thread; // xorshift64: the same reads every run
                    let mut latencies = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        let t = Instant::now();
                        let mut reader = log.read(state % records, 1)?;
                        reader.next().transpose()?;
                        latencies.push(t.elapsed());
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(latencies)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(options.store_seconds));
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for reader in readers {
            all.extend(reader.join().expect("a reader thread panicked")?);
        }
        Ok(all)
    })?;
    let elapsed = started.elapsed();
    log.close()?;
    progress(name, 1, 1);
    let count = reads.load(Ordering::Relaxed);
    let mut result = result(name, count, count * VALUE_BYTES as u64, elapsed, latencies);
    if let Some(budget) = budget {
        let metrics = budget.metrics();
        result.note = Some(format!(
            "{READERS} threads over {} MB, budget {} MB; direct reclaims {} (stall p50 {} µs, p99 {} µs), background {}, maps ≤ {}",
            records * VALUE_BYTES as u64 / 1_000_000,
            budget.config().max_mapped_bytes / 1_000_000,
            metrics.direct_stall.count,
            metrics.direct_stall.p50_us,
            metrics.direct_stall.p99_us,
            metrics.reclaimed_background,
            budget.config().max_maps,
        ));
    }
    Ok(result)
}
