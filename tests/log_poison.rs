//! Poisoning: a failed fsync (data, directory) or a failure after some bytes of a batch
//! were stored makes every later append fail with `Error::Poisoned`, and a close after it never
//! writes `.clean-shutdown` (KAFKA-13773). A failure before any byte is stored (creating the next
//! segment) is an ordinary error: the log stays usable; so is a checkpoint that cannot be written
//! (`log_checkpoint_failures.rs`). Failures are injected with failpoints.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::values;
use fail::FailScenario;
use strata_log::{Error, Log, LogConfig, Record};

fn small() -> LogConfig {
    LogConfig { segment_bytes: 1024, preallocate: false, ..LogConfig::default() }
}

/// The append's own error if the failure happened on its thread, `Poisoned` if the syncer hit it.
fn failed_with(result: strata_log::Result<strata_log::AppendInfo>, op: &str) -> bool {
    match result {
        Err(Error::Io { op: failed, .. }) => failed == op,
        Err(Error::Poisoned) => true,
        _ => false,
    }
}

fn assert_poisoned(log: Log, dir: &std::path::Path) {
    assert!(matches!(log.append(&[Record::new(b"later")]), Err(Error::Poisoned)));
    assert!(matches!(log.flush(), Err(Error::Poisoned)));
    assert!(matches!(log.close(), Err(Error::Poisoned)));
    assert!(!dir.join(".clean-shutdown").exists(), "no clean-shutdown marker after a failure");
    let log = Log::open(dir, small()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
}

#[test]
fn a_failed_fdatasync_poisons_the_log() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    log.append(&[Record::new(b"stored")]).unwrap();
    fail::cfg("fdatasync", "return").unwrap();
    assert!(matches!(log.flush(), Err(Error::Io { op: "fdatasync", .. } | Error::Poisoned)));
    fail::remove("fdatasync");
    assert_poisoned(log, dir.path());
    scenario.teardown();
}

#[test]
fn a_failure_after_bytes_are_stored_poisons_the_log() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    log.append(&[Record::new(b"first")]).unwrap();
    fail::cfg("append_after_data", "return").unwrap();
    assert!(matches!(log.append(&[Record::new(b"half")]), Err(Error::Io { op: "append_after_data", .. })));
    fail::remove("append_after_data");
    assert_poisoned(log, dir.path());
    scenario.teardown();
}

#[test]
fn a_failed_directory_fsync_poisons_the_log() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    fail::cfg("fsync_directory", "return").unwrap();
    let big = vec![1u8; 600];
    log.append(&[Record::new(&big)]).unwrap();
    // The second batch rolls; sealing the first segment then fsyncs the directory, which fails.
    assert!(failed_with(log.append(&[Record::new(&big)]), "fsync_directory"));
    fail::remove("fsync_directory");
    assert_poisoned(log, dir.path());
    scenario.teardown();
}

#[test]
fn a_failure_before_any_byte_is_stored_leaves_the_log_usable() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small()).unwrap();
    let big = vec![7u8; 600];
    log.append(&[Record::new(&big)]).unwrap();
    // The next append must roll; creating the new segment fails (as with a full disk).
    fail::cfg("create_segment", "return").unwrap();
    assert!(matches!(log.append(&[Record::new(&big)]), Err(Error::Io { op: "create_segment", .. })));
    assert_eq!(log.next_offset(), 1, "nothing was stored");
    fail::remove("create_segment");
    assert_eq!(log.append(&[Record::new(&big)]).unwrap().base_offset, 1, "appends work again");
    log.close().unwrap();
    assert!(dir.path().join(".clean-shutdown").exists());
    let log = Log::open(dir.path(), small()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(values(&log), [big.clone(), big]);
    // Closed before the scenario ends: a close after it could consume the next test's failpoints.
    drop(log);
    scenario.teardown();
}
