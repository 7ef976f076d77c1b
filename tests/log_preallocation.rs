//! The next segment is preallocated in the background once the active one is half full, so rolls
//! rename a ready segment instead of allocating one; nothing of it is left behind at close; a full
//! disk (`min_free_bytes`) stops a roll before anything is stored.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

#[test]
fn rolls_take_preallocated_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 64 << 10, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Log::open(dir.path(), config()).unwrap();
    let value = vec![7u8; 1000];
    for _ in 0..1000 {
        log.append(&[Record::new(&value)]).unwrap();
        // Give the preallocator time now and then: it runs beside the appender.
        if log.next_offset().is_multiple_of(40) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let metrics = log.metrics();
    assert!(metrics.rolls >= 10, "{metrics:?}");
    assert!(metrics.preallocated_rolls > 0, "no roll used a preallocated segment: {metrics:?}");
    log.close().unwrap();
    let leftovers: Vec<_> = common::file_names(dir.path()).into_iter().filter(|n| n.contains("prealloc")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(common::values(&log).len(), 1000);
}

#[test]
fn a_roll_without_free_space_fails_before_storing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        min_free_bytes: u64::MAX / 4,
        preallocate: false,
        flush_policy: FlushPolicy::Never,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let value = vec![1u8; 1500];
    log.append(&[Record::new(&value)]).unwrap();
    log.append(&[Record::new(&value)]).unwrap();
    let full = log.append(&[Record::new(&value)]);
    assert!(matches!(full, Err(Error::DiskFull { .. })), "{full:?}");
    assert_eq!(log.next_offset(), 2, "nothing stored");
    // The log stays usable: a record that fits the active segment is still appended.
    log.append(&[Record::new(b"small")]).unwrap();
    assert_eq!(log.next_offset(), 3);
}
