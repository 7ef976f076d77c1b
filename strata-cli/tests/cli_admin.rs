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
    strata().args(["dump", "--index-sanity-check"]).arg(&index).assert().code(1).stdout(
        predicate::str::contains("FAILED")
            .and(predicate::str::contains("position 8: index entry 1: relative offset 1 does not increase past 5")),
    );
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
    let mut lowered = strata_log::internals::Checkpoint::decode(&checkpoint).unwrap();
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
    assert!(
        predicate::str::is_match(r"removed \d+ B of torn or damaged data \(no whole record\) from the end")
            .unwrap()
            .eval(&text),
        "the torn batch was no whole record: {text}"
    );
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
        (&["--store-messages", "0"][..], "--store-messages"),
        (&["--store-seconds", "0"][..], "--store-seconds"),
        (&["--section", "disk"][..], "--section"),
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
        .args(["--durable-ops", "8", "--runs", "1", "--store-seconds", "0.2", "--store-messages", "300", "--dir"])
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

fn log_bases(dir: &std::path::Path) -> Vec<u64> {
    common::file_names(dir).iter().filter_map(|n| n.strip_suffix(".log")).map(|b| b.parse().unwrap()).collect()
}

fn json_of(args: &[&str], dir: &std::path::Path) -> serde_json::Value {
    let out = strata().args(args).arg(dir).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)))
}

/// Regression: an empty stray `.log` made `verify` report two errors, one against the healthy
/// segment after it; `recover` and its dry run repeated both and promised a cut keeping a
/// `.corrupt` copy, though `--force` only sets the stray file aside; `produce` hinted at
/// `.corrupt` too. A foreign file is one finding naming it, and every command says what
/// `--force` really does with it.
#[test]
fn a_foreign_file_is_one_finding_and_force_sets_it_aside() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 200);
    let bases = log_bases(dir.path());
    let stray = format!("{:020}.log", bases[3] + 1);
    std::fs::write(dir.path().join(&stray), b"").unwrap();
    let before = common::snapshot(dir.path());

    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(errors[0].contains(&stray) && errors[0].contains("foreign: "), "{text}");
    assert!(errors[0].contains("`strata recover --force` sets it aside as .foreign"), "{text}");
    assert!(!text.contains("missing: the next open rebuilds"), "its indexes are not the log's: {text}");
    let json = json_of(&["verify", "--json"], dir.path());
    assert_eq!(json["findings"][0]["foreign"], true, "{json}");

    let dry = strata().args(["recover", "--dry-run"]).arg(dir.path()).output().unwrap();
    assert_eq!(dry.status.code(), Some(1), "refused without --force: {}", stdout(&dry));
    assert!(stdout(&dry).contains("--force would set it aside as .foreign, losing nothing"), "{}", stdout(&dry));
    let forced_dry = strata().args(["recover", "--dry-run", "--force"]).arg(dir.path()).output().unwrap();
    assert_eq!(forced_dry.status.code(), Some(0), "{}", stdout(&forced_dry));
    assert!(stdout(&forced_dry).contains(&format!("would set aside {}", dir.path().join(&stray).display())));
    let refused = strata().arg("recover").arg(dir.path()).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    for text in [stdout(&dry), stdout(&forced_dry), stdout(&refused)] {
        assert!(!text.contains(".corrupt") && !text.contains("cut"), "{text}");
        for base in &bases {
            assert!(!text.contains(&format!("{base:020}.log")), "a healthy segment named: {text}");
        }
    }
    assert!(common::snapshot(dir.path()) == before, "nothing changed");
    let produced = strata().arg("produce").arg(dir.path()).write_stdin("x\n").output().unwrap();
    assert_eq!(produced.status.code(), Some(1));
    assert!(stderr(&produced).contains("sets it aside as .foreign"), "{}", stderr(&produced));
    assert!(!stderr(&produced).contains(".corrupt"), "{}", stderr(&produced));

    // --force sets it aside and says so; verify notes the copy; dump reads it as a segment.
    let forced = json_of(&["-q", "recover", "--force", "--json"], dir.path());
    let kept = dir.path().join(format!("{stray}.foreign"));
    assert_eq!(forced["files_kept_foreign"], serde_json::json!([kept]), "{forced}");
    assert_eq!(forced["acknowledged_records_lost"], 0);
    assert_eq!(forced["before"]["records"], forced["after"]["records"]);
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains(&format!("note: {}: a file that did not belong to the log", kept.display())));
    strata().arg("dump").arg(&kept).assert().success().stdout(predicate::str::contains(": segment, 0 batches"));
    strata().args(["consume", "-q"]).arg(dir.path()).assert().success();

    // A copy of a segment under a base inside the one before it is foreign too; the text of a
    // real recover lists what was set aside.
    let copy = format!("{:020}.log", bases[1] + 1);
    std::fs::copy(dir.path().join(format!("{:020}.log", bases[1])), dir.path().join(&copy)).unwrap();
    let text = stdout(&strata().arg("verify").arg(dir.path()).output().unwrap());
    assert_eq!(text.matches("error: ").count(), 1, "{text}");
    assert!(text.contains(&format!("{copy}: foreign: its base offset falls inside")), "{text}");
    let out = strata().args(["-q", "recover", "--force"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!("set aside {}.foreign", dir.path().join(&copy).display())));
    strata().args(["dump", "--records"]).arg(dir.path().join(format!("{copy}.foreign"))).assert().code(1);
}

/// Regression: `recover --force --json` reported before.records 182, records_removed 113,
/// after.records 87; a torn tail kept before.bytes = after.bytes with bytes_removed 39; the dry
/// run said 0 lost where the real run lost 113. The counts add up and the dry run estimates.
#[test]
fn recover_counts_add_up_and_the_dry_run_estimates_them() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 200);
    cli::flip(&dir.path().join(first_log(dir.path())), 300);
    let dry = json_of(&["recover", "--dry-run", "--force", "--json"], dir.path());
    let real = json_of(&["-q", "recover", "--force", "--json"], dir.path());
    let n = |v: &serde_json::Value, path: &[&str]| path.iter().fold(v, |v, k| &v[*k]).as_u64().unwrap();
    assert_eq!(n(&real, &["before", "records"]) - n(&real, &["records_removed"]), n(&real, &["after", "records"]));
    assert_eq!(n(&real, &["before", "bytes"]) - n(&real, &["bytes_removed"]), n(&real, &["after", "bytes"]));
    let offsets = real["offsets_removed"].as_array().unwrap();
    assert_eq!(offsets[0].as_u64(), real["after"]["next_offset"].as_u64(), "{real}");
    assert_eq!(offsets[1].as_u64(), Some(199));
    assert_eq!(n(&real, &["acknowledged_records_lost"]), 200 - n(&real, &["after", "next_offset"]));
    assert!(n(&real, &["damaged_bytes_removed"]) > 0, "{real}");
    for key in ["records_removed", "bytes_removed", "offsets_removed", "acknowledged_records_lost"] {
        assert_eq!(dry[key], real[key], "the dry run estimates {key}: {dry}\n{real}");
    }
    assert!(dry["damaged_bytes_removed"].is_null(), "unknown until cut: {dry}");
    // The text says the same, and where the damaged data went.
    let again = tempfile::tempdir().unwrap();
    build(again.path(), 200);
    cli::flip(&again.path().join(first_log(again.path())), 300);
    let plan = stdout(&strata().args(["recover", "--dry-run"]).arg(again.path()).output().unwrap());
    let lost = n(&real, &["acknowledged_records_lost"]);
    assert!(plan.contains(&format!("losing about {lost} acknowledged records")), "{plan}");
    let text = stdout(&strata().args(["-q", "recover", "--force"]).arg(again.path()).output().unwrap());
    assert!(text.contains(&format!("lost {lost} acknowledged records (below the recovery point)")), "{text}");
    assert!(text.contains("of torn or damaged data"), "{text}");
}

#[test]
fn offsets_on_a_live_log_a_compacted_log_and_beside_a_stray_segment() {
    let dir = tempfile::tempdir().unwrap();
    let live = strata_log::Log::open(dir.path(), strata_log::LogConfig::default()).unwrap();
    for i in 0..6 {
        live.append(&[strata_log::Record::new(format!("v{i}").as_bytes())]).unwrap();
    }
    let text = stdout(&strata().arg("offsets").arg(dir.path()).output().unwrap());
    assert!(text.contains("durable         at least 0  (open in a writer"), "{text}");
    assert!(text.contains("all 6 if it flushes always, the default"), "{text}");
    assert!(json_of(&["offsets", "--json"], dir.path())["live"] == true);
    strata().args(["recover", "--dry-run"]).arg(dir.path()).assert().code(2).stderr(predicate::str::contains("locked"));
    live.close().unwrap();
    assert!(json_of(&["offsets", "--json"], dir.path())["live"] == false);

    let compacted = tempfile::tempdir().unwrap();
    build(compacted.path(), 60);
    strata().arg("compact").arg(compacted.path()).assert().success();
    let text = stdout(&strata().arg("offsets").arg(compacted.path()).output().unwrap());
    assert!(text.contains("records         at most 60  (compacted"), "{text}");

    let stray = tempfile::tempdir().unwrap();
    build(stray.path(), 60);
    std::fs::write(stray.path().join("00000000000000005000.log"), b"").unwrap();
    let text = stdout(&strata().arg("offsets").arg(stray.path()).output().unwrap());
    assert!(text.contains("latest          60\n") && text.contains("foreign file"), "{text}");
    // consume stops where the data does, blaming no healthy segment.
    let out = strata().args(["consume", "--from", "58"]).arg(stray.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "58\tvalue-58\n59\tvalue-59\n");
}

/// Regression: `dump` on a live log failed now and then with `stat …index.prealloc: No such
/// file or directory`: a file that vanishes between the listing and its reading is left out.
#[test]
fn dump_on_a_live_log_skips_files_that_vanish() {
    let dir = tempfile::tempdir().unwrap();
    let config = strata_log::LogConfig {
        segment_bytes: 1024,
        flush_policy: strata_log::FlushPolicy::Never,
        ..strata_log::LogConfig::default()
    };
    let log = strata_log::Log::open(dir.path(), config).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                log.append(&[strata_log::Record::new(format!("value-{i}").as_bytes())]).unwrap();
                i += 1;
                if i.is_multiple_of(50) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        });
        for _ in 0..30 {
            let out = strata().args(["-q", "dump"]).arg(dir.path()).output().unwrap();
            assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
            assert!(!stderr(&out).contains("No such file"), "{}", stderr(&out));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

/// `verify … | head -1` still exits 1 when it found damage: a closed pipe ends the output, it
/// does not change the verdict. Findings come in a stable order; grammar.
#[test]
fn verdicts_survive_a_closed_pipe_and_findings_are_ordered() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let bases = log_bases(dir.path());
    for base in [bases[3], bases[1]] {
        std::fs::remove_file(dir.path().join(format!("{base:020}.timeindex"))).unwrap();
    }
    std::fs::write(dir.path().join("00000000000000099999.index"), [0u8; 8]).unwrap();
    cli::flip(&dir.path().join(first_log(dir.path())), 300);
    let text = stdout(&strata().arg("verify").arg(dir.path()).output().unwrap());
    let files: Vec<&str> = text.lines().filter(|l| l.starts_with("note: ")).collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted, "{text}");
    for args in [&["verify"][..], &["dump"], &["recover", "--dry-run"]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("-q")
            .args(args)
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        assert_eq!(child.wait().unwrap().code(), Some(1), "{args:?}");
    }
    let empty = tempfile::tempdir().unwrap();
    strata().arg("dump").arg(empty.path()).assert().code(2).stderr(predicate::str::contains("holds no log"));
    let index = dir.path().join(format!("{:020}.index", bases[2]));
    std::fs::write(&index, [0, 0, 0, 1, 0, 0, 0, 50]).unwrap();
    strata().arg("dump").arg(&index).assert().stdout(predicate::str::contains("offset index, 1 entry\n"));
}

/// Regression: `bench … 2>&1 >/dev/null | head -1` panicked on the closed stderr.
#[test]
fn bench_survives_a_closed_stderr_and_refuses_what_it_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    strata()
        .args(["bench", "--records", "99999999999999", "--dir"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--records"));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(common::file_names(dir.path()).is_empty(), "nothing left behind");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "--records", "10", "--runs", "1", "--durable-ops", "5", "--threads", "2"])
        .args(["--producer-threads", "2", "--store-seconds", "0.2", "--store-messages", "30", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    assert_eq!(child.wait().unwrap().code(), Some(0), "no panic on a closed stderr");
    assert!(common::file_names(dir.path()).is_empty(), "nothing left behind");
}
