//! Prefix removal (docs/DESIGN.md §9): retention by size and by time (with an injected clock, never
//! real time), `delete_records_before`, the delayed unlink, and readers in deleted segments.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{copy_dir, file_names, read_all, small_config, value_of};
use strata_log::{Error, Log, LogConfig, ManualClock, Record};

fn append_values(log: &Log, from: u64, to: u64) {
    for offset in from..to {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
}

/// Every record from the start offset on is there with its value.
fn assert_intact(log: &Log) {
    let records = read_all(log, log.start_offset(), 1 << 16);
    assert_eq!(records.len() as u64, log.next_offset() - log.start_offset());
    for (i, (offset, record)) in records.iter().enumerate() {
        assert_eq!(*offset, log.start_offset() + i as u64);
        assert_eq!(record.value.as_deref(), Some(&value_of(*offset)[..]));
    }
}

fn deleted_files(dir: &Path) -> usize {
    file_names(dir).iter().filter(|n| n.ends_with(".deleted")).count()
}

/// Polls `done` for up to 30 s (the event thread runs the work; the test only waits for it).
fn eventually(what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn retention_by_size_keeps_at_least_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 3 * 4096;
    let log = Log::open(dir.path(), LogConfig { retention_bytes: Some(limit), ..small_config() }).unwrap();
    append_values(&log, 0, 600);
    let before = log.metrics();
    let deleted = log.enforce_retention().unwrap();
    let after = log.metrics();
    assert!(deleted > 0);
    assert_eq!(after.segments, before.segments - deleted);
    assert_eq!(after.retention_deletions, deleted);
    assert!(after.bytes_on_disk >= limit, "{} < {limit}", after.bytes_on_disk);
    // Deleting one more segment would have gone below the limit.
    let first = file_names(dir.path()).into_iter().find(|n| n.ends_with(".log")).unwrap();
    let first_len = std::fs::metadata(dir.path().join(first)).unwrap().len();
    assert!(after.bytes_on_disk - first_len < limit);
    assert!(log.start_offset() > 0);
    assert!(matches!(log.read(0, 100), Err(Error::OffsetOutOfRange { .. })));
    assert_intact(&log);
    assert_eq!(log.enforce_retention().unwrap(), 0, "nothing more to delete");
}

#[test]
fn retention_by_time_uses_each_segments_newest_record_and_spares_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { retention_ms: Some(500), clock: clock.clock(), ..small_config() };
    let log = Log::open(dir.path(), config).unwrap();
    append_values(&log, 0, 200);
    let old_end = log.next_offset();
    clock.advance(1000);
    append_values(&log, 200, 400);
    // At 1_001_000 the first records are 1000 ms old: segments holding only them go; the segment
    // holding offset 199 also holds a record stamped 1_001_000, so it stays.
    let deleted = log.enforce_retention().unwrap();
    assert!(deleted > 0);
    let start = log.start_offset();
    assert!(start <= old_end && start > 0, "start {start}");
    let first = read_all(&log, start, 1 << 16);
    assert!(first.iter().any(|(o, _)| *o < old_end), "the straddling segment stays");
    assert_intact(&log);
    // Far in the future every sealed segment is too old; the active one stays.
    clock.advance(1_000_000);
    log.enforce_retention().unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.next_offset(), 400);
    assert_intact(&log);
    log.append(&[Record::new(&value_of(400))]).unwrap();
}

#[test]
fn retention_runs_on_the_event_thread_every_retention_check_ms() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { retention_ms: Some(10), retention_check_ms: 5, clock: clock.clock(), ..small_config() };
    let log = Log::open(dir.path(), config).unwrap();
    append_values(&log, 0, 300);
    assert_eq!(log.metrics().retention_deletions, 0, "nothing is old yet by the injected clock");
    clock.advance(60_000);
    eventually("a retention check", || log.metrics().retention_deletions > 0);
    assert!(log.start_offset() > 0);
    let events = log.event_metrics().unwrap();
    assert!(events.processed > 0 && events.failed == 0 && events.panicked == 0, "{events:?}");
    assert_intact(&log);
}

#[test]
fn delete_records_before_survives_clean_and_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 400);
    let segments = log.segment_count();
    assert_eq!(log.delete_records_before(250).unwrap(), 250);
    assert_eq!(log.start_offset(), 250);
    assert!(log.segment_count() < segments);
    assert!(deleted_files(dir.path()) > 0, "renamed .deleted, unlinked after file_delete_delay_ms");
    assert!(matches!(log.read(249, 100), Err(Error::OffsetOutOfRange { start: 250, .. })));
    assert_eq!(log.read(250, 100).unwrap().next().unwrap().unwrap().offset(), 250);
    assert_eq!(log.delete_records_before(100).unwrap(), 250, "the start never moves back");
    assert_eq!(log.delete_records_before(u64::MAX).unwrap(), 400, "at most the next offset");
    assert_eq!(log.read(400, 100).unwrap().count(), 0, "everything deleted: the start is the end");
    assert!(matches!(log.read(399, 100), Err(Error::OffsetOutOfRange { start: 400, .. })));
    append_values(&log, 400, 420);

    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    let reopened = Log::open(crashed.path(), small_config()).unwrap();
    assert!(!reopened.recovery_report().clean_shutdown);
    assert_eq!((reopened.start_offset(), reopened.next_offset()), (400, 420));
    assert_intact(&reopened);
    assert_eq!(deleted_files(crashed.path()), 0, "open removes .deleted files");
    drop(reopened);

    log.close().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (400, 420));
    assert_intact(&log);
    assert_eq!(deleted_files(dir.path()), 0);
}

#[test]
fn deleted_segments_are_unlinked_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { file_delete_delay_ms: 0, ..small_config() }).unwrap();
    append_values(&log, 0, 300);
    log.delete_records_before(200).unwrap();
    eventually("the unlink", || deleted_files(dir.path()) == 0);
    let bases: Vec<u64> =
        file_names(dir.path()).iter().filter_map(|n| n.strip_suffix(".log")).map(|b| b.parse().unwrap()).collect();
    assert!(bases[0] <= 200 && bases.len() == log.segment_count());
}

#[test]
fn a_reader_in_a_deleted_segment_finishes_its_read() {
    let dir = tempfile::tempdir().unwrap();
    // Segments of several read chunks each, so the reader is inside segment 0 when it goes.
    let config = LogConfig { segment_bytes: 1 << 20, ..small_config() };
    let log = Log::open(dir.path(), config).unwrap();
    let value = vec![7u8; 1000];
    for _ in 0..2500 {
        log.append(&[Record::new(&value)]).unwrap();
    }
    assert!(log.segment_count() >= 3);
    let mut reader = log.read(0, usize::MAX).unwrap();
    assert_eq!(reader.next().unwrap().unwrap().offset(), 0);
    let second_base = file_names(dir.path())
        .iter()
        .filter_map(|n| n.strip_suffix(".log"))
        .map(|b| b.parse::<u64>().unwrap())
        .nth(1)
        .unwrap();
    log.delete_records_before(second_base).unwrap();
    let mut next = 1;
    for record in reader.by_ref() {
        let record = record.unwrap();
        assert_eq!(record.offset(), next);
        assert_eq!(record.value(), Some(&value[..]));
        next += 1;
    }
    assert_eq!(next, 2500, "the reader read segment 0 to its end, then the rest");
}

#[test]
fn readers_racing_retention_see_records_or_out_of_range_never_damage() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { file_delete_delay_ms: 0, ..small_config() }).unwrap();
    append_values(&log, 0, 200);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut records = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let Ok(reader) = log.read(log.start_offset(), 1 << 14) else { continue };
                        for record in reader {
                            match record {
                                Ok(record) => {
                                    assert_eq!(record.value(), Some(&value_of(record.offset())[..]));
                                    records += 1;
                                }
                                Err(Error::OffsetOutOfRange { .. }) => break,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                    records
                })
            })
            .collect();
        for round in 0..50u64 {
            append_values(&log, 200 + round * 20, 200 + (round + 1) * 20);
            log.delete_records_before(round * 20).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
    assert_intact(&log);
}

#[test]
fn zero_retention_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for config in [
        LogConfig { retention_bytes: Some(0), ..small_config() },
        LogConfig { retention_ms: Some(0), ..small_config() },
    ] {
        assert!(matches!(Log::open(dir.path(), config), Err(Error::InvalidConfig { .. })));
    }
}

/// Retention decides on the segments as they are when it deletes: a truncation and fresh appends
/// while a retention check is starting must not lose the fresh records. (The clock of the
/// retention thread blocks until the main thread has truncated and appended.)
#[test]
fn retention_racing_a_truncation_keeps_fresh_records() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::{Arc, Barrier};
    let now = Arc::new(AtomicI64::new(1_000_000));
    let (gate, resume) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let (n, g, r) = (Arc::clone(&now), Arc::clone(&gate), Arc::clone(&resume));
    let clock = strata_log::Clock::from_fn(move || {
        if std::thread::current().name() == Some("retention") {
            g.wait();
            r.wait();
        }
        n.load(Ordering::SeqCst)
    });
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { retention_ms: Some(60_000), file_delete_delay_ms: 0, clock, ..small_config() };
    let log = Log::open(dir.path(), config).unwrap();
    append_values(&log, 0, 400);
    now.fetch_add(3_600_000, Ordering::SeqCst);
    std::thread::scope(|s| {
        let retention =
            std::thread::Builder::new().name("retention".into()).spawn_scoped(s, || log.enforce_retention()).unwrap();
        gate.wait();
        assert_eq!(log.truncate_to(10).unwrap(), 10);
        append_values(&log, 10, 400);
        resume.wait();
        retention.join().unwrap().unwrap();
    });
    // Records from 10 on were appended after the truncation, an hour younger than the old ones:
    // none may go (the first segment also holds fresh records, so it stays whole).
    assert!(log.start_offset() <= 10, "fresh records deleted: start {}", log.start_offset());
    assert_intact(&log);
}
