//! Batch-level views of a read (`LogReader::batches`): each batch's base offset, record count,
//! attributes and timestamps as stored, with the records the read returns; and each record's
//! encoded size (`RecordView::encoded_len`), which a consume-queue entry stores.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::internals::format::{ATTR_CLEANER, ATTR_CREATE_TIME, BATCH_HEADER_LEN};
use strata_log::{BatchView, FlushPolicy, Header, Log, LogConfig, ManualClock, Record};

const NOW: i64 = 1_700_000_000_000;

fn open(dir: &std::path::Path, segment_bytes: u64) -> Log {
    let clock = ManualClock::new(NOW);
    let config =
        LogConfig { clock: clock.clock(), segment_bytes, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    Log::open(dir, config).unwrap()
}

fn batches(log: &Log, from: u64) -> Vec<BatchView> {
    log.read(from, 1 << 20).unwrap().batches().collect::<Result<_, _>>().unwrap()
}

fn offsets(batch: &BatchView) -> Vec<u64> {
    batch.records().iter().map(|r| r.offset()).collect()
}

#[test]
fn each_batch_shows_its_header_and_the_records_of_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 1 << 20);
    log.append(&[Record::new(b"a"), Record::new(b"b"), Record::new(b"c")]).unwrap();
    let headers = [Header { key: "h", value: Some(b"v") }];
    log.append(&[
        Record::new(b"created").with_timestamp(NOW - 50).with_key(b"k"),
        Record::new(b"later").with_timestamp(NOW - 10).with_headers(&headers),
    ])
    .unwrap();

    let all = batches(&log, 0);
    assert_eq!(all.len(), 2);
    let (first, second) = (&all[0], &all[1]);
    assert_eq!((first.base_offset(), first.last_offset(), first.record_count()), (0, 2, 3));
    assert_eq!(offsets(first), [0, 1, 2]);
    assert_eq!((first.attributes(), first.is_create_time()), (0, false));
    assert_eq!((first.first_timestamp_ms(), first.max_timestamp_ms()), (NOW, NOW));
    assert_eq!((second.base_offset(), second.record_count()), (3, 2));
    assert_eq!((second.attributes(), second.is_create_time()), (ATTR_CREATE_TIME, true));
    assert_eq!((second.first_timestamp_ms(), second.max_timestamp_ms()), (NOW - 50, NOW - 10));
    assert_eq!(second.records()[1].headers().next(), Some(headers[0]));

    // The batches tile the segment: header + records, back to back.
    for batch in &all {
        let records: usize = batch.records().iter().map(|r| r.encoded_len()).sum();
        assert_eq!((BATCH_HEADER_LEN + records) as u64, batch.encoded_len(), "{batch:?}");
    }
    // A record of a 1-byte value, no key, no headers, first in its batch: length prefix 1, then
    // attributes 1, timestamp delta 1, offset delta 1, key length (-1) 1, value length 1, value 1,
    // header count 1.
    assert_eq!(first.records()[0].encoded_len(), 8);
}

#[test]
fn a_read_starting_inside_a_batch_returns_its_records_from_there() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 1 << 20);
    log.append(&[Record::new(b"0"), Record::new(b"1"), Record::new(b"2"), Record::new(b"3")]).unwrap();
    log.append(&[Record::new(b"4")]).unwrap();
    let from_two = batches(&log, 2);
    assert_eq!((from_two[0].base_offset(), from_two[0].record_count()), (0, 4), "the header as stored");
    assert_eq!(offsets(&from_two[0]), [2, 3]);
    assert_eq!(offsets(&from_two[1]), [4]);

    // Records already taken from the reader are not returned again.
    let mut reader = log.read(0, 1 << 20).unwrap();
    assert_eq!(reader.next().unwrap().unwrap().offset(), 0);
    let mut rest = reader.batches();
    assert_eq!(offsets(&rest.next().unwrap().unwrap()), [1, 2, 3]);
    assert_eq!(offsets(&rest.next().unwrap().unwrap()), [4]);
    assert!(rest.next().is_none());
    assert_eq!(rest.next_offset(), 5);

    // At the end: no batches, and the position stays.
    let at_end = log.read(5, 1 << 20).unwrap().batches();
    assert_eq!(at_end.next_offset(), 5);
    assert_eq!(at_end.count(), 0);
}

#[test]
fn compacted_batches_show_the_cleaner_bit_and_only_their_kept_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), 2048);
    for i in 0..200u32 {
        let key = format!("key-{}", i % 4);
        log.append(&[Record::new(&i.to_be_bytes()).with_key(key.as_bytes()), Record::new(b"unkeyed")]).unwrap();
    }
    log.compact().unwrap().expect("sealed segments were dirty");
    let all = batches(&log, log.start_offset());
    let cleaned: Vec<&BatchView> = all.iter().filter(|b| b.attributes() & ATTR_CLEANER != 0).collect();
    assert!(!cleaned.is_empty());
    assert!(cleaned.iter().any(|b| b.record_count() == 1 && b.last_offset() == b.base_offset() + 1), "{cleaned:?}");
    for batch in &all {
        assert_eq!(batch.records().len(), batch.record_count() as usize, "a read from the start gets them all");
        let records: usize = batch.records().iter().map(|r| r.encoded_len()).sum();
        assert_eq!((BATCH_HEADER_LEN + records) as u64, batch.encoded_len());
    }
    let from_batches: Vec<u64> = all.iter().flat_map(offsets).collect();
    let from_records: Vec<u64> = log.records(..).unwrap().map(|r| r.unwrap().offset()).collect();
    assert_eq!(from_batches, from_records);
    assert_eq!(common::values(&log).len(), from_records.len());
}
