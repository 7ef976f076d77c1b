//! `Producer`: every send completes exactly once with a correct, dense offset, from many threads;
//! close drains; errors reach the handles; the pool limit holds under back-pressure.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use strata_log::{Error, FlushPolicy, Log, LogConfig, Producer, ProducerConfig, Record};

fn log(dir: &std::path::Path, flush_policy: FlushPolicy) -> Arc<Log> {
    Arc::new(Log::open(dir, LogConfig { segment_bytes: 256 << 10, flush_policy, ..LogConfig::default() }).unwrap())
}

#[test]
fn every_send_completes_once_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path(), FlushPolicy::Never);
    let producer = Arc::new(
        Producer::new(Arc::clone(&log), ProducerConfig { batch_bytes: 4096, ..ProducerConfig::default() }).unwrap(),
    );
    let senders: Vec<_> = (0..4)
        .map(|t| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || {
                (0..2000)
                    .map(|i| {
                        let value = format!("{t}:{i}");
                        (value.clone(), producer.send(Record::new(value.as_bytes())).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let handles: Vec<_> = senders.into_iter().flat_map(|s| s.join().unwrap()).collect();
    producer.flush().unwrap();
    let mut offsets: Vec<u64> = handles.iter().map(|(_, h)| h.wait().unwrap()).collect();
    for (value, handle) in &handles {
        let offset = handle.wait().unwrap();
        assert_eq!(handle.wait().unwrap(), offset, "a handle's result never changes");
        let record = log.read(offset, 1).unwrap().next().unwrap().unwrap();
        assert_eq!(record.value().unwrap(), value.as_bytes(), "the record at the handle's offset is the one sent");
    }
    offsets.sort_unstable();
    assert_eq!(offsets, (0..8000).collect::<Vec<_>>(), "dense, each offset exactly once");
    // Each thread's records keep their order.
    for t in 0..4 {
        let mine: Vec<u64> =
            handles.iter().filter(|(v, _)| v.starts_with(&format!("{t}:"))).map(|(_, h)| h.wait().unwrap()).collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
    }
}

#[test]
fn close_drains_everything() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path(), FlushPolicy::Always);
    let producer =
        Producer::new(Arc::clone(&log), ProducerConfig { linger_ms: 10_000, ..ProducerConfig::default() }).unwrap();
    let handles: Vec<_> = (0..100).map(|i| producer.send(Record::new(&[i as u8])).unwrap()).collect();
    assert!(handles[0].try_wait().is_none(), "still lingering");
    producer.close().unwrap();
    assert_eq!(handles.iter().map(|h| h.wait().unwrap()).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
    assert_eq!(log.durable_offset(), 100, "under Always a completed send is durable");
}

#[test]
fn errors_reach_the_handles() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(
        Log::open(
            dir.path(),
            LogConfig { max_batch_bytes: 1000, flush_policy: FlushPolicy::Never, ..LogConfig::default() },
        )
        .unwrap(),
    );
    let producer = Producer::new(Arc::clone(&log), ProducerConfig::default()).unwrap();
    // Too large for any batch the log accepts: refused at send.
    let big = vec![0u8; 5000];
    assert!(matches!(producer.send(Record::new(&big)), Err(Error::BatchTooLarge { max: 1000, .. })));
    // Refused by the log when its batch is appended: the error reaches the handle.
    let stale = producer.send(Record::new(b"stale").with_timestamp(1)).unwrap();
    producer.flush().unwrap();
    assert!(matches!(stale.wait(), Err(Error::SendFailed(e)) if matches!(*e, Error::InvalidTimestamp { .. })));
    // Later sends are unaffected.
    let fine = producer.send(Record::new(b"fine")).unwrap();
    producer.flush().unwrap();
    assert_eq!(fine.wait().unwrap(), 0);
}

#[test]
fn back_pressure_keeps_the_pool_within_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path(), FlushPolicy::Always);
    let config = ProducerConfig { batch_bytes: 1024, buffer_memory: 4096, linger_ms: 1, max_block_ms: 30_000 };
    let producer = Arc::new(Producer::new(Arc::clone(&log), config).unwrap());
    let watcher = {
        let producer = Arc::clone(&producer);
        std::thread::spawn(move || {
            let mut lowest = usize::MAX;
            for _ in 0..2000 {
                let m = producer.pool_metrics();
                assert!(m.available_bytes <= m.total_bytes);
                lowest = lowest.min(m.available_bytes);
                std::thread::sleep(Duration::from_micros(100));
            }
            lowest
        })
    };
    let value = vec![3u8; 200];
    let handles: Vec<_> = (0..400).map(|_| producer.send(Record::new(&value)).unwrap()).collect();
    producer.flush().unwrap();
    assert!(handles.iter().all(|h| h.wait().is_ok()));
    let lowest = watcher.join().unwrap();
    assert!(lowest < 4096, "the pool was used");
    let metrics = producer.pool_metrics();
    assert_eq!(metrics.available_bytes, 4096, "every buffer came back");
}

/// Regression: a batch took its base and max timestamp from the sender that allocated its buffer,
/// whose record might then go elsewhere (too large for it) while other senders' earlier-stamped
/// records filled it: the batch's max_timestamp exceeded every record's, and the log refused it
/// (`SendFailed(InvalidBatch { reason: BadMaxTimestamp { .. } })` for all its records, seen in 3
/// of 5 runs of this test). Both timestamps now come from the records added (`BatchBuilder`). A
/// batch left empty that way is skipped by the sender, never finished with `record_count - 1`.
#[test]
fn large_and_small_records_from_many_threads_all_complete() {
    let dir = tempfile::tempdir().unwrap();
    let log = log(dir.path(), FlushPolicy::Never);
    let config = ProducerConfig { batch_bytes: 256, linger_ms: 0, ..ProducerConfig::default() };
    let producer = Arc::new(Producer::new(Arc::clone(&log), config).unwrap());
    let senders: Vec<_> = (0..8)
        .map(|t| {
            let producer = Arc::clone(&producer);
            std::thread::spawn(move || {
                let (small, large) = (vec![t as u8; 8], vec![t as u8; 1000]);
                (0..3000)
                    .map(|i| producer.send(Record::new(if i % 2 == t % 2 { &small } else { &large })).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let handles: Vec<_> = senders.into_iter().flat_map(|s| s.join().unwrap()).collect();
    producer.flush().unwrap();
    let mut offsets: Vec<u64> = handles.iter().map(|h| h.wait().unwrap()).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..24_000).collect::<Vec<_>>());
}
