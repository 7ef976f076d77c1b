//! Unit tests of `verify` and of the listing it settles on: what a live writer does that a check
//! must see as a change, and the findings of a log no writer holds.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use super::dirs::vanished;
use super::listing::Listing;
use super::verify_log::verify;
use crate::config::LogConfig;
use crate::format::{LOG_SUFFIX, SWAP_SUFFIX};
use crate::log::index::IndexEntry;
use crate::log::segment::SegmentPaths;
use crate::log::{Checkpoint, Log, Record, TimeEntry};

/// A seal trims a segment's `.log` before its indexes: a check that read an index being
/// trimmed must see the listing change, or it reports the half-trimmed index as damage
/// (`verify_live_writer` flaked with "index is … not a whole number of 12-byte entries").
#[test]
fn an_index_trimmed_after_its_segment_changes_the_listing() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    for _ in 0..40 {
        log.append(&[Record::new(&[7u8; 100])]).unwrap();
    }
    log.close().unwrap();
    let before = Listing::of(dir.path()).unwrap();
    assert!(before.segments.len() > 2, "{before:?}");
    for (i, len) in [(1usize, 1u64), (2, 2)] {
        let paths = SegmentPaths::new(dir.path(), before.segments[0].0);
        let path = if i == 1 { &paths.index } else { &paths.time_index };
        let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        let was = file.metadata().unwrap().len();
        file.set_len(was + len).unwrap();
        assert!(!Listing::of(dir.path()).unwrap().settled_since(&before), "a longer {}", path.display());
        file.set_len(was).unwrap();
        assert!(Listing::of(dir.path()).unwrap().settled_since(&before));
    }
}

fn closed_log(config: &LogConfig, records: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config.clone()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    for i in 0..records {
        // Rising, so a segment's final time entry is its last record's.
        log.append(&[Record::new(&[7u8; 100]).with_timestamp(now + i as i64)]).unwrap();
    }
    log.close().unwrap();
    dir
}

fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// What a live writer does that a check must see as a change, and what it must not.
#[test]
fn a_cut_a_lowered_recovery_point_or_a_swap_unsettles_the_listing() {
    let dir = closed_log(&LogConfig { segment_bytes: 1024, ..LogConfig::default() }, 40);
    let path = dir.path();
    let before = Listing::of(path).unwrap();
    let last = SegmentPaths::new(path, before.segments.last().unwrap().0).log;
    let len = std::fs::metadata(&last).unwrap().len();
    set_len(&last, len + 100);
    assert!(Listing::of(path).unwrap().settled_since(&before), "appends are no change");
    set_len(&last, len - 1);
    assert!(!Listing::of(path).unwrap().settled_since(&before), "a truncation is");
    set_len(&last, len);
    let stored = Checkpoint::read(path).unwrap().unwrap().unwrap().checkpoint;
    Checkpoint { recovery_point: stored.recovery_point - 1, ..stored }.write(path).unwrap();
    assert!(!Listing::of(path).unwrap().settled_since(&before), "a lowered recovery point is");
    stored.write(path).unwrap();
    assert!(Listing::of(path).unwrap().settled_since(&before));
    let swap = path.join(format!("{}{SWAP_SUFFIX}", crate::format::file_name(before.segments[0].0, LOG_SUFFIX)));
    std::fs::write(&swap, b"").unwrap();
    assert!(!Listing::of(path).unwrap().settled_since(&before), "a swap in progress is");
}

/// A segment rolled away from and not yet sealed (its indexes still preallocated) lacks the
/// final time entry: no error, live or after a crash. A sealed segment lacking it is damage.
#[test]
fn only_a_sealed_segment_must_end_its_time_index_with_the_final_entry() {
    let config = LogConfig { segment_bytes: 1024, index_interval_bytes: u64::from(u32::MAX), ..LogConfig::default() };
    let dir = closed_log(&config, 40);
    let path = dir.path();
    assert!(verify(path, &config).unwrap().is_clean());
    let paths = SegmentPaths::new(path, Listing::of(path).unwrap().segments[0].0);
    let times = std::fs::metadata(&paths.time_index).unwrap().len();
    assert!(times >= TimeEntry::LEN as u64);
    set_len(&paths.time_index, times - TimeEntry::LEN as u64);
    let report = verify(path, &config).unwrap();
    assert!(report.errors().any(|f| f.problem.contains("final")), "{report:#?}");
    // Preallocated, as a rolled segment's indexes are until its seal trims them.
    for index in [&paths.index, &paths.time_index] {
        let len = std::fs::metadata(index).unwrap().len();
        set_len(index, len + 10 * 12);
    }
    let report = verify(path, &config).unwrap();
    assert!(report.errors().next().is_none(), "{report:#?}");
}

/// A deletion renames the segments it removes; a crash part-way used to leave a hole below the
/// start offset (the newest renamed first). Nothing of the log is missing: a note, not damage.
#[test]
fn a_hole_below_the_start_offset_is_no_damage() {
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let dir = closed_log(&config, 40);
    let path = dir.path();
    let bases: Vec<u64> = Listing::of(path).unwrap().segments.iter().map(|s| s.0).collect();
    assert!(bases.len() > 4, "{bases:?}");
    let first = SegmentPaths::new(path, bases[0]);
    let kept: Vec<(PathBuf, Vec<u8>)> = [first.log, first.index, first.time_index]
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    let log = Log::open(path, config.clone()).unwrap();
    log.delete_records_before(bases[3]).unwrap();
    log.close().unwrap();
    for (p, bytes) in &kept {
        std::fs::write(p, bytes).unwrap();
    }
    let report = verify(path, &config).unwrap();
    assert!(report.is_clean(), "{report:#?}");
    assert!(report.notes().any(|f| f.problem.contains("interrupted deletion")), "{report:#?}");
    assert_eq!(report.start_offset, bases[3]);
    let log = Log::open(path, config).unwrap();
    assert_eq!(log.start_offset(), bases[3]);
}

/// A problem that stays on a log no writer holds is the answer, at once: a file that cannot be
/// read is no log changing under the check (`Unsettled` was returned here after 20 tries).
#[test]
fn a_file_gone_for_good_from_a_closed_log_is_reported_not_retried() {
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let dir = closed_log(&config, 40);
    let dangling = dir.path().join(crate::format::file_name(1 << 40, LOG_SUFFIX));
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let result = verify(dir.path(), &config);
    assert!(result.as_ref().is_err_and(vanished), "{result:?}");
}
