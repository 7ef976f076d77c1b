//! A full disk, for real: a small ext4 image filled to the last block by another writer. Regression
//! for: fs2's `allocate` reporting errno after `posix_fallocate` (a full disk showed as `No such
//! file or directory`, `Resource temporarily unavailable` or `Success (os error 0)`), a failed
//! checkpoint write (a new temporary file needs a block) poisoning the log for good, and a log on
//! a full disk failing to open (the checkpoint's temporary file, the active segment's
//! re-extension). Each step is checked on the full disk, then after the space is freed; then a
//! flush in an immutable directory. (What `strata produce` says on a full disk is tested with the
//! binary, in `strata-cli/tests/cli_disk_full_ext4.rs`.)
//!
//! Needs root and loop devices: `cargo test --all-features --test log_disk_full_ext4 -- --ignored`.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::ext4::{Mount, fill};
use common::values;
use strata_log::{Error, Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 1 << 20, index_bytes: 64 << 10, file_delete_delay_ms: 0, ..LogConfig::default() }
}

fn record(i: u32) -> Vec<u8> {
    format!("{i:06}-{}", "r".repeat(2000)).into_bytes()
}

fn is_disk_full<T: std::fmt::Debug>(result: &strata_log::Result<T>) -> bool {
    match result {
        Err(Error::DiskFull { needed, available, .. }) => needed.is_some() && available.is_some(),
        _ => false,
    }
}

#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test log_disk_full_ext4 -- --ignored"]
fn every_step_on_a_full_ext4_and_after() {
    let mount = Mount::new(32, None);
    let dir = mount.path().join("log");
    let log = Log::open(&dir, config()).unwrap();
    let mut i = 0;
    while i < 300 {
        log.append(&[Record::new(&record(i))]).unwrap();
        i += 1;
    }
    let filler = fill(mount.path());

    // Appends go on inside the preallocated segment, then a roll needs space.
    let full = loop {
        let result = log.append(&[Record::new(&record(i))]);
        if result.is_err() {
            break result;
        }
        i += 1;
    };
    assert!(is_disk_full(&full), "{full:?}");
    assert!(full.unwrap_err().to_string().contains("segment_bytes"));
    log.flush().unwrap();
    assert_eq!(log.delete_records_before(100).unwrap(), 100);
    log.close().unwrap();

    // A log on a full disk opens (cleanly), refuses appends with DiskFull, deletes records.
    let log = Log::open(&dir, config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert!(is_disk_full(&log.append(&[Record::new(&record(i))])));
    log.delete_records_before(200).unwrap();
    log.flush().unwrap();
    log.close().unwrap();

    // After a crash on a full disk: recovery rebuilds indexes (no room for new files: in place)
    // and cuts the active segment, and the log opens.
    std::fs::remove_file(dir.join(".clean-shutdown")).unwrap();
    let log = Log::open(&dir, config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.start_offset(), 200);
    assert!(is_disk_full(&log.append(&[Record::new(&record(i))])));
    let names = common::file_names(&dir);
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "no temporary file left: {names:?}");
    drop(log);

    std::fs::remove_file(&filler).unwrap();
    let log = Log::open(&dir, config()).unwrap();
    assert_eq!(log.start_offset(), 200);
    for _ in 0..50 {
        log.append(&[Record::new(&record(i))]).unwrap();
        i += 1;
    }
    assert_eq!(values(&log).len() as u64, log.next_offset() - 200);

    // An immutable directory (`chattr +i`): no file can be created or renamed in it, and the
    // checkpoint, written in place, still works.
    chattr("+i", &dir);
    log.append(&[Record::new(&record(i))]).unwrap();
    let flushed = log.flush();
    chattr("-i", &dir);
    flushed.unwrap();
    log.close().unwrap();
}

fn chattr(flag: &str, dir: &std::path::Path) {
    let status = Command::new("chattr").arg(flag).arg(dir).status().unwrap();
    assert!(status.success(), "chattr {flag}");
}

/// Regression (review): a failed fallocate on ext4 keeps the blocks it got and grows the file, so
/// an open on a nearly full disk let the indexes' failed re-extension take the space the `.log`
/// needed (the `.index` grew to 4.8 MB, the disk showed 0 bytes free, every append failed). A
/// failed allocation is now undone.
#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test log_disk_full_ext4 -- --ignored"]
fn a_failed_allocation_takes_no_space() {
    let mount = Mount::new(32, None);
    let dir = mount.path().join("log");
    let config =
        LogConfig { segment_bytes: 1 << 20, index_bytes: 10 << 20, file_delete_delay_ms: 0, ..LogConfig::default() };
    let log = Log::open(&dir, LogConfig { index_bytes: 64 << 10, ..config.clone() }).unwrap();
    for i in 0..100 {
        log.append(&[Record::new(&record(i))]).unwrap();
    }
    log.close().unwrap();
    // Leave 3 MiB: room for the 1 MiB `.log`, not for two 10 MiB indexes.
    let filler = fill(mount.path());
    let len = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&filler).unwrap().set_len(len - (3 << 20)).unwrap();
    let free = |path: &std::path::Path| rustix::fs::statvfs(path).map(|s| s.f_bavail * s.f_frsize).unwrap();
    let before = free(mount.path());
    let log = Log::open(&dir, config).unwrap();
    let after = free(mount.path());
    assert!(after + (1 << 20) + (64 << 10) >= before, "the failed index allocations took space: {before} -> {after}");
    for name in common::file_names(&dir).iter().filter(|n| n.ends_with("index")) {
        let len = std::fs::metadata(dir.join(name)).unwrap().len();
        assert!(len < 1 << 20, "{name} grew to {len} bytes");
    }
    let appended = log.append(&[Record::new(&record(100))]);
    assert!(matches!(&appended, Err(Error::DiskFull { advice, .. }) if advice.contains("index_bytes")), "{appended:?}");
    drop(log);
}
