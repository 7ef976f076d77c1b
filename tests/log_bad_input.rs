//! Bad input is a clear error, never a panic, and never loses what was already written.
#![allow(clippy::unwrap_used)]

mod common;

use common::values;
use strata_log::{Error, Log, LogConfig, ManualClock, Record};

#[test]
fn empty_batch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(matches!(log.append(&[]), Err(Error::EmptyBatch)));
    assert_eq!(log.next_offset(), 0);
}

#[test]
fn oversized_batch_is_refused_and_the_log_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { max_batch_bytes: 1000, ..LogConfig::default() }).unwrap();
    log.append(&[Record::new(b"before")]).unwrap();
    let big = vec![0u8; 1000];
    assert!(matches!(log.append(&[Record::new(&big)]), Err(Error::BatchTooLarge { max: 1000, .. })));
    log.append(&[Record::new(b"after")]).unwrap();
    assert_eq!(values(&log), [b"before".to_vec(), b"after".to_vec()]);
}

#[test]
fn reads_past_the_next_offset_are_out_of_range_and_at_it_empty() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.read(0, 100).unwrap().count(), 0, "an empty log: nothing to read, not an error");
    assert!(matches!(log.read(1, 100), Err(Error::OffsetOutOfRange { requested: 1, start: 0, next: 0 })));
    log.append(&[Record::new(b"x"), Record::new(b"y")]).unwrap();
    assert_eq!(log.read(2, 100).unwrap().count(), 0, "at the end");
    assert!(matches!(log.read(3, 100), Err(Error::OffsetOutOfRange { requested: 3, next: 2, .. })));
    assert!(matches!(log.read(u64::MAX, 100), Err(Error::OffsetOutOfRange { .. })));
    assert_eq!(log.read(1, 100).unwrap().count(), 1);
}

#[test]
fn timestamps_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { max_timestamp_skew_ms: 1000, clock: clock.clock(), ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    for bad in [-1, 998_999, 1_001_001, i64::MAX, i64::MIN] {
        let result = log.append(&[Record::new(b"v").with_timestamp(bad)]);
        assert!(matches!(result, Err(Error::InvalidTimestamp { timestamp_ms, .. }) if timestamp_ms == bad), "{bad}");
    }
    for good in [999_000, 1_000_000, 1_001_000] {
        log.append(&[Record::new(b"v").with_timestamp(good)]).unwrap();
    }
    assert_eq!(log.next_offset(), 3);
}

#[test]
fn a_file_is_not_a_log_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a dir").unwrap();
    assert!(matches!(Log::open(&file, LogConfig::default()), Err(Error::NotADirectory { .. })));
    assert!(matches!(Log::open(file.join("below"), LogConfig::default()), Err(Error::NotADirectory { .. })));
    assert_eq!(std::fs::read(&file).unwrap(), b"not a dir", "nothing was changed");
}

#[test]
fn an_unwritable_location_is_an_io_error() {
    // /proc refuses new directories even to root, which ignores permission bits.
    let result = Log::open("/proc/strata-cannot-exist/log", LogConfig::default());
    assert!(matches!(result, Err(Error::Io { .. })), "{result:?}");
}

#[test]
fn invalid_config_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 3 << 30, ..LogConfig::default() };
    assert!(matches!(Log::open(dir.path(), config), Err(Error::InvalidConfig { field: "segment_bytes", .. })));
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing created");
}
