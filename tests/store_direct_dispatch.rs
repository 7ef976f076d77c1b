//! A put dispatches its own batch from what it holds (its fields, its records' sizes), not by
//! reading it back from the commit log. What it builds must be what dispatch from the log builds:
//! the consume-queue files and index files of a store whose puts built them are byte for byte
//! those its reopen rebuilds from the commit log once they are deleted — single puts and batches
//! (up to 100 records, so record offset deltas take two bytes), tags, keys, several queues.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

fn config(policy: FlushPolicy) -> StoreConfig {
    StoreConfig {
        log: LogConfig { flush_policy: policy, segment_bytes: 64 << 10, ..StoreConfig::default().log },
        queue_entries_per_file: 100,
        index_slots: 1_000,
        index_entries: 400,
        ..StoreConfig::default()
    }
}

/// Every derived file under `root` (queues and index), by relative path.
fn derived_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for dir in ["consumequeue", "index"] {
        collect(root, &root.join(dir), &mut files);
    }
    files
}

fn collect(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let name = path.strip_prefix(root).unwrap().display().to_string();
            files.insert(name, std::fs::read(&path).unwrap());
        }
    }
}

fn message(i: u64) -> Message {
    let mut message = Message::new(
        ["a", "b"][(i % 2) as usize],
        (i % 3) as u32,
        format!("body {i} {}", "x".repeat((i % 50) as usize)),
    );
    if !i.is_multiple_of(4) {
        message = message.with_tag(["red", "blue"][(i % 3 % 2) as usize]);
    }
    match i % 5 {
        0 => message,
        1 => message.with_keys([format!("k{i}")]),
        _ => message.with_keys([format!("k{i}"), format!("shared{}", i % 7)]),
    }
}

fn run(policy: FlushPolicy) {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config(policy)).unwrap();
    let mut i = 0;
    for round in 0..40u64 {
        if round % 3 == 0 {
            // A batch: one topic and queue, up to 100 records.
            let size = [2, 17, 64, 65, 100][(round % 5) as usize];
            let first = message(i);
            let batch: Vec<Message> = (0..size)
                .map(|k| {
                    let m = message(i + k);
                    Message::new(first.topic(), first.queue_id(), m.body().to_vec()).with_keys(m.keys().to_vec())
                })
                .collect();
            store.put_batch(&batch).unwrap();
            i += size;
        } else {
            store.put(&message(i)).unwrap();
            i += 1;
        }
    }
    store.close().unwrap();
    let built = derived_files(dir.path());
    assert!(built.keys().any(|k| k.ends_with(".cq")) && built.keys().any(|k| k.ends_with(".idx")));
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    std::fs::remove_file(dir.path().join("store.checkpoint")).unwrap();
    let store = MessageStore::open(dir.path(), config(policy)).unwrap();
    store.close().unwrap();
    let rebuilt = derived_files(dir.path());
    assert_eq!(built.keys().collect::<Vec<_>>(), rebuilt.keys().collect::<Vec<_>>(), "the same files");
    for (name, bytes) in &built {
        let first_difference = bytes.iter().zip(&rebuilt[name]).position(|(a, b)| a != b);
        assert_eq!(
            first_difference, None,
            "{name}: built by puts and rebuilt from the log differ (byte {first_difference:?})"
        );
        assert_eq!(bytes.len(), rebuilt[name].len(), "{name}: lengths");
    }
}

#[test]
fn puts_build_what_dispatch_from_the_log_builds_every_interval() {
    run(FlushPolicy::EveryInterval { ms: 5, messages: 1_000 });
}

#[test]
fn puts_build_what_dispatch_from_the_log_builds_always() {
    run(FlushPolicy::Always);
}
