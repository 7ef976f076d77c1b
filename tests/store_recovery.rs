//! The message store at open: after an unclean shutdown (a copy of a live store's files, as a
//! crash leaves them with the page cache intact, then damaged past the checkpoint), and with its
//! derived files deleted, truncated or garbage (rebuilt from the commit log), and consumer offsets
//! torn or past a queue's end.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::copy_dir;
use strata_log::{FlushPolicy, GetStatus, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 16 << 10, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        queue_entries_per_file: 8,
        index_slots: 16,
        index_entries: 64,
        ..StoreConfig::default()
    }
}

/// (topic, queue, body, key) of message `i`.
fn message(i: u64) -> Message {
    let topic = ["orders", "payments", "audit"][(i % 3) as usize];
    Message::new(topic, (i % 2) as u32, format!("m{i}")).with_keys([format!("k{i}")]).with_tag(format!("t{}", i % 4))
}

fn fill(store: &MessageStore, count: u64) {
    for i in 0..count {
        store.put(&message(i)).unwrap();
    }
}

/// Every message is in its queue once, in order, and findable by key.
fn check_all(store: &MessageStore, count: u64) {
    for topic in ["orders", "payments", "audit"] {
        for queue in 0..2 {
            let expected: Vec<String> = (0..count)
                .filter(|i| message(*i).topic() == topic && message(*i).queue_id() == queue)
                .map(|i| format!("m{i}"))
                .collect();
            let got = store.get_messages(topic, queue, 0, 10_000, None).unwrap();
            let bodies: Vec<String> =
                got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
            assert_eq!(bodies, expected, "{topic}/{queue}");
            for (q, m) in got.messages.iter().enumerate() {
                assert_eq!(m.queue_offset(), q as u64);
            }
        }
    }
    for i in (0..count).step_by(7) {
        let found = store.query_by_key(message(i).topic(), &format!("k{i}"), 0, i64::MAX, 10).unwrap();
        assert_eq!(found.len(), 1, "key k{i}");
        assert_eq!(found[0].body(), format!("m{i}").as_bytes());
    }
}

#[test]
fn an_unclean_copy_recovers_every_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let (live, copy) = (dir.path().join("live"), dir.path().join("copy"));
    let store = MessageStore::open(&live, config()).unwrap();
    fill(&store, 300);
    copy_dir(&live, &copy);
    assert!(copy.join("abort").exists(), "the copy is of an open store");
    let recovered = MessageStore::open(&copy, config()).unwrap();
    check_all(&recovered, 300);
    let next = recovered.put(&message(300)).unwrap();
    assert_eq!(next.queue_offset, 50, "numbering goes on (message 300 is the 51st of orders/0)");
    recovered.close().unwrap();
    drop(store);
}

#[test]
fn queue_entries_torn_past_the_checkpoint_are_cut_and_dispatched_again() {
    let dir = tempfile::tempdir().unwrap();
    let (live, copy) = (dir.path().join("live"), dir.path().join("copy"));
    let store = MessageStore::open(&live, config()).unwrap();
    fill(&store, 120);
    store.close().unwrap();
    let store = MessageStore::open(&live, config()).unwrap();
    fill_from(&store, 120, 180);
    copy_dir(&live, &copy);
    drop(store);
    // The store checkpoint says 120 at most: tear the copy's newest queue entries (zero one in
    // the middle of the active file, garbage after it), as a crash before their flush could.
    let cq = newest_file(&copy.join("consumequeue/orders/0"));
    let mut bytes = std::fs::read(&cq).unwrap();
    let len = bytes.len();
    let entries = bytes.chunks(20).take_while(|e| e.iter().any(|&b| b != 0)).count();
    assert!(entries >= 2, "the active file has entries");
    bytes[(entries - 2) * 20..(entries - 1) * 20].fill(0);
    bytes[entries * 20..(entries * 20 + 20).min(len)].fill(0xab);
    std::fs::write(&cq, &bytes).unwrap();
    let recovered = MessageStore::open(&copy, config()).unwrap();
    check_all(&recovered, 180);
}

fn fill_from(store: &MessageStore, from: u64, to: u64) {
    for i in from..to {
        store.put(&message(i)).unwrap();
    }
}

fn newest_file(dir: &Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.pop().unwrap()
}

#[test]
fn deleted_queues_and_index_are_rebuilt_from_the_commit_log() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = MessageStore::open(root, config()).unwrap();
    fill(&store, 200);
    store.close().unwrap();
    for derived in ["consumequeue", "index"] {
        std::fs::remove_dir_all(root.join(derived)).unwrap();
        let store = MessageStore::open(root, config()).unwrap();
        check_all(&store, 200);
        store.close().unwrap();
    }
    std::fs::remove_dir_all(root.join("consumequeue/payments/1")).unwrap();
    std::fs::remove_file(root.join("store.checkpoint")).unwrap();
    let store = MessageStore::open(root, config()).unwrap();
    check_all(&store, 200);
}

#[test]
fn garbage_and_truncated_derived_files_are_rebuilt() {
    let garbage: Vec<u8> = (0..160u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    type Damage<'a> = (&'a str, &'a dyn Fn(&Path));
    let damages: [Damage<'_>; 4] = [
        ("garbage over the newest .cq", &|root| {
            std::fs::write(newest_file(&root.join("consumequeue/orders/0")), &garbage).unwrap()
        }),
        ("garbage over an older .cq", &|root| {
            let mut files: Vec<_> =
                std::fs::read_dir(root.join("consumequeue/orders/0")).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            std::fs::write(&files[files.len() - 2], &garbage).unwrap();
        }),
        ("a truncated .cq", &|root| {
            let file = newest_file(&root.join("consumequeue/audit/1"));
            std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(30).unwrap();
        }),
        ("garbage over the newest .idx", &|root| std::fs::write(newest_file(&root.join("index")), &garbage).unwrap()),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = MessageStore::open(root, config()).unwrap();
        fill(&store, 200);
        store.close().unwrap();
        damage(root);
        let store = MessageStore::open(root, config()).unwrap_or_else(|e| panic!("{what}: {e}"));
        check_all_or(&store, 200, what);
        store.close().unwrap();
    }
}

fn check_all_or(store: &MessageStore, count: u64, what: &str) {
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_all(store, count)));
    assert!(checked.is_ok(), "after {what}");
}

#[test]
fn a_torn_offsets_file_falls_back_to_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = MessageStore::open(root, config()).unwrap();
    fill(&store, 30);
    store.commit_offset("g", "orders", 0, 2).unwrap();
    store.flush_offsets().unwrap();
    store.commit_offset("g", "orders", 0, 4).unwrap();
    store.close().unwrap();
    let json = std::fs::read(root.join("offsets.json")).unwrap();
    std::fs::write(root.join("offsets.json"), &json[..json.len() / 2]).unwrap();
    let store = MessageStore::open(root, config()).unwrap();
    assert_eq!(store.committed_offset("g", "orders", 0), Some(2), "the backup's offset, not nothing");
}

/// Committed offsets are clamped only against a queue that was cut or rebuilt (its log lost its
/// tail): an intact queue and a queue that does not exist keep what the consumer committed.
#[test]
fn committed_offsets_of_queues_not_rebuilt_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = MessageStore::open(root, config()).unwrap();
    fill(&store, 12);
    let end = store.max_queue_offset("orders", 0).unwrap();
    store.commit_offset("g", "orders", 0, end + 100).unwrap();
    store.commit_offset("g", "never", 3, 7).unwrap();
    store.close().unwrap();
    let store = MessageStore::open(root, config()).unwrap();
    assert_eq!(store.committed_offset("g", "orders", 0), Some(end + 100));
    assert_eq!(store.committed_offset("g", "never", 3), Some(7));
}

#[test]
fn retention_moves_queue_minimums_and_deletes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = MessageStore::open(root, config()).unwrap();
    fill(&store, 600);
    let files = |queue: &str| std::fs::read_dir(root.join("consumequeue").join(queue)).unwrap().count();
    let (cq_before, idx_before) = (files("orders/0"), std::fs::read_dir(root.join("index")).unwrap().count());
    let start = store.delete_messages_before(400).unwrap();
    assert!(start > 0 && start <= 400, "whole segments go: start {start}");
    assert_eq!(store.commit_log_start_offset(), start);
    let min = store.min_queue_offset("orders", 0).unwrap();
    assert!(min > 0, "the queue's minimum moved");
    let below = store.get_messages("orders", 0, 0, 10, None).unwrap();
    assert_eq!((below.status, below.next_queue_offset), (GetStatus::OffsetTooSmall, min));
    let got = store.get_messages("orders", 0, min, 1, None).unwrap();
    assert!(got.messages[0].log_offset() >= start);
    assert!(files("orders/0") < cq_before, "queue files below the start are deleted");
    assert!(std::fs::read_dir(root.join("index")).unwrap().count() < idx_before, "index files too");
    assert!(store.query_by_key("orders", "k0", 0, i64::MAX, 10).unwrap().is_empty());
    store.close().unwrap();
    let store = MessageStore::open(root, config()).unwrap();
    assert_eq!(store.get_messages("orders", 0, 0, 10, None).unwrap().status, GetStatus::OffsetTooSmall);
    let next = store.put(&message(600)).unwrap();
    assert_eq!(next.queue_offset, 100, "numbering survives retention and a reopen");
}
