//! `strata store recover`: a store whose index was damaged where no cheap check at open looks
//! (the entries, not the header or slots) is reported by `verify` and repaired by `store
//! recover`; a dry run changes nothing; damage in the commit log is refused without `--force`,
//! and with it the commit log is cut, every derived file rebuilt, and the queue offsets cut
//! reported; a live store is refused in one line; `strata recover` on a store root points at
//! `store recover`.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;

use std::path::{Path, PathBuf};

use cli::{stderr, stdout, strata};
use strata_log::{LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 4096, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 1024,
        ..StoreConfig::default()
    }
}

/// A closed store with `n` messages in `orders` queue 0, keyed `order-{i}`.
fn build(root: &Path, n: u64) {
    let store = MessageStore::open(root, config()).unwrap();
    for i in 0..n {
        store
            .put(
                &Message::new("orders", 0, format!("message {i:04} {}", "x".repeat(100)))
                    .with_keys([format!("order-{i}")]),
            )
            .unwrap();
    }
    store.close().unwrap();
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                all.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn damage_in_the_index_entries_is_verified_then_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    build(root, 20);
    let idx = files(&root.join("index"), ".idx").remove(0);
    // Entry 5's log offset (header 40 bytes, 64 slots of 4, entries of 20: log offset at +4).
    let at = 40 + 64 * 4 + 5 * 20 + 4 + 7;
    let mut bytes = std::fs::read(&idx).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(&idx, bytes).unwrap();
    strata().arg("verify").arg(root).assert().code(1);

    let before = snapshot(root);
    let out = strata().args(["store", "recover", "--dry-run"]).arg(root).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("would rebuild"), "{}", stdout(&out));
    assert_eq!(snapshot(root), before, "a dry run changes nothing");

    let out = strata().args(["store", "recover"]).arg(root).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("rebuilt every derived file"), "{}", stdout(&out));
    let out = strata().arg("verify").arg(root).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    let store = MessageStore::open(root, config()).unwrap();
    for i in 0..20u64 {
        let found = store.query_by_key("orders", &format!("order-{i}"), 0, i64::MAX, 10).unwrap();
        assert_eq!(found.len(), 1, "order-{i} found once after the rebuild");
    }
    assert_eq!(store.put(&Message::new("orders", 0, "next")).unwrap().queue_offset, 20);
}

#[test]
fn commit_log_damage_is_refused_then_cut_with_force_reporting_the_queue_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    build(root, 200);
    let segments = files(&root.join("commitlog"), ".log");
    assert!(segments.len() >= 3, "{segments:?}");
    let damaged = &segments[1];
    let mut bytes = std::fs::read(damaged).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(damaged, bytes).unwrap();

    let before = snapshot(root);
    let out = strata().args(["store", "recover"]).arg(root).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).starts_with("refused:"), "{}", stdout(&out));
    assert_eq!(snapshot(root), before, "a refusal changes nothing");

    let out = strata().args(["store", "recover", "--force", "--json"]).arg(root).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cut = &report["queue_offsets_cut"][0];
    assert_eq!(cut["topic"], "orders", "{report}");
    let [first, last] = [cut["offsets"][0].as_u64().unwrap(), cut["offsets"][1].as_u64().unwrap()];
    assert_eq!(last, 199, "{report}");
    let store = MessageStore::open(root, config()).unwrap();
    assert_eq!(store.max_queue_offset("orders", 0).unwrap(), first, "the queue ends where the cut began");
    let got = store.get_messages("orders", 0, 0, 1000, None).unwrap();
    assert_eq!(got.messages.len() as u64, first);
    assert_eq!(
        store.put(&Message::new("orders", 0, "next")).unwrap().queue_offset,
        first,
        "the cut offsets are handed out again"
    );
}

#[test]
fn a_live_store_is_refused_and_a_store_root_is_not_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    build(root, 3);
    let out = strata().arg("recover").arg(root).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("strata store recover"), "{}", stderr(&out));
    let store = MessageStore::open(root, config()).unwrap();
    let out = strata().args(["store", "recover"]).arg(root).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("open in another process"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    store.close().unwrap();
}
