//! Regressions (found in review): after one thread's failure poisoned the log, another thread still
//! moved the durable offset and wrote the checkpoint past the failed data — through a directory
//! fsync marked clean before its result was known, or through a retried seal that returned `Ok`
//! without syncing anything. Fix: the durable offset and the checkpoint never move once the log is
//! poisoned; a failed directory fsync leaves the directory dirty; a segment whose seal or flush
//! failed stays failed (`Poisoned`), however often it is retried.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use fail::FailScenario;
use strata_log::internals::Checkpoint;
use strata_log::{Error, Log, LogConfig, Record};

/// Both appends' results, the checkpoint, the log and its directory.
type Raced = (Result<(), Error>, Result<(), Error>, Checkpoint, Arc<Log>, tempfile::TempDir);

/// Thread 1 rolls (its seal of segment 0 blocks inside the first fdatasync), thread 2 rolls again
/// and waits to seal; then `fail_with` is configured and thread 1 is released. Returns both results
/// and the checkpoint afterwards.
fn race(fail_with: (&str, &str)) -> Raced {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static ENTERED: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    CALLS.store(0, Ordering::SeqCst);
    ENTERED.store(false, Ordering::SeqCst);
    RELEASE.store(false, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap());
    let big = vec![1u8; 600];
    log.append(&[Record::new(&big)]).unwrap();
    fail::cfg_callback("fdatasync", || {
        if CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
            ENTERED.store(true, Ordering::SeqCst);
            while !RELEASE.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap();
    let spawn = |log: &Arc<Log>| {
        let (log, big) = (Arc::clone(log), big.clone());
        std::thread::spawn(move || log.append(&[Record::new(&big)]).map(|_| ()))
    };
    let first = spawn(&log);
    while !ENTERED.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let second = spawn(&log);
    while log.next_offset() < 3 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    fail::cfg(fail_with.0, fail_with.1).unwrap();
    RELEASE.store(true, Ordering::SeqCst);
    let (r1, r2) = (first.join().unwrap(), second.join().unwrap());
    fail::remove("fdatasync");
    fail::remove(fail_with.0);
    let checkpoint = Checkpoint::decode(&std::fs::read(dir.path().join("checkpoint")).unwrap()).unwrap();
    (r1, r2, checkpoint, log, dir)
}

fn assert_nothing_claimed(r1: &Result<(), Error>, r2: &Result<(), Error>, checkpoint: Checkpoint, log: &Log) {
    assert!(r1.is_err() && r2.is_err(), "neither append may report success: {r1:?} {r2:?}");
    assert!(checkpoint.recovery_point <= 1, "the checkpoint moved past failed data: {checkpoint:?}");
    assert!(log.durable_offset() <= 1, "durable offset {}", log.durable_offset());
    assert!(matches!(log.append(&[Record::new(b"x")]), Err(Error::Poisoned)));
}

#[test]
fn a_failed_directory_fsync_stops_every_thread_from_claiming_durability() {
    let scenario = FailScenario::setup();
    let (r1, r2, checkpoint, log, _dir) = race(("fsync_directory", "1*return"));
    assert_nothing_claimed(&r1, &r2, checkpoint, &log);
    // Every log is dropped (closed) before the scenario ends: a close after it could consume the
    // next test's failpoints.
    drop(log);
    scenario.teardown();
}

#[test]
fn a_seal_that_failed_is_not_completed_by_a_retry() {
    let scenario = FailScenario::setup();
    // Segment 0's fdatasync is the blocked one; the next fdatasync (segment 1's) fails.
    let (r1, r2, checkpoint, log, dir) = race(("fdatasync", "1*return"));
    assert_nothing_claimed(&r1, &r2, checkpoint, &log);
    drop(log);
    let reopened = Log::open(dir.path(), LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    assert!(!reopened.recovery_report().clean_shutdown);
    drop(reopened);
    scenario.teardown();
}
