//! Regression: `reset_at(offset)` recorded its cut at `offset`, so a waiter for a removed record
//! below it (stored, never made durable) was told it was durable: after `append_nowait` of offset
//! 10 under `Never`, `reset_at(1000)` or `reset_at(11)`, `wait_batch_durable` and `wait_durable`
//! returned `Ok(())` (under `Always`, an `append` racing a reset could return `Ok` for a record the
//! reset removed). A reset removes every record: its cut is the old log start.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

fn never() -> LogConfig {
    LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }
}

#[test]
fn waiters_for_removed_records_are_told_at_any_reset_offset() {
    for reset in [5, 11, 1000] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), never()).unwrap();
        for _ in 0..10 {
            log.append(&[Record::new(b"old")]).unwrap();
        }
        let info = log.append_nowait(&[Record::new(b"never durable")]).unwrap();
        assert_eq!(info.last_offset, 10);
        log.reset_at(reset).unwrap();
        let waited = log.wait_batch_durable(&info, Duration::from_secs(5));
        assert!(matches!(waited, Err(Error::Truncated { .. })), "reset_at({reset}): {waited:?}");
    }
}
