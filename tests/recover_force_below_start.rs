//! Regression (review): `recover --force` with damage only below the log start offset threw away
//! every intact record above it. 100 records, `delete_records_before(30)`, one byte of record 26
//! damaged in the segment that still holds 26..30: a strict open read all 70 records, but
//! `recover --force` scanned from the first segment, cut at 26, reported 74 acknowledged records
//! lost and left the log empty at 30. Records below the start are deleted anyway: the forced scan
//! starts at the segment holding the start, and validates only batches reaching it.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::internals::inspect::{RecoverOptions, recover};
use strata_log::{Log, LogConfig, Record};

#[test]
fn damage_below_the_log_start_costs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, index_bytes: 1024, ..LogConfig::default() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for i in 0..100u32 {
        log.append(&[Record::new(format!("{i:0100}").as_bytes())]).unwrap();
    }
    assert_eq!(log.delete_records_before(30).unwrap(), 30);
    log.close().unwrap();
    // Damage record 26's batch (below the start, in the segment that holds the start).
    let first = common::file_names(dir.path()).into_iter().find(|n| n.ends_with(".log")).unwrap();
    let path = dir.path().join(first);
    let mut bytes = std::fs::read(&path).unwrap();
    let mut at = 0usize;
    loop {
        let base = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let len = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if base == 26 {
            bytes[at + 60] ^= 0xff;
            break;
        }
        at += 12 + len;
    }
    std::fs::write(&path, &bytes).unwrap();
    let outcome = recover(dir.path(), RecoverOptions { force: true, ..RecoverOptions::default() }).unwrap();
    assert_eq!(outcome.acknowledged_records_lost, 0, "{outcome:?}");
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (30, 100));
    assert_eq!(common::values(&log).len(), 70);
}
