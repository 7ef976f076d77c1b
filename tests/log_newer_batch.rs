//! A stored batch whose CRC is valid but whose attributes hold a bit this build does not know (a
//! compression codec or a feature of a newer build) is whole data of a newer format, not damage:
//! opening, recovering, reading, `verify` and `recover --force` refuse it with
//! `Error::UnsupportedFormat` naming the file, the position and the bits, and nothing cuts it as a
//! torn tail. (A batch whose CRC fails stays damage.)
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use byteorder::{BigEndian, ByteOrder};
use strata_log::internals::format::{
    ATTRIBUTES_POS, BATCH_HEADER_LEN, BATCH_LENGTH_POS, CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CRC_POS, LOG_OVERHEAD,
};
use strata_log::internals::inspect::{self, RecoverOptions};
use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

/// An attribute bit no build defines yet.
const UNKNOWN_BIT: u16 = 1 << 7;

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig { segment_bytes, flush_policy: FlushPolicy::Never, ..LogConfig::default() }
}

/// A closed log of `n` one-record batches.
fn log_of(dir: &Path, n: u32, segment_bytes: u64) {
    let log = Log::open(dir, config(segment_bytes)).unwrap();
    for i in 0..n {
        log.append(&[Record::new(format!("value-{i}").as_bytes())]).unwrap();
    }
    log.close().unwrap();
}

/// Leaves the log as a crash before its first checkpoint would: no clean-shutdown marker, no
/// checkpoint, so every batch is past the recovery point and damage at the tail is a torn tail that
/// recovery cuts.
fn crash_before_any_checkpoint(dir: &Path) {
    std::fs::remove_file(dir.join(CLEAN_SHUTDOWN_FILE)).unwrap();
    std::fs::remove_file(dir.join(CHECKPOINT_FILE)).unwrap();
}

/// The byte positions of the batches of a `.log` file, in order.
fn batch_positions(path: &Path) -> Vec<usize> {
    let bytes = std::fs::read(path).unwrap();
    let mut positions = Vec::new();
    let mut at = 0;
    while at + BATCH_HEADER_LEN <= bytes.len() && bytes[at..at + BATCH_HEADER_LEN].iter().any(|&b| b != 0) {
        positions.push(at);
        at += LOG_OVERHEAD + BigEndian::read_u32(&bytes[at + BATCH_LENGTH_POS..]) as usize;
    }
    positions
}

/// Sets `bits` in the attributes of the batch at `position` and recomputes its CRC: a whole batch
/// as a newer build would write it.
fn set_attributes(path: &Path, position: usize, bits: u16) {
    let mut bytes = std::fs::read(path).unwrap();
    let batch = &mut bytes[position..];
    let len = LOG_OVERHEAD + BigEndian::read_u32(&batch[BATCH_LENGTH_POS..]) as usize;
    let attributes = BigEndian::read_u16(&batch[ATTRIBUTES_POS..]) | bits;
    BigEndian::write_u16(&mut batch[ATTRIBUTES_POS..], attributes);
    let crc = crc32fast::hash(&batch[ATTRIBUTES_POS..len]);
    BigEndian::write_u32(&mut batch[CRC_POS..], crc);
    std::fs::write(path, bytes).unwrap();
}

/// Every file of `dir` (the lock file too) with its bytes.
fn every_file(dir: &Path) -> Vec<(String, Vec<u8>)> {
    common::file_names(dir).into_iter().map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap())).collect()
}

fn segment(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

/// The error names the `.log`, the batch's position and the unknown bits.
fn assert_refuses_batch(error: Error, path: &Path, position: usize) {
    let Error::UnsupportedFormat { path: named, what } = &error else { panic!("not UnsupportedFormat: {error:?}") };
    assert_eq!(named, path, "{error}");
    assert!(what.contains(&format!("position {position}")), "{error}");
    assert!(what.contains("0x0080"), "{error}");
}

#[test]
fn a_crashed_logs_newer_tail_batch_is_refused_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    log_of(dir.path(), 20, 1 << 20);
    crash_before_any_checkpoint(dir.path());
    let path = segment(dir.path(), 0);
    let last = *batch_positions(&path).last().unwrap();
    set_attributes(&path, last, UNKNOWN_BIT);
    let before = every_file(dir.path());
    assert_refuses_batch(Log::open(dir.path(), config(1 << 20)).err().unwrap(), &path, last);
    assert_eq!(every_file(dir.path()), before, "nothing cut, nothing changed");
    assert_refuses_batch(Log::open_read_only(dir.path(), config(1 << 20)).err().unwrap(), &path, last);
    // What a build that knows the bit sees: all 20 records, none cut.
    let mut bytes = std::fs::read(&path).unwrap();
    let attributes = BigEndian::read_u16(&bytes[last + ATTRIBUTES_POS..]) & !UNKNOWN_BIT;
    BigEndian::write_u16(&mut bytes[last + ATTRIBUTES_POS..], attributes);
    let crc = crc32fast::hash(&bytes[last + ATTRIBUTES_POS..batch_end(&bytes, last)]);
    BigEndian::write_u32(&mut bytes[last + CRC_POS..], crc);
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(Log::open(dir.path(), config(1 << 20)).unwrap().next_offset(), 20);
}

fn batch_end(bytes: &[u8], position: usize) -> usize {
    position + LOG_OVERHEAD + BigEndian::read_u32(&bytes[position + BATCH_LENGTH_POS..]) as usize
}

#[test]
fn a_cleanly_closed_logs_newer_tail_batch_is_refused_with_the_marker_kept() {
    let dir = tempfile::tempdir().unwrap();
    log_of(dir.path(), 20, 1 << 20);
    let path = segment(dir.path(), 0);
    let last = *batch_positions(&path).last().unwrap();
    set_attributes(&path, last, UNKNOWN_BIT);
    let before = every_file(dir.path());
    assert_refuses_batch(Log::open(dir.path(), config(1 << 20)).err().unwrap(), &path, last);
    assert_eq!(every_file(dir.path()), before, "the clean-shutdown marker is back, nothing cut");
}

#[test]
fn a_read_reaching_a_newer_batch_in_a_sealed_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    log_of(dir.path(), 60, 1024);
    let path = segment(dir.path(), 0);
    set_attributes(&path, 0, UNKNOWN_BIT);
    for log in [Log::open(dir.path(), config(1024)).unwrap(), Log::open_read_only(dir.path(), config(1024)).unwrap()] {
        let error = log.read(0, 1 << 20).unwrap().find_map(Result::err).expect("the read fails");
        assert_refuses_batch(error, &path, 0);
        assert!(!log.metrics().corruption_seen, "not counted as damage");
    }
}

#[test]
fn verify_and_recover_refuse_a_newer_batch_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    log_of(dir.path(), 20, 1 << 20);
    crash_before_any_checkpoint(dir.path());
    let path = segment(dir.path(), 0);
    let last = *batch_positions(&path).last().unwrap();
    set_attributes(&path, last, UNKNOWN_BIT);
    let before = every_file(dir.path());
    assert_refuses_batch(inspect::verify(dir.path(), &LogConfig::default()).err().unwrap(), &path, last);
    for force in [false, true] {
        let options = RecoverOptions { force, dry_run: false };
        assert_refuses_batch(inspect::recover(dir.path(), options).err().unwrap(), &path, last);
    }
    assert_eq!(every_file(dir.path()), before, "recover --force cut nothing");
}

#[test]
fn a_compression_codec_is_named_and_a_bad_crc_stays_damage() {
    let dir = tempfile::tempdir().unwrap();
    log_of(dir.path(), 5, 1 << 20);
    crash_before_any_checkpoint(dir.path());
    let path = segment(dir.path(), 0);
    let last = *batch_positions(&path).last().unwrap();
    set_attributes(&path, last, 0b010);
    let error = Log::open(dir.path(), config(1 << 20)).err().unwrap();
    assert!(error.to_string().contains("compression codec 2"), "{error}");
    // The same batch with a CRC that fails: a torn tail past the recovery point, cut.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[last + CRC_POS] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let log = Log::open(dir.path(), config(1 << 20)).unwrap();
    assert_eq!(log.next_offset(), 4, "the torn batch was cut");
    assert!(log.recovery_report().bytes_truncated > 0);
}
