//! Regression (found by the kill test): after an unclean shutdown, recovery rebuilt the active
//! segment's time index without a final entry, the appender resumed its largest timestamp from the
//! last entry, and `offset_for_timestamp` skipped the segment for any time after that entry:
//! records present in the log were not found by time. Fix: recovery writes the final time entry for
//! every segment it scans, the active one included.
#![allow(clippy::unwrap_used)]

use strata_log::{Log, LogConfig, ManualClock, Record};

#[test]
fn time_lookup_finds_the_last_records_after_an_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = || LogConfig { clock: clock.clock(), ..LogConfig::default() };
    let log = Log::open(dir.path(), config()).unwrap();
    for i in 0..10 {
        clock.advance(10);
        log.append(&[Record::new(format!("r{i}").as_bytes())]).unwrap();
    }
    log.close().unwrap();
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(!log.recovery_report().clean_shutdown);
    assert_eq!(log.offset_for_timestamp(1_000_100).unwrap(), Some(9));
    assert_eq!(log.offset_for_timestamp(1_000_050).unwrap(), Some(4));
    // And the appender's state is right: a later append with the same clock reading is found too.
    log.append(&[Record::new(b"after")]).unwrap();
    assert_eq!(log.offset_for_timestamp(1_000_100).unwrap(), Some(9));
}
