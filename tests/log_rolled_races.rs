//! Regression: segments rolled away from but not yet sealed were tracked in a list that sealing
//! emptied by position (`remove(0)` after sealing the first) while prefix deletion and `reset_at`
//! removed entries by identity. A deletion of the segment being sealed made `remove(0)` panic on an
//! empty list (`removal index (is 0) should be < len (is 0)`) or drop the *next* rolled segment,
//! which was then never sealed (its descriptors held for the life of the log, retention stuck
//! behind it). Fix: sealing removes exactly the segment it sealed.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

fn race_secs() -> f64 {
    std::env::var("STRATA_RACE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0)
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_bytes: 8 * 32,
        flush_policy: FlushPolicy::Never,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// Errors a racing call may legitimately return: its offsets were removed under it.
fn benign(error: &Error) -> bool {
    matches!(error, Error::Truncated { .. } | Error::OffsetOutOfRange { .. })
}

#[test]
fn prefix_deletion_racing_reset_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let deleters: Vec<_> = (0..2)
        .map(|_| {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = log.delete_records_before(log.start_offset())
                        && !benign(&e)
                    {
                        panic!("delete_records_before: {e}");
                    }
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs_f64(race_secs());
    let value = [7u8; 200];
    while Instant::now() < deadline {
        for _ in 0..6 {
            log.append(&[Record::new(&value)]).unwrap();
        }
        log.reset_at(log.next_offset()).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for deleter in deleters {
        deleter.join().expect("a deleting thread panicked");
    }
    log.flush().unwrap();
    assert_eq!(log.metrics().unsealed_segments, 0, "every rolled segment is sealed after a flush");
    Arc::try_unwrap(log).unwrap().close().unwrap();
}

#[test]
fn retention_racing_rolls_leaves_no_segment_unsealed() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { retention_bytes: Some(4096), ..config() };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let retention: Vec<_> = (0..2)
        .map(|_| {
            let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    log.enforce_retention().unwrap();
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs_f64(race_secs());
    let value = [3u8; 300];
    while Instant::now() < deadline {
        log.append(&[Record::new(&value)]).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for thread in retention {
        thread.join().expect("a retention thread panicked");
    }
    log.flush().unwrap();
    assert_eq!(log.metrics().unsealed_segments, 0, "every rolled segment is sealed after a flush");
    // Retention is not stuck behind a segment nobody seals.
    log.enforce_retention().unwrap();
    assert!(log.metrics().bytes_on_disk <= 4096 + 1024, "{:?}", log.metrics().bytes_on_disk);
    let values = common::values(&log);
    assert!(values.iter().all(|v| v == &value), "only whole records of the right value");
    Arc::try_unwrap(log).unwrap().close().unwrap();
}
