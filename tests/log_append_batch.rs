//! `append_batch`: a producer-encoded batch is checked like stored data, then stamped with the
//! log's offset without re-hashing.
#![allow(clippy::unwrap_used)]

mod common;

use byteorder::{BigEndian, ByteOrder};
use common::values;
use strata_log::internals::format::{ATTR_CLEANER, ATTRIBUTES_POS, CRC_POS, MAX_TIMESTAMP_POS};
use strata_log::{Corruption, Error, Log, LogConfig, ManualClock, Record, encode_batch};

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
    let batch = encode_batch(&[Record::new(b"a"), Record::new(b"b").with_key(b"k")], now).unwrap();
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
    let good = encode_batch(&[Record::new(b"payload")], now).unwrap();

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

    let stale = encode_batch(&[Record::new(b"old")], now - 3_700_000).unwrap();
    assert!(matches!(log.append_batch(&stale), Err(Error::InvalidTimestamp { .. })));

    assert_eq!(log.next_offset(), 0, "nothing was stored");
    log.append_batch(&good).unwrap();
    assert_eq!(values(&log), [b"payload".to_vec()]);
}
