//! Regression (review): a failed fdatasync of the zeros ahead of the appends is the data's failure
//! too (it syncs the same file, and Linux reports a failed writeback once per open file): the log
//! must be poisoned, never claim the appends before it durable.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use fail::FailScenario;
use strata_log::{Error, Log, LogConfig, Record};

#[test]
fn a_failed_zeroing_sync_poisons_the_log() {
    let scenario = FailScenario::setup();
    fail::cfg("zero_ahead_fdatasync", "return").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 1 << 20, zero_ahead_bytes: 64 << 10, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    // The first append asks for zeros; the zeroing event's sync fails; a later append must fail.
    let deadline = Instant::now() + Duration::from_secs(10);
    let failed = loop {
        match log.append(&[Record::new(&[1; 100])]) {
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            other => break other,
        }
    };
    assert!(matches!(failed, Err(Error::Poisoned)), "{failed:?}");
    scenario.teardown();
}
