//! `strata dump` and `strata verify` on a message store's files: a `.cq` and an `.idx` dumped,
//! a clean store verified, a damaged queue entry named, a garbage `.idx` a clear finding.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};

use cli::{assert_no_debug, stderr, stdout, strata};
use strata_log::{LogConfig, Message, MessageStore, StoreConfig};

/// A closed store: 6 messages alternating between `orders` queues 0 and 1, keyed, with a tag.
fn build(root: &Path) {
    let config = StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 1024,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(root, config).unwrap();
    for i in 0..6u32 {
        let message = Message::new("orders", i % 2, format!("m{i}")).with_tag("t").with_keys([format!("k{i}")]);
        store.put(&message).unwrap();
    }
    store.close().unwrap();
}

fn queue_file(root: &Path, queue: u32) -> PathBuf {
    root.join(format!("consumequeue/orders/{queue}/00000000000000000000.cq"))
}

fn index_file(root: &Path) -> PathBuf {
    root.join("index/00000000000000000000.idx")
}

#[test]
fn dump_shows_queue_and_index_entries() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let out = strata().arg("dump").arg(queue_file(dir.path(), 1)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("consume queue from queue offset 0, 3 entries of 16 slots, then 13 unused"), "{text}");
    assert!(text.contains("queue offset          2  log offset            5"), "{text}");
    assert_no_debug(&text);
    let out = strata().args(["dump", "--json"]).arg(index_file(dir.path())).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["kind"], "index_file");
    assert_eq!(json[0]["header"]["index_count"], 6);
    assert_eq!(json[0]["entries"][5]["log_offset"], 5);
    assert_eq!(
        json[0]["slots_used"].as_u64().unwrap(),
        6 - json[0]["entries"].as_array().unwrap().iter().filter(|e| e["prev_entry"] != 0).count() as u64
    );
}

#[test]
fn verify_of_a_clean_store_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("2 queues with 6 entries, 1 index file with 6 entries"), "{text}");
    assert_eq!(text.lines().last(), Some("clean"), "{text}");
}

#[test]
fn verify_names_a_queue_entry_pointing_at_another_message() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let path = queue_file(dir.path(), 0);
    let mut bytes = std::fs::read(&path).unwrap();
    // Entry 1 of queue 0 is log offset 2; make it 3, a message of queue 1.
    bytes[20..28].copy_from_slice(&3u64.to_be_bytes());
    std::fs::write(&path, bytes).unwrap();
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let error = text.lines().find(|l| l.starts_with("error: ")).unwrap();
    assert!(error.contains(&format!("{} at position 20", path.display())), "{text}");
    assert!(error.contains("queue 1"), "{text}");
}

#[test]
fn a_garbage_index_file_is_a_clear_finding_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let path = index_file(dir.path());
    std::fs::write(&path, vec![0xff; 100]).unwrap();
    let dump = strata().arg("dump").arg(&path).output().unwrap();
    assert_eq!(dump.status.code(), Some(1), "{}", stderr(&dump));
    assert!(
        stdout(&dump).contains("DAMAGE in") && stdout(&dump).contains("not a valid index file"),
        "{}",
        stdout(&dump)
    );
    assert!(!stderr(&dump).contains("panicked"), "{}", stderr(&dump));
    let verify = strata().arg("verify").arg(dir.path()).output().unwrap();
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    assert!(stdout(&verify).contains(&format!("error: {}", path.display())), "{}", stdout(&verify));
    std::fs::write(&path, b"x").unwrap();
    let short = strata().arg("dump").arg(&path).output().unwrap();
    assert_eq!(short.status.code(), Some(1), "a truncated file: {}", stderr(&short));
}
