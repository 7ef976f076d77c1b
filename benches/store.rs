//! The message store: `put` of one 100-byte message per call (no fsync, and
//! `FlushPolicy::Always`), `get_messages` of 32 per call from a prefilled queue (page cache), and
//! `query_by_key` of the prefilled store's unique keys.
#![allow(missing_docs, clippy::unwrap_used)]

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

const TOPIC: &str = "bench";
const BODY_BYTES: usize = 100;
/// Messages of the prefilled store the get and key-query benches read.
const MESSAGES: u64 = 200_000;

fn open(dir: &std::path::Path, policy: FlushPolicy) -> MessageStore {
    let defaults = StoreConfig::default();
    let log = LogConfig { segment_bytes: 256 << 20, flush_policy: policy, ..defaults.log };
    MessageStore::open(dir, StoreConfig { log, ..defaults }).unwrap()
}

fn key(i: u64) -> String {
    format!("key-{i:010}")
}

fn put(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_put");
    group.throughput(Throughput::Bytes(BODY_BYTES as u64));
    for (name, policy) in [("never", FlushPolicy::Never), ("always", FlushPolicy::Always)] {
        if policy == FlushPolicy::Always {
            group.sample_size(10).measurement_time(Duration::from_secs(8));
        }
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), policy);
        // Eight queues of one topic, taken in turn.
        let messages: Vec<Message> = (0..8).map(|q| Message::new(TOPIC, q, vec![0x5au8; BODY_BYTES])).collect();
        let mut next = 0;
        group.bench_function(BenchmarkId::new("1t_100B", name), |b| {
            b.iter(|| {
                store.put(&messages[next % messages.len()]).unwrap();
                next += 1;
            });
        });
        store.close().unwrap();
    }
    group.finish();
}

/// A store of `MESSAGES` 100-byte messages in queue 0, each with a key of its own.
fn prefilled(dir: &std::path::Path) -> MessageStore {
    let store = open(dir, FlushPolicy::Never);
    let mut last = None;
    for i in 0..MESSAGES {
        let message = Message::new(TOPIC, 0, vec![0xc3u8; BODY_BYTES]).with_keys([key(i)]);
        last = Some(store.put_nowait(&message).unwrap());
    }
    last.unwrap().wait().unwrap();
    store
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = prefilled(dir.path());

    let mut group = c.benchmark_group("store_get");
    let batch = 32;
    group.throughput(Throughput::Elements(batch));
    let mut offset = 0;
    group.bench_function(BenchmarkId::new("get_messages", format!("x{batch}")), |b| {
        b.iter(|| {
            let got = store.get_messages(TOPIC, 0, offset, batch as usize, None).unwrap();
            assert_eq!(got.messages.len() as u64, batch);
            offset = if got.next_queue_offset + batch > MESSAGES { 0 } else { got.next_queue_offset };
        });
    });
    group.finish();

    let mut group = c.benchmark_group("store_query");
    group.throughput(Throughput::Elements(1));
    let mut state = 0x9e37_79b9_7f4a_7c15u64; // xorshift64: the same keys every run
    group.bench_function(BenchmarkId::new("query_by_key", "unique_keys"), |b| {
        b.iter_batched(
            || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                key(state % MESSAGES)
            },
            |wanted| assert_eq!(store.query_by_key(TOPIC, &wanted, 0, i64::MAX, 32).unwrap().len(), 1),
            criterion::BatchSize::SmallInput,
        );
    });
    group.finish();
    store.close().unwrap();
}

criterion_group!(benches, put, read);
criterion_main!(benches);
