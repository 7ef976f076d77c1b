//! `offset_for_timestamp`: the first offset whose timestamp is at or after the target, using the
//! time index, across segments, after reopen, and with create-time timestamps out of order.
#![allow(clippy::unwrap_used)]

mod common;

use common::small_config;
use strata_log::{Log, LogConfig, ManualClock, Record};

/// The answer by a linear scan of every record.
fn scan(log: &Log, target: i64) -> Option<u64> {
    let mut reader = log.read(log.start_offset(), usize::MAX).unwrap();
    reader.find(|r| r.as_ref().unwrap().timestamp_ms() >= target).map(|r| r.unwrap().offset())
}

#[test]
fn append_time_lookups_match_a_linear_scan() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = || LogConfig { clock: clock.clock(), ..small_config() };
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..400u64 {
        clock.advance(if i % 10 == 0 { 0 } else { 7 });
        log.append(&[Record::new(&i.to_be_bytes()), Record::new(b"second")]).unwrap();
    }
    assert!(log.segment_count() > 3);
    let last = clock.clock().now_ms();
    let check = |log: &Log| {
        for target in (999_990..last + 10).step_by(3) {
            assert_eq!(log.offset_for_timestamp(target).unwrap(), scan(log, target), "target {target}");
        }
    };
    check(&log);
    log.close().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    check(&log);
}

#[test]
fn create_time_out_of_order_still_finds_the_first_match() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(5_000_000);
    let log = Log::open(dir.path(), LogConfig { clock: clock.clock(), ..small_config() }).unwrap();
    let stamps = [4_990_000i64, 5_000_500, 4_995_000, 5_001_000, 4_999_999, 5_000_000];
    for round in 0..40 {
        for &ts in &stamps {
            log.append(&[Record::new(&[round as u8; 50]).with_timestamp(ts + round)]).unwrap();
        }
    }
    for target in [4_989_000, 4_995_000, 4_999_999, 5_000_001, 5_000_500, 5_001_010, 5_001_039, 5_001_040, 6_000_000] {
        assert_eq!(log.offset_for_timestamp(target).unwrap(), scan(&log, target), "target {target}");
    }
}

#[test]
fn timestamps_of_records_are_the_ones_appended() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(42_000);
    let log = Log::open(dir.path(), LogConfig { clock: clock.clock(), ..LogConfig::default() }).unwrap();
    let info = log.append(&[Record::new(b"a"), Record::new(b"b").with_timestamp(41_500)]).unwrap();
    assert_eq!(info.append_time_ms, 42_000);
    assert_eq!(info.max_timestamp_ms, 42_000);
    clock.set(10_000); // the clock goes backwards: append time does not
    let info = log.append(&[Record::new(b"c")]).unwrap();
    assert_eq!(info.append_time_ms, 42_000, "append time is monotonic");
    let stamps: Vec<i64> = log.read(0, 1 << 20).unwrap().map(|r| r.unwrap().timestamp_ms()).collect();
    assert_eq!(stamps, [42_000, 41_500, 42_000]);
}
