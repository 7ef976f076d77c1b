//! The producer: 100-byte records sent one at a time from 4 threads, no fsync.
#![allow(missing_docs, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_log::{FlushPolicy, Log, LogConfig, Producer, ProducerConfig, Record};

fn producer(c: &mut Criterion) {
    let mut group = c.benchmark_group("producer");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(1));
    group.bench_function("4t_send_100B", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::tempdir().unwrap();
            let config =
                LogConfig { segment_bytes: 256 << 20, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
            let log = Arc::new(Log::open(dir.path(), config).unwrap());
            let producer = Arc::new(Producer::new(Arc::clone(&log), ProducerConfig::default()).unwrap());
            let started = Instant::now();
            let senders: Vec<_> = (0..4)
                .map(|_| {
                    let producer = Arc::clone(&producer);
                    std::thread::spawn(move || {
                        let value = [0x42u8; 100];
                        for _ in 0..iters.div_ceil(4) {
                            producer.send(Record::new(&value)).unwrap();
                        }
                    })
                })
                .collect();
            for sender in senders {
                sender.join().unwrap();
            }
            producer.flush().unwrap();
            started.elapsed()
        });
    });
    group.finish();
}

criterion_group!(benches, producer);
criterion_main!(benches);
