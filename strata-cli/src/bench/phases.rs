//! The phases of `strata bench`, one function each.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::commitlog;
use super::maintenance::{self, Background};
use super::{BenchOptions, BenchResult, budget, channel, fsync_regime, result, size_name, store, sync_all};
use strata_log::internals::io_error;
use strata_log::{Error, FlushPolicy, Log, LogConfig, Producer, ProducerConfig, ReadPath, Record, Result};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

const SEGMENT_BYTES: u64 = 256 << 20;
const SMALL: usize = 100;

/// One run of every phase of the chosen sections, in order, with a `sync` before each.
pub(super) fn run_all(dir: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<Vec<BenchResult>> {
    let mut out = Vec::new();
    let mut phase = |r: Result<BenchResult>| -> Result<()> {
        sync_all(dir);
        out.push(r?);
        Ok(())
    };
    if options.sections.log() {
        log_phases(dir, options, &mut phase, progress)?;
    }
    if options.sections.store() {
        store::run_all(dir, options, &mut phase, progress)?;
    }
    if options.sections.budget() {
        budget::run_all(dir, options, &mut phase, progress)?;
    }
    if options.sections.channel() {
        channel::run_all(dir, options, &mut phase, progress)?;
    }
    Ok(out)
}

/// The log's phases, in order.
fn log_phases(
    dir: &Path,
    options: &BenchOptions,
    phase: &mut dyn FnMut(Result<BenchResult>) -> Result<()>,
    progress: Progress<'_>,
) -> Result<()> {
    let large = options.large_value_bytes;
    let large_records = (options.records / 4).max(options.batch as u64);
    phase(raw_write(dir, options, large, large_records, "raw_write", progress))?;
    phase(raw_write(dir, options, SMALL, options.records, "raw_write_100B", progress))?;
    for (size, records, name) in [(SMALL, options.records, "small"), (large, large_records, "large")] {
        let log_dir = dir.join(name);
        phase(append(&log_dir, options, size, records, progress))?;
        phase(raw_read(&log_dir, size, records, progress))?;
        phase(read(&log_dir, options, size, Reads::Copied(ReadPath::Mmap), progress))?;
        phase(read(&log_dir, options, size, Reads::InPlace, progress))?;
        phase(read(&log_dir, options, size, Reads::Copied(ReadPath::Pread), progress))?;
    }
    // The peer on the 100-byte workloads.
    let peer_dir = dir.join("commitlog");
    phase(commitlog::append(&peer_dir, options, SMALL, options.records, progress))?;
    phase(commitlog::read(&peer_dir, SMALL, progress))?;
    // The fsync baseline right before the durable phases: the disk's fsync latency drifts.
    phase(raw_write_fdatasync(dir, options, large, progress))?;
    phase(durable(dir, options, 1, options.batch, large, progress))?;
    phase(durable(dir, options, 1, 1, SMALL, progress))?;
    phase(durable(dir, options, options.threads, 1, SMALL, progress))?;
    phase(producer(dir, options, progress))?;
    phase(recovery_scan(&dir.join("large"), options, progress))?;
    phase(maintenance::compaction(&dir.join("compaction"), options, progress))?;
    for background in [Background::Deletion, Background::Compaction, Background::Idle] {
        let log_dir = dir.join(format!("beside-{background:?}"));
        phase(maintenance::append_beside(&log_dir, options, background, progress))?;
    }
    Ok(())
}

/// The bytes of one batch of `batch` records of `size`-byte values, as written raw.
fn raw_chunk(options: &BenchOptions, size: usize) -> Vec<u8> {
    // About what the log writes for such a batch: the values plus ~12 bytes of framing each.
    vec![0x5a; options.batch * (size + 12) + 61]
}

/// The physical baseline: `write(2)` of batch-sized chunks of `size`-byte records, no fsync.
fn raw_write(
    dir: &Path,
    options: &BenchOptions,
    size: usize,
    records: u64,
    name: &str,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let path = dir.join(name);
    let mut file = File::create(&path).map_err(io_error("create", &path))?;
    let chunk = raw_chunk(options, size);
    let calls = records.div_ceil(options.batch as u64);
    let mut latencies = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for call in 0..calls {
        let t = Instant::now();
        file.write_all(&chunk).map_err(io_error("write", &path))?;
        latencies.push(t.elapsed());
        if call % 256 == 0 {
            progress(name, call, calls);
        }
    }
    let elapsed = started.elapsed();
    drop(file);
    std::fs::remove_file(&path).map_err(io_error("unlink", &path))?;
    let batch = options.batch as u64;
    Ok(result(name, calls * batch, calls * batch * size as u64, elapsed, latencies))
}

/// The durable baseline: `write(2)` of a batch-sized chunk then `fdatasync`, per batch.
fn raw_write_fdatasync(dir: &Path, options: &BenchOptions, size: usize, progress: Progress<'_>) -> Result<BenchResult> {
    let path = dir.join("raw_write_fdatasync");
    let mut file = File::create(&path).map_err(io_error("create", &path))?;
    let chunk = raw_chunk(options, size);
    let deadline = Instant::now() + Duration::from_secs_f64(options.durable_seconds);
    let mut latencies = Vec::new();
    let started = Instant::now();
    while (latencies.len() as u64) < options.durable_ops.div_ceil(4) && Instant::now() < deadline {
        let t = Instant::now();
        file.write_all(&chunk).map_err(io_error("write", &path))?;
        file.sync_data().map_err(io_error("fdatasync", &path))?;
        latencies.push(t.elapsed());
        progress("raw_write_fdatasync", latencies.len() as u64, options.durable_ops.div_ceil(4));
    }
    let elapsed = started.elapsed();
    std::fs::remove_file(&path).map_err(io_error("unlink", &path))?;
    let ops = latencies.len() as u64;
    let mut sorted = latencies.clone();
    sorted.sort_unstable();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let batch = options.batch as u64;
    let mut r = result("raw_write_fdatasync", ops * batch, ops * batch * size as u64, elapsed, latencies);
    r.note = Some(fsync_regime(p50));
    Ok(r)
}

/// Appends of `batch` records per call, under the options' flush policy.
fn append(
    dir: &Path,
    options: &BenchOptions,
    size: usize,
    records: u64,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = format!("append_{}", size_name(size));
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: options.flush_policy, ..LogConfig::default() };
    let log = Log::open(dir, config)?;
    let value = vec![0xa5u8; size];
    let batch: Vec<Record<'_>> = (0..options.batch.max(1)).map(|_| Record::new(&value)).collect();
    let calls = records.div_ceil(batch.len() as u64);
    let mut latencies = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for call in 0..calls {
        let t = Instant::now();
        log.append(&batch)?;
        latencies.push(t.elapsed());
        if call % 1024 == 0 {
            progress(&name, call, calls);
        }
    }
    let elapsed = started.elapsed();
    log.close()?;
    let count = calls * batch.len() as u64;
    Ok(result(&name, count, count * size as u64, elapsed, latencies))
}

/// How a read phase reads.
#[derive(Debug, Clone, Copy)]
enum Reads {
    /// `Log::read` (owned records), through the mapping or with `pread` (`LogConfig::read_path`).
    Copied(ReadPath),
    /// `Log::read_batches` (in place, through the mapping).
    InPlace,
}

/// Reads of everything appended, 1 MiB of batches per call, every batch CRC-checked, each
/// record's value looked at.
fn read(dir: &Path, options: &BenchOptions, size: usize, reads: Reads, progress: Progress<'_>) -> Result<BenchResult> {
    let (name, read_path) = match reads {
        Reads::Copied(ReadPath::Mmap) => (format!("read_{}", size_name(size)), ReadPath::Mmap),
        Reads::Copied(ReadPath::Pread) => (format!("read_{}_pread", size_name(size)), ReadPath::Pread),
        Reads::InPlace => (format!("read_{}_in_place", size_name(size)), ReadPath::Mmap),
    };
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        flush_policy: options.flush_policy,
        read_path,
        ..LogConfig::default()
    };
    let log = Log::open(dir, config)?;
    let end = log.next_offset();
    let (mut next, mut count, mut bytes) = (log.start_offset(), 0u64, 0u64);
    let mut latencies = Vec::new();
    let started = Instant::now();
    while next < end {
        let t = Instant::now();
        next = match reads {
            Reads::Copied(_) => {
                let mut reader = log.read(next, 1 << 20)?;
                for record in reader.by_ref() {
                    bytes += record?.value().map_or(0, <[u8]>::len) as u64;
                    count += 1;
                }
                reader.next_offset()
            }
            Reads::InPlace => log.read_batches(next, 1 << 20, |batch| {
                for record in batch.records() {
                    bytes += record.value().map_or(0, <[u8]>::len) as u64;
                    count += 1;
                }
                std::ops::ControlFlow::Continue(())
            })?,
        };
        latencies.push(t.elapsed());
        progress(&name, next, end);
    }
    Ok(result(&name, count, bytes, started.elapsed(), latencies))
}

/// The read baseline: every `.log` file of the log at `dir` read with `pread`, 1 MiB at a time,
/// and each chunk CRC-checked — a reader that decodes nothing and trusts no index. `records` is
/// what the log holds, so records per second compare with the read phases'.
fn raw_read(dir: &Path, size: usize, records: u64, progress: Progress<'_>) -> Result<BenchResult> {
    use std::os::unix::fs::FileExt as _;
    let name = format!("raw_read_{}", size_name(size));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_error("list", dir))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut buf = vec![0u8; 1 << 20];
    let (mut bytes, mut checksum) = (0u64, 0u32);
    let mut latencies = Vec::new();
    let started = Instant::now();
    for path in &files {
        let file = File::open(path).map_err(io_error("open", path))?;
        let mut position = 0;
        loop {
            let t = Instant::now();
            let n = file.read_at(&mut buf, position).map_err(io_error("pread", path))?;
            if n == 0 {
                break;
            }
            checksum ^= crc32fast::hash(&buf[..n]);
            latencies.push(t.elapsed());
            position += n as u64;
            bytes += n as u64;
        }
    }
    let elapsed = started.elapsed();
    std::hint::black_box(checksum);
    progress(&name, 1, 1);
    Ok(result(&name, records, bytes, elapsed, latencies))
}

/// `FlushPolicy::Always` appends from `threads` threads, `batch` records of `size` bytes per call,
/// until `durable_ops` calls or `durable_seconds`.
fn durable(
    dir: &Path,
    options: &BenchOptions,
    threads: usize,
    batch: usize,
    size: usize,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = format!("durable_{threads}t_{}_x{batch}", size_name(size));
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: FlushPolicy::Always, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.join(&name), config)?);
    let calls = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(options.durable_seconds);
    let started = Instant::now();
    let workers: Vec<_> = (0..threads.max(1))
        .map(|_| {
            let (log, calls, total) = (Arc::clone(&log), Arc::clone(&calls), options.durable_ops);
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let value = vec![0x3cu8; size];
                let records: Vec<Record<'_>> = (0..batch).map(|_| Record::new(&value)).collect();
                let mut latencies = Vec::new();
                while calls.fetch_add(1, Ordering::Relaxed) < total && Instant::now() < deadline {
                    let t = Instant::now();
                    log.append(&records)?;
                    latencies.push(t.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let latencies = join_latencies(dir, workers, |e| e)?;
    let elapsed = started.elapsed();
    progress(&name, 1, 1);
    let metrics = log.metrics();
    let ops = latencies.len() as u64;
    let mut r = result(&name, ops * batch as u64, ops * (batch * size) as u64, elapsed, latencies);
    r.appends_per_fsync = Some(metrics.appends_per_sync);
    Ok(r)
}

/// 100-byte records sent one at a time from `producer_threads` threads, no fsync.
fn producer(dir: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<BenchResult> {
    let threads = options.producer_threads.max(1);
    let name = format!("producer_{threads}t_100B");
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.join(&name), config)?);
    let failed = |e: Error| io_error("produce", dir)(std::io::Error::other(e));
    let producer = Arc::new(Producer::new(Arc::clone(&log), ProducerConfig::default()).map_err(failed)?);
    let per_thread = options.records / threads as u64;
    let started = Instant::now();
    let senders: Vec<_> = (0..threads)
        .map(|_| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || -> Result<Vec<Duration>> {
                let value = [0x42u8; SMALL];
                let mut latencies = Vec::with_capacity(per_thread as usize);
                for _ in 0..per_thread {
                    let t = Instant::now();
                    producer.send(Record::new(&value))?;
                    latencies.push(t.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let latencies = join_latencies(dir, senders, failed)?;
    producer.flush().map_err(failed)?;
    let elapsed = started.elapsed();
    progress(&name, 1, 1);
    let count = per_thread * threads as u64;
    Ok(result(&name, count, count * SMALL as u64, elapsed, latencies))
}

/// An unclean open of the large-record log: every batch validated from the first segment.
fn recovery_scan(dir: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<BenchResult> {
    for name in [".clean-shutdown", "checkpoint"] {
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error("unlink", path)(e)),
            _ => {}
        }
    }
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: options.flush_policy, ..LogConfig::default() };
    let started = Instant::now();
    let log = Log::open(dir, config)?;
    let elapsed = started.elapsed();
    let report = log.recovery_report().clone();
    log.close()?;
    progress("recovery_scan", 1, 1);
    let records = report.bytes_scanned / (options.large_value_bytes as u64 + 12).max(1);
    Ok(result("recovery_scan", records, report.bytes_scanned, elapsed, vec![elapsed]))
}

/// Joins the threads of a phase and gathers their latencies; a thread's error (converted by
/// `convert`) or panic fails the phase.
fn join_latencies<E>(
    dir: &Path,
    threads: Vec<std::thread::JoinHandle<std::result::Result<Vec<Duration>, E>>>,
    convert: impl Fn(E) -> Error,
) -> Result<Vec<Duration>> {
    let mut latencies = Vec::new();
    for thread in threads {
        let joined = thread.join().map_err(|_| Error::Io {
            op: "join bench thread",
            path: dir.to_path_buf(),
            source: std::io::Error::other("a bench thread panicked"),
        })?;
        latencies.extend(joined.map_err(&convert)?);
    }
    Ok(latencies)
}
