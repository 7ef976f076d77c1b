//! The index takes puts ahead of its files (up to 64, put in together): when the index cannot
//! roll (a full disk) or its active file is poisoned, that must look as it did when every put
//! went in at once — the put whose key needs the new file fails (dispatch stops there and
//! retries), `query_by_key` goes on answering from the files, the store checkpoint goes on
//! advancing up to the stuck message, and nothing acknowledged is lost once space returns.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

static SERIAL: Mutex<()> = Mutex::new(());

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        flush_interval_ms: 50,
        queue_entries_per_file: 1024,
        index_slots: 16,
        index_entries: 64,
        ..StoreConfig::default()
    }
}

fn message(i: u64) -> Message {
    Message::new("t", 0, format!("m{i}")).with_keys([format!("k{i}")])
}

/// A new store at `root` holding messages 0..100, each with its key.
fn with_100_keys(root: &std::path::Path) -> MessageStore {
    let store = MessageStore::open(root, config()).unwrap();
    for i in 0..100 {
        store.put(&message(i)).unwrap();
    }
    store
}

fn by_key(store: &MessageStore, i: u64) -> strata_log::Result<usize> {
    store.query_by_key("t", &format!("k{i}"), 0, i64::MAX, 4).map(|found| found.len())
}

/// The index cannot create its next file (the disk is full for it): puts, queries of keys in
/// the files, and the checkpoint.
#[test]
fn a_full_disk_at_an_index_roll() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    // 100 keys: the first file (63 entries) is full, the second holds 37.
    let store = with_100_keys(&root);
    assert_eq!(by_key(&store, 0).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(300));
    let checkpoints_before = store.metrics().checkpoints;

    let index_dir = root.join("index");
    fail::cfg("fallocate_enospc", &format!("return({})", index_dir.display())).unwrap();
    let mut outcomes = Vec::new();
    for i in 100..200 {
        outcomes.push((i, store.put(&message(i)).map(|_| ()).map_err(|e| e.to_string())));
    }
    let first_failed = outcomes.iter().find(|(_, r)| r.is_err()).map(|(i, _)| *i);
    assert_eq!(first_failed, Some(126), "the put whose key needs the new file is the first refused");
    // The second file is full after key 125 (37 + 26 = 63): key 126 needs a new file.
    eprintln!("first put refused: {first_failed:?} (key 126 is the first that needs a new index file)");
    let acked_without_index: Vec<u64> =
        outcomes.iter().filter(|(i, r)| *i >= 126 && r.is_ok()).map(|(i, _)| *i).collect();
    eprintln!("puts acknowledged after the index could no longer take their keys: {}", acked_without_index.len());
    // A key of the first file, a key of the second.
    let old = by_key(&store, 0);
    let recent = by_key(&store, 110);
    eprintln!("query_by_key k0 on the full disk: {old:?}; k110: {recent:?}");
    std::thread::sleep(Duration::from_millis(500));
    let m = store.metrics();
    eprintln!(
        "checkpoints written while full: {} (background failures {}), dispatched_up_to {}",
        m.checkpoints - checkpoints_before,
        m.background_failures,
        m.dispatched_up_to
    );
    fail::remove("fallocate_enospc");

    // Space is back: everything acknowledged is found again, and after a reopen.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..200 {
        if i < 100 || outcomes[(i - 100) as usize].1.is_ok() {
            assert_eq!(by_key(&store, i).unwrap(), 1, "k{i} after space returned");
        }
    }
    store.close().unwrap();
    let store = MessageStore::open(&root, config()).unwrap();
    for i in 0..200 {
        assert_eq!(by_key(&store, i).unwrap(), 1, "k{i} after reopen");
    }
    store.close().unwrap();

    assert!(
        matches!(old, Ok(1)),
        "a key indexed long before the disk filled must still be found on the full disk: {old:?}"
    );
    assert!(
        m.checkpoints > checkpoints_before,
        "the store checkpoint must go on advancing up to the message whose index roll fails"
    );
}

/// The index's active file is poisoned (an fdatasync of its flush failed): queries of keys in the
/// files.
#[test]
fn a_poisoned_active_index_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = with_100_keys(&root);
    let index_dir = root.join("index");
    fail::cfg("fdatasync", &format!("return({})", index_dir.display())).unwrap();
    // The background checkpoint flushes the index: its fdatasync fails and poisons the file.
    std::thread::sleep(Duration::from_millis(300));
    fail::remove("fdatasync");
    let mut outcomes = Vec::new();
    for i in 100..110 {
        outcomes.push(store.put(&message(i)).map(|_| ()).map_err(|e| e.to_string()));
    }
    eprintln!("puts after the poisoning: {outcomes:?}");
    let old = by_key(&store, 0);
    eprintln!("query_by_key k0 with the active file poisoned: {old:?}");
    drop(store);
    assert!(matches!(old, Ok(1)), "a key in a sealed file is found while the active file is poisoned: {old:?}");
    assert!(
        outcomes.iter().all(|outcome| outcome.as_ref().is_err_and(|e| e.contains("not dispatched"))),
        "puts whose keys cannot go into the poisoned file fail: {outcomes:?}"
    );
}

/// `StoreMetrics::index_files` after puts, before and after a query puts the taken ones in.
#[test]
fn index_files_metric_after_puts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { index_entries: 8, flush_interval_ms: 3_600_000, ..config() };
    let store = MessageStore::open(dir.path(), config).unwrap();
    for i in 0..60 {
        store.put(&message(i)).unwrap();
    }
    let before = store.metrics().index_files;
    let on_disk_before = std::fs::read_dir(dir.path().join("index")).unwrap().count();
    by_key(&store, 0).unwrap();
    let after = store.metrics().index_files;
    eprintln!(
        "60 keys, 7 a file: metrics.index_files {before} (files on disk {on_disk_before}) before a query, {after} after"
    );
    store.close().unwrap();
    assert_eq!(before, after, "the metric counts the files the puts so far need");
}
