//! Append throughput with no fsync: batches of 100 records of 100 B and 1 KiB.
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, Log, LogConfig, Record};

const BATCH: usize = 100;

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group.measurement_time(Duration::from_secs(5));
    for size in [100usize, 1024] {
        let value = vec![0x5au8; size];
        let records: Vec<Record<'_>> = (0..BATCH).map(|_| Record::new(&value)).collect();
        group.throughput(Throughput::Elements(BATCH as u64));
        group.bench_with_input(BenchmarkId::new("batch100", format!("{size}B")), &records, |b, records| {
            b.iter_custom(|iters| {
                // A fresh log per sample keeps the disk footprint bounded.
                let dir = tempfile::tempdir().unwrap();
                let log = Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() })
                    .unwrap();
                let started = Instant::now();
                for _ in 0..iters {
                    log.append(records).unwrap();
                }
                let elapsed = started.elapsed();
                drop(log);
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
