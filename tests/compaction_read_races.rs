//! Regression: a compaction swap replaced a segment with `SkipMap::insert` under its existing key;
//! crossbeam-skiplist unlinks the old node before linking the new one, so a reader looking up an
//! offset in between saw the previous segment (`Corrupt … DataEndsEarly`) or none
//! (`OffsetOutOfRange`) on healthy data — a consumer then stops, or resets its position and skips
//! records. Fix: every change of the segment map other than a roll is one edit that lookups see
//! as atomic (a version counter, `log/segments.rs`). Here nothing truncates or deletes, so every
//! read error is false.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::RngExt;
use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn race_secs() -> f64 {
    std::env::var("STRATA_RACE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0)
}

#[test]
fn reads_during_compaction_never_fail_on_healthy_data() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 16 << 10,
        index_bytes: 8 * 32,
        index_interval_bytes: 128,
        flush_policy: FlushPolicy::Never,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    for offset in 0..1000u64 {
        append(&log, offset);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            // Bounded, so passes (which rewrite every sealed segment) stay short; each roll gives
            // the next pass something dirty to clean.
            while !stop.load(Ordering::Relaxed) && log.next_offset() < 200_000 {
                append(&log, log.next_offset());
            }
        }));
    }
    {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                log.compact().unwrap();
            }
        }));
    }
    for reader in 0..3 {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = common::rng(&format!("compaction reader {reader}"));
            while !stop.load(Ordering::Relaxed) {
                let end = log.visible_end();
                // Mostly where every pass replaces the first segment (base 0) with its cleaned copy.
                let from =
                    if rng.random_bool(0.8) { rng.random_range(0..end.min(2000)) } else { rng.random_range(0..end) };
                let max_bytes = if rng.random_bool(0.9) { 1 } else { 4096 };
                let mut last = None;
                for record in log.read(from, max_bytes).unwrap() {
                    let record = record.unwrap_or_else(|e| panic!("read from {from} (end {end}): {e}"));
                    assert!(record.offset() >= from && last.is_none_or(|l| record.offset() > l));
                    assert_eq!(
                        record.value(),
                        Some(&record.offset().to_be_bytes()[..]),
                        "value at {}",
                        record.offset()
                    );
                    last = Some(record.offset());
                }
                if rng.random_bool(0.01) {
                    log.offset_for_timestamp(0).unwrap().expect("the log has records");
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs_f64(race_secs()));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("a racing thread failed");
    }
    let passes = log.metrics().compaction_passes;
    eprintln!("{passes} compaction passes");
    assert!(passes > 0, "compaction ran");
}

/// One record at `offset` (the appender is the only one): its value is the offset, its key one of
/// 32, so compaction always has superseded records to remove.
fn append(log: &Log, offset: u64) {
    let key = (offset % 32).to_be_bytes();
    let info = log.append(&[Record::new(&offset.to_be_bytes()).with_key(&key)]).unwrap();
    assert_eq!(info.base_offset, offset);
}
