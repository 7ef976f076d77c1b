//! `strata consume` through the binary: the end by default, --follow beside a live writer,
//! counts, ranges, relative and time starts, templates, JSON, and a closed pipe.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;
mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cli::{stdout, strata};
use predicates::prelude::*;
use strata_log::{Header, Log, LogConfig, Record};

#[test]
fn exits_at_the_end_with_counts_ranges_and_relative_starts() {
    let dir = tempfile::tempdir().unwrap();
    cli::build(dir.path(), 20);
    let lines = |args: &[&str]| {
        let out = strata().arg("consume").args(args).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", cli::stderr(&out));
        stdout(&out).lines().map(|l| l.split('\t').next().unwrap().parse::<u64>().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(lines(&[]), (0..20).collect::<Vec<_>>());
    assert_eq!(lines(&["-c", "3"]), [0, 1, 2]);
    assert_eq!(lines(&["--from", "5", "--to", "8"]), [5, 6, 7]);
    assert_eq!(lines(&["--from", "end-2"]), [18, 19]);
    assert_eq!(lines(&["-o", "-3", "-c", "1"]), [17]);
    assert_eq!(lines(&["--from", "beginning+18"]), [18, 19]);
    assert_eq!(lines(&["--from", "end"]), Vec::<u64>::new());
    strata()
        .args(["consume", "--from", "500"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("past the end of the log (20)"));
    strata()
        .args(["consume", "--from", "soon"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("end-N"));
}

#[test]
fn starts_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        Log::open(dir.path(), LogConfig { max_timestamp_skew_ms: i64::MAX as u64, ..LogConfig::default() }).unwrap();
    for (i, ts) in [1_600_000_000_000i64, 1_700_000_000_000, 1_800_000_000_000].iter().enumerate() {
        log.append(&[Record::new(format!("v{i}").as_bytes()).with_timestamp(*ts)]).unwrap();
    }
    log.close().unwrap();
    let from = |time: &str| {
        let out = strata().args(["consume", "--from-time", time, "--format", "%v"]).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", cli::stderr(&out));
        stdout(&out)
    };
    assert_eq!(from("2023-11-14T22:13:20Z"), "v1\nv2\n", "exactly the second record's time");
    assert_eq!(from("2023-11-14T23:13:20+01:00"), "v1\nv2\n", "with an offset");
    assert_eq!(from("1700000000001"), "v2\n", "as milliseconds");
    assert_eq!(from("2030-01-01"), "", "after every record: nothing");
}

#[test]
fn templates_show_keys_timestamps_headers_and_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        Log::open(dir.path(), LogConfig { max_timestamp_skew_ms: i64::MAX as u64, ..LogConfig::default() }).unwrap();
    let headers = [Header { key: "trace", value: Some(b"abc") }, Header { key: "empty", value: None }];
    log.append(&[
        Record::new(b"v0").with_key(b"k0").with_headers(&headers).with_timestamp(1_796_016_000_000),
        Record::tombstone(b"gone").with_timestamp(1_796_016_000_000),
    ])
    .unwrap();
    log.close().unwrap();
    strata().args(["consume", "--format", "%o %T %t %k=%v [%h] %K %S"]).arg(dir.path()).assert().success().stdout(
        "0 1796016000000 2026-11-30T05:20:00.000Z k0=v0 [trace=abc,empty=] 2 2\n\
             1 1796016000000 2026-11-30T05:20:00.000Z gone= [] 4 -1\n",
    );
    strata()
        .args(["consume", "-Z", "--format", r"%k=%v\n"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout("k0=v0\ngone=NULL\n");
    strata()
        .args(["consume", "--format", "%x"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown %x"));
}

#[test]
fn json_has_headers_base64_for_bytes_and_null_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let headers = [Header { key: "h", value: Some(b"\xff") }];
    log.append(&[Record::new(b"\xfe\xff").with_key(b"k").with_headers(&headers), Record::tombstone(b"k")]).unwrap();
    log.close().unwrap();
    let out = strata().args(["consume", "--json"]).arg(dir.path()).output().unwrap();
    let lines: Vec<serde_json::Value> = stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["key"], "k");
    assert_eq!((&lines[0]["value"], &lines[0]["value_encoding"]), (&"/v8=".into(), &"base64".into()));
    assert_eq!(lines[0]["headers"][0]["key"], "h");
    assert_eq!(lines[0]["headers"][0]["value_encoding"], "base64");
    assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(lines[1]["value"].is_null(), "a tombstone's value is null");
    assert!(lines[1].get("value_encoding").is_none());
}

/// Regression: `strata consume … | head -1` failed with `Broken pipe` and exit 2.
#[test]
fn a_closed_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    cli::build(dir.path(), 2000);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("consume")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first, "0\tvalue-0\n");
    // The reader is gone (dropped with the BufReader): the next write fails with EPIPE.
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", cli::stderr(&out));
    assert_eq!(cli::stderr(&out), "");
}

#[test]
fn follow_prints_what_another_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"before")]).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["consume", "-f", "--poll-ms", "20", "-c", "3", "--format", "%v"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "before");
    log.append(&[Record::new(b"during 1")]).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "during 1");
    log.append(&[Record::new(b"during 2"), Record::new(b"past the count")]).unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "during 2");
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(status.success() && started.elapsed() < Duration::from_secs(10), "exits after -c records");
    assert!(lines.next().is_none());
    drop(log);
}

#[test]
fn follow_stops_on_ctrl_c_with_130() {
    let dir = tempfile::tempdir().unwrap();
    cli::build(dir.path(), 1);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["consume", "--follow"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let kill = std::process::Command::new("kill").arg("-INT").arg(child.id().to_string()).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(stdout(&out), "0\tvalue-0\n");
}

/// Regression: `strata consume fixtures/bad_crc_mid_segment` printed offsets 0–89 and exited 0,
/// hiding that 90–99, below the recovery point, are damaged.
#[test]
fn damage_below_the_recovery_point_is_reported_after_the_records_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bad_crc_mid_segment");
    common::copy_dir(&fixture, dir.path());
    let out = strata().args(["-q", "consume"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", cli::stderr(&out));
    let offsets: Vec<u64> =
        stdout(&out).lines().map(|l| l.split('\t').next().unwrap().parse::<u64>().unwrap()).collect();
    assert_eq!(offsets, (0..90).collect::<Vec<_>>());
    let stderr = cli::stderr(&out);
    assert!(stderr.contains("00000000000000000083.log at position 255"), "{stderr}");
    assert!(stderr.contains("strata recover --force"), "says what to run: {stderr}");
}

/// Regression: `consume --from 85 --to 87` on a log damaged at 87 reported the damage and exited
/// 1: `--to` excludes its bound, so nothing at or past it is read.
#[test]
fn to_stops_before_its_bound_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/bad_crc_mid_segment");
    common::copy_dir(&fixture, dir.path());
    let out = strata().args(["consume", "--from", "88", "--to", "90"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", cli::stderr(&out));
    let text = stdout(&out);
    let offsets: Vec<&str> = text.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(offsets, ["88", "89"]);
    assert!(!cli::stderr(&out).contains("corrupt"), "{}", cli::stderr(&out));
    // Asking for the damaged offset still reports it.
    strata().args(["-q", "consume", "--from", "88", "--to", "91"]).arg(dir.path()).assert().code(1);
}

/// Regression: `consume --from 100` said "use --follow to wait for it", but with `-f` it exited 2
/// "out of range". With --follow a start past the end waits for it (and is not taken for a
/// truncation).
#[test]
fn follow_waits_for_a_start_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for i in 0..6 {
        log.append(&[Record::new(format!("v{i}").as_bytes())]).unwrap();
    }
    strata()
        .args(["consume", "--from", "8"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("past the end of the log (6); use --follow to wait for it"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["consume", "--from", "8", "-f", "--poll-ms", "20", "-c", "2"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    for i in 6..11 {
        log.append(&[Record::new(format!("v{i}").as_bytes())]).unwrap();
    }
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", cli::stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(stdout(&out), "8\tv8\n9\tv9\n");
    assert!(!cli::stderr(&out).contains("truncated"), "{}", cli::stderr(&out));
    drop(log);
}
