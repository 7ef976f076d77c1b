//! Regression (review): `offset_for_timestamp` during `truncate_to` answered `Ok(None)` for records
//! the cut keeps (5.5M of 14.7M lookups): the truncation retires the cut segment milliseconds
//! before it puts the cut copy in the map, and the time lookup took "retired" for "nothing here",
//! so a consumer seeking by time jumped to the end and skipped records. It now waits for the
//! truncation and looks again.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use strata_log::{Clock, FlushPolicy, Log, LogConfig, Record};

#[test]
fn a_time_lookup_racing_truncations_finds_the_records_they_keep() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicI64::new(1_000_000));
    let clock = {
        let now = Arc::clone(&now);
        Clock::from_fn(move || now.load(Ordering::SeqCst))
    };
    let config = LogConfig { flush_policy: FlushPolicy::Never, clock, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let mut stamps = Vec::new();
    for i in 0..40 {
        stamps.push(log.append(&[Record::new(format!("r{i}").as_bytes())]).unwrap().append_time_ms);
        now.fetch_add(10, Ordering::SeqCst);
    }
    let target = stamps[3];
    let stop = Arc::new(AtomicBool::new(false));
    let truncator = {
        let (log, stop, now) = (Arc::clone(&log), Arc::clone(&stop), Arc::clone(&now));
        std::thread::spawn(move || {
            let mut cuts = 0;
            while !stop.load(Ordering::Relaxed) {
                log.truncate_to(5).unwrap();
                for i in 5..40 {
                    log.append(&[Record::new(format!("r{i}").as_bytes())]).unwrap();
                    now.fetch_add(10, Ordering::SeqCst);
                }
                cuts += 1;
            }
            cuts
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut lookups = 0u64;
    while Instant::now() < deadline {
        assert_eq!(log.offset_for_timestamp(target).unwrap(), Some(3), "lookup {lookups}");
        lookups += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let cuts = truncator.join().unwrap();
    assert!(cuts > 10 && lookups > 100, "{cuts} truncations, {lookups} lookups");
}
