//! What a careful adopter trips over first, each a behaviour of its own:
//! - `delete-before` past the end of the log is an error (it deleted everything, exit 0), and
//!   `--clamp` asks for that explicitly;
//! - `--max-batch-bytes` raises the 1 MiB record limit of `produce`;
//! - an error is one line on stderr (it was repeated as timestamped WARN lines);
//! - `consume --from` after `--to` is a usage error (it printed nothing, exit 0);
//! - `strata recover` rebuilds an index with the interval the log was made with (it used the
//!   default: an index of 38 entries came back with 0).
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;
mod common;

use cli::{build, stderr, stdout, strata};
use predicates::prelude::*;

fn offsets(dir: &std::path::Path) -> (u64, u64) {
    let out = strata().args(["offsets", "--json"]).arg(dir).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (json["earliest"].as_u64().unwrap(), json["latest"].as_u64().unwrap())
}

#[test]
fn delete_before_past_the_end_is_refused_unless_clamped() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 30);
    strata().args(["delete-before"]).arg(dir.path()).arg("500").assert().code(2).stderr(predicate::str::contains(
        "offset 500 is past the end of the log (next offset 30); nothing was deleted",
    ));
    assert_eq!(offsets(dir.path()), (0, 30), "nothing deleted");
    strata()
        .args(["delete-before", "--clamp"])
        .arg(dir.path())
        .arg("500")
        .assert()
        .success()
        .stdout(predicate::str::contains("now starts at 30"));
    assert_eq!(offsets(dir.path()), (30, 30));
}

#[test]
fn max_batch_bytes_raises_the_record_limit() {
    let dir = tempfile::tempdir().unwrap();
    let big = format!("{}\n", "x".repeat(2 << 20));
    let refused = strata().arg("produce").arg(dir.path()).write_stdin(big.clone()).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("--max-batch-bytes"), "{}", stderr(&refused));
    strata().args(["produce", "--max-batch-bytes", "4194304"]).arg(dir.path()).write_stdin(big).assert().success();
    strata()
        .args(["consume", "--format", "%o %S"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(format!("0 {}\n", 2 << 20));
    strata().args(["produce", "--max-batch-bytes", "67108865"]).arg(dir.path()).write_stdin("x\n").assert().code(2);
}

#[test]
fn an_error_is_one_line_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 60);
    let first = common::file_names(dir.path()).into_iter().find(|n| n.ends_with(".log")).unwrap();
    cli::flip(&dir.path().join(first), 100);
    let out = strata().arg("consume").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("strata: corrupt ") && err.contains("strata recover --force"), "{err}");
    // The repair's summary is on stdout; stderr repeats none of it without -v.
    let out = strata().args(["recover", "--force"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "stdout:\n{}", stdout(&out));
    let verbose = strata().args(["-v", "recover"]).arg(dir.path()).output().unwrap();
    assert!(stderr(&verbose).contains("INFO"), "-v shows the library's log lines: {}", stderr(&verbose));
}

#[test]
fn consume_from_after_to_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 20);
    strata()
        .args(["consume", "--from", "10", "--to", "5"])
        .arg(dir.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--from 10 is after --to 5"));
    // A start that only the log's state puts after --to (retention moved the start) is no usage
    // error: nothing to print.
    strata().args(["consume", "--from", "end-2", "--to", "5"]).arg(dir.path()).assert().success().stdout("");
    strata().args(["consume", "--from", "5", "--to", "5"]).arg(dir.path()).assert().success().stdout("");
}

/// Entries of an index file, from `strata dump --json`.
fn index_entries(path: &std::path::Path) -> usize {
    let out = strata().args(["dump", "--json"]).arg(path).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json[0]["entries"].as_array().unwrap().len()
}

#[test]
fn recover_rebuilds_an_index_with_the_interval_the_log_was_made_with() {
    let dir = tempfile::tempdir().unwrap();
    let lines: String = (0..200).map(|i| format!("record number {i}\n")).collect();
    strata()
        .args(["produce", "--index-interval-bytes", "100", "--segment-bytes", "1048576"])
        .arg(dir.path())
        .write_stdin(lines)
        .assert()
        .success();
    let index = dir.path().join("00000000000000000000.index");
    let entries = index_entries(&index);
    assert!(entries > 30, "{entries} entries");
    std::fs::remove_file(&index).unwrap();
    strata().arg("recover").arg(dir.path()).assert().success();
    assert_eq!(index_entries(&index), entries, "rebuilt with the recorded interval");
    // A later produce keeps the log's parameters too.
    strata().arg("produce").arg(dir.path()).write_stdin("one more\n").assert().success();
    let meta = strata().args(["dump", "--json"]).arg(dir.path().join("log.meta")).output().unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&meta.stdout).unwrap();
    assert_eq!(meta[0]["meta"]["index_interval_bytes"].as_u64(), Some(100), "{meta}");
    assert_eq!(meta[0]["meta"]["segment_bytes"].as_u64(), Some(1 << 20), "{meta}");
}

/// Regression (review): the store commands opened the commit log with the default index
/// parameters, so even `store get` recorded them over the ones the store was made with.
#[test]
fn store_commands_keep_the_commit_logs_recorded_parameters() {
    use strata_log::{LogConfig, Message, MessageStore, StoreConfig};
    let root = tempfile::tempdir().unwrap();
    let log = LogConfig {
        segment_bytes: 1 << 20,
        index_bytes: 4 << 20,
        index_interval_bytes: 512,
        ..StoreConfig::default().log
    };
    let config = StoreConfig { log, index_slots: 1000, index_entries: 4000, ..StoreConfig::default() };
    let store = MessageStore::open(root.path(), config).unwrap();
    store.put(&Message::new("t", 0, "hello")).unwrap();
    store.close().unwrap();
    strata().args(["store", "get", "--topic", "t", "--queue", "0"]).arg(root.path()).assert().success();
    let meta = root.path().join("commitlog").join("log.meta");
    let out = strata().args(["dump", "--json"]).arg(&meta).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["meta"]["index_interval_bytes"].as_u64(), Some(512), "{json}");
    assert_eq!(json[0]["meta"]["index_bytes"].as_u64(), Some(4 << 20), "{json}");
}

/// A command that only reads says what a directory of other files is not; only a command that
/// writes says it refuses to write (read-only commands said "refusing to write into it").
#[test]
fn read_only_commands_on_a_directory_that_is_not_a_log_say_so_truly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let not_a_log = format!(
        "strata: {} is not a log directory (no .log segment, checkpoint or log.meta found; it holds other files)",
        dir.path().display()
    );
    for command in [&["verify"][..], &["consume"], &["offsets"]] {
        let out = strata().args(command).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert_eq!(stderr(&out).trim(), not_a_log, "{command:?}");
    }
    let out = strata().args(["truncate", "--to", "5"]).arg(dir.path()).output().unwrap();
    assert_eq!(stderr(&out).trim(), format!("{not_a_log}; refusing to write into it"));
    let out = strata().arg("recover").arg(dir.path()).output().unwrap();
    assert!(stderr(&out).contains("not a log directory (no .log segment, checkpoint or log.meta found)"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing written");
}

/// A whole batch a newer build wrote (its CRC valid, an attribute bit this build does not know)
/// is neither damage nor a torn tail: `verify` and `recover --force` say so (exit 2) and change
/// nothing (recovery cut such a batch as a torn tail).
#[test]
fn verify_and_recover_refuse_a_batch_of_a_newer_format() {
    use strata_log::internals::format::{ATTRIBUTES_POS, BATCH_LENGTH_POS, CHECKPOINT_FILE, CRC_POS, LOG_OVERHEAD};
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 5);
    // As a crash before any checkpoint leaves it: every batch is past the recovery point.
    std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap();
    let segment = dir.path().join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let batch_len = |b: &[u8], at: usize| {
        LOG_OVERHEAD + u32::from_be_bytes(b[at + BATCH_LENGTH_POS..][..4].try_into().unwrap()) as usize
    };
    let (mut last, mut at) = (0, 0);
    while at + LOG_OVERHEAD <= bytes.len() && bytes[at..at + LOG_OVERHEAD].iter().any(|&b| b != 0) {
        last = at;
        at += batch_len(&bytes, at);
    }
    bytes[last + ATTRIBUTES_POS] |= 0x01; // attribute bit 8
    let crc = crc32fast::hash(&bytes[last + ATTRIBUTES_POS..at]);
    bytes[last + CRC_POS..last + CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&segment, bytes).unwrap();
    let before = common::snapshot(dir.path());
    for command in [&["verify"][..], &["recover", "--force"]] {
        let out = strata().args(command).arg(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(said.contains(&format!("the batch at position {last} has attributes")), "{said}");
        assert!(said.contains("not damage") && said.contains("changed nothing"), "{said}");
    }
    assert_eq!(common::snapshot(dir.path()), before, "nothing cut");
}
