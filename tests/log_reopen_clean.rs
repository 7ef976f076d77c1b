//! Reopening after a clean close: everything comes back, and nothing is rescanned.
#![allow(clippy::unwrap_used)]

mod common;

use common::{file_names, small_config, values};
use strata_log::{Log, LogConfig, Record};

#[test]
fn reopen_after_close_reads_everything_without_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let written: Vec<Vec<u8>> = (0..300u32).map(|i| format!("value-{i}").into_bytes()).collect();
    for chunk in written.chunks(3) {
        let records: Vec<Record<'_>> = chunk.iter().map(|v| Record::new(v)).collect();
        log.append(&records).unwrap();
    }
    let segments = log.segment_count();
    log.close().unwrap();
    assert!(dir.path().join(".clean-shutdown").exists());

    let log = Log::open(dir.path(), small_config()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean_shutdown, "{report:?}");
    assert_eq!(report.segments_scanned, 0, "a clean open scans nothing");
    assert_eq!(report.bytes_scanned, 0);
    assert_eq!(report.indexes_rebuilt, 0);
    assert_eq!(report.segments_loaded as usize, segments);
    assert!(!dir.path().join(".clean-shutdown").exists(), "the marker is deleted at open");
    assert_eq!(values(&log), written);
    // And appends continue where the log ended.
    assert_eq!(log.append(&[Record::new(b"more")]).unwrap().base_offset, 300);
}

#[test]
fn reopen_with_exactly_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"only")]).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), [b"only".to_vec()]);
}

#[test]
fn reopen_with_one_record_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 128, ..LogConfig::default() };
    let log = Log::open(dir.path(), config()).unwrap();
    let big = vec![b'x'; 100];
    for _ in 0..10 {
        log.append(&[Record::new(&big)]).unwrap();
    }
    assert_eq!(log.segment_count(), 10);
    log.close().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log).len(), 10);
    log.append(&[Record::new(&big)]).unwrap();
    drop(log);
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(values(&log).len(), 11);
}

#[test]
fn reopen_of_an_empty_log() {
    let dir = tempfile::tempdir().unwrap();
    Log::open(dir.path(), LogConfig::default()).unwrap().close().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(log.next_offset(), 0);
    assert_eq!(log.append(&[Record::new(b"first")]).unwrap().base_offset, 0);
}

#[test]
fn dropping_the_log_closes_it_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    log.append(&[Record::new(b"a"), Record::new(b"b")]).unwrap();
    drop(log);
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn sealed_and_closed_files_are_trimmed_and_no_temp_files_remain() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for i in 0..200u32 {
        log.append(&[Record::new(&i.to_be_bytes())]).unwrap();
    }
    log.close().unwrap();
    for name in file_names(dir.path()) {
        assert!(!name.ends_with(".tmp"), "temporary file left: {name}");
        let len = std::fs::metadata(dir.path().join(&name)).unwrap().len();
        if name.ends_with(".log") {
            assert!(len <= 4096, "{name} is {len} bytes: trimmed to its data");
        }
        if name.ends_with(".index") {
            assert_eq!(len % 8, 0, "{name}");
        }
    }
}

#[test]
fn a_missing_marker_means_a_scan_that_still_finds_everything() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for i in 0..100u32 {
        log.append(&[Record::new(&i.to_be_bytes())]).unwrap();
    }
    log.close().unwrap();
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let report = log.recovery_report();
    assert!(!report.clean_shutdown);
    assert!(report.segments_scanned >= 1);
    assert_eq!(report.bytes_truncated, 0);
    assert_eq!(values(&log).len(), 100);
}

#[test]
fn a_marker_that_does_not_match_the_files_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"a")]).unwrap();
    log.close().unwrap();
    let marker = std::fs::read(dir.path().join(".clean-shutdown")).unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"b")]).unwrap();
    log.close().unwrap();
    // An old marker: its length and next offset no longer match the active segment.
    std::fs::write(dir.path().join(".clean-shutdown"), marker).unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), [b"a".to_vec(), b"b".to_vec()]);
}
