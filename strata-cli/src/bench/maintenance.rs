//! The maintenance phases of `strata bench`: compaction throughput, and what retention deletion
//! and compaction running in the background do to append latency (the same appends measured
//! idle, during deletions, during compaction passes).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{BenchOptions, BenchResult, result};
use crate::tools::text::count;
use strata_log::{Log, LogConfig, Record, Result};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

const SEGMENT_BYTES: u64 = 4 << 20;
const VALUE_BYTES: usize = 100;
/// Distinct keys: most records are superseded, as in a changelog of a small table.
const KEYS: u64 = 10_000;

fn config(options: &BenchOptions) -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        flush_policy: options.flush_policy,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// Appends `calls` batches of keyed records (keys cycling over `KEYS`), starting at record `from`.
fn append_keyed(
    log: &Log,
    options: &BenchOptions,
    from: u64,
    calls: u64,
    mut each: impl FnMut(u64, Duration),
) -> Result<()> {
    let value = vec![0x3cu8; VALUE_BYTES];
    let keys: Vec<String> = (0..KEYS).map(|k| format!("key-{k:06}")).collect();
    let batch = options.batch.max(1) as u64;
    for call in 0..calls {
        let first = from + call * batch;
        let records: Vec<Record<'_>> = (first..first + batch)
            .map(|i| Record::new(&value).with_key(keys[(i % KEYS) as usize].as_bytes()))
            .collect();
        let t = Instant::now();
        log.append(&records)?;
        each(call, t.elapsed());
    }
    Ok(())
}

/// One compaction pass over a log of `records` keyed records, 90%+ of them superseded: input
/// MB/s (bytes of the segments rewritten).
pub(super) fn compaction(dir: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<BenchResult> {
    let records = (options.records / 4).max(KEYS);
    // At least eight sealed segments whatever the size of the run.
    let segment_bytes = (records * (VALUE_BYTES as u64 + 30) / 8).clamp(64 << 10, SEGMENT_BYTES);
    let log = Log::open(dir, LogConfig { segment_bytes, ..config(options) })?;
    let calls = records.div_ceil(options.batch.max(1) as u64);
    append_keyed(&log, options, 0, calls, |call, _| {
        if call % 1024 == 0 {
            progress("compaction (filling)", call, calls);
        }
    })?;
    log.flush()?;
    progress("compaction", 0, 1);
    let started = Instant::now();
    let report = log.compact()?.unwrap_or_default();
    let elapsed = started.elapsed();
    log.close()?;
    let mut r =
        result("compaction", report.records_kept + report.records_removed, report.bytes_before, elapsed, vec![elapsed]);
    r.note = Some(format!(
        "{}, {:.1} MB -> {:.1} MB, {} removed",
        count(report.segments_cleaned, "segment", "segments"),
        report.bytes_before as f64 / 1e6,
        report.bytes_after as f64 / 1e6,
        count(report.records_removed, "record", "records")
    ));
    Ok(r)
}

/// What runs beside the measured appends.
#[derive(Debug, Clone, Copy)]
pub(super) enum Background {
    Idle,
    /// `delete_records_before` keeping about four segments, in a loop.
    Deletion,
    /// Compaction passes, in a loop.
    Compaction,
}

/// Appends of keyed batches with `background` running: the latency percentiles are the figure.
pub(super) fn append_beside(
    dir: &Path,
    options: &BenchOptions,
    background: Background,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = match background {
        Background::Idle => "append_keyed_idle",
        Background::Deletion => "append_keyed_during_deletion",
        Background::Compaction => "append_keyed_during_compaction",
    };
    let log = Log::open(dir, config(options))?;
    // Start with sealed segments for the background work to chew on.
    let batch = options.batch.max(1) as u64;
    let warm = (SEGMENT_BYTES * 4 / (VALUE_BYTES as u64 + 30) / batch).max(1);
    append_keyed(&log, options, 0, warm, |_, _| {})?;
    let calls = (options.records / batch).max(1);
    let done = AtomicBool::new(false);
    let mut latencies = Vec::with_capacity(calls as usize);
    let mut background_runs = 0u64;
    let elapsed = std::thread::scope(|s| -> Result<Duration> {
        let worker = s.spawn(|| -> Result<u64> {
            let mut runs = 0;
            while !done.load(Ordering::Relaxed) {
                match background {
                    Background::Idle => return Ok(0),
                    Background::Deletion => {
                        let keep = SEGMENT_BYTES * 4 / (VALUE_BYTES as u64 + 30);
                        log.delete_records_before(log.next_offset().saturating_sub(keep))?;
                    }
                    Background::Compaction => {
                        log.compact()?;
                    }
                }
                runs += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(runs)
        });
        let started = Instant::now();
        let appended = append_keyed(&log, options, warm * batch, calls, |call, latency| {
            latencies.push(latency);
            if call % 1024 == 0 {
                progress(name, call, calls);
            }
        });
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        background_runs = worker.join().unwrap_or(Ok(0))?;
        appended.map(|()| elapsed)
    })?;
    let metrics = log.metrics();
    log.close()?;
    let records = calls * batch;
    let mut r = result(name, records, records * VALUE_BYTES as u64, elapsed, latencies);
    r.note = match background {
        Background::Idle => None,
        Background::Deletion => Some(format!(
            "{}, {} deleted",
            count(background_runs, "deletion call", "deletion calls"),
            count(metrics.retention_deletions, "segment", "segments")
        )),
        Background::Compaction => {
            let passes = count(metrics.compaction_passes, "compaction pass", "compaction passes");
            Some(format!("{passes}, ratio {:.2}", metrics.compaction_ratio))
        }
    };
    Ok(r)
}
