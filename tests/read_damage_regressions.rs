//! Regressions found by the random-damage crash test (`crash_damage.rs`):
//!
//! 1. Zeroed bytes in the middle of a sealed segment read as "end of data", and the reader moved
//!    on to the next segment, silently skipping the missing records. Fix: a segment whose data ends
//!    before the offsets the log holds after it is `Error::Corrupt` (`DataEndsEarly`).
//! 2. Damage in a sealed segment made its lazy index check fail; the rebuild then failed on the
//!    damage and the whole segment became unreadable, even the records before the damage. Fix: the
//!    rebuild indexes the valid prefix; reads before the damage work, reads reaching it fail.
//! 3. A read whose chunk ended at an invalid header failed as a whole, losing the valid batches
//!    before it. Fix: the valid batches are returned, then the damage is reported.
#![allow(clippy::unwrap_used)]

mod common;

use common::value_of;
use strata_log::internals::inspect::{self, Dump};
use strata_log::{Error, Log, LogConfig, Record};

/// A log of three sealed segments and an active one; returns the first segment's file name and
/// its batches.
fn build(dir: &std::path::Path) -> (String, Vec<strata_log::internals::inspect::BatchInfo>) {
    let log =
        Log::open(dir, LogConfig { segment_bytes: 2048, index_interval_bytes: 200, ..LogConfig::default() }).unwrap();
    for offset in 0..150u64 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    assert!(log.segment_count() >= 4);
    log.close().unwrap();
    let name = "00000000000000000000.log".to_owned();
    let Dump::Log { batches, .. } = inspect::dump_file(&dir.join(&name), false).unwrap() else { unreachable!() };
    (name, batches)
}

/// Reads from 0 until the first error: the offsets returned, and the error.
fn read(log: &Log) -> (Vec<u64>, Option<Error>) {
    let mut offsets = Vec::new();
    let mut next = 0;
    while next < log.visible_end() {
        let mut reader = log.read(next, 300).unwrap();
        for record in reader.by_ref() {
            match record {
                Ok(r) => {
                    assert_eq!(r.value().unwrap(), value_of(r.offset()));
                    offsets.push(r.offset());
                }
                Err(e) => return (offsets, Some(e)),
            }
        }
        next = reader.next_offset();
    }
    (offsets, None)
}

fn damage(dir: &std::path::Path, name: &str, position: u64, bytes: &[u8]) {
    let mut data = std::fs::read(dir.join(name)).unwrap();
    data[position as usize..position as usize + bytes.len()].copy_from_slice(bytes);
    std::fs::write(dir.join(name), data).unwrap();
}

#[test]
fn zeroed_header_mid_segment_is_corrupt_not_a_skip() {
    let dir = tempfile::tempdir().unwrap();
    let (name, batches) = build(dir.path());
    let victim = &batches[batches.len() / 2];
    damage(dir.path(), &name, victim.position, &[0u8; 43]);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let (offsets, error) = read(&log);
    assert_eq!(offsets, (0..victim.base_offset).collect::<Vec<_>>(), "exactly the records before the damage");
    assert!(matches!(error, Some(Error::Corrupt { position, .. }) if position == victim.position), "{error:?}");
}

#[test]
fn damage_in_a_sealed_segment_leaves_earlier_records_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (name, batches) = build(dir.path());
    // Damage the batch the index's last entry points at: the lazy sanity check fails on it and
    // forces a rebuild of a damaged segment.
    let Dump::Index { entries, .. } =
        inspect::dump_file(&dir.path().join(name.replace(".log", ".index")), false).unwrap()
    else {
        unreachable!()
    };
    let last_entry = u64::from(entries.last().expect("the segment is indexed").position);
    let victim = batches.iter().find(|b| b.position == last_entry).unwrap();
    damage(dir.path(), &name, victim.position + victim.size - 1, &[0xff]);
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let (offsets, error) = read(&log);
    assert_eq!(offsets.len() as u64, victim.base_offset);
    assert!(matches!(error, Some(Error::Corrupt { .. })), "{error:?}");
}
