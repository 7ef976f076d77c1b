//! `strata produce` through the binary: keys, headers, timestamps, framings, UTF-8 handling, the
//! flush policy, the summary, Ctrl-C, and a failed produce changing nothing.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;
mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use cli::{stderr, stdout, strata};
use predicates::prelude::*;
use strata_log::{Log, LogConfig};

fn records(dir: &std::path::Path) -> Vec<common::Owned> {
    let log = Log::open_read_only(dir, LogConfig::default()).unwrap();
    log.records(..).unwrap().map(|r| common::Owned::of(&r.unwrap())).collect()
}

#[test]
fn keys_headers_and_a_summary_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    strata()
        .args(["produce", "-K", ":", "-H", "source=cli", "-H", "flag", "--batch", "2"])
        .arg(&log)
        .write_stdin("user-1:hello\nno key here\nuser-2:a:b\n")
        .assert()
        .success()
        .stdout("")
        .stderr(
            predicate::str::is_match(r"produced 3 records \(\d+ B\) at offsets 0–2 in [\d.]+ s: \d+ records/s")
                .unwrap(),
        );
    let got = records(&log);
    assert_eq!(got.len(), 3);
    assert_eq!((got[0].key.as_deref(), got[0].value.as_deref()), (Some(&b"user-1"[..]), Some(&b"hello"[..])));
    assert_eq!((got[1].key.as_deref(), got[1].value.as_deref()), (None, Some(&b"no key here"[..])));
    assert_eq!(got[2].value.as_deref(), Some(&b"a:b"[..]), "split at the first separator only");
    assert_eq!(got[0].headers, [("source".to_owned(), Some(b"cli".to_vec())), ("flag".to_owned(), None)]);
    strata().args(["produce", "-q"]).arg(&log).write_stdin("x\n").assert().success().stderr("");
    let json = strata().args(["produce", "--json"]).arg(&log).write_stdin("y\n").output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&json.stderr).unwrap();
    assert_eq!((summary["records"].as_u64(), summary["first_offset"].as_u64()), (Some(1), Some(4)));
}

#[test]
fn timestamps_given_or_parsed_from_each_line() {
    let dir = tempfile::tempdir().unwrap();
    strata()
        .args(["produce", "--timestamp", "2020-01-01T00:00:00Z"])
        .arg(dir.path())
        .write_stdin("old\n")
        .assert()
        .success();
    strata()
        .args(["produce", "--timestamp-separator", "|", "-K", ":"])
        .arg(dir.path())
        .write_stdin("2021-06-01T12:00:00+02:00|k:v\n1700000000000|k:w\n")
        .assert()
        .success();
    let log = Log::open_read_only(dir.path(), LogConfig::default()).unwrap();
    let times: Vec<i64> = log.records(..).unwrap().map(|r| r.unwrap().timestamp_ms()).collect();
    assert_eq!(times, [1_577_836_800_000, 1_622_541_600_000, 1_700_000_000_000]);
    strata()
        .args(["produce", "--timestamp-separator", "|"])
        .arg(dir.path())
        .write_stdin("yesterday|v\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 1").and(predicate::str::contains("ISO 8601")));
}

#[test]
fn delimiters_nul_and_length_prefixed_framing() {
    let dir = tempfile::tempdir().unwrap();
    strata().args(["produce", "-D", ";;"]).arg(dir.path()).write_stdin("a;;b;;c").assert().success();
    strata().args(["produce", "-0"]).arg(dir.path()).write_stdin(&b"multi\nline\0second\0"[..]).assert().success();
    let mut framed = Vec::new();
    for value in [&b"\x00\x01binary"[..], b""] {
        framed.extend_from_slice(&(value.len() as u32).to_be_bytes());
        framed.extend_from_slice(value);
    }
    strata().args(["produce", "--length-prefixed"]).arg(dir.path()).write_stdin(framed).assert().success();
    let values: Vec<Vec<u8>> = records(dir.path()).into_iter().map(|r| r.value.unwrap()).collect();
    let expected: Vec<&[u8]> = vec![b"a", b"b", b"c", b"multi\nline", b"second", b"\x00\x01binary", b""];
    assert_eq!(values, expected);
    strata()
        .args(["produce", "--length-prefixed"])
        .arg(dir.path())
        .write_stdin(&b"\0\0\0\x09short"[..])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("record 1: 9 bytes announced"));
}

#[test]
fn invalid_utf8_is_stored_as_bytes_or_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    strata().arg("produce").arg(dir.path()).write_stdin(&b"ok\nbad \xff byte\n"[..]).assert().success();
    assert_eq!(records(dir.path())[1].value.as_deref(), Some(&b"bad \xff byte"[..]));
    strata()
        .args(["produce", "--require-utf8"])
        .arg(dir.path())
        .write_stdin(&b"fine\nstill fine\nbad \xff\nnever read\n"[..])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("line 3: invalid UTF-8 at byte 5"));
    let values: Vec<_> = records(dir.path()).into_iter().map(|r| r.value.unwrap()).collect();
    assert_eq!(values.len(), 4, "the lines before the bad one are produced, nothing after it");
}

#[test]
fn flush_policies_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    for policy in ["always", "never", "interval:50"] {
        strata()
            .args(["produce", "--print-offsets", "--flush-policy", policy])
            .arg(dir.path())
            .write_stdin("a\nb\n")
            .assert()
            .success();
    }
    assert_eq!(records(dir.path()).len(), 6);
    strata()
        .args(["produce", "--sync", "--batch", "2"])
        .arg(dir.path())
        .write_stdin("c\nd\ne\n")
        .assert()
        .success()
        .stdout("6\n7\n8\n");
    strata()
        .args(["produce", "--flush-policy", "sometimes"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("expected never, always or interval:MS"));
}

/// Regression: Ctrl-C on `strata produce` exited 130 without a clean-shutdown marker. Now the
/// batch being read is appended, the log closed cleanly, and the exit is still 130.
#[test]
fn ctrl_c_appends_what_was_read_and_closes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", "--batch", "100"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"one\ntwo\nthree\n").unwrap();
    stdin.flush().unwrap();
    // The input stays open, as at a console; the batch of 100 is not full.
    std::thread::sleep(Duration::from_millis(500));
    send_signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted; produced 3 records"), "{}", stderr(&out));
    assert!(dir.path().join(".clean-shutdown").exists(), "closed cleanly");
    assert_eq!(records(dir.path()).len(), 3);
}

/// Sends `signal` (e.g. `INT`) to `pid` with the `kill` command (the crate denies `unsafe`).
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().unwrap();
    assert!(status.success());
}

/// Regression: a produce whose open failed left `.index`/`.timeindex` files behind, and produce
/// wrote a new log into a directory of unrelated files.
#[test]
fn a_failed_produce_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    cli::build(dir.path(), 60);
    let names = common::file_names(dir.path());
    let last = names.iter().rfind(|n| n.ends_with(".log")).unwrap().clone();
    let first = names.iter().find(|n| n.ends_with(".log")).unwrap().clone();
    // An unclean shutdown with damage below the recovery point and a missing index: the open
    // rebuilds the index, then refuses the damage.
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    std::fs::remove_file(dir.path().join(first.replace(".log", ".index"))).unwrap();
    std::fs::remove_file(dir.path().join(first.replace(".log", ".timeindex"))).unwrap();
    cli::flip(&dir.path().join(&last), 60);
    let before = common::snapshot(dir.path());
    let out = strata().arg("produce").arg(dir.path()).write_stdin("x\n").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "damage found: {}", stderr(&out));
    assert!(stderr(&out).contains("corrupt"), "{}", stderr(&out));
    assert_eq!(common::snapshot(dir.path()), before, "nothing changed");

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
    std::fs::write(other.path().join("report.log"), "mine too").unwrap();
    strata()
        .arg("produce")
        .arg(other.path())
        .write_stdin("x\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a log directory"));
    assert_eq!(common::file_names(other.path()), ["notes.txt", "report.log"]);
    assert!(stdout(&out).is_empty());
}

/// Regression: a produce refused for its arguments or its first record (invalid UTF-8 under
/// --require-utf8, an empty delimiter, a negative timestamp, a 20 MiB line) exited 2 but left a
/// new log directory behind. Now nothing is created; input refused part-way says what was stored.
#[test]
fn refused_input_creates_nothing_and_says_what_was_stored() {
    let parent = tempfile::tempdir().unwrap();
    let huge = vec![b'x'; 20 << 20];
    let cases: Vec<(&[&str], Vec<u8>, &str)> = vec![
        (&["--require-utf8"], b"\xff\n".to_vec(), "line 1: invalid UTF-8"),
        (&["-D", ""], b"x\n".to_vec(), "delimiter"),
        (&["--timestamp=-5"], b"a\n".to_vec(), "1970-01-01T00:00:00Z"),
        (&["--timestamp", "99999999999999999"], b"a\n".to_vec(), "out of range"),
        (&["-K", ""], b"k:v\n".to_vec(), "key separator"),
        (&["-H", ""], b"v\n".to_vec(), "empty key"),
        (&["-H", "=v"], b"v\n".to_vec(), "empty key"),
        (&[], huge, "larger than a batch may be"),
    ];
    for (i, (args, input, message)) in cases.into_iter().enumerate() {
        let log = parent.path().join(format!("log-{i}"));
        let out = strata().arg("produce").args(args).arg(&log).write_stdin(input).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(message), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("max skew"), "{args:?}: {}", stderr(&out));
        assert!(!log.exists(), "{args:?} left {} behind", log.display());
    }
    // An empty directory stays empty.
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    strata().args(["produce", "--require-utf8"]).arg(&empty).write_stdin(&b"\xff\n"[..]).assert().code(2);
    assert!(common::file_names(&empty).is_empty());
    // Refused part-way: the records before stay, and the summary says so.
    let log = parent.path().join("partial");
    let out = strata()
        .args(["produce", "--require-utf8", "--batch", "10"])
        .arg(&log)
        .write_stdin(&b"a\nb\n\xff\nc\n"[..])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("stored 2 records (2 B) at offsets 0–1 before the error"), "{}", stderr(&out));
    assert!(stderr(&out).contains("line 3: invalid UTF-8"), "{}", stderr(&out));
    assert_eq!(records(&log).len(), 2);
}

/// Records that together exceed a batch are appended in several batches, not refused.
#[test]
fn batches_are_split_rather_than_grow_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let line = "y".repeat(100 << 10);
    let input: String = (0..30).map(|_| format!("{line}\n")).collect();
    strata().args(["produce", "-q", "--batch", "1000"]).arg(dir.path()).write_stdin(input).assert().success();
    assert_eq!(records(dir.path()).len(), 30);
}

/// Regression: a log made with `--segment-bytes 10485760` got 1 GiB segments (and a 1 GiB
/// fallocate) at the next plain produce. Its segment size is inferred, as the admin commands do.
#[test]
fn an_existing_log_keeps_its_segment_size() {
    let dir = tempfile::tempdir().unwrap();
    let lines = |from: usize| -> String { (from..from + 400).map(|i| format!("record number {i}\n")).collect() };
    strata()
        .args(["produce", "-q", "--segment-bytes", "8192"])
        .arg(dir.path())
        .write_stdin(lines(0))
        .assert()
        .success();
    let before = common::file_names(dir.path()).iter().filter(|n| n.ends_with(".log")).count();
    assert!(before > 1, "rolled");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", "-q"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(lines(400).as_bytes()).unwrap();
    // While it runs, its active segment is preallocated to the segment size.
    std::thread::sleep(Duration::from_millis(300));
    let largest = || {
        common::file_names(dir.path())
            .iter()
            .filter(|n| n.ends_with(".log"))
            .map(|n| std::fs::metadata(dir.path().join(n)).unwrap().len())
            .max()
            .unwrap()
    };
    assert!(largest() <= 8192, "{} bytes", largest());
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let after = common::file_names(dir.path()).iter().filter(|n| n.ends_with(".log")).count();
    assert!(after > before + 1, "kept rolling at about 8 KiB: {before} → {after} segments");
    assert_eq!(records(dir.path()).len(), 800);
}

/// Regression (adversarial pass): two `strata produce` starting at once on a new directory both
/// failed (in 76 of 100 runs) and the directory was gone: the loser's "undo" of a failed open
/// removed the winner's log. A failed open now undoes only under the directory's lock.
#[test]
fn two_producers_racing_on_a_new_directory_never_remove_each_others_log() {
    for round in 0..10 {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("log");
        let spawn = |tag: &str| {
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
                .args(["produce", "-q", "--flush-policy", "never"])
                .arg(&dir)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let input: String = (0..200).map(|i| format!("{tag}-{i}\n")).collect();
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
            child
        };
        let (a, b) = (spawn("a"), spawn("b"));
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let ok: Vec<bool> = [&a, &b].iter().map(|o| o.status.success()).collect();
        assert!(ok.contains(&true), "round {round}: both failed: {} / {}", stderr(&a), stderr(&b));
        for out in [&a, &b].iter().filter(|o| !o.status.success()) {
            assert!(stderr(out).contains("locked"), "round {round}: {}", stderr(out));
        }
        let stored = records(&dir).len();
        assert_eq!(stored, 200 * ok.iter().filter(|&&o| o).count(), "round {round}");
    }
}
