//! strata against its peer and its limits, the four workloads of the performance table (README,
//! "Performance"), in one run so the ratios come from one sitting:
//!
//! - `read_100B`: every record of 1M × 100 B records in batches of 100, from the page cache, each
//!   batch (strata) or message (commitlog) CRC-checked, 1 MiB per read call — strata through
//!   `Log::read` (owned records) and `Log::read_batches` (in place);
//! - `append_100B_x100`, `append_1KiB_x100`: batches of 100 records, no fsync (with `raw_write`,
//!   `write(2)` of the same bytes to a plain file: the ceiling both are under);
//! - `durable_1KiB_x100`: one thread, 100 × 1 KiB per call, each call durable — strata under
//!   `FlushPolicy::Always` against `write(2)` + `fdatasync` of the same bytes (the physical limit);
//! - `durable_100B_x1`: single-record durable appends from 1 and from 8 threads (group commit).
//!
//! The peer is the `commitlog` crate (0.2), the closest embeddable Rust log: a segmented log of
//! CRC-checked messages with a sparse offset index. Run: `cargo bench --bench peers`; the ratio of
//! two lines is the ratio of their throughputs.
#![allow(missing_docs, clippy::unwrap_used)]

use std::fs::File;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use commitlog::message::{MessageBuf, MessageSet};
use commitlog::{CommitLog, LogOptions, ReadLimit};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, Log, LogConfig, Record};

const BATCH: usize = 100;
const READ_RECORDS: u64 = 1_000_000;
const READ_CALL_BYTES: usize = 1 << 20;

fn strata_config(flush_policy: FlushPolicy) -> LogConfig {
    LogConfig { flush_policy, segment_bytes: 1 << 30, index_bytes: 10 << 20, ..LogConfig::default() }
}

fn commitlog_at(dir: &Path) -> CommitLog {
    let mut options = LogOptions::new(dir);
    options.segment_max_bytes(1 << 30).message_max_bytes(8 << 20);
    CommitLog::new(options).unwrap()
}

fn commitlog_batch(size: usize) -> MessageBuf {
    let mut buf = MessageBuf::default();
    let value = vec![0x5au8; size];
    for _ in 0..BATCH {
        buf.push(&value).unwrap();
    }
    buf
}

/// Every record of a strata log, through `Log::read`; returns the value bytes seen.
fn strata_read_all(log: &Log) -> u64 {
    let (mut next, mut bytes) = (0, 0u64);
    while next < log.next_offset() {
        let mut reader = log.read(next, READ_CALL_BYTES).unwrap();
        for record in reader.by_ref() {
            bytes += record.unwrap().value().unwrap().len() as u64;
        }
        next = reader.next_offset();
    }
    bytes
}

/// Every record of a strata log, in place (`Log::read_batches`); returns the value bytes seen.
fn strata_read_in_place(log: &Log) -> u64 {
    let (mut next, mut bytes) = (0, 0u64);
    while next < log.next_offset() {
        next = log
            .read_batches(next, READ_CALL_BYTES, |batch| {
                for record in batch.records() {
                    bytes += record.value().unwrap().len() as u64;
                }
                ControlFlow::Continue(())
            })
            .unwrap();
    }
    bytes
}

/// Every message of a commitlog, 1 MiB per read (each message's CRC is checked by the read).
fn commitlog_read_all(log: &CommitLog) -> u64 {
    let (mut next, mut bytes) = (0, 0u64);
    while next < log.next_offset() {
        let messages = log.read(next, ReadLimit::max_bytes(READ_CALL_BYTES)).unwrap();
        for message in messages.iter() {
            bytes += message.payload().len() as u64;
            next = message.offset() + 1;
        }
    }
    bytes
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_100B");
    group.measurement_time(Duration::from_secs(4)).sample_size(20).throughput(Throughput::Elements(READ_RECORDS));
    let value = [0x5au8; 100];
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path().join("strata"), strata_config(FlushPolicy::Never)).unwrap();
    let batch: Vec<Record<'_>> = (0..BATCH).map(|_| Record::new(&value)).collect();
    for _ in 0..READ_RECORDS / BATCH as u64 {
        log.append(&batch).unwrap();
    }
    let mut peer = commitlog_at(&dir.path().join("commitlog"));
    let mut buf = commitlog_batch(value.len());
    for _ in 0..READ_RECORDS / BATCH as u64 {
        peer.append(&mut buf).unwrap();
    }
    let expected = READ_RECORDS * value.len() as u64;
    group.bench_function("strata", |b| b.iter(|| assert_eq!(strata_read_all(&log), expected)));
    group.bench_function("strata_in_place", |b| b.iter(|| assert_eq!(strata_read_in_place(&log), expected)));
    group.bench_function("commitlog", |b| b.iter(|| assert_eq!(commitlog_read_all(&peer), expected)));
    group.finish();
}

/// `iters` batches of 100 `size`-byte records appended to a fresh log, no fsync.
fn append(c: &mut Criterion) {
    for size in [100usize, 1024] {
        let name = if size == 100 { "append_100B_x100" } else { "append_1KiB_x100" };
        let mut group = c.benchmark_group(name);
        group.measurement_time(Duration::from_secs(4)).sample_size(20).throughput(Throughput::Elements(BATCH as u64));
        group.bench_function("strata", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().unwrap();
                let log = Log::open(dir.path(), strata_config(FlushPolicy::Never)).unwrap();
                let value = vec![0x5au8; size];
                let batch: Vec<Record<'_>> = (0..BATCH).map(|_| Record::new(&value)).collect();
                let started = Instant::now();
                for _ in 0..iters {
                    log.append(&batch).unwrap();
                }
                started.elapsed()
            });
        });
        // The physical ceiling: the same bytes (about 12 bytes of framing per record) appended
        // with `write(2)` to a plain file.
        group.bench_function("raw_write", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().unwrap();
                let mut file = File::create(dir.path().join("raw")).unwrap();
                let chunk = vec![0x5au8; 43 + BATCH * (size + 12)];
                let started = Instant::now();
                for _ in 0..iters {
                    file.write_all(&chunk).unwrap();
                }
                started.elapsed()
            });
        });
        group.bench_function("commitlog", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().unwrap();
                let mut log = commitlog_at(dir.path());
                let started = Instant::now();
                for _ in 0..iters {
                    // Built per call, as the strata side builds its batch inside `append`.
                    let mut buf = commitlog_batch(size);
                    log.append(&mut buf).unwrap();
                }
                started.elapsed()
            });
        });
        group.finish();
    }
}

/// One thread, 100 × 1 KiB per call, each call durable: strata against `write` + `fdatasync`.
fn durable_batches(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_1KiB_x100");
    group.measurement_time(Duration::from_secs(5)).sample_size(10).throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("strata", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().unwrap();
            let log = Log::open(dir.path(), strata_config(FlushPolicy::Always)).unwrap();
            let value = vec![0x5au8; 1024];
            let batch: Vec<Record<'_>> = (0..BATCH).map(|_| Record::new(&value)).collect();
            let started = Instant::now();
            for _ in 0..iters {
                log.append(&batch).unwrap();
            }
            started.elapsed()
        });
    });
    group.bench_function("raw_write_fdatasync", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().unwrap();
            let mut file = File::create(dir.path().join("raw")).unwrap();
            // What strata writes for such a batch: a 43-byte header, ~8 bytes of framing a record.
            let chunk = vec![0x5au8; 43 + BATCH * (1024 + 8)];
            let started = Instant::now();
            for _ in 0..iters {
                file.write_all(&chunk).unwrap();
                file.sync_data().unwrap();
            }
            started.elapsed()
        });
    });
    group.finish();
}

/// Single 100-byte records, each append durable, from 1 and from 8 threads.
fn durable_single(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_100B_x1");
    group.measurement_time(Duration::from_secs(5)).sample_size(10).throughput(Throughput::Elements(1));
    for threads in [1u64, 8] {
        group.bench_with_input(BenchmarkId::new("strata_threads", threads), &threads, |b, &threads| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir().unwrap();
                let log = Arc::new(Log::open(dir.path(), strata_config(FlushPolicy::Always)).unwrap());
                let started = Instant::now();
                let workers: Vec<_> = (0..threads)
                    .map(|t| {
                        let log = Arc::clone(&log);
                        let mine = iters / threads + u64::from(t < iters % threads);
                        std::thread::spawn(move || {
                            let value = [0x3cu8; 100];
                            for _ in 0..mine {
                                log.append(&[Record::new(&value)]).unwrap();
                            }
                        })
                    })
                    .collect();
                for worker in workers {
                    worker.join().unwrap();
                }
                started.elapsed()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, read, append, durable_batches, durable_single);
criterion_main!(benches);
