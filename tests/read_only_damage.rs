//! Regression: `Log::open_read_only` (what `strata consume`, `dump` and `verify` use) hid damage to
//! acknowledged records: it took the end of the last segment's valid data as the end of the log,
//! so `strata consume fixtures/bad_crc_mid_segment` printed offsets 0–89 and exited 0 although
//! 90–99 are below the recovery point (100), and one byte flipped in the last segment of a healthy
//! log made 15 of 200 records silently vanish. docs/DESIGN.md §3 (read-only open) and §7: an
//! invalid batch below the recovery point is `Error::Corrupt`; past it, on a live log, it is the
//! end. A live writer's truncation lowers the checkpoint before it cuts, so the checkpoint is read
//! again before damage is reported.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{snapshot, value_of};
use strata_log::internals::Checkpoint;
use strata_log::{Error, Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes: 200, ..LogConfig::default() }
}

/// Every record from the start, then the error that ended the read (if one did).
fn read_until_error(log: &Log) -> (Vec<u64>, Option<Error>) {
    let mut offsets = Vec::new();
    let mut next = log.start_offset();
    while next < log.visible_end() {
        let mut reader = match log.read(next, 1 << 16) {
            Ok(reader) => reader,
            Err(e) => return (offsets, Some(e)),
        };
        for record in reader.by_ref() {
            match record {
                Ok(record) => offsets.push(record.offset()),
                Err(e) => return (offsets, Some(e)),
            }
        }
        if reader.next_offset() == next {
            break;
        }
        next = reader.next_offset();
    }
    (offsets, None)
}

fn fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name);
    common::copy_dir(&from, dir.path());
    dir
}

fn last_segment(dir: &Path) -> PathBuf {
    dir.join(common::file_names(dir).into_iter().rfind(|n| n.ends_with(".log")).unwrap())
}

/// A closed log of 200 records (recovery point 200) with one byte of record `damaged`'s batch
/// flipped in the last segment; returns the directory and the damaged batch's position.
fn healthy_log_with_a_flipped_byte(damaged: u64) -> (tempfile::TempDir, u64) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    let mut position = None;
    for offset in 0..200 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    let path = last_segment(dir.path());
    let base: u64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    assert!(base < damaged, "record {damaged} is in the last segment ({base})");
    // Walk the batches (one record each) to the damaged one.
    let bytes = std::fs::read(&path).unwrap();
    let mut at = 0usize;
    for offset in base.. {
        if offset == damaged {
            position = Some(at as u64);
            break;
        }
        let length = u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 12 + length;
    }
    let position = position.unwrap();
    let mut bytes = bytes;
    bytes[position as usize + 45] ^= 0x40; // inside the record, covered by the CRC
    std::fs::write(&path, bytes).unwrap();
    (dir, position)
}

#[test]
fn a_fixture_with_damage_below_the_recovery_point_reports_it() {
    let dir = fixture("bad_crc_mid_segment");
    let log = Log::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(log.next_offset(), 100, "the log ends at the recovery point, not before the damage");
    let (offsets, error) = read_until_error(&log);
    assert_eq!(offsets, (0..90).collect::<Vec<_>>(), "every record before the damage");
    match error {
        Some(Error::Corrupt { path, .. }) => assert!(path.ends_with("00000000000000000083.log"), "{path:?}"),
        other => panic!("expected the damage, got {other:?}"),
    }
    assert!(log.metrics().corruption_seen);
}

#[test]
fn one_flipped_byte_in_the_last_segment_is_reported_not_hidden() {
    let (dir, position) = healthy_log_with_a_flipped_byte(185);
    let before = snapshot(dir.path());
    let log = Log::open_read_only(dir.path(), config()).unwrap();
    let (offsets, error) = read_until_error(&log);
    assert_eq!(offsets, (0..185).collect::<Vec<_>>());
    assert!(matches!(error, Some(Error::Corrupt { position: p, .. }) if p == position), "{error:?}");
    drop(log);
    assert_eq!(snapshot(dir.path()), before, "a read-only open changes nothing");
}

#[test]
fn damage_a_truncation_lowered_the_checkpoint_below_is_the_end() {
    let (dir, _) = healthy_log_with_a_flipped_byte(185);
    let log = Log::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(log.next_offset(), 200);
    // A live writer truncating to 185 lowers the recovery point before it cuts: the bytes from
    // 185 on are its tail now, being cut.
    let lowered = Checkpoint { log_start_offset: 0, recovery_point: 185 };
    std::fs::write(dir.path().join("checkpoint"), lowered.encode_file(7)).unwrap();
    let (offsets, error) = read_until_error(&log);
    assert_eq!(offsets, (0..185).collect::<Vec<_>>());
    assert!(error.is_none(), "{error:?}");
    assert!(!log.metrics().corruption_seen);
}

#[test]
fn a_torn_tail_past_the_recovery_point_is_the_end_of_a_live_log() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), LogConfig { flush_policy: strata_log::FlushPolicy::Never, ..config() }).unwrap();
    for offset in 0..60 {
        writer.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    // Only what the writer checkpointed is claimed durable (say, up to 50): the rest may be torn.
    let copy = tempfile::tempdir().unwrap();
    common::copy_dir(dir.path(), copy.path());
    let checkpoint = Checkpoint { log_start_offset: 0, recovery_point: 50 };
    std::fs::write(copy.path().join("checkpoint"), checkpoint.encode_file(1)).unwrap();
    let path = last_segment(copy.path());
    let mut bytes = std::fs::read(&path).unwrap();
    let data_end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    bytes[data_end - 3] ^= 0xFF; // the last batch torn
    std::fs::write(&path, bytes).unwrap();
    let log = Log::open_read_only(copy.path(), config()).unwrap();
    let (offsets, error) = read_until_error(&log);
    assert_eq!(offsets.len(), 59);
    assert!(error.is_none(), "{error:?}");
    drop(writer);
}
