//! Crash test 1: the active segment cut at every byte position. A cut above the recovery point is a
//! torn tail: recovery keeps exactly the whole batches before the cut. A cut below it is damage to
//! acknowledged data: a strict open fails with `Error::Corrupt` at the first missing batch and
//! changes nothing; `TruncateCorrupt` keeps the whole batches before the cut, keeps the damaged
//! segment as `.corrupt`, and reports the acknowledged records lost.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{copy_dir, snapshot, value_of};
use strata_log::internals::Checkpoint;
use strata_log::internals::inspect::{self, BatchInfo, Dump};
use strata_log::{Error, Log, LogConfig, ManualClock, Record, RecoveryMode};

const LOG: &str = "00000000000000000000.log";

fn config(recovery: RecoveryMode) -> LogConfig {
    let clock = ManualClock::new(1_700_000_000_000);
    LogConfig {
        segment_bytes: 64 << 10,
        index_bytes: 1024,
        index_interval_bytes: 150,
        clock: clock.clock(),
        recovery,
        // Recovery is what is tested here: no fsync per append, no background preallocation.
        flush_policy: strata_log::FlushPolicy::Never,
        preallocate: false,
        ..LogConfig::default()
    }
}

/// A one-segment log of 40 batches, closed, then made unclean with the recovery point at the
/// base of batch 25. Returns the batches and the recovery point.
fn build(dir: &Path) -> (Vec<BatchInfo>, u64) {
    let log = Log::open(dir, config(RecoveryMode::Strict)).unwrap();
    let mut offset = 0;
    for i in 0..40u64 {
        let values: Vec<Vec<u8>> = (offset..offset + i % 4 + 1).map(value_of).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        offset = log.append(&records).unwrap().last_offset + 1;
    }
    log.close().unwrap();
    std::fs::remove_file(dir.join(".clean-shutdown")).unwrap();
    let Dump::Log { batches, .. } = inspect::dump_file(&dir.join(LOG), false).unwrap() else { panic!("not a log") };
    let recovery_point = batches[25].base_offset;
    std::fs::write(dir.join("checkpoint"), Checkpoint { log_start_offset: 0, recovery_point }.encode_file(1)).unwrap();
    (batches, recovery_point)
}

fn read_values(log: &Log) -> Vec<(u64, Vec<u8>)> {
    common::read_all(log, 0, 1 << 20).into_iter().map(|(o, r)| (o, r.value.unwrap())).collect()
}

fn expected_values(end: u64) -> Vec<(u64, Vec<u8>)> {
    (0..end).map(|o| (o, value_of(o))).collect()
}

#[test]
fn cut_at_every_byte() {
    let pristine = tempfile::tempdir().unwrap();
    let (batches, recovery_point) = build(pristine.path());
    let file_len = std::fs::metadata(pristine.path().join(LOG)).unwrap().len();
    let (mut torn, mut acknowledged) = (0, 0);
    for cut in 0..=file_len {
        let whole: Vec<&BatchInfo> = batches.iter().filter(|b| b.position + b.size <= cut).collect();
        let end = whole.last().map_or(0, |b| b.last_offset + 1);
        let end_position = whole.last().map_or(0, |b| b.position + b.size);
        let work = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), work.path());
        std::fs::OpenOptions::new().write(true).open(work.path().join(LOG)).unwrap().set_len(cut).unwrap();
        if end >= recovery_point {
            torn += 1;
            check_torn_tail(work.path(), cut, end, end_position);
        } else {
            acknowledged += 1;
            check_acknowledged_damage(work.path(), cut, end, end_position, recovery_point);
        }
    }
    assert!(torn > 1000 && acknowledged > 1000, "{torn} torn-tail cuts, {acknowledged} cuts below the recovery point");
}

fn check_torn_tail(dir: &Path, cut: u64, end: u64, end_position: u64) {
    let log = Log::open(dir, config(RecoveryMode::Strict)).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown);
    assert_eq!(log.next_offset(), end, "cut at {cut} keeps exactly the whole batches before it");
    assert!(report.bytes_truncated <= cut - end_position, "cut at {cut}: {report:?}");
    assert_eq!(report.acknowledged_records_lost, 0);
    assert_eq!(read_values(&log), expected_values(end), "cut at {cut}");
    common::check_lookups(&log);
    log.close().unwrap();
    let log = Log::open(dir, config(RecoveryMode::Strict)).unwrap();
    assert!(log.recovery_report().clean_shutdown, "cut at {cut}: recovery left a clean log");
    assert_eq!(log.next_offset(), end);
}

fn check_acknowledged_damage(dir: &Path, cut: u64, end: u64, end_position: u64, recovery_point: u64) {
    let before = snapshot(dir);
    let result = Log::open(dir, config(RecoveryMode::Strict));
    match result {
        Err(Error::Corrupt { path, position, .. }) => {
            assert_eq!(path, dir.join(LOG), "cut at {cut}");
            assert_eq!(position, end_position, "cut at {cut}: the damage is where the valid data ends");
        }
        other => panic!("cut at {cut} below the recovery point: expected Corrupt, got {other:?}"),
    }
    assert_eq!(snapshot(dir), before, "cut at {cut}: a strict open that fails changes nothing");

    let log = Log::open(dir, config(RecoveryMode::TruncateCorrupt)).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(log.next_offset(), end, "cut at {cut}");
    assert_eq!(report.acknowledged_records_lost, recovery_point - end, "cut at {cut}: {report:?}");
    assert_eq!(report.files_kept_corrupt, [dir.join(format!("{LOG}.corrupt"))]);
    assert!(dir.join(format!("{LOG}.corrupt")).exists());
    assert_eq!(read_values(&log), expected_values(end), "cut at {cut}");
}
