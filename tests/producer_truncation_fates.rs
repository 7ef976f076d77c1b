//! Regression: the producer's sender waits once for a round of batches (the first batch's
//! truncation epoch, the last batch's offset) and gave that wait's `Truncated` to every batch of
//! the round, so records below the cut — kept, durable — were reported failed (13,429 of 13,798
//! failed handles had their record in the log). Each batch now learns its own fate: a handle that
//! failed with `Truncated` names a record that is not in the log.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_log::{Error, Log, LogConfig, Producer, ProducerConfig, Record};

#[test]
fn a_handle_fails_with_truncated_only_if_its_record_was_removed() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), LogConfig { segment_bytes: 64 << 10, ..LogConfig::default() }).unwrap());
    // Small batches, so a round of the sender holds many and a truncation lands inside one.
    let config = ProducerConfig { linger_ms: 2, batch_bytes: 512, ..ProducerConfig::default() };
    let producer = Producer::new(Arc::clone(&log), config).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let truncator = {
        let (log, stop) = (Arc::clone(&log), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                let next = log.next_offset();
                if next > 3 {
                    log.truncate_to(next - 3).unwrap();
                }
            }
        })
    };
    let mut handles = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut i = 0u64;
    while Instant::now() < deadline {
        let value = format!("rec-{i}");
        handles.push((value.clone(), producer.send(Record::new(value.as_bytes())).unwrap()));
        i += 1;
        if i.is_multiple_of(50) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    producer.flush().unwrap();
    stop.store(true, Ordering::Relaxed);
    truncator.join().unwrap();
    producer.close().unwrap();
    let present: HashSet<Vec<u8>> = common::values(&log).into_iter().collect();
    let (mut failed, mut wrongly) = (0, 0);
    for (value, handle) in handles {
        match handle.wait() {
            Ok(_) => {}
            Err(Error::SendFailed(e)) if matches!(*e, Error::Truncated { .. }) => {
                failed += 1;
                wrongly += usize::from(present.contains(value.as_bytes()));
            }
            Err(e) => panic!("{value}: {e:?}"),
        }
    }
    eprintln!(
        "{i} sent, {failed} failed with Truncated, {wrongly} of them still in the log, {} truncations",
        log.metrics().truncations
    );
    assert_eq!(wrongly, 0, "a record reported removed is in the log");
}
