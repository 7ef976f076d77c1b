//! A full disk (docs/DESIGN.md §8): `Error::DiskFull` wherever space runs out, saying what was
//! needed; nothing stored by the failing call, nothing poisoned; a log on a full disk still opens
//! (cleanly or after a crash), so records can be deleted; appends work again once space returns.
//! The disk is made "full" by the `fallocate_enospc` failpoint (every preallocation fails with
//! ENOSPC); `log_disk_full_ext4.rs` fills a real file system.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::values;
use fail::FailScenario;
use strata_log::{Error, Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, preallocate: false, file_delete_delay_ms: 0, ..LogConfig::default() }
}

fn append(log: &Log, i: u32) -> strata_log::Result<strata_log::AppendInfo> {
    log.append(&[Record::new(format!("{i:04}-{}", "v".repeat(300)).as_bytes())])
}

fn disk_full<T: std::fmt::Debug>(result: strata_log::Result<T>) -> bool {
    match result {
        Err(error @ Error::DiskFull { .. }) => error.to_string().contains("segment_bytes"),
        other => panic!("expected DiskFull naming segment_bytes, got {other:?}"),
    }
}

#[test]
fn a_roll_on_a_full_disk_fails_cleanly_and_works_once_space_returns() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..12 {
        append(&log, i).unwrap();
    }
    fail::cfg("fallocate_enospc", "return").unwrap();
    let mut i = 12;
    // Appends go on inside the preallocated segment until one needs a new one.
    let full = loop {
        match append(&log, i) {
            Ok(_) => i += 1,
            Err(error) => break error,
        }
    };
    assert!(disk_full::<()>(Err(full)));
    assert_eq!(log.next_offset(), u64::from(i), "nothing of the failed append was stored");
    log.flush().unwrap();
    assert_eq!(log.delete_records_before(5).unwrap(), 5, "records can still be deleted");
    fail::remove("fallocate_enospc");
    append(&log, i).unwrap();
    assert_eq!(values(&log).len(), i as usize + 1 - 5);
    log.close().unwrap();
    drop(scenario);
}

#[test]
fn a_log_on_a_full_disk_opens_and_appends_once_space_returns() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..30 {
        append(&log, i).unwrap();
    }
    log.close().unwrap(); // the active segment is trimmed: reopening must re-extend it
    fail::cfg("fallocate_enospc", "return").unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert!(disk_full(append(&log, 30)));
    assert_eq!(log.next_offset(), 30);
    assert_eq!(log.delete_records_before(12).unwrap(), 12);
    log.flush().unwrap();
    fail::remove("fallocate_enospc");
    append(&log, 30).unwrap();
    log.close().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (12, 31));
    assert_eq!(values(&log).len(), 19);
    drop(log);
    drop(scenario);
}

#[test]
fn a_crashed_log_on_a_full_disk_recovers_and_opens() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..30 {
        append(&log, i).unwrap();
    }
    // A copy of a live log is what a crash leaves: no marker, the active segment untrimmed.
    common::copy_dir(dir.path(), crashed.path());
    drop(log);
    fail::cfg("fallocate_enospc", "return").unwrap();
    let log = Log::open(crashed.path(), config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.next_offset(), 30);
    assert_eq!(values(&log).len(), 30);
    assert_eq!(log.delete_records_before(20).unwrap(), 20);
    fail::remove("fallocate_enospc");
    append(&log, 30).unwrap();
    log.close().unwrap();
    drop(scenario);
}

/// Regression (review): an append that re-extended the `.log` but not an index (the disk filled up
/// between the two) left the index short for good — the `.log` had room, so no later append
/// re-extended it — and an append past the index's room poisoned the log.
#[test]
fn an_index_left_short_is_re_extended_before_it_is_needed() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { index_bytes: 64 * 8, index_interval_bytes: 0, ..config() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for i in 0..3 {
        append(&log, i).unwrap();
    }
    log.close().unwrap();
    fail::cfg("fallocate_enospc", "return").unwrap();
    let log = Log::open(dir.path(), config.clone()).unwrap();
    // Space for the `.log` only: its re-extension passes, the index's fails.
    fail::cfg("fallocate_enospc", "1*off->return").unwrap();
    let full = append(&log, 3);
    assert!(matches!(&full, Err(Error::DiskFull { advice, .. }) if advice.contains("index_bytes")), "{full:?}");
    fail::remove("fallocate_enospc");
    // Index entries for every batch (interval 0): far more than the index had room for.
    for i in 3..40 {
        append(&log, i).unwrap_or_else(|e| panic!("append {i}: {e}"));
    }
    log.flush().unwrap();
    assert_eq!(values(&log).len(), 40);
    log.close().unwrap();
    drop(scenario);
}

/// Regression (adversarial pass): a log whose checkpoint was of version 1 (or missing) did not
/// open on a full disk: the open replaces the checkpoint with a new file, which needs a block, and
/// failed with `DiskFull`, so the user could not open the log to delete records. The old
/// checkpoint (only older) now stays, a version 1 file is updated in place, and the first write
/// with room replaces it by version 2.
#[test]
fn a_log_with_a_version_1_checkpoint_opens_on_a_full_disk() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    closed_log_of_30(dir.path());
    // A version 1 checkpoint (docs/FORMAT.md): magic, version 1, log start 0, recovery point 30, CRC.
    let mut v1 = Vec::new();
    v1.extend_from_slice(b"SLCP");
    v1.extend_from_slice(&1u16.to_be_bytes());
    v1.extend_from_slice(&0u64.to_be_bytes());
    v1.extend_from_slice(&30u64.to_be_bytes());
    let crc = crc32fast::hash(&v1);
    v1.extend_from_slice(&crc.to_be_bytes());
    std::fs::write(dir.path().join("checkpoint"), v1).unwrap();
    fill_the_disk();
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(log.next_offset(), 30);
    assert_eq!(values(&log).len(), 30);
    let len = || std::fs::metadata(dir.path().join("checkpoint")).unwrap().len();
    assert_eq!(len(), 26, "still the version 1 file");
    // Deleting records (to make room) still works: the version 1 file is updated in place.
    assert_eq!(log.delete_records_before(20).unwrap(), 20);
    assert_eq!(len(), 26);
    fail::remove("new_file_enospc");
    fail::remove("fallocate_enospc");
    append(&log, 30).unwrap();
    log.flush().unwrap();
    assert_eq!(len(), 8192, "replaced by version 2 once there is room");
    log.close().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (20, 31));
    drop(log);
    drop(scenario);
}

/// Regression (review): with no checkpoint file at all, the open on a full disk failed with
/// `stat …/checkpoint: No such file or directory` (the version-1 fallback's length check) instead
/// of skipping the write as it does for an old file; and once the open had skipped it, no flush
/// wrote it (the in-memory copy claimed it current).
#[test]
fn a_log_without_a_checkpoint_opens_on_a_full_disk() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    closed_log_of_30(dir.path());
    std::fs::remove_file(dir.path().join("checkpoint")).unwrap();
    fill_the_disk();
    let opened = Log::open(dir.path(), config());
    fail::remove("new_file_enospc");
    fail::remove("fallocate_enospc");
    let log = opened.unwrap_or_else(|e| panic!("open on a full disk without a checkpoint failed: {e}"));
    assert_eq!(log.next_offset(), 30);
    assert_eq!(values(&log).len(), 30);
    // Space is back: the next flush writes the checkpoint the open could not.
    log.flush().unwrap();
    assert!(dir.path().join("checkpoint").exists(), "the flush wrote the checkpoint");
    drop(log);
    drop(scenario);
}

/// A closed log of 30 records in `dir`.
fn closed_log_of_30(dir: &std::path::Path) {
    let log = Log::open(dir, config()).unwrap();
    for i in 0..30 {
        append(&log, i).unwrap();
    }
    log.close().unwrap();
}

/// From here every new file and every allocation fails with ENOSPC (until the failpoints go).
fn fill_the_disk() {
    fail::cfg("fallocate_enospc", "return").unwrap();
    fail::cfg("new_file_enospc", "return").unwrap();
}
