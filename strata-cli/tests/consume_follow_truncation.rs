//! Regression (adversarial pass): `consume --follow` beside a writer that truncates exited with
//! code 2 (a read of a view whose records the writer had just cut away failed, and the error ended
//! the follow). A read that fails under a live writer now opens a fresh view and goes on from where
//! the log is; only a failure that repeats at one offset ends it.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use strata_cli::tools::{ConsumeOptions, consume};
use strata_log::{Log, LogConfig, Record};

#[test]
fn follow_survives_a_writer_that_truncates_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, file_delete_delay_ms: 0, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config.clone()).unwrap());
    log.append(&[Record::new(b"first")]).unwrap();
    log.flush().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (dir, config, stop) = (dir.path().to_path_buf(), config.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let options = ConsumeOptions { follow: true, poll: Duration::from_millis(1), ..ConsumeOptions::default() };
            let mut out = Vec::new();
            consume(&dir, &config, &options, &mut out, &stop)
        })
    };
    let rounds: u64 = std::env::var("STRATA_FOLLOW_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    for round in 0..rounds {
        for i in 0..20 {
            log.append(&[Record::new(&common::value_of(round * 20 + i))]).unwrap();
        }
        log.flush().unwrap();
        // Cut back into the records the consumer is likely reading, sometimes across segments.
        let end = log.next_offset();
        log.truncate_to(end - 1 - round % 15).unwrap();
        if round % 50 == 49 {
            log.delete_records_before(log.next_offset().saturating_sub(5)).unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let summary = consumer.join().unwrap().unwrap();
    assert!(summary.records > 0);
}

/// The retry is bounded: real damage still ends a follow with its error, it is not waited on.
#[test]
fn follow_still_fails_on_damage() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for offset in 0..200 {
        log.append(&[Record::new(&common::value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    let first = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&first, bytes).unwrap();
    let options = ConsumeOptions { follow: true, poll: Duration::from_millis(1), ..ConsumeOptions::default() };
    let result = consume(dir.path(), &config, &options, &mut Vec::new(), &AtomicBool::new(false));
    assert!(result.is_err(), "{result:?}");
}
