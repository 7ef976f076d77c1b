//! A segment rolls when the next batch would not fit, when an index is full, and when it is older
//! than `segment_ms`; a batch larger than a segment gets one of its own.
#![allow(clippy::unwrap_used)]

mod common;

use common::values;
use strata_log::{Log, LogConfig, ManualClock, Record};

fn log_files(dir: &std::path::Path) -> usize {
    common::file_names(dir).iter().filter(|n| n.ends_with(".log")).count()
}

#[test]
fn rolls_when_the_next_batch_would_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 1000, ..LogConfig::default() }).unwrap();
    let value = vec![0u8; 400];
    log.append(&[Record::new(&value)]).unwrap();
    log.append(&[Record::new(&value)]).unwrap();
    assert_eq!(log.segment_count(), 1, "two batches of ~450 bytes fit in 1000");
    log.append(&[Record::new(&value)]).unwrap();
    assert_eq!(log.segment_count(), 2, "the third does not");
}

#[test]
fn rolls_when_the_offset_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    // Room for 3 offset-index entries (and 2 time-index entries); an entry for every batch.
    let config = LogConfig { index_bytes: 24, index_interval_bytes: 1, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    for i in 0..12u32 {
        log.append(&[Record::new(&i.to_be_bytes())]).unwrap();
    }
    assert!(log.segment_count() >= 4, "{} segments", log.segment_count());
    assert_eq!(values(&log).len(), 12);
}

#[test]
fn rolls_when_the_segment_is_older_than_segment_ms() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { segment_ms: 60_000, clock: clock.clock(), ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    log.append(&[Record::new(b"a")]).unwrap();
    clock.advance(60_000);
    log.append(&[Record::new(b"b")]).unwrap();
    assert_eq!(log.segment_count(), 1, "exactly segment_ms old: not yet");
    clock.advance(1);
    log.append(&[Record::new(b"c")]).unwrap();
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log_files(dir.path()), 2);
    clock.advance(30_000);
    log.append(&[Record::new(b"d")]).unwrap();
    assert_eq!(log.segment_count(), 2, "age counts from the new segment's first batch");
}

#[test]
fn an_empty_segment_never_rolls_for_age() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { segment_ms: 10, clock: clock.clock(), ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    clock.advance(1_000);
    log.append(&[Record::new(b"a")]).unwrap();
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn log_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Log>();
    assert_send_sync::<strata_log::RecordView>();
}
