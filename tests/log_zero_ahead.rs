//! Zeroing ahead of the appends (`LogConfig::zero_ahead_bytes`, `log/zero_ahead.rs`): the zeros
//! never land on data (appends from several threads race the zeroing chunk by chunk across many
//! rolls, and every record reads back), sealed segments are trimmed to their data (a zeroing chunk
//! never extends a sealed file), and the log reopens cleanly with the zeros past its end.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn config(flush_policy: FlushPolicy) -> LogConfig {
    // A window as large as a segment, so the zeroing runs all the time, one 1 MiB chunk (here: the
    // whole window) per event.
    LogConfig { segment_bytes: 64 << 10, zero_ahead_bytes: 64 << 10, flush_policy, ..LogConfig::default() }
}

#[test]
fn zeros_never_land_on_data_and_sealed_segments_keep_only_their_data() {
    // Rounds: a race that puts zeros on data shows in about one round of three.
    let policies = [FlushPolicy::Always, FlushPolicy::EveryInterval { ms: 1, messages: 50 }];
    for flush_policy in policies.into_iter().cycle().take(8) {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(dir.path(), config(flush_policy)).unwrap());
        let writers: Vec<_> = (0..4u8)
            .map(|t| {
                let log = Arc::clone(&log);
                std::thread::spawn(move || {
                    for i in 0..300u32 {
                        let value = [vec![t; 1 + (i as usize * 37) % 900], i.to_be_bytes().to_vec()].concat();
                        log.append(&[Record::new(&value), Record::new(&[t; 10])]).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        log.flush().unwrap();
        assert!(log.segment_count() > 4, "{flush_policy:?}: the appends rolled several segments");
        let records = common::read_all(&log, 0, 1 << 20);
        assert_eq!(records.len(), 2400);
        for (_, record) in &records {
            let value = record.value.as_ref().unwrap();
            assert!(value.iter().all(|&b| b < 4) || value.len() > 4, "no zeroed record: {value:?}");
        }
        let end = log.next_offset();
        let sealed: Vec<_> = log.read(0, 1 << 30).unwrap().batches().map(Result::unwrap).collect();
        Arc::into_inner(log).unwrap().close().unwrap();
        // Every sealed `.log` is exactly its batches: none was extended by zeros after its trim.
        let mut logs: Vec<_> = common::file_names(dir.path()).into_iter().filter(|n| n.ends_with(".log")).collect();
        logs.pop(); // the active segment
        for name in logs {
            let base: u64 = name.trim_end_matches(".log").parse().unwrap();
            let next_base = common::file_names(dir.path())
                .into_iter()
                .filter(|n| n.ends_with(".log"))
                .map(|n| n.trim_end_matches(".log").parse::<u64>().unwrap())
                .find(|&b| b > base)
                .unwrap();
            let bytes: u64 = sealed
                .iter()
                .filter(|b| b.base_offset() >= base && b.base_offset() < next_base)
                .map(|b| b.encoded_len())
                .sum();
            assert_eq!(std::fs::metadata(dir.path().join(&name)).unwrap().len(), bytes, "{name}");
        }
        let log = Log::open(dir.path(), config(flush_policy)).unwrap();
        assert_eq!(log.next_offset(), end);
        assert_eq!(common::read_all(&log, 0, 1 << 20).len(), 2400);
    }
}

/// Under `Never` nothing is zeroed (the zeros would cost writes and buy nothing); under `Always`
/// the metrics count what was.
#[test]
fn nothing_is_zeroed_without_fsyncs() {
    for (flush_policy, zeroes) in [(FlushPolicy::Never, false), (FlushPolicy::Always, true)] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), config(flush_policy)).unwrap();
        for _ in 0..10 {
            log.append(&[Record::new(&[7; 1000])]).unwrap();
        }
        log.flush().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while zeroes && log.metrics().zeroed_ahead_bytes == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(log.metrics().zeroed_ahead_bytes > 0, zeroes, "{flush_policy:?}");
    }
}

/// Regression (review): once the zeroing reached a segment's end, every append asked for another
/// zeroing event that had nothing to do.
#[test]
fn a_fully_zeroed_segment_asks_for_no_more_zeroing() {
    let dir = tempfile::tempdir().unwrap();
    // A window larger than the segment: the first event or two zero all of it.
    let config = LogConfig {
        segment_bytes: 1 << 20,
        zero_ahead_bytes: 8 << 20,
        flush_policy: FlushPolicy::EveryInterval { ms: 60_000, messages: u64::MAX },
        preallocate: false,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    for _ in 0..500 {
        log.append(&[Record::new(&[3; 1000])]).unwrap();
    }
    let events = log.event_metrics().unwrap();
    assert!(events.processed + events.queue_len as u64 <= 10, "{events:?}");
    assert!(log.metrics().zeroed_ahead_bytes <= 1 << 20);
}
