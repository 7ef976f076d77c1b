//! The `strata` binary: `verify` exit codes (0 clean, 1 damage, 2 usage or I/O error), `dump`
//! of a damaged file up to the damage, `recover` with and without `--force`, `consume` on a live log.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use strata_log::{Log, LogConfig, Record};

fn strata(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).args(args).arg(dir).output().unwrap()
}

/// A closed log of 3 segments; returns the first segment's path.
fn build(dir: &Path) -> std::path::PathBuf {
    let log = Log::open(dir, LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    for offset in 0..60 {
        log.append(&[Record::new(&common::value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    dir.join("00000000000000000000.log")
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn verify_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let first = build(dir.path());
    let clean = strata(&["verify"], dir.path());
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stdout));
    flip(&first, 300);
    let damaged = strata(&["verify", "--json"], dir.path());
    assert_eq!(damaged.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&damaged.stdout).unwrap();
    let finding = &report["findings"][0];
    assert!(finding["file"].as_str().unwrap().ends_with("00000000000000000000.log"), "{report}");
    assert!(finding["position"].as_u64().unwrap() <= 300);
    assert_eq!(strata(&["verify"], &dir.path().join("missing")).status.code(), Some(2));
    let usage = Command::new(env!("CARGO_BIN_EXE_strata")).args(["verify"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "a usage error");
}

#[test]
fn dump_shows_a_damaged_file_up_to_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let first = build(dir.path());
    flip(&first, 300);
    let out =
        Command::new(env!("CARGO_BIN_EXE_strata")).args(["dump", "--json", "--records"]).arg(&first).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "damage found");
    let dump: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let damage = dump[0]["damage"]["position"].as_u64().expect("the damage is shown");
    assert!(damage <= 300);
    let batches = dump[0]["batches"].as_array().unwrap();
    // Every batch before the damage is shown, valid, with its records; a batch whose header was
    // readable but whose contents are damaged is shown too, with the problem as its status.
    let before: Vec<_> = batches.iter().filter(|b| b["position"].as_u64().unwrap() < damage).collect();
    assert!(!before.is_empty() && before.iter().all(|b| b["status"] == "ok" && b["records"].is_array()));
    assert!(batches.iter().filter(|b| b["position"].as_u64().unwrap() >= damage).all(|b| b["status"] != "ok"));
    let text = Command::new(env!("CARGO_BIN_EXE_strata")).arg("dump").arg(dir.path()).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("DAMAGE") && text.contains("checkpoint") && text.contains("time index"), "{text}");
    assert_eq!(
        Command::new(env!("CARGO_BIN_EXE_strata")).arg("dump").arg(dir.path()).output().unwrap().status.code(),
        Some(1),
        "dump exits 1 when it finds damage"
    );
}

#[test]
fn recover_refuses_acknowledged_damage_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let first = build(dir.path());
    // Damage in the active segment, below the recovery point (the log was closed cleanly, so the
    // recovery point is its end): `recover` scans it and refuses to cut acknowledged records.
    let last = common::file_names(dir.path()).into_iter().rfind(|n| n.ends_with(".log")).unwrap();
    flip(&dir.path().join(&last), 100);
    let refused = strata(&["recover"], dir.path());
    assert_eq!(refused.status.code(), Some(1), "strict recovery refuses damage below the recovery point");
    assert!(String::from_utf8_lossy(&refused.stdout).contains("refused"));
    let forced = strata(&["recover", "--force", "--json"], dir.path());
    assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
    let report: serde_json::Value = serde_json::from_slice(&forced.stdout).unwrap();
    assert!(report["acknowledged_records_lost"].as_u64().unwrap() > 0);
    let (before, after) = (&report["before"]["next_offset"], &report["after"]["next_offset"]);
    let removed = before.as_u64().unwrap() - after.as_u64().unwrap();
    let count = |shape: &str, what: &str| report[shape][what].as_u64().unwrap();
    let valid_removed = report["records_removed"].as_u64().unwrap();
    assert_eq!(count("before", "records") - valid_removed, count("after", "records"), "counts add up: {report}");
    assert_eq!(count("before", "bytes") - report["bytes_removed"].as_u64().unwrap(), count("after", "bytes"));
    assert_eq!(
        report["offsets_removed"],
        serde_json::json!([count("after", "next_offset"), before.as_u64().unwrap() - 1])
    );
    assert_eq!(report["acknowledged_records_lost"].as_u64().unwrap(), removed, "all of them acknowledged: {report}");
    assert_eq!(report["files_kept_corrupt"].as_array().unwrap().len(), 1);
    assert!(first.exists());
    assert_eq!(strata(&["verify"], dir.path()).status.code(), Some(0), "recovered log verifies clean");
}

#[test]
fn consume_prints_offsets_and_values_from_a_live_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"alpha"), Record::new(b"beta")]).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_strata")).args(["consume", "--from", "1"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "1\tbeta\n");
    drop(log);
}

#[test]
fn a_compacted_log_verifies_and_dumps_its_cleaner_batches() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    for i in 0..100u32 {
        log.append(&[Record::new(&i.to_be_bytes()).with_key(format!("k{}", i % 3).as_bytes())]).unwrap();
    }
    let report = log.compact().unwrap().unwrap();
    log.close().unwrap();
    let verified = strata(&["verify"], dir.path());
    assert_eq!(verified.status.code(), Some(0), "{}", String::from_utf8_lossy(&verified.stdout));
    let dump = strata(&["dump"], dir.path());
    let text = String::from_utf8_lossy(&dump.stdout);
    assert!(text.contains(&format!("cleaned up to offset {}", report.cleaned_up_to)), "{text}");
    assert!(text.contains("attributes 0x0010"), "cleaner batches carry bit 4: {text}");
}
