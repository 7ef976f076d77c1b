//! Crash test: a live `truncate_to` (or `reset_at`), then records of exactly the same size appended
//! over the removed ones, then a kill. The stale batches would line up exactly after the new ones
//! (same sizes, consecutive offsets, valid CRCs), so a truncation that only moved offsets would let
//! recovery bring them back. None may come back. With the `failpoints` feature the child is also
//! killed at each named step of the truncation and the reset: the log then reopens as it was before
//! or as it is after, never a mix, with nothing below the cut lost.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use common::child::CHILD_DIR;
use common::{file_names, read_all};
use strata_log::{FlushPolicy, LogConfig, Record};

const OLD: u64 = 400;
const CHILD_OP: &str = "STRATA_CHILD_OP";

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_interval_bytes: 256, file_delete_delay_ms: 0, ..LogConfig::default() }
}

/// Old and new values have the same length, so their batches have the same size.
fn old(offset: u64) -> Vec<u8> {
    format!("old-{offset:06}").into_bytes()
}

fn new(offset: u64) -> Vec<u8> {
    format!("new-{offset:06}").into_bytes()
}

/// A log of `OLD` records, each its own batch, closed cleanly.
fn old_log(dir: &Path) {
    let log = common::open_unlocked(dir, config()).unwrap();
    for offset in 0..OLD {
        log.append(&[Record::new(&old(offset))]).unwrap();
    }
    log.close().unwrap();
}

/// The child: runs `STRATA_CHILD_OP` (`truncate:<offset>:<appends>` or `reset:<offset>:<appends>`)
/// on the log in `STRATA_CHILD_DIR`, appends the new records without any fsync, reports "done" and
/// waits to be killed.
#[test]
#[ignore = "the child process of the tests below"]
fn child_process() {
    // Started alone (`--ignored`, no parent), it runs a truncation on a log of its own.
    let own = tempfile::tempdir().unwrap();
    let parent = std::env::var(CHILD_DIR).is_ok();
    let (dir, op) = match (std::env::var(CHILD_DIR), std::env::var(CHILD_OP)) {
        (Ok(dir), Ok(op)) => (dir.into(), op),
        _ => {
            old_log(own.path());
            (own.path().to_path_buf(), "truncate:200:10".to_owned())
        }
    };
    let dir: std::path::PathBuf = dir;
    #[cfg(feature = "failpoints")]
    let _scenario = fail::FailScenario::setup();
    let log = common::open_unlocked(&dir, LogConfig { flush_policy: FlushPolicy::Never, ..config() }).unwrap();
    let parts: Vec<&str> = op.split(':').collect();
    let (at, appends): (u64, u64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
    let next = match parts[0] {
        "truncate" => log.truncate_to(at).unwrap(),
        "reset" => {
            log.reset_at(at).unwrap();
            at
        }
        other => panic!("unknown op {other}"),
    };
    for offset in next..next + appends {
        log.append(&[Record::new(&new(offset))]).unwrap();
    }
    println!("done {next}");
    if parent {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// Runs the child on `dir`; returns its exit code (None when killed by us) and the next offset it
/// reported after its operation.
fn run_child(dir: &Path, op: &str, failpoints: Option<&str>) -> (Option<i32>, Option<u64>) {
    let mut command = common::child::command(dir);
    command.env(CHILD_OP, op).stdout(Stdio::piped()).stderr(Stdio::null());
    if let Some(spec) = failpoints {
        command.env("FAILPOINTS", spec);
    }
    let mut child = command.spawn().unwrap();
    let mut reported = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
        // The harness prints "test child_process ... " without a newline before the child's line.
        if let Some((_, next)) = line.split_once("done ") {
            reported = Some(next.trim().parse().unwrap());
            child.kill().unwrap();
            break;
        }
    }
    let status = child.wait().unwrap();
    (if reported.is_some() { None } else { status.code() }, reported)
}

/// Every record in the reopened log is its offset's old value below `cut` and new value from it
/// on, with `next` as the log's end; nothing temporary is left.
fn check(dir: &Path, start: u64, cut: u64, next: u64) {
    let log = common::open_unlocked(dir, config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (start, next));
    let records = read_all(&log, start, 1 << 16);
    assert_eq!(records.len() as u64, next - start);
    for (i, (offset, record)) in records.iter().enumerate() {
        assert_eq!(*offset, start + i as u64);
        let expected = if *offset < cut { old(*offset) } else { new(*offset) };
        assert_eq!(record.value.as_deref(), Some(&expected[..]), "offset {offset}");
    }
    common::check_lookups(&log);
    for name in file_names(dir) {
        assert!(!name.ends_with(".deleted") && !name.ends_with(".tmp"), "left over: {name}");
    }
}

#[test]
fn records_removed_by_a_live_truncation_never_come_back() {
    // Cuts inside the active segment, inside a sealed one, at a segment boundary, at zero.
    for cut in [OLD - 7, 150, 0] {
        let dir = tempfile::tempdir().unwrap();
        old_log(dir.path());
        let appends = (OLD - cut) / 2;
        let (_, next) = run_child(dir.path(), &format!("truncate:{cut}:{appends}"), None);
        assert_eq!(next, Some(cut));
        check(dir.path(), 0, cut, cut + appends);
    }
}

#[test]
fn records_removed_by_a_reset_never_come_back() {
    for at in [0, 200, OLD + 1000] {
        let dir = tempfile::tempdir().unwrap();
        old_log(dir.path());
        let (_, next) = run_child(dir.path(), &format!("reset:{at}:50"), None);
        assert_eq!(next, Some(at));
        check(dir.path(), at, 0, at + 50);
    }
}

/// The child dies at each step of a truncation: the log reopens whole or truncated.
#[cfg(feature = "failpoints")]
#[test]
fn a_crash_at_each_step_of_a_truncation_leaves_the_old_or_the_new_log() {
    use strata_log::internals::CRASH_EXIT_CODE;
    let cut = 150;
    for point in ["truncate_after_checkpoint", "truncate_after_rename", "truncate_after_cut"] {
        let dir = tempfile::tempdir().unwrap();
        old_log(dir.path());
        let (code, _) = run_child(dir.path(), &format!("truncate:{cut}:10"), Some(&format!("{point}=return")));
        assert_eq!(code, Some(CRASH_EXIT_CODE), "{point} was reached");
        let log = common::open_unlocked(dir.path(), config()).unwrap();
        let next = log.next_offset();
        drop(log);
        // Not truncated yet (the old log, or a prefix of it still holding every record below the
        // cut), or truncated.
        assert!(next >= cut, "{point}: records below the cut were lost ({next})");
        check(dir.path(), 0, OLD, next);
    }
}

/// The child dies at each step of a reset: the log reopens as it was (before the checkpoint), or
/// empty at the new offset — never the new start with old records above it. Regression (review):
/// a crash right after the checkpoint of `reset_at(100)` (below the old end) reopened with start
/// 100 and the old records 100.. still there (a Raft follower would see stale entries past its
/// snapshot). The checkpoint now marks the reset in progress, and an open completes it.
#[cfg(feature = "failpoints")]
#[test]
fn a_crash_at_each_step_of_a_reset_leaves_the_old_or_the_new_log() {
    use strata_log::internals::CRASH_EXIT_CODE;
    for point in ["reset_after_checkpoint", "reset_after_rename"] {
        for at in [OLD + 1000, 100, 0] {
            let dir = tempfile::tempdir().unwrap();
            old_log(dir.path());
            let (code, _) = run_child(dir.path(), &format!("reset:{at}:10"), Some(&format!("{point}=return")));
            assert_eq!(code, Some(CRASH_EXIT_CODE), "{point}");
            let log = common::open_unlocked(dir.path(), config()).unwrap();
            let (start, next) = (log.start_offset(), log.next_offset());
            drop(log);
            assert_eq!((start, next), (at, at), "{point}, reset_at({at}): the reset completed");
            check(dir.path(), at, 0, at);
        }
    }
}
