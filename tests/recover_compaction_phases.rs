//! Kafka's loader cases for an interrupted compaction swap (docs/DESIGN.md §10): the cleaner writes
//! `<base>.log.cleaned`, renames groups to `.swap` in descending offset order, renames the
//! originals to `.deleted`, then strips `.swap`. A crash at any phase leaves the old or the new
//! segments — never a mix and never a loss. The cleaner's output here is the concatenation of the
//! segments it replaces (the records are unchanged, so "no loss" is checked record by record, and
//! "old or new" by which files exist).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{check_recovered, file_names, value_of};
use strata_log::{Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 1024, index_interval_bytes: 200, ..LogConfig::default() }
}

const RECORDS: u64 = 150;

/// A clean log of at least five segments; returns the `.log` names.
fn build(dir: &Path) -> Vec<String> {
    let log = Log::open(dir, config()).unwrap();
    for offset in 0..RECORDS {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    let logs: Vec<String> = file_names(dir).into_iter().filter(|n| n.ends_with(".log")).collect();
    assert!(logs.len() >= 5);
    logs
}

/// Writes the cleaner's output for segments `group` (concatenated) as `<first>.log<suffix>`.
fn write_output(dir: &Path, logs: &[String], group: std::ops::Range<usize>, suffix: &str) {
    let mut bytes = Vec::new();
    for name in &logs[group.clone()] {
        bytes.extend(std::fs::read(dir.join(name)).unwrap());
    }
    std::fs::write(dir.join(format!("{}{suffix}", logs[group.start])), bytes).unwrap();
}

#[test]
fn crash_with_only_cleaned_output_keeps_the_originals() {
    let dir = tempfile::tempdir().unwrap();
    let logs = build(dir.path());
    write_output(dir.path(), &logs, 0..2, ".cleaned");
    write_output(dir.path(), &logs, 2..4, ".cleaned");
    let before = file_names(dir.path());
    drop(check_recovered(dir.path(), config(), RECORDS));
    let after = file_names(dir.path());
    assert!(logs.iter().all(|l| after.contains(l)), "every original kept");
    assert!(after.iter().all(|n| !n.ends_with(".cleaned")));
    assert!(before.len() > after.len());
}

#[test]
fn crash_with_some_groups_renamed_to_swap_discards_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let logs = build(dir.path());
    // Descending order: the higher group reached .swap, the lower one is still .cleaned.
    write_output(dir.path(), &logs, 2..4, ".swap");
    write_output(dir.path(), &logs, 0..2, ".cleaned");
    drop(check_recovered(dir.path(), config(), RECORDS));
    let after = file_names(dir.path());
    assert!(logs.iter().all(|l| after.contains(l)), "every original kept: {after:?}");
    assert!(after.iter().all(|n| !n.ends_with(".swap") && !n.ends_with(".cleaned")));
}

#[test]
fn crash_with_all_groups_swapped_and_originals_deleted_completes_the_swap() {
    let dir = tempfile::tempdir().unwrap();
    let logs = build(dir.path());
    write_output(dir.path(), &logs, 0..2, ".swap");
    write_output(dir.path(), &logs, 2..4, ".swap");
    for name in &logs[0..4] {
        for suffix in ["", ".index", ".timeindex"] {
            let file = if suffix.is_empty() { name.clone() } else { name.replace(".log", suffix) };
            std::fs::rename(dir.path().join(&file), dir.path().join(format!("{file}.deleted"))).unwrap();
        }
    }
    let log = check_recovered(dir.path(), config(), RECORDS);
    assert_eq!(log.segment_count(), logs.len() - 2, "two groups of two became two segments");
    drop(log);
    let after = file_names(dir.path());
    assert!(after.contains(&logs[0]) && after.contains(&logs[2]), "the swapped-in segments: {after:?}");
    assert!(!after.contains(&logs[1]) && !after.contains(&logs[3]));
}

#[test]
fn crash_with_all_groups_swapped_and_originals_present_completes_the_swap() {
    let dir = tempfile::tempdir().unwrap();
    let logs = build(dir.path());
    write_output(dir.path(), &logs, 0..2, ".swap");
    write_output(dir.path(), &logs, 2..4, ".swap");
    let log = check_recovered(dir.path(), config(), RECORDS);
    assert_eq!(log.segment_count(), logs.len() - 2);
}
