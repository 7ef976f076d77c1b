//! The `strata` binary's inspection and admin commands: offsets, verify severities, dump options,
//! recover (account, dry run, refusals), truncate / delete-before / compact, and what every
//! command shares: exit codes in --help, completions, no Debug output, no colour in a pipe,
//! bench argument checks.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;
mod common;

use cli::{assert_no_debug, build, stderr, stdout, strata};
use predicates::prelude::*;

fn first_log(dir: &std::path::Path) -> String {
    common::file_names(dir).into_iter().find(|n| n.ends_with(".log")).unwrap()
}

#[test]
fn offsets_reports_earliest_latest_durable_and_sizes() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let out = strata().arg("offsets").arg(dir.path()).output().unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    for line in
        ["earliest        0", "latest          60", "durable         60  (closed cleanly)", "recovery point  60"]
    {
        assert!(text.contains(line), "{line:?} in\n{text}");
    }
    assert!(text.contains(" B") || text.contains("KiB"), "a human size: {text}");
    assert_no_debug(&text);
    let json: serde_json::Value =
        serde_json::from_slice(&strata().args(["offsets", "--json"]).arg(dir.path()).output().unwrap().stdout).unwrap();
    assert_eq!((json["earliest"].as_u64(), json["latest"].as_u64()), (Some(0), Some(60)));
    assert!(json["segments"].as_u64().unwrap() > 1);
    strata()
        .args(["offsets", "--time", "2000-01-01"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("offset for time 0"));
    strata().arg("offsets").arg(dir.path().join("missing")).assert().code(2);
}

#[test]
fn verify_notes_are_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let first = first_log(dir.path());
    // A missing index is rebuilt at open: a note, exit 0. An orphan index is noted.
    std::fs::remove_file(dir.path().join(first.replace(".log", ".index"))).unwrap();
    std::fs::write(dir.path().join("00000000000000099999.index"), [0u8; 8]).unwrap();
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("note: ") && text.contains("missing: the next open rebuilds it"), "{text}");
    assert!(text.contains("orphan index"), "{text}");
    assert!(text.lines().last().unwrap().starts_with("clean (2 notes"), "{text}");
    assert_no_debug(&text);
    let json: serde_json::Value =
        serde_json::from_slice(&strata().args(["verify", "--json"]).arg(dir.path()).output().unwrap().stdout).unwrap();
    assert!(json["findings"].as_array().unwrap().iter().all(|f| f["severity"] == "note"));
}

/// A damaged segment makes the segments after it look like they start at the wrong offset: that
/// gap follows from the damage and is not a second finding.
#[test]
fn verify_reports_damage_once() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    cli::flip(&dir.path().join(first_log(dir.path())), 300);
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.matches("error: ").count(), 1, "{text}");
    assert!(text.lines().last().unwrap().starts_with("damage found: 1 error"), "{text}");
}

#[test]
fn dump_ranges_limits_iso_times_and_damage_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let first = dir.path().join(first_log(dir.path()));
    let out = strata().args(["dump", "--records", "--from", "3", "--to", "5"]).arg(&first).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("batch offset 3 ") && text.contains("batch offset 4 "), "{text}");
    assert!(!text.contains("batch offset 5 ") && !text.contains("batch offset 2 "), "{text}");
    assert!(text.contains("key key-0  value value-3"), "keys as text: {text}");
    assert!(predicate::str::is_match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z").unwrap().eval(&text), "{text}");
    assert_no_debug(&text);
    let limited = stdout(&strata().args(["dump", "--max-records", "2"]).arg(dir.path()).output().unwrap());
    assert_eq!(limited.matches("  value value-").count(), 2, "{limited}");
    let whole = stdout(&strata().arg("dump").arg(dir.path()).output().unwrap());
    assert!(whole.contains("checkpoint: log start offset 0, recovery point 60"), "{whole}");
    assert!(whole.contains("clean-shutdown marker: next offset 60"), "{whole}");
    assert_no_debug(&whole);
    cli::flip(&first, 300);
    strata().arg("dump").arg(&first).assert().code(1).stdout(predicate::str::contains("DAMAGE"));
}

#[test]
fn dump_checks_index_sanity_and_decodes_corrupt_copies() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    strata()
        .args(["dump", "--index-sanity-check"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains(".index: ok").and(predicate::str::contains("entries")));
    let index = dir.path().join(first_log(dir.path()).replace(".log", ".index"));
    std::fs::write(&index, [0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1]).unwrap();
    strata()
        .args(["dump", "--index-sanity-check"])
        .arg(&index)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAILED"));
    let copy = dir.path().join(format!("{}.corrupt", first_log(dir.path())));
    std::fs::copy(dir.path().join(first_log(dir.path())), &copy).unwrap();
    strata()
        .args(["dump", "--records"])
        .arg(&copy)
        .assert()
        .success()
        .stdout(predicate::str::contains("segment,").and(predicate::str::contains("value value-0")));
}

#[test]
fn recover_tells_what_it_did_and_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let last = common::file_names(dir.path()).into_iter().rfind(|n| n.ends_with(".log")).unwrap();
    // A torn tail past the recovery point: an unclean shutdown whose last batch is half there.
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let data = std::fs::read(dir.path().join(&last)).unwrap();
    let end = data.iter().rposition(|&b| b != 0).unwrap() + 1;
    let checkpoint = std::fs::read(dir.path().join("checkpoint")).unwrap();
    let mut lowered = strata_log::Checkpoint::decode(&checkpoint).unwrap();
    lowered.recovery_point = 59;
    std::fs::write(dir.path().join("checkpoint"), lowered.encode_file(1)).unwrap();
    std::fs::write(dir.path().join(&last), &data[..end - 3]).unwrap();
    let before = common::snapshot(dir.path());
    let dry = strata().args(["recover", "--dry-run"]).arg(dir.path()).output().unwrap();
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(stdout(&dry).starts_with("dry run: nothing was changed"), "{}", stdout(&dry));
    assert!(stdout(&dry).contains("would cut the torn tail"), "{}", stdout(&dry));
    assert_eq!(common::snapshot(dir.path()), before);
    let out = strata().arg("recover").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with(&format!("recovered {}", dir.path().display())), "{text}");
    assert!(text.contains("log now offsets [0, 59), 59 records"), "{text}");
    assert!(text.contains("removed (0 records, "), "the torn batch was no whole record: {text}");
    assert!(!text.contains("clean_shutdown"), "{text}");
    assert_no_debug(&text);
    let json: serde_json::Value =
        serde_json::from_slice(&strata().args(["recover", "--json"]).arg(dir.path()).output().unwrap().stdout).unwrap();
    assert_eq!(json["records_removed"], 0, "{json}");
    assert_eq!(json["before"]["records"], json["after"]["records"], "counts add up: {json}");
    assert!(json.get("clean_shutdown").is_none());
}

/// Regression: `recover` without `--force` deleted `.clean-shutdown` though its help says nothing
/// changes; and on a directory that is not a log it created six files and exited 0.
#[test]
fn a_refused_recover_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    cli::flip(&dir.path().join(first_log(dir.path())), 300);
    let before = common::snapshot(dir.path());
    let out = strata().arg("recover").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "damage found");
    assert!(stdout(&out).starts_with("refused:") && stdout(&out).contains("--force"), "{}", stdout(&out));
    assert_eq!(common::snapshot(dir.path()), before, "the clean-shutdown marker and everything else stay");
    let dry = strata().args(["recover", "--dry-run"]).arg(dir.path()).output().unwrap();
    assert_eq!(dry.status.code(), Some(1), "a dry run finds the damage too");
    assert!(stdout(&dry).contains("would refuse") && stdout(&dry).contains("--force would cut it there"));
    let forced = stdout(&strata().args(["recover", "--dry-run", "--force"]).arg(dir.path()).output().unwrap());
    assert!(forced.contains("would cut the log at"), "{forced}");
    assert_eq!(common::snapshot(dir.path()), before);
    let not_a_log = tempfile::tempdir().unwrap();
    std::fs::write(not_a_log.path().join("notes.txt"), "mine").unwrap();
    std::fs::write(not_a_log.path().join("report.log"), "mine").unwrap();
    strata()
        .arg("recover")
        .arg(not_a_log.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a log directory"));
    assert_eq!(common::file_names(not_a_log.path()), ["notes.txt", "report.log"]);
    let empty = tempfile::tempdir().unwrap();
    strata().arg("recover").arg(empty.path()).assert().code(2);
    assert!(common::file_names(empty.path()).is_empty());
}

#[test]
fn truncate_delete_before_and_compact_confirm_what_they_did() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    strata()
        .args(["truncate", "--to", "50"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("offsets 50–59 removed; the log now ends at 50"));
    strata()
        .args(["truncate", "--to", "45", "--json"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(predicate::str::contains("\"next_after\": 45"));
    strata()
        .args(["delete-before"])
        .arg(dir.path())
        .arg("20")
        .assert()
        .success()
        .stdout(predicate::str::contains("deleted offsets 0–19").and(predicate::str::contains("now starts at 20")));
    let compacted = strata().arg("compact").arg(dir.path()).output().unwrap();
    assert!(compacted.status.success(), "{}", stderr(&compacted));
    assert!(stdout(&compacted).starts_with("compacted ") && stdout(&compacted).contains("clean up to offset"));
    let json: serde_json::Value =
        serde_json::from_slice(&strata().args(["offsets", "--json"]).arg(dir.path()).output().unwrap().stdout).unwrap();
    assert_eq!((json["earliest"].as_u64(), json["latest"].as_u64()), (Some(20), Some(45)));
    strata()
        .args(["truncate", "--to", "5"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("offset 5 out of range [20, 45)"));
    // Never on a directory that holds no log, and never beside a live writer.
    let empty = tempfile::tempdir().unwrap();
    strata().arg("compact").arg(empty.path()).assert().code(2);
    assert!(common::file_names(empty.path()).is_empty());
    let live = strata_log::Log::open(dir.path(), strata_log::LogConfig::default()).unwrap();
    strata().arg("compact").arg(dir.path()).assert().code(2).stderr(predicate::str::contains("locked"));
    drop(live);
}

#[test]
fn help_completions_logging_and_usage_errors() {
    strata().arg("--help").assert().success().stdout(
        predicate::str::contains("Exit codes:")
            .and(predicate::str::contains("130  interrupted"))
            .and(predicate::str::contains("RUST_LOG")),
    );
    strata().args(["verify", "--help"]).assert().success().stdout(predicate::str::contains("Exit codes:"));
    strata().args(["completions", "bash"]).assert().success().stdout(predicate::str::contains("_strata()"));
    strata().args(["completions", "zsh"]).assert().success().stdout(predicate::str::contains("#compdef strata"));
    strata().args(["completions", "tcsh"]).assert().code(2);
    strata().arg("frobnicate").assert().code(2);
    // Log lines on stderr carry no ANSI colour when stderr is not a terminal.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    std::fs::remove_file(dir.path().join(first_log(dir.path()).replace(".log", ".index"))).unwrap();
    let out = strata().args(["-v", "produce"]).arg(dir.path()).write_stdin("x\n").output().unwrap();
    assert!(stderr(&out).contains("INFO") && !stderr(&out).contains('\u{1b}'), "{}", stderr(&out));
    let quiet = strata().args(["-q", "produce"]).arg(dir.path()).write_stdin("x\n").output().unwrap();
    assert_eq!(stderr(&quiet), "");
}

#[test]
fn bench_checks_its_arguments_before_any_work() {
    for (args, flag) in [
        (&["--batch", "0"][..], "--batch"),
        (&["--value-size", "1000000000000"][..], "--value-size"),
        (&["--threads", "0"][..], "--threads"),
        (&["--records", "0"][..], "--records"),
        (&["--runs", "0"][..], "--runs"),
        (&["--batch", "5000"][..], "--batch"),
    ] {
        let started = std::time::Instant::now();
        strata().arg("bench").args(args).assert().code(2).stderr(predicate::str::contains(flag));
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{args:?} failed only after work");
    }
    strata().args(["bench", "--help"]).assert().success().stdout(predicate::str::contains("[default: 2000000"));
}

#[test]
fn bench_prints_a_legend_aligned_columns_and_a_line_per_phase() {
    let dir = tempfile::tempdir().unwrap();
    let out = strata()
        .args(["bench", "--records", "400", "--batch", "10", "--threads", "2", "--producer-threads", "2"])
        .args(["--durable-ops", "8", "--runs", "1", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().take_while(|l| !l.starts_with('[') && !l.is_empty()).collect();
    let header_at = rows[0].find("records/s").unwrap();
    assert!(rows.len() > 10, "{text}");
    for row in &rows[1..] {
        assert_eq!(row[..header_at].len(), header_at, "aligned: {row}");
    }
    assert!(text.contains("fsync regime") && text.contains("[1]"), "notes numbered by phase: {text}");
    assert!(text.contains("p50/p99/p99.9 µs: latency"), "a legend: {text}");
    let finished = stderr(&out).lines().filter(|l| l.starts_with("bench: finished ")).count();
    assert!(finished >= rows.len() - 1, "a line per phase when stderr is not a terminal: {}", stderr(&out));
}
