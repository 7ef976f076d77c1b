//! Appending records and reading them back: fields, offsets, max_bytes, segment boundaries.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Owned, read_all, small_config, values};
use strata_log::{Header, Log, LogConfig, Record};

#[test]
fn every_field_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let headers = [Header { key: "content-type", value: Some(b"text/plain") }, Header { key: "empty", value: None }];
    let info = log
        .append(&[
            Record::new(b"plain"),
            Record::new(b"keyed").with_key(b"k1").with_headers(&headers),
            Record::tombstone(b"k2"),
            Record::new(b""),
        ])
        .unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, 3));
    let records: Vec<_> = log.read(0, 1 << 20).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(records.iter().map(|r| r.offset()).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(records[0].key(), None);
    assert_eq!(records[1].key(), Some(&b"k1"[..]));
    assert_eq!(records[1].value(), Some(&b"keyed"[..]));
    assert_eq!(records[1].headers().collect::<Vec<_>>(), headers);
    assert_eq!((records[2].key(), records[2].value()), (Some(&b"k2"[..]), None));
    assert_eq!(records[3].value(), Some(&b""[..]));
    assert!(records.iter().all(|r| r.timestamp_ms() == info.append_time_ms), "append time for all");
}

#[test]
fn offsets_are_dense_across_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let mut expected = Vec::new();
    for i in 0..500u32 {
        let batch: Vec<Vec<u8>> = (0..(i % 7 + 1)).map(|j| format!("record {i}.{j}").into_bytes()).collect();
        let records: Vec<Record<'_>> = batch.iter().map(|v| Record::new(v)).collect();
        let info = log.append(&records).unwrap();
        assert_eq!(info.base_offset, expected.len() as u64);
        expected.extend(batch);
    }
    assert!(log.segment_count() > 10, "small segments roll: {}", log.segment_count());
    assert_eq!(log.next_offset(), expected.len() as u64);
    assert_eq!(values(&log), expected);
    // Reads starting at every offset see exactly the suffix.
    for start in (0..expected.len()).step_by(37) {
        let got: Vec<_> = read_all(&log, start as u64, 300).into_iter().map(|(_, r)| r.value.unwrap()).collect();
        assert_eq!(got, expected[start..], "read from {start}");
    }
}

#[test]
fn max_bytes_returns_whole_batches_and_at_least_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let big = vec![7u8; 10_000];
    log.append(&[Record::new(&big), Record::new(&big)]).unwrap();
    log.append(&[Record::new(b"small")]).unwrap();
    // max_bytes smaller than the first batch: that batch still comes back whole, and nothing more.
    let first: Vec<u64> = log.read(0, 10).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(first, [0, 1]);
    // Starting inside the batch skips the earlier records but still returns the batch's rest.
    let mid: Vec<u64> = log.read(1, 10).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(mid, [1]);
    let all: Vec<u64> = log.read(0, 1 << 20).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(all, [0, 1, 2]);
}

#[test]
fn a_batch_larger_than_a_segment_gets_its_own_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    let big = vec![1u8; 5000];
    log.append(&[Record::new(&big)]).unwrap();
    log.append(&[Record::new(b"after")]).unwrap();
    log.append(&[Record::new(&big)]).unwrap();
    assert_eq!(values(&log), [big.clone(), b"after".to_vec(), big.clone()]);
    drop(log);
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    assert_eq!(values(&log).len(), 3);
}

#[test]
fn reader_reports_where_to_continue() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    for i in 0..100u32 {
        Owned::append_all(&log, &[Owned::value(i.to_be_bytes())]).unwrap();
    }
    let mut reader = log.read(10, 100).unwrap();
    let got: Vec<u64> = reader.by_ref().map(|r| r.unwrap().offset()).collect();
    assert_eq!(got.first(), Some(&10));
    assert_eq!(reader.next_offset(), got.last().unwrap() + 1);
}
