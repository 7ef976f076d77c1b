//! `RaftLogStorage::append` of a `RaftLogStore` (feature `openraft`), durable each (the call's
//! flushed callback awaited before the next call): 1 and 64 entries per call, entries of about
//! 100 bytes. Beside it, the cost the store's one-entry-per-batch layout is measured against:
//! the same 64 records appended to a bare `Log` as one batch, and as 64 one-record batches.
#![allow(missing_docs, clippy::unwrap_used)]

use std::io::Cursor;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use openraft::storage::RaftLogStorageExt;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use strata_log::{Log, LogConfig, RaftLogStore, Record};

openraft::declare_raft_types!(pub Kv: D = String, R = String);

fn config() -> LogConfig {
    LogConfig { segment_bytes: 256 << 20, ..LogConfig::default() }
}

fn entry(index: u64) -> Entry<Kv> {
    let command = format!("key{index:08}={:0>80}", index);
    Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Normal(command) }
}

/// `iters` calls of `per_call` entries through `RaftLogStorage::append`, each awaited durable.
fn raft(runtime: &tokio::runtime::Runtime, iters: u64, per_call: u64) -> Duration {
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut store = RaftLogStore::<Kv>::open(dir.path(), config()).await.unwrap();
        let started = Instant::now();
        for call in 0..iters {
            let entries: Vec<Entry<Kv>> = (call * per_call..(call + 1) * per_call).map(entry).collect();
            store.blocking_append(entries).await.unwrap();
        }
        let elapsed = started.elapsed();
        store.close().await.unwrap();
        elapsed
    })
}

/// `iters` durable appends of one batch of 64 records to a bare `Log`.
fn one_batch(iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    let values: Vec<String> = (0..64).map(|i| format!("{:0>100}", i)).collect();
    let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v.as_bytes())).collect();
    let started = Instant::now();
    for _ in 0..iters {
        log.append(&records).unwrap();
    }
    started.elapsed()
}

/// `iters` rounds of 64 one-record batches (`append_nowait`) to a bare `Log`, the last waited
/// durable: the store's layout without openraft, encoding or the blocking pool.
fn single_batches(iters: u64) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    let values: Vec<String> = (0..64).map(|i| format!("{:0>100}", i)).collect();
    let started = Instant::now();
    for _ in 0..iters {
        let mut last = None;
        for value in &values {
            last = Some(log.append_nowait(&[Record::new(value.as_bytes())]).unwrap());
        }
        log.wait_batch_durable(&last.unwrap(), Duration::from_secs(10)).unwrap();
    }
    started.elapsed()
}

fn raft_append(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("raft_append");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    for per_call in [1u64, 64] {
        group.throughput(Throughput::Elements(per_call));
        let id = BenchmarkId::new("entries_per_call", per_call);
        group.bench_function(id, |b| b.iter_custom(|iters| raft(&runtime, iters, per_call)));
    }
    group.throughput(Throughput::Elements(64));
    group.bench_function(BenchmarkId::new("bare_log_one_batch", 64), |b| b.iter_custom(one_batch));
    group.bench_function(BenchmarkId::new("bare_log_single_batches", 64), |b| b.iter_custom(single_batches));
    group.finish();
}

criterion_group!(benches, raft_append);
criterion_main!(benches);
