//! Crash test: a child process runs a compaction pass and dies at each named step of the swap
//! (docs/DESIGN.md §10). Reopening must give exactly the old segments or exactly the compacted
//! ones, never a mix and never a loss, and an unclean reopen after a completed pass keeps it.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::child::CHILD_DIR;
use common::{copy_dir, file_names};
use strata_log::internals::CRASH_EXIT_CODE;
use strata_log::{LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 2048, index_interval_bytes: 128, file_delete_delay_ms: 0, ..LogConfig::default() }
}

/// Superseded records with unique ones between them, over many segments (several groups).
fn build(dir: &Path) {
    let log = common::open_unlocked(dir, config()).unwrap();
    for round in 0..60 {
        for key in 0..4 {
            log.append(&[Record::new(format!("old-{round}").as_bytes()).with_key(format!("key-{key}").as_bytes())])
                .unwrap();
        }
        log.append(&[Record::new(b"unique").with_key(format!("unique-{round}").as_bytes())]).unwrap();
    }
    log.close().unwrap();
}

fn contents(dir: &Path) -> BTreeMap<u64, (Vec<u8>, Vec<u8>)> {
    let log = common::open_unlocked(dir, config()).unwrap();
    let mut out = BTreeMap::new();
    let mut next = log.start_offset();
    while next < log.next_offset() {
        for record in log.read(next, 1 << 20).unwrap() {
            let record = record.unwrap();
            next = record.offset() + 1;
            out.insert(record.offset(), (record.key().unwrap().to_vec(), record.value().unwrap().to_vec()));
        }
    }
    out
}

/// The child: compacts the log in `STRATA_CHILD_DIR` (dying at the configured crash point).
/// Started alone (`--ignored`, no `STRATA_CHILD_DIR`) it compacts a log of its own, so it runs
/// rather than passing without doing anything.
#[test]
#[ignore = "the child process of the tests below"]
fn child_process() {
    let own = tempfile::tempdir().unwrap();
    let dir = std::env::var(CHILD_DIR).map(std::path::PathBuf::from).unwrap_or_else(|_| {
        build(own.path());
        own.path().to_path_buf()
    });
    let _scenario = fail::FailScenario::setup();
    let log = common::open_unlocked(&dir, config()).unwrap();
    log.compact().unwrap();
    log.close().unwrap();
}

fn run_child(dir: &Path, failpoints: &str) -> Option<i32> {
    common::child::run(&mut common::child::command(dir), failpoints)
}

#[test]
fn a_crash_at_each_compaction_step_leaves_the_old_or_the_new_segments() {
    let template = tempfile::tempdir().unwrap();
    build(template.path());
    let old = contents(template.path());
    // What a completed pass gives, from a copy.
    let done = tempfile::tempdir().unwrap();
    copy_dir(template.path(), done.path());
    common::open_unlocked(done.path(), config()).unwrap().compact().unwrap().unwrap();
    let compacted = contents(done.path());
    assert!(compacted.len() < old.len());

    let points = [
        ("cleaner_after_cleaned", false),
        ("cleaner_after_swap_rename", false),
        ("1*off->return", false),
        ("cleaner_after_deleted_rename", true),
        ("cleaner_mid_strip", true),
    ];
    for (point, completes) in points {
        // `1*off->return` is the second swap rename (some groups renamed, not all).
        let spec =
            if point.contains("->") { format!("cleaner_after_swap_rename={point}") } else { format!("{point}=return") };
        let dir = tempfile::tempdir().unwrap();
        copy_dir(template.path(), dir.path());
        assert_eq!(run_child(dir.path(), &spec), Some(CRASH_EXIT_CODE), "{spec} was reached");
        let after = contents(dir.path());
        let expected = if completes { &compacted } else { &old };
        assert!(after == *expected, "{spec}: neither wholly old nor wholly compacted as expected");
        let names = file_names(dir.path());
        assert!(
            !names.iter().any(|n| n.ends_with(".cleaned") || n.ends_with(".swap") || n.ends_with(".deleted")),
            "{spec}: leftovers {names:?}"
        );
    }
}

#[test]
fn an_unclean_reopen_after_a_pass_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let log = common::open_unlocked(dir.path(), config()).unwrap();
    log.compact().unwrap().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    drop(log);
    let reopened = common::open_unlocked(crashed.path(), config()).unwrap();
    assert!(!reopened.recovery_report().clean_shutdown);
    drop(reopened);
    assert_eq!(contents(crashed.path()), contents(dir.path()));
}
