//! Regression (adversarial pass): `verify` beside a live writer that rolls, seals and deletes old
//! segments reported errors on a healthy log (a segment gone between the listing and its read, a
//! segment trimmed while it was read). A check made while the segments changed is now done again:
//! every report here must be clean.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_log::{Log, LogConfig, Record};

#[test]
fn verify_beside_a_rolling_writer_with_retention_reports_no_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        retention_bytes: Some(16 * 1024),
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    };
    let log = Arc::new(Log::open(dir.path(), config.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut offset = 0u64;
            while !stop.load(Ordering::Relaxed) {
                log.append(&[Record::new(&common::value_of(offset))]).unwrap();
                offset += 1;
                if offset.is_multiple_of(50) {
                    log.flush().unwrap();
                    log.enforce_retention().unwrap();
                }
            }
            offset
        })
    };
    let rounds: u32 = std::env::var("STRATA_VERIFY_LIVE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    for round in 0..rounds {
        let report = strata_log::internals::inspect::verify(dir.path(), &config).unwrap();
        let errors: Vec<_> = report.errors().collect();
        assert!(errors.is_empty(), "round {round}: {errors:#?}");
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);
}
