//! Regression: the cleaner writes a group's indexes without the `index_bytes` bound; a truncation
//! into such a segment reopened it as the active one with no spare index slot, so sealing it at
//! the next roll could not add its final time entry (`append past the preallocated capacity`) and
//! poisoned the log — 23 of 59 cut points did, the batch of the failing append stored anyway. A
//! reopened index now always has room for one more entry.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

#[test]
fn appending_after_a_truncation_into_a_cleaned_segment_never_poisons() {
    let config = LogConfig {
        segment_bytes: 4096,
        index_bytes: 24,
        index_interval_bytes: 200,
        flush_policy: FlushPolicy::Never,
        ..LogConfig::default()
    };
    for cut in (1..60u64).step_by(2) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), config.clone()).unwrap();
        for i in 0..60u32 {
            let key = format!("k{}", i % 7);
            log.append(&[Record::new(format!("value {i} {}", "x".repeat(40)).as_bytes()).with_key(key.as_bytes())])
                .unwrap();
        }
        log.compact().unwrap();
        let end = log.truncate_to(cut).unwrap();
        for i in 0..80u32 {
            log.append(&[Record::new(format!("after {i} {}", "y".repeat(40)).as_bytes())])
                .unwrap_or_else(|e| panic!("cut at {cut} (end {end}), append {i}: {e}"));
        }
        log.flush().unwrap();
        assert!(log.metrics().rolls > 0, "the cut segment was sealed at a roll");
        let values = common::values(&log);
        log.close().unwrap();
        let reopened = Log::open(dir.path(), config.clone()).unwrap();
        assert_eq!(common::values(&reopened), values, "cut at {cut}");
    }
}
