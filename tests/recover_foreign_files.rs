//! Regression: a stray file blamed a healthy one. An empty `00000000000000000500.log` dropped into a
//! log made open fail with `corrupt …/00000000000000000180.log at position 652` (a healthy file),
//! and `recover --force` kept that healthy segment as `.corrupt` and reported 300 records lost.
//! docs/DESIGN.md §4: a `.log` whose base falls inside the previous segment's offsets, or an empty
//! `.log` that is not the last, is foreign: the error names it, `recover --force` renames it
//! `.foreign` (kept, never deleted), and no healthy segment becomes `.corrupt`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{file_names, snapshot, value_of};
use strata_log::{Corruption, Error, Log, LogConfig, Record, RecoveryMode};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, ..LogConfig::default() }
}

fn force() -> LogConfig {
    LogConfig { recovery: RecoveryMode::TruncateCorrupt, ..config() }
}

/// A closed log of `n` records over several segments; returns the segment bases.
fn log_of(dir: &Path, n: u64) -> Vec<u64> {
    let log = Log::open(dir, config()).unwrap();
    for offset in 0..n {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    file_names(dir).iter().filter(|n| n.ends_with(".log")).map(|n| n[..20].parse().unwrap()).collect()
}

fn assert_foreign(error: Error, name: &str) {
    match error {
        Error::Corrupt { path, reason: Corruption::ForeignFile(_), .. } => {
            assert!(path.ends_with(name), "the error names {}, not {name}", path.display());
        }
        other => panic!("expected a foreign-file error naming {name}, got {other:?}"),
    }
}

#[test]
fn an_empty_stray_log_past_the_end_is_named_and_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let active = *bases.last().unwrap();
    // Inside the active segment's offsets, and empty: a stray file, not data.
    let stray = format!("{:020}.log", active + 5);
    std::fs::write(dir.path().join(&stray), b"").unwrap();
    let before = snapshot(dir.path());
    let error = Log::open(dir.path(), config()).unwrap_err();
    assert_foreign(error, &stray);
    // Nothing changed: not even the clean-shutdown marker, which the open had taken.
    assert_eq!(snapshot(dir.path()), before, "a strict open that fails changes nothing");

    let log = Log::open(dir.path(), force()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.acknowledged_records_lost, 0);
    assert!(report.files_kept_corrupt.is_empty(), "no healthy segment is blamed: {report:?}");
    assert_eq!(report.files_kept_foreign.len(), 1);
    assert_eq!(log.next_offset(), 300);
    assert_eq!(common::values(&log).len(), 300);
    log.close().unwrap();
    assert!(file_names(dir.path()).contains(&format!("{stray}.foreign")), "kept, renamed");
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(common::values(&log).len(), 300, "reopens strictly");
}

#[test]
fn an_empty_stray_log_between_segments_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let stray = format!("{:020}.log", bases[1] + 1);
    std::fs::write(dir.path().join(&stray), b"").unwrap();
    assert_foreign(Log::open(dir.path(), config()).unwrap_err(), &stray);
    let log = Log::open(dir.path(), force()).unwrap();
    assert_eq!(log.recovery_report().acknowledged_records_lost, 0);
    assert_eq!(common::values(&log).len(), 300);
}

#[test]
fn a_non_empty_log_starting_inside_the_previous_segment_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let active = *bases.last().unwrap();
    // A copy of an old segment under a name inside the active segment's offsets.
    let stray = format!("{:020}.log", active + 3);
    std::fs::copy(dir.path().join(format!("{:020}.log", bases[0])), dir.path().join(&stray)).unwrap();
    assert_foreign(Log::open(dir.path(), config()).unwrap_err(), &stray);
    let log = Log::open(dir.path(), force()).unwrap();
    let report = log.recovery_report();
    assert_eq!(report.acknowledged_records_lost, 0, "{report:?}");
    assert!(report.files_kept_corrupt.is_empty(), "{report:?}");
    assert_eq!(common::values(&log).len(), 300);
}

/// Regression (review): a clean open took a foreign `.log` (another log's segment, copied in under
/// a name inside an existing segment's offsets) for a segment, and `read(12)` returned that log's
/// record. A segment's first read checks that it begins where the one before it ends.
#[test]
fn a_clean_open_never_reads_a_foreign_segment() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let other = tempfile::tempdir().unwrap();
    let log = Log::open(other.path(), config()).unwrap();
    log.reset_at(bases[1] + 10).unwrap();
    for i in 0..5 {
        log.append(&[Record::new(format!("B-{i}").as_bytes())]).unwrap();
    }
    log.close().unwrap();
    let stray = format!("{:020}.log", bases[1] + 10);
    std::fs::copy(other.path().join(&stray), dir.path().join(&stray)).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    let read = log.read(bases[1] + 12, 1).unwrap().next().unwrap();
    match read {
        Err(error) => assert_foreign(error, &stray),
        Ok(record) => panic!("read a record of another log: {:?}", record.value()),
    }
    assert!(log.metrics().corruption_seen);
}

/// Copies another log's segment of `records` records at `base` into `dir`; returns its file name.
fn copy_in_foreign(dir: &Path, base: u64, records: u32) -> String {
    let other = tempfile::tempdir().unwrap();
    let log = Log::open(other.path(), LogConfig { segment_bytes: 1 << 20, ..config() }).unwrap();
    log.reset_at(base).unwrap();
    for i in 0..records {
        log.append(&[Record::new(format!("FOREIGN {i}").as_bytes())]).unwrap();
    }
    log.close().unwrap();
    let name = format!("{base:020}.log");
    std::fs::copy(other.path().join(&name), dir.join(&name)).unwrap();
    name
}

/// Regression (review): with the foreign file's base inside the segment holding the log start and
/// at or below the start, the file was taken for the start segment, never checked, and a read at
/// the start returned the other log's records.
#[test]
fn a_foreign_file_at_the_log_start_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let start = bases[1] + (bases[2] - bases[1]) / 2;
    let log = Log::open(dir.path(), config()).unwrap();
    log.delete_records_before(start).unwrap();
    log.close().unwrap();
    let stray = copy_in_foreign(dir.path(), start - 1, 5);
    // Opened cleanly, then after an unclean shutdown (the scan starts at the recovery point, far
    // above), and under `recover --force` (which scans from the start): named, never read.
    for unclean in [false, true] {
        if unclean {
            std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
        }
        let log = Log::open(dir.path(), config()).unwrap();
        match log.read(start, 1 << 20).and_then(|mut r| r.next().unwrap()) {
            Err(error) => assert_foreign(error, &stray),
            Ok(record) => assert_eq!(record.value().unwrap(), &value_of(start)[..], "another log's record"),
        }
    }
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let log = Log::open(dir.path(), force()).unwrap();
    assert!(dir.path().join(format!("{stray}.foreign")).exists(), "{:?}", file_names(dir.path()));
    let values = common::values(&log);
    assert!(values.iter().zip(start..).all(|(v, offset)| v == &value_of(offset)), "only this log's records");
    assert_eq!(values.len() as u64, 300 - start);
}

/// A stray file below the log whose records reach past the start: the two files overlap where
/// the log begins, and nothing there is returned (whichever is foreign); an overlap of deleted
/// records only is no part of the log, and the log reads as it is.
#[test]
fn a_stray_file_below_the_log_is_refused_only_where_it_overlaps_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let bases = log_of(dir.path(), 300);
    let start = bases[2] + 5;
    let log = Log::open(dir.path(), config()).unwrap();
    log.delete_records_before(start).unwrap();
    log.close().unwrap();
    assert!(!dir.path().join(format!("{:020}.log", bases[0])).exists());

    // Below the log, ending below the start: ignored.
    let below = tempfile::tempdir().unwrap();
    common::copy_dir(dir.path(), below.path());
    copy_in_foreign(below.path(), 0, (start - 1) as u32);
    let log = Log::open(below.path(), config()).unwrap();
    let values = common::values(&log);
    assert_eq!(values.len() as u64, 300 - start);
    assert!(values.iter().zip(start..).all(|(v, offset)| v == &value_of(offset)));
    drop(log);

    // Below the log, reaching past the start: refused, never another log's record.
    copy_in_foreign(dir.path(), 0, (start + 3) as u32);
    let log = Log::open(dir.path(), config()).unwrap();
    match log.read(start, 1 << 20).and_then(|mut r| r.next().unwrap()) {
        Err(Error::Corrupt { reason: Corruption::ForeignFile(_), .. }) => {}
        Err(other) => panic!("expected a foreign-file error, got {other}"),
        Ok(record) => assert_eq!(record.value().unwrap(), &value_of(start)[..], "another log's record"),
    }
}
