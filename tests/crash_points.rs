//! Crash test 6: named crash points for exact replay. A child process (this test binary run again
//! as a writer, or as `recover`, through the library) runs with `FAILPOINTS=<point>=<spec>` and
//! exits on the spot at that step (status 86, asserted, so each test proves its step was reached);
//! the parent then reopens and checks everything acknowledged is there, intact, dense, and that
//! the interrupted multi-file operation was completed or undone. Every step of every multi-file
//! operation is crashed at least once: rolls, sealing, checkpoint and marker writes, close, marker
//! deletion at open, swap completion, recovery's cut, removal of later segments and index rebuilds.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::child::{Writer, WriterOptions, recover};
use common::{check_recovered, value_of};
use strata_log::internals::CRASH_EXIT_CODE;
use strata_log::internals::Checkpoint;
use strata_log::{LogConfig, Record};

const SEGMENT_BYTES: u64 = 1024;

fn config() -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, index_interval_bytes: 200, ..LogConfig::default() }
}

/// Runs a writer that flushes each record before acknowledging it on `dir` with `failpoints`,
/// feeding `lines` records from offset `next` and then closing its input. Returns its exit code
/// and the offset after the last acknowledged record.
fn produce(dir: &Path, failpoints: &str, next: u64, lines: u64) -> (Option<i32>, u64) {
    let options = WriterOptions {
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 200,
        sync: true,
        failpoints: Some(failpoints.to_owned()),
        ..WriterOptions::default()
    };
    let mut child = Writer::spawn(dir, &options);
    child.feed(next..next + lines);
    let acked = child.read_acks(next, u64::MAX);
    (child.wait(), acked)
}

/// A writer crashes at `failpoints`; the log reopens with everything acknowledged.
fn writer_crash(failpoints: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (code, acked) = produce(dir.path(), failpoints, 0, 200);
    assert_eq!(code, Some(CRASH_EXIT_CODE), "{failpoints}: the crash point was reached");
    let log = check_recovered(dir.path(), config(), acked);
    assert!(!log.recovery_report().clean_shutdown, "{failpoints}");
    // The log keeps working after the crash.
    let next = log.next_offset();
    drop(log);
    let (code, acked) = produce(dir.path(), "", next, 50);
    assert_eq!(code, Some(0));
    drop(check_recovered(dir.path(), config(), acked));
}

#[test]
fn crash_right_after_a_roll() {
    writer_crash("after_roll=3*off->return");
}

#[test]
fn crash_while_sealing_before_the_indexes_are_flushed() {
    writer_crash("before_index_flush=2*off->return");
}

#[test]
fn crash_after_sealing_before_the_directory_and_checkpoint() {
    writer_crash("after_seal=2*off->return");
}

// Atomic replaces (temp file, fsync, rename, directory fsync): the first is the checkpoint file's
// creation at open (later checkpoints overwrite one of its two slots in place), the second
// `log.meta`'s creation at open, the third the clean-shutdown marker at close.

#[test]
fn crash_after_the_log_meta_temp_file_is_written() {
    writer_crash("after_tmp_write=1*off->return");
}

#[test]
fn crash_after_the_log_meta_rename_before_the_directory_fsync() {
    writer_crash("after_rename=1*off->return");
}

#[test]
fn crash_after_the_marker_temp_file_is_written() {
    writer_crash("after_tmp_write=2*off->return");
}

#[test]
fn crash_after_the_marker_rename_before_the_directory_fsync() {
    // The marker is in place (a kill loses no rename), so the next open may trust it.
    let dir = tempfile::tempdir().unwrap();
    let (code, acked) = produce(dir.path(), "after_rename=2*off->return", 0, 200);
    assert_eq!(code, Some(CRASH_EXIT_CODE), "the crash point was reached");
    assert!(dir.path().join(".clean-shutdown").exists());
    drop(check_recovered(dir.path(), config(), acked));
}

#[test]
fn crash_while_creating_the_checkpoint_file() {
    writer_crash("after_tmp_write=return");
}

#[test]
fn crash_at_close_before_the_clean_shutdown_marker() {
    let dir = tempfile::tempdir().unwrap();
    let (code, acked) = produce(dir.path(), "before_clean_marker=return", 0, 120);
    assert_eq!(code, Some(CRASH_EXIT_CODE));
    assert_eq!(acked, 120);
    assert!(!dir.path().join(".clean-shutdown").exists());
    let log = check_recovered(dir.path(), config(), acked);
    assert!(!log.recovery_report().clean_shutdown, "no marker, so no clean shutdown");
}

#[test]
fn crash_at_open_right_after_the_marker_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (code, acked) = produce(dir.path(), "", 0, 100);
    assert_eq!(code, Some(0));
    assert!(dir.path().join(".clean-shutdown").exists());
    let (code, _) = produce(dir.path(), "after_marker_delete=return", acked, 10);
    assert_eq!(code, Some(CRASH_EXIT_CODE));
    let log = check_recovered(dir.path(), config(), acked);
    assert!(!log.recovery_report().clean_shutdown, "the marker was consumed: the next open scans");
}

/// A clean log of several segments; returns the `.log` names in order.
fn build(dir: &Path, records: u64) -> Vec<String> {
    let log = common::open_unlocked(dir, config()).unwrap();
    for offset in 0..records {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    common::file_names(dir).into_iter().filter(|n| n.ends_with(".log")).collect()
}

/// The state a compaction swap leaves: segments 0 and 1 concatenated as `<0>.log.swap`, the
/// originals still present. Records are unchanged, so the log reads the same after the swap.
fn leave_swap(dir: &Path) -> Vec<String> {
    let logs = build(dir, 120);
    let mut swap = std::fs::read(dir.join(&logs[0])).unwrap();
    swap.extend(std::fs::read(dir.join(&logs[1])).unwrap());
    std::fs::write(dir.join(format!("{}.swap", logs[0])), swap).unwrap();
    logs
}

fn swap_crash(failpoints: &str) {
    let dir = tempfile::tempdir().unwrap();
    let logs = leave_swap(dir.path());
    assert_eq!(recover(dir.path(), failpoints), Some(CRASH_EXIT_CODE), "{failpoints}");
    let log = check_recovered(dir.path(), config(), 120);
    assert_eq!(log.next_offset(), 120);
    drop(log);
    assert!(!dir.path().join(&logs[1]).exists(), "{failpoints}: the swapped-in segment replaced the second original");
}

#[test]
fn crash_in_swap_completion_after_the_first_deletion() {
    swap_crash("mid_delete=return");
}

#[test]
fn crash_in_swap_completion_after_a_later_deletion() {
    swap_crash("mid_delete=3*off->return");
}

#[test]
fn crash_in_swap_completion_after_the_log_rename() {
    swap_crash("swap_renamed=return");
}

/// An unclean log whose recovery must cut, as a crash during a roll leaves it: the recovery point in
/// the second segment; the third still untrimmed (its files' preallocated zero tails) with its last batch
/// torn; two segments after it. Returns the offset where the log must end.
fn leave_torn_log(dir: &Path) -> u64 {
    let logs = build(dir, 200);
    std::fs::remove_file(dir.join(".clean-shutdown")).unwrap();
    let len = |name: &String| std::fs::metadata(dir.join(name)).unwrap().len();
    // A segment with room left (one filled to the last byte has no zero tail to tell it unsealed)
    // and two segments after it.
    let torn = (2..logs.len() - 2).find(|&i| len(&logs[i]) < SEGMENT_BYTES).expect("a segment with room");
    let base = |name: &String| name.trim_end_matches(".log").parse::<u64>().unwrap();
    let checkpoint = Checkpoint { log_start_offset: 0, recovery_point: base(&logs[torn - 1]) + 1 };
    std::fs::write(dir.join("checkpoint"), checkpoint.encode_file(1)).unwrap();
    let path = dir.join(&logs[torn]);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff; // the segment's last batch
    bytes.resize(SEGMENT_BYTES as usize, 0); // never sealed: still preallocated
    std::fs::write(&path, bytes).unwrap();
    for index in ["index", "timeindex"] {
        let index = path.with_extension(index);
        let len = std::fs::metadata(&index).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&index).unwrap().set_len(len + 4096).unwrap();
    }
    let batches = match strata_log::internals::inspect::dump_file(&path, false).unwrap() {
        strata_log::internals::inspect::Dump::Log { batches, .. } => batches,
        _ => unreachable!(),
    };
    batches.last().unwrap().base_offset
}

fn recovery_crash(failpoints: &str) {
    let dir = tempfile::tempdir().unwrap();
    let end = leave_torn_log(dir.path());
    assert_eq!(recover(dir.path(), failpoints), Some(CRASH_EXIT_CODE), "{failpoints}");
    let log = check_recovered(dir.path(), config(), end);
    assert_eq!(log.next_offset(), end, "{failpoints}: the interrupted recovery is redone to the same end");
}

#[test]
fn crash_in_recovery_after_an_index_rebuild() {
    recovery_crash("after_index_rebuild=return");
}

#[test]
fn crash_in_recovery_after_the_cut() {
    recovery_crash("after_truncate=return");
}

#[test]
fn crash_in_recovery_while_removing_later_segments() {
    recovery_crash("mid_remove=2*off->return");
}

#[test]
fn crash_in_recovery_while_writing_the_checkpoint() {
    recovery_crash("after_tmp_write=return");
}

#[test]
#[ignore = "the child process of the tests above"]
fn child_process() {
    common::child::main();
}
