//! Opening a log: the validating scan after an unclean shutdown (1 GiB of 1 KiB records, every
//! batch CRC-checked and decoded, indexes rebuilt) and a clean open of 10,000 segments (no scan).
#![allow(missing_docs, clippy::unwrap_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{Log, LogConfig, Record};

fn fill(dir: &Path, config: LogConfig, value_len: usize, batches: u64, per_batch: usize) {
    let log = Log::open(dir, config).unwrap();
    let value = vec![0x5au8; value_len];
    let records: Vec<Record<'_>> = (0..per_batch).map(|_| Record::new(&value)).collect();
    for _ in 0..batches {
        log.append(&records).unwrap();
    }
    log.close().unwrap();
}

fn recovery(c: &mut Criterion) {
    let mut group = c.benchmark_group("recovery");
    group.sample_size(10).measurement_time(Duration::from_secs(20));

    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 256 << 20, ..LogConfig::default() };
    fill(dir.path(), config(), 1024, 10_000, 100);
    let bytes: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("unclean_scan_1GiB_1KiB_records", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // No marker and no checkpoint: the scan starts at the first segment.
                std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
                std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
                let started = Instant::now();
                let log = Log::open(dir.path(), config()).unwrap();
                total += started.elapsed();
                assert_eq!(log.recovery_report().bytes_scanned, bytes);
                log.close().unwrap();
            }
            total
        });
    });
    drop(dir);

    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 1024, index_bytes: 1024, ..LogConfig::default() };
    fill(dir.path(), config(), 900, 10_000, 1);
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("clean_open_10k_segments", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let log = Log::open(dir.path(), config()).unwrap();
                total += started.elapsed();
                assert!(log.recovery_report().clean_shutdown);
                assert_eq!(log.recovery_report().segments_scanned, 0);
                assert_eq!(log.segment_count(), 10_000);
                log.close().unwrap();
            }
            total
        });
    });
    group.finish();
}

criterion_group!(benches, recovery);
criterion_main!(benches);
