//! Durable appends (`FlushPolicy::Always`): one thread appending batches of 100 × 1 KiB, one thread
//! appending single 100-byte records, and 8 threads appending single records (group commit).
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn open(dir: &std::path::Path) -> Arc<Log> {
    let config = LogConfig { segment_bytes: 256 << 20, flush_policy: FlushPolicy::Always, ..LogConfig::default() };
    Arc::new(Log::open(dir, config).unwrap())
}

/// `iters` append calls of `batch` records of `size` bytes, spread over `threads` threads.
fn run(iters: u64, threads: u64, batch: usize, size: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let value = vec![0x3cu8; size];
                let records: Vec<Record<'_>> = (0..batch).map(|_| Record::new(&value)).collect();
                for _ in 0..iters.div_ceil(threads) {
                    log.append(&records).unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    started.elapsed()
}

fn durable(c: &mut Criterion) {
    let mut group = c.benchmark_group("durable_append");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    for (threads, batch, size) in [(1u64, 100usize, 1024usize), (1, 1, 100), (8, 1, 100)] {
        group.throughput(Throughput::Elements(1));
        let id = BenchmarkId::new(format!("{threads}t_x{batch}"), format!("{size}B"));
        group.bench_function(id, |b| b.iter_custom(|iters| run(iters, threads, batch, size)));
    }
    group.finish();
}

criterion_group!(benches, durable);
criterion_main!(benches);
