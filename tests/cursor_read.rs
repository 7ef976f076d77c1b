//! `Log::cursor`: a reader that owns its share of the log, so it moves to another thread, and keeps
//! its position across calls. Each call returns whole batches (at least one, else at most
//! `max_bytes`), and at the end of the log it returns none, not an error, until more is appended.
#![allow(clippy::unwrap_used)]

mod common;

use common::{small_config, value_of};
use strata_log::{BatchView, Cursor, Error, Log, LogConfig, Record};

/// Appends `count` batches of one to three records, numbered from `from`, with `value_of` values.
fn append_batches(log: &Log, from: u64, count: u64) -> u64 {
    let mut next = from;
    for i in 0..count {
        let values: Vec<Vec<u8>> = (next..next + 1 + i % 3).map(value_of).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        assert_eq!(log.append(&records).unwrap().base_offset, next);
        next += values.len() as u64;
    }
    next
}

fn offsets_and_values(batches: &[BatchView]) -> Vec<(u64, Vec<u8>)> {
    batches.iter().flat_map(BatchView::records).map(|r| (r.offset(), r.value().unwrap().to_vec())).collect()
}

#[test]
fn a_cursor_moved_to_another_thread_reads_the_whole_log_in_bounded_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let next = append_batches(&log, 0, 300);
    assert!(log.segment_count() > 5, "the read crosses segments");
    let cursor: Cursor = log.cursor(0).unwrap();
    let max_bytes = 300;
    // `'static`: the thread outlives no borrow of `log`.
    let reader = std::thread::spawn(move || {
        let mut cursor = cursor;
        let mut seen = Vec::new();
        let mut calls = 0;
        loop {
            let batches = cursor.next_batch(max_bytes).unwrap();
            if batches.is_empty() {
                return (seen, calls, cursor.position());
            }
            calls += 1;
            let bytes: u64 = batches.iter().map(BatchView::encoded_len).sum();
            assert!(batches.len() == 1 || bytes <= max_bytes as u64, "{} batches, {bytes} bytes", batches.len());
            for batch in &batches {
                assert_eq!(batch.records().len() as u32, batch.record_count(), "whole batches");
            }
            assert_eq!(batches.last().unwrap().last_offset() + 1, cursor.position());
            seen.extend(offsets_and_values(&batches));
        }
    });
    let (seen, calls, position) = reader.join().unwrap();
    assert_eq!(position, next);
    assert!(calls > 10, "max_bytes bounded each call ({calls} calls)");
    let expected: Vec<(u64, Vec<u8>)> = (0..next).map(|o| (o, value_of(o))).collect();
    assert_eq!(seen, expected);
}

#[test]
fn at_the_end_it_returns_nothing_until_records_are_appended() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut cursor = log.cursor(0).unwrap();
    for round in 0..4u64 {
        assert!(cursor.next_batch(1 << 20).unwrap().is_empty(), "nothing new is not an error");
        assert_eq!(cursor.position(), round * 2, "an empty call does not move");
        log.append(&[Record::new(&value_of(round * 2)), Record::new(&value_of(round * 2 + 1))]).unwrap();
        let batches = cursor.next_batch(1 << 20).unwrap();
        assert_eq!(
            offsets_and_values(&batches),
            [(round * 2, value_of(round * 2)), (round * 2 + 1, value_of(round * 2 + 1))]
        );
    }
}

#[test]
fn a_cursor_starts_anywhere_from_the_start_to_the_next_offset_and_seeks() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let next = append_batches(&log, 0, 50);
    assert!(matches!(log.cursor(next + 1), Err(Error::OffsetOutOfRange { requested, .. }) if requested == next + 1));
    assert!(log.cursor(next).unwrap().next_batch(1 << 20).unwrap().is_empty());
    // Inside a batch: the first batch holds only the records from there on.
    let inside = 4; // batches of 1, 2, 3 records: offset 4 is the second record of the third batch
    let mut cursor = log.cursor(inside).unwrap();
    let first = cursor.next_batch(1).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!((first[0].base_offset(), first[0].record_count(), first[0].records().len()), (3, 3, 2));
    assert_eq!(cursor.position(), 6);
    cursor.seek(1);
    assert_eq!(offsets_and_values(&cursor.next_batch(1).unwrap()), [(1, value_of(1)), (2, value_of(2))]);
    cursor.seek(next + 5);
    assert!(
        matches!(cursor.next_batch(1 << 20), Err(Error::OffsetOutOfRange { requested, .. }) if requested == next + 5)
    );
    // Below the start (a prefix deletion) is out of range too.
    log.delete_records_before(10).unwrap();
    cursor.seek(9);
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::OffsetOutOfRange { requested: 9, start: 10, .. })));
    cursor.seek(10);
    assert_eq!(cursor.next_batch(1).unwrap()[0].records()[0].offset(), 10);
}

#[test]
fn records_a_caller_keeps_outlive_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"kept").with_key(b"k")]).unwrap();
    let mut cursor = log.cursor(0).unwrap();
    let batches = cursor.next_batch(1 << 20).unwrap();
    drop(cursor);
    log.close().unwrap();
    let record = &batches[0].records()[0];
    assert_eq!((record.key(), record.value()), (Some(&b"k"[..]), Some(&b"kept"[..])));
}
