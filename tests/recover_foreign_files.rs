//! Regression: a stray file blamed a healthy one. An empty `00000000000000000500.log` dropped into a
//! log made open fail with `corrupt …/00000000000000000180.log at position 652` (a healthy file),
//! and `recover --force` kept that healthy segment as `.corrupt` and reported 300 records lost.
//! DESIGN.md §4: a `.log` whose base falls inside the previous segment's offsets, or an empty
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
