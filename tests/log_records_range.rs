//! `Log::records(range)` returns every record of a range however many `read` calls that takes
//! (each stops at `max_bytes`), skips compaction gaps, clamps the end and refuses a start outside
//! the log.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Error, Log, LogConfig, Record};

#[test]
fn reads_a_whole_log_past_max_bytes_and_any_range() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), common::small_config()).unwrap();
    let value = vec![7u8; 10_000];
    // 300 records of 10 kB: 3 MB, several underlying reads of 1 MiB.
    for _ in 0..30 {
        log.append(&[Record::new(&value); 10]).unwrap();
    }
    let offsets: Vec<u64> = log.records(..).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(offsets, (0..300).collect::<Vec<_>>());
    let offsets: Vec<u64> = log.records(95..=105).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(offsets, (95..=105).collect::<Vec<_>>());
    assert_eq!(log.records(290..10_000).unwrap().count(), 10, "the end is clamped to the visible end");
    assert_eq!(log.records(300..).unwrap().count(), 0, "at the end: nothing, not an error");
    assert!(matches!(log.records(301..), Err(Error::OffsetOutOfRange { requested: 301, .. })));
    log.delete_records_before(100).unwrap();
    assert!(matches!(log.records(50..), Err(Error::OffsetOutOfRange { requested: 50, .. })));
    assert_eq!(log.records(..).unwrap().next().unwrap().unwrap().offset(), 100);
}

#[test]
fn skips_what_compaction_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 4096, ..common::small_config() }).unwrap();
    for i in 0..300u32 {
        let key = format!("key-{}", i % 5);
        log.append(&[Record::new(&i.to_be_bytes()).with_key(key.as_bytes())]).unwrap();
    }
    log.compact().unwrap().unwrap();
    let offsets: Vec<u64> = log.records(..).unwrap().map(|r| r.unwrap().offset()).collect();
    assert!(offsets.len() < 300 && offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    assert_eq!(offsets.last(), Some(&299));
    let expected = common::read_all(&log, log.start_offset(), 1 << 20);
    assert_eq!(offsets, expected.iter().map(|(o, _)| *o).collect::<Vec<_>>(), "the same records as read() loops");
}
