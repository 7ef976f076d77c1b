//! A bug that panics in a background thread never hangs a caller nor reaches one as a panic: a
//! panic in a sync round poisons the log (every waiter gets `Error::Poisoned`); a panicking
//! compaction pass is abandoned before any rename (its `.cleaned` output deleted), logged and
//! counted, and the next pass runs; a panic in the producer's sender fails the unsent records
//! (`Error::Closed`) and `flush`/`close` return. Panics are injected with failpoints.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use fail::FailScenario;
use strata_log::{CleanupPolicy, Error, FlushPolicy, Log, LogConfig, Producer, ProducerConfig, Record};

#[test]
fn a_panicking_sync_round_poisons_instead_of_hanging() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"before")]).unwrap();
    fail::cfg("sync_round", "panic").unwrap();
    // Under Always the appender leads the round itself: it gets the panic as an error, and the
    // log is poisoned.
    let during = log.append(&[Record::new(b"during")]);
    assert!(matches!(during, Err(Error::Panicked { .. })), "{during:?}");
    fail::remove("sync_round");
    assert!(matches!(log.append(&[Record::new(b"after")]), Err(Error::Poisoned)));
    assert!(matches!(log.wait_durable(5, Duration::from_secs(5)), Err(Error::Poisoned)));
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(common::values(&log)[0], b"before");
    drop(log);
    scenario.teardown();
}

#[test]
fn a_panicking_sync_round_in_the_syncer_wakes_every_waiter() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    fail::cfg("sync_round", "panic").unwrap();
    // append_nowait leaves the round to the syncer thread; the waiter must not hang.
    let info = log.append_nowait(&[Record::new(b"x")]).unwrap();
    let waited = log.wait_batch_durable(&info, Duration::from_secs(20));
    assert!(matches!(waited, Err(Error::Poisoned | Error::Panicked { .. })), "{waited:?}");
    assert!(matches!(log.append(&[Record::new(b"y")]), Err(Error::Poisoned)));
    fail::remove("sync_round");
    drop(log);
    scenario.teardown();
}

#[test]
fn a_panicking_compaction_pass_is_abandoned_and_the_next_one_runs() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 2048,
        flush_policy: FlushPolicy::Never,
        cleanup_policy: CleanupPolicy::Compact,
        cleaner_backoff_ms: 10,
        min_cleanable_dirty_percent: 0,
        ..LogConfig::default()
    };
    fail::cfg("cleaner_group_written", "panic").unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    for i in 0..300u32 {
        log.append(&[Record::new(&i.to_be_bytes()).with_key(format!("k{}", i % 5).as_bytes())]).unwrap();
    }
    let explicit = log.compact();
    assert!(matches!(explicit, Err(Error::Panicked { .. })), "{explicit:?}");
    // The cleaner thread hits the same panic on its own passes and keeps going.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while log.metrics().compaction_failures < 3 {
        assert!(std::time::Instant::now() < deadline, "the cleaner thread keeps trying");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!common::file_names(dir.path()).iter().any(|n| n.contains(".cleaned")), "output deleted");
    fail::remove("cleaner_group_written");
    while log.metrics().compaction_passes == 0 {
        assert!(std::time::Instant::now() < deadline, "a pass succeeds once the bug is gone");
        std::thread::sleep(Duration::from_millis(10));
    }
    let values = common::values(&log);
    assert!(values.len() < 300, "compacted");
    log.append(&[Record::new(b"still writable")]).unwrap();
    log.close().unwrap();
    scenario.teardown();
}

#[test]
fn a_panicking_producer_sender_fails_the_records_and_returns() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(Log::open(dir.path(), LogConfig::default()).unwrap());
    let producer = Producer::new(std::sync::Arc::clone(&log), ProducerConfig::default()).unwrap();
    fail::cfg("producer_sender", "panic").unwrap();
    let handle = producer.send(Record::new(b"lost")).unwrap();
    let waited = handle.wait();
    assert!(matches!(&waited, Err(Error::SendFailed(e)) if matches!(**e, Error::Closed)), "{waited:?}");
    producer.flush().unwrap();
    assert!(matches!(producer.send(Record::new(b"later")), Err(Error::Closed)));
    producer.close().unwrap();
    fail::remove("producer_sender");
    log.append(&[Record::new(b"the log is fine")]).unwrap();
    scenario.teardown();
}
