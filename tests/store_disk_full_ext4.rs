//! The message store on a full disk, for real (a small ext4 filled by another writer): puts fail
//! with a clear error and no panic, what was acknowledged stays readable, the store closes and
//! reopens with every acknowledged message once, and works again once space returns.
//!
//! Needs root and loop devices: `cargo test --all-features --test store_disk_full_ext4 -- --ignored`.
#![allow(clippy::unwrap_used)]

mod common;

use common::ext4::{Mount, fill};
use strata_log::{LogConfig, Message, MessageStore, PutResult, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig {
            segment_bytes: 1 << 20,
            index_bytes: 64 << 10,
            file_delete_delay_ms: 0,
            ..StoreConfig::default().log
        },
        queue_entries_per_file: 1024,
        index_slots: 1024,
        index_entries: 4096,
        flush_interval_ms: 20,
        offsets_flush_ms: 20,
        ..StoreConfig::default()
    }
}

fn message(i: u64) -> Message {
    let topic = ["a", "b", "c"][(i % 3) as usize];
    let body = format!("{i:08}-{}", "x".repeat(1500));
    Message::new(topic, (i % 4) as u32, body).with_keys([format!("k{i}")])
}

fn check(store: &MessageStore, acked: &[(u64, PutResult)]) {
    for (i, put) in acked {
        let m = message(*i);
        let got = store.get_messages(m.topic(), m.queue_id(), put.queue_offset, 1, None).unwrap();
        let found = got.messages.first().unwrap_or_else(|| panic!("put {i} at {put:?} missing: {got:?}"));
        assert_eq!((found.body(), found.log_offset()), (m.body(), put.log_offset), "put {i}");
        let by_key = store.query_by_key(m.topic(), &format!("k{i}"), 0, i64::MAX, 4).unwrap();
        assert_eq!(by_key.len(), 1, "put {i} by key: {by_key:?}");
    }
}

#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test store_disk_full_ext4 -- --ignored"]
fn a_store_on_a_full_ext4_and_after() {
    let mount = Mount::new(32, None);
    let root = mount.path().join("store");
    let store = MessageStore::open(&root, config()).unwrap();
    let mut acked = Vec::new();
    let mut i = 0u64;
    while i < 200 {
        acked.push((i, store.put(&message(i)).unwrap()));
        i += 1;
    }
    let filler = fill(mount.path());
    let mut errors = Vec::new();
    while errors.len() < 50 && i < 100_000 {
        match store.put(&message(i)) {
            Ok(put) => acked.push((i, put)),
            Err(error) => errors.push((i, error.to_string())),
        }
        i += 1;
    }
    eprintln!("{} acknowledged, first errors: {:?}", acked.len(), &errors[..errors.len().min(3)]);
    assert!(!errors.is_empty(), "the disk never filled");
    assert!(
        errors.iter().all(|(_, e)| e.contains("disk full") || e.contains("No space") || e.contains("space")),
        "{errors:?}"
    );
    check(&store, &acked);
    store.commit_offset("g", "a", 0, 3).unwrap();
    let closed = store.close();
    eprintln!("close on a full disk: {closed:?}");

    assert!(closed.is_err(), "the store checkpoint needs a block");

    // Opens on the full disk (recovering, as the close failed), and can delete messages. A put
    // there is stored (room left in the active segment) or refused as disk full, never worse.
    let store = MessageStore::open(&root, config()).unwrap();
    check(&store, &acked);
    match store.put(&message(i)) {
        Ok(put) => acked.push((i, put)),
        Err(error) => assert!(error.to_string().contains("disk full"), "{error}"),
    }
    i += 1;
    check(&store, &acked);
    let start = store.delete_messages_before(acked[acked.len() / 2].1.log_offset).unwrap();
    acked.retain(|(_, put)| put.log_offset >= start);
    check(&store, &acked);
    eprintln!("close of the reopened store on a full disk: {:?}", store.close());
    std::fs::remove_file(&filler).unwrap();
    let store = MessageStore::open(&root, config()).unwrap();
    check(&store, &acked);
    // Numbering goes on without reuse.
    for _ in 0..50 {
        let m = message(i);
        let before = store.max_queue_offset(m.topic(), m.queue_id()).unwrap();
        let put = store.put(&m).unwrap();
        assert_eq!(put.queue_offset, before);
        acked.push((i, put));
        i += 1;
    }
    check(&store, &acked);
    store.close().unwrap();
}
