//! Read throughput from the page cache, CRC verified: every record of a prefilled log, 1 MiB per
//! read call, for 100 B and 1 KiB values.
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn read_all(log: &Log) -> u64 {
    let (mut next, mut bytes) = (0, 0u64);
    while next < log.next_offset() {
        let mut reader = log.read(next, 1 << 20).unwrap();
        for record in reader.by_ref() {
            bytes += record.unwrap().value().unwrap().len() as u64;
        }
        next = reader.next_offset();
    }
    bytes
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    group.measurement_time(Duration::from_secs(5)).sample_size(20);
    for (size, records) in [(100usize, 1_000_000u64), (1024, 200_000)] {
        let dir = tempfile::tempdir().unwrap();
        let log =
            Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }).unwrap();
        let value = vec![0x5au8; size];
        let batch: Vec<Record<'_>> = (0..100).map(|_| Record::new(&value)).collect();
        for _ in 0..records / 100 {
            log.append(&batch).unwrap();
        }
        group.throughput(Throughput::Elements(records));
        group.bench_with_input(BenchmarkId::new("all", format!("{size}B")), &log, |b, log| {
            b.iter(|| assert_eq!(read_all(log), records * size as u64));
        });
    }
    group.finish();
}

criterion_group!(benches, read);
criterion_main!(benches);
