//! Regression (adversarial passes): `verify` beside a live writer reported errors on a healthy
//! log: a segment gone between the listing and its read, a segment trimmed while it was read, the
//! missing final time entry of a segment rolled away from but not yet sealed, the moment of a
//! compaction swap with neither the originals nor their replacements in place, a segment cut by a
//! truncation, and a log rolling at every append that never held still. A check made while the
//! log changed is now done again, and one that never settles says so (`Error::Unsettled`): no
//! report here may hold an error, and no check may fail any other way.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_log::{CleanupPolicy, Error, Log, LogConfig, Record};

/// Runs `write(log, n)` for n = 0, 1, … (up to 200 000) on a thread while `verify` checks the log, and returns how
/// many checks gave a report (the others were `Unsettled`).
fn verify_beside(config: LogConfig, write: impl Fn(&Log, u64) + Send + 'static) -> u32 {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0u64;
            // Bounded, so a slow check never meets an ever larger log.
            while !stop.load(Ordering::Relaxed) && n < 200_000 {
                write(&log, n);
                n += 1;
            }
            n
        })
    };
    let rounds: u32 = std::env::var("STRATA_VERIFY_LIVE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let mut reports = 0;
    for round in 0..rounds {
        match strata_log::internals::inspect::verify(dir.path(), &config) {
            Ok(report) => {
                let errors: Vec<_> = report.errors().collect();
                assert!(errors.is_empty(), "round {round}: {errors:#?}");
                reports += 1;
            }
            Err(Error::Unsettled { .. }) => {}
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().unwrap() > 0);
    // Held and still: the first check is the answer, clean.
    let report = strata_log::internals::inspect::verify(dir.path(), &config).unwrap();
    assert!(report.is_clean(), "{report:#?}");
    eprintln!("{reports} of {rounds} checks settled");
    reports
}

#[test]
fn verify_beside_a_rolling_writer_with_retention_reports_no_errors() {
    let config = LogConfig {
        segment_bytes: 4096,
        retention_bytes: Some(16 * 1024),
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    };
    let reports = verify_beside(config, |log, n| {
        log.append(&[Record::new(&common::value_of(n))]).unwrap();
        if n % 50 == 49 {
            log.flush().unwrap();
            log.enforce_retention().unwrap();
        }
    });
    assert!(reports > 0, "some check settled");
}

/// Rising timestamps and no offset index entries: a segment rolled away from lacks its final time
/// entry until the syncer seals it.
#[test]
fn verify_beside_segments_rolled_but_not_yet_sealed_reports_no_errors() {
    let config = LogConfig { segment_bytes: 512, index_interval_bytes: u64::from(u32::MAX), ..LogConfig::default() };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    verify_beside(config, move |log, n| {
        log.append(&[Record::new(&common::value_of(n)).with_timestamp(now + n as i64)]).unwrap();
    });
}

#[test]
fn verify_beside_compaction_reports_no_errors() {
    let config = LogConfig {
        segment_bytes: 2048,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_percent: 0,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    };
    let reports = verify_beside(config, |log, n| {
        let key = format!("key-{}", n % 8);
        log.append(&[Record::new(&common::value_of(n)).with_key(key.as_bytes())]).unwrap();
        if n % 40 == 39 {
            log.compact().unwrap();
        }
    });
    assert!(reports > 0, "some check settled");
}

#[test]
fn verify_beside_truncations_reports_no_errors() {
    let config = LogConfig { segment_bytes: 4096, file_delete_delay_ms: 0, ..LogConfig::default() };
    let reports = verify_beside(config, |log, n| {
        log.append(&[Record::new(&common::value_of(n))]).unwrap();
        if n % 30 == 29 {
            log.flush().unwrap();
            let next = log.next_offset();
            log.truncate_to(next - next.min(20)).unwrap();
        }
    });
    assert!(reports > 0, "some check settled");
}
