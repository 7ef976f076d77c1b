//! The channel's phases of `strata bench`: events/s through put-commit and take-commit, with
//! transactions of 100 events of 100 bytes, from 1 and `--threads` threads on each side, under
//! `FlushPolicy::Always` (the durability the channel promises), against `Log::append` of the same
//! bytes (100 records of 100 bytes per call, same threads, same policy) measured in the same run.
//! The take phase drains, after a reopen, what the put phase committed; the reopen's replay is a
//! figure too.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::store::drive;
use super::{BenchOptions, BenchResult, result};
use strata_log::internals::io_error;
use strata_log::{Channel, ChannelConfig, Event, FlushPolicy, Log, LogConfig, Record, Result};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);
type Phase<'a> = &'a mut dyn FnMut(Result<BenchResult>) -> Result<()>;

/// Events per transaction, and records per append of the baseline.
pub(super) const EVENTS_PER_TRANSACTION: usize = 100;
const BODY_BYTES: usize = 100;

/// One run of every channel phase, in order.
pub(super) fn run_all(dir: &Path, options: &BenchOptions, phase: Phase<'_>, progress: Progress<'_>) -> Result<()> {
    let mut thread_counts = vec![1];
    if options.threads > 1 {
        thread_counts.push(options.threads.min(4));
    }
    for threads in thread_counts {
        // Side by side, so the disk's drifting fsync latency hits all three alike.
        phase(append(dir, options, threads, progress))?;
        let root = dir.join(format!("channel_{threads}t"));
        phase(put(&root, options, threads, progress))?;
        let (replayed, took) = take(&root, threads, progress)?;
        phase(Ok(replayed))?;
        phase(Ok(took))?;
    }
    Ok(())
}

/// The channel of the put phase: room for every event it may put, and the default log.
fn config(options: &BenchOptions, keep_alive_ms: u64) -> ChannelConfig {
    let most = options.durable_ops.saturating_mul(EVENTS_PER_TRANSACTION as u64).min(u64::from(u32::MAX));
    ChannelConfig {
        capacity: most,
        transaction_capacity: EVENTS_PER_TRANSACTION as u64,
        byte_capacity: u64::MAX,
        keep_alive_ms,
        log: LogConfig { flush_policy: FlushPolicy::Always, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    }
}

/// The baseline: `Log::append` of 100 records of 100 bytes per call, durable when it returns.
fn append(dir: &Path, options: &BenchOptions, threads: usize, progress: Progress<'_>) -> Result<BenchResult> {
    let name = format!("channel_append_{threads}t");
    let log = Log::open(dir.join(&name), config(options, 0).log)?;
    let value = [0x5au8; BODY_BYTES];
    let records = vec![Record::new(&value); EVENTS_PER_TRANSACTION];
    let (latencies, elapsed) =
        drive(dir, threads, options.durable_ops, options.durable_seconds, |_, _| log.append(&records).map(drop))?;
    progress(&name, 1, 1);
    let appends_per_sync = log.metrics().appends_per_sync;
    log.close()?;
    let events = latencies.len() as u64 * EVENTS_PER_TRANSACTION as u64;
    let mut r = result(&name, events, events * BODY_BYTES as u64, elapsed, latencies);
    r.appends_per_fsync = Some(appends_per_sync);
    Ok(r)
}

/// Transactions of 100 puts, committed, from `threads` threads.
fn put(root: &Path, options: &BenchOptions, threads: usize, progress: Progress<'_>) -> Result<BenchResult> {
    let name = format!("channel_put_{threads}t");
    let channel = Channel::open(root, config(options, 0))?;
    let event = Event::new(vec![0x5au8; BODY_BYTES]);
    let (latencies, elapsed) = drive(root, threads, options.durable_ops, options.durable_seconds, |_, _| {
        let mut tx = channel.transaction();
        for _ in 0..EVENTS_PER_TRANSACTION {
            tx.put(event.clone())?;
        }
        tx.commit()
    })?;
    progress(&name, 1, 1);
    let metrics = channel.metrics()?;
    channel.close()?;
    let events = metrics.put_successes;
    let mut r = result(&name, events, events * BODY_BYTES as u64, elapsed, latencies);
    r.appends_per_fsync = Some(metrics.log.appends_per_sync);
    Ok(r)
}

/// Reopens the put phase's channel (the replay, a figure of its own), then drains it with
/// transactions of 100 takes, committed, from `threads` threads.
fn take(root: &Path, threads: usize, progress: Progress<'_>) -> Result<(BenchResult, BenchResult)> {
    let name = format!("channel_take_{threads}t");
    let started = Instant::now();
    // Nothing is put any more: a take on an empty channel returns at once.
    let channel = Channel::open(root, ChannelConfig { keep_alive_ms: 0, ..config(&BenchOptions::default(), 0) })?;
    let replay_elapsed = started.elapsed();
    let held = channel.metrics()?.events_recovered;
    let replayed = result(
        &format!("channel_replay_{threads}t"),
        held,
        held * BODY_BYTES as u64,
        replay_elapsed,
        vec![replay_elapsed],
    );
    let taken = AtomicU64::new(0);
    let started = Instant::now();
    let joined = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let (channel, taken) = (&channel, &taken);
                s.spawn(move || -> Result<Vec<Duration>> {
                    let mut latencies = Vec::new();
                    loop {
                        let t = Instant::now();
                        let mut tx = channel.transaction();
                        while tx.takes() < EVENTS_PER_TRANSACTION && tx.take()?.is_some() {}
                        let n = tx.takes() as u64;
                        tx.commit()?;
                        if n == 0 {
                            return Ok(latencies);
                        }
                        latencies.push(t.elapsed());
                        taken.fetch_add(n, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join()).collect::<Vec<_>>()
    });
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    for worker in joined {
        let worker = worker.map_err(|_| io_error("join bench thread", root)(std::io::Error::other("panicked")))?;
        latencies.extend(worker?);
    }
    progress(&name, 1, 1);
    let metrics = channel.metrics()?;
    channel.close()?;
    let events = taken.load(Ordering::Relaxed);
    let mut r = result(&name, events, events * BODY_BYTES as u64, elapsed, latencies);
    r.appends_per_fsync = Some(metrics.log.appends_per_sync);
    Ok((replayed, r))
}
