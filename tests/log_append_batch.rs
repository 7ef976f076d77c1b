//! `append_batch`: a producer-encoded batch is checked like stored data, then stamped with the
//! log's offset without re-hashing.
#![allow(clippy::unwrap_used)]

mod common;

use byteorder::{BigEndian, ByteOrder};
use common::{encode, values};
use strata_log::internals::format::{ATTR_CLEANER, ATTRIBUTES_POS, CRC_POS, MAX_TIMESTAMP_POS};
use strata_log::{BatchBuilder, Corruption, Error, Log, LogConfig, ManualClock, Record};

fn recrc(batch: &mut [u8]) {
    let crc = crc32fast::hash(&batch[ATTRIBUTES_POS..]);
    BigEndian::write_u32(&mut batch[CRC_POS..], crc);
}

fn open(dir: &std::path::Path) -> (Log, i64) {
    let clock = ManualClock::new(1_000_000);
    let log = Log::open(dir, LogConfig { clock: clock.clock(), ..LogConfig::default() }).unwrap();
    (log, 1_000_000)
}

#[test]
fn an_encoded_batch_is_appended_at_the_next_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (log, now) = open(dir.path());
    log.append(&[Record::new(b"first")]).unwrap();
    let batch = encode(&[Record::new(b"a"), Record::new(b"b").with_key(b"k")], now).unwrap();
    let info = log.append_batch(&batch).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (1, 2));
    // The same bytes again: the log re-stamps the offset.
    assert_eq!(log.append_batch(&batch).unwrap().base_offset, 3);
    assert_eq!(values(&log), [&b"first"[..], b"a", b"b", b"a", b"b"].map(<[u8]>::to_vec));
}

#[test]
fn damaged_or_forbidden_batches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (log, now) = open(dir.path());
    let good = encode(&[Record::new(b"payload")], now).unwrap();

    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert!(matches!(log.append_batch(&flipped), Err(Error::InvalidBatch { reason: Corruption::CrcMismatch { .. } })));

    let mut cleaner = good.clone();
    let attrs = BigEndian::read_u16(&cleaner[ATTRIBUTES_POS..]) | ATTR_CLEANER;
    BigEndian::write_u16(&mut cleaner[ATTRIBUTES_POS..], attrs);
    recrc(&mut cleaner);
    assert!(matches!(log.append_batch(&cleaner), Err(Error::InvalidBatch { reason: Corruption::CleanerBatch })));

    let mut compressed = good.clone();
    let attrs = BigEndian::read_u16(&compressed[ATTRIBUTES_POS..]) | 1;
    BigEndian::write_u16(&mut compressed[ATTRIBUTES_POS..], attrs);
    recrc(&mut compressed);
    assert!(matches!(log.append_batch(&compressed), Err(Error::InvalidBatch { reason: Corruption::BadAttributes(_) })));

    let mut lying = good.clone();
    BigEndian::write_i64(&mut lying[MAX_TIMESTAMP_POS..], now + 5);
    recrc(&mut lying);
    assert!(matches!(
        log.append_batch(&lying),
        Err(Error::InvalidBatch { reason: Corruption::BadMaxTimestamp { .. } })
    ));

    let mut trailing = good.clone();
    trailing.push(0);
    assert!(matches!(log.append_batch(&trailing), Err(Error::InvalidBatch { .. })));
    assert!(matches!(log.append_batch(&good[..good.len() - 1]), Err(Error::InvalidBatch { .. })));
    // Too short for a header: its own reason, not an empty batch.
    assert!(matches!(
        log.append_batch(&good[..10]),
        Err(Error::InvalidBatch { reason: Corruption::ShortHeader { available: 10 } })
    ));

    let stale = encode(&[Record::new(b"old")], now - 3_700_000).unwrap();
    assert!(matches!(log.append_batch(&stale), Err(Error::InvalidTimestamp { .. })));

    assert_eq!(log.next_offset(), 0, "nothing was stored");
    log.append_batch(&good).unwrap();
    assert_eq!(values(&log), [b"payload".to_vec()]);
}

#[test]
fn a_built_batch_keeps_every_field_of_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let (log, now) = open(dir.path());
    let headers =
        [strata_log::Header { key: "trace", value: Some(b"42") }, strata_log::Header { key: "x", value: None }];
    let mut batch = BatchBuilder::new(now);
    assert!(batch.is_empty());
    batch.append(&Record::new(b"now")).unwrap();
    batch.append(&Record::new(b"earlier").with_key(b"k").with_headers(&headers).with_timestamp(now - 500)).unwrap();
    batch.append(&Record::tombstone(b"gone").with_timestamp(now + 7)).unwrap();
    assert_eq!(batch.record_count(), 3);
    let info = log.append_batch(batch.finish().unwrap()).unwrap();
    assert_eq!((info.base_offset, info.last_offset, info.max_timestamp_ms), (0, 2, now + 7));

    let read: Vec<_> = log.read(0, 1 << 20).unwrap().batches().collect::<Result<_, _>>().unwrap();
    assert_eq!(read.len(), 1);
    assert!(read[0].is_create_time());
    assert_eq!((read[0].first_timestamp_ms(), read[0].max_timestamp_ms()), (now, now + 7));
    assert_eq!(read[0].encoded_len(), batch.encoded_len() as u64);
    let records = read[0].records();
    assert_eq!(records.iter().map(|r| r.timestamp_ms()).collect::<Vec<_>>(), [now, now - 500, now + 7]);
    assert_eq!((records[1].key(), records[1].value()), (Some(&b"k"[..]), Some(&b"earlier"[..])));
    assert_eq!(records[1].headers().collect::<Vec<_>>(), headers);
    assert_eq!((records[2].key(), records[2].value()), (Some(&b"gone"[..]), None));

    // More records after a finish: finish again.
    batch.append(&Record::new(b"fourth")).unwrap();
    assert_eq!(log.append_batch(batch.finish().unwrap()).unwrap().last_offset, 6);
}

#[test]
fn a_builder_stops_at_its_limit_and_refuses_to_finish_empty() {
    let mut batch = BatchBuilder::new(1_000).with_max_bytes(100);
    assert!(matches!(batch.finish(), Err(Error::EmptyBatch)));
    let mut added = 0;
    let refused = loop {
        match batch.append(&Record::new(b"0123456789")) {
            Ok(()) => added += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(refused, Error::BatchTooLarge { size, max: 100 } if size > 100), "{refused}");
    assert_eq!(batch.record_count(), added, "the refused record was not added");
    assert!(batch.encoded_len() <= 100);
    let bytes = batch.finish().unwrap().to_vec();
    assert_eq!(bytes.len(), batch.encoded_len());

    // Reusing the buffer starts an empty batch.
    let reused = BatchBuilder::with_buffer(batch.into_buffer(), 2_000);
    assert!(reused.is_empty());
    assert_eq!(reused.encoded_len(), 43);
}

#[test]
fn a_builder_over_a_pooled_buffer_never_grows_it() {
    let pool = strata_log::BufferPool::new(4096, 256);
    let buffer = pool.allocate(256, std::time::Duration::from_secs(1)).unwrap();
    let capacity = buffer.capacity();
    let mut batch = BatchBuilder::with_buffer(buffer, 1_000);
    while batch.append(&Record::new(&[7u8; 30])).is_ok() {}
    assert!(batch.encoded_len() <= capacity);
    batch.finish().unwrap();
    let buffer = batch.into_buffer();
    assert_eq!(buffer.capacity(), capacity, "still the pool's buffer");
    drop(buffer);
    assert_eq!(pool.metrics().available_bytes, 4096, "returned to the pool");
}
