//! `MessageStore::open_read_only`: a store read beside its owner (here in the same process; a
//! child process in `store_read_only_live.rs`) sees what the owner puts since, new queues too,
//! without its lock; it changes no file (bytes and modification times) and works on a tree made
//! read-only; every write is `Error::ReadOnly`; a queue's torn tail reads as the end while the
//! owner may be writing, and damage below it is an error; an index header behind its entries is
//! not an error.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{set_read_only_tree, tree_snapshot};
use strata_log::internals::format::{INDEX_FILE_INDEX_COUNT_POS, STORE_ABORT_FILE};
use strata_log::{Error, GetStatus, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 64 << 10, ..StoreConfig::default().log },
        queue_entries_per_file: 4,
        index_slots: 64,
        index_entries: 256,
        flush_interval_ms: 20,
        ..StoreConfig::default()
    }
}

fn message(topic: &str, queue_id: u32, i: u64) -> Message {
    Message::new(topic, queue_id, format!("{topic}-{queue_id}-{i}")).with_tag("red").with_keys([format!("k{i}")])
}

fn bodies(messages: &[strata_log::StoredMessage]) -> Vec<String> {
    messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect()
}

/// A dispatcher that takes what it is given.
struct Nothing;

impl strata_log::Dispatch for Nothing {
    fn dispatch(&mut self, _: &strata_log::DispatchRequest<'_>) -> strata_log::Result<()> {
        Ok(())
    }
}

/// A closed store with `n` messages in `orders` queue 0 and a committed offset.
fn closed_store(root: &Path, n: u64) {
    let store = MessageStore::open(root, config()).unwrap();
    for i in 0..n {
        store.put(&message("orders", 0, i)).unwrap();
    }
    store.commit_offset("billing", "orders", 0, 2).unwrap();
    store.close().unwrap();
}

/// Waits (up to 20 s) until `done` holds: for what the owner makes visible at its next flush.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn reads_beside_its_owner_and_sees_what_it_puts_since() {
    let dir = tempfile::tempdir().unwrap();
    let owner = MessageStore::open(dir.path(), config()).unwrap();
    for i in 0..10 {
        owner.put(&message("orders", 0, i)).unwrap();
    }
    owner.commit_offset("billing", "orders", 0, 4).unwrap();
    owner.flush_offsets().unwrap();
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    assert!(reader.is_read_only() && !owner.is_read_only());
    let got = reader.get_messages("orders", 0, 0, 100, None).unwrap();
    assert_eq!(bodies(&got.messages), (0..10).map(|i| format!("orders-0-{i}")).collect::<Vec<_>>());
    assert_eq!((got.status, got.next_queue_offset, got.max_queue_offset), (GetStatus::Found, 10, 10));
    assert_eq!(reader.committed_offset("billing", "orders", 0), Some(4));
    assert_eq!(reader.committed_offsets(), owner.committed_offsets());

    // The owner goes on, into the queue and into a new one.
    for i in 10..15 {
        owner.put(&message("orders", 0, i)).unwrap();
    }
    owner.put(&message("payments", 3, 0)).unwrap();
    let all = reader.get_messages("orders", 0, 0, 100, None).unwrap();
    assert_eq!((all.messages.len(), all.max_queue_offset), (15, 15), "a get reaching the end looks again");
    let more = reader.get_messages("orders", 0, 10, 100, None).unwrap();
    assert_eq!(bodies(&more.messages), (10..15).map(|i| format!("orders-0-{i}")).collect::<Vec<_>>());
    assert_eq!(reader.max_queue_offset("orders", 0).unwrap(), 15);
    assert_eq!(reader.get_messages("payments", 3, 0, 10, Some("red")).unwrap().messages.len(), 1);
    assert_eq!(reader.queues(), owner.queues());
    assert_eq!(reader.commit_log_start_offset(), owner.commit_log_start_offset());
    let time = more.messages[2].timestamp_ms();
    assert_eq!(
        reader.queue_offset_for_timestamp("orders", 0, time).unwrap(),
        owner.queue_offset_for_timestamp("orders", 0, time).unwrap()
    );
    // Keys: what the owner's index flushed (every 20 ms here).
    eventually("the reader finding k14", || reader.query_by_key("orders", "k14", 0, i64::MAX, 10).unwrap().len() == 1);
    let found = reader.query_by_key("orders", "k3", 0, i64::MAX, 10).unwrap();
    assert_eq!(bodies(&found), ["orders-0-3"]);
    let metrics = reader.metrics();
    assert_eq!((metrics.queues, metrics.log.next_offset), (2, 16));
    assert!(metrics.gets >= 3 && metrics.key_queries >= 2);
    reader.close().unwrap();
    owner.close().unwrap();
}

#[test]
fn a_waiting_get_sees_a_message_put_after_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let owner = MessageStore::open(dir.path(), config()).unwrap();
    owner.put(&message("orders", 1, 0)).unwrap();
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| reader.get_messages_wait("orders", 1, 1, 10, None, Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(50));
        owner.put(&message("orders", 1, 1)).unwrap();
        let got = waiting.join().unwrap().unwrap();
        assert_eq!(bodies(&got.messages), ["orders-1-1"]);
    });
    // A queue that has no directory yet is waited for too.
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| reader.get_messages_wait("audit", 2, 0, 10, None, Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(50));
        owner.put(&message("audit", 2, 0)).unwrap();
        assert_eq!(bodies(&waiting.join().unwrap().unwrap().messages), ["audit-2-0"]);
    });
    let nothing = reader.get_messages_wait("orders", 1, 2, 10, None, Duration::from_millis(30)).unwrap();
    assert_eq!((nothing.status, nothing.next_queue_offset), (GetStatus::NoNewMessage, 2));
    owner.close().unwrap();
}

#[test]
fn every_write_is_refused_and_no_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path(), 6);
    let before = tree_snapshot(dir.path());
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    let m = message("orders", 0, 99);
    assert!(matches!(reader.put(&m), Err(Error::ReadOnly)));
    assert!(matches!(reader.put_nowait(&m), Err(Error::ReadOnly)));
    assert!(matches!(reader.put_batch(std::slice::from_ref(&m)), Err(Error::ReadOnly)));
    assert!(matches!(reader.put_batch(&[]), Err(Error::ReadOnly)));
    assert!(matches!(reader.commit_offset("billing", "orders", 0, 5), Err(Error::ReadOnly)));
    assert!(matches!(reader.flush_offsets(), Err(Error::ReadOnly)));
    assert!(matches!(reader.delete_messages_before(3), Err(Error::ReadOnly)));
    reader.register_dispatcher(Box::new(Nothing)); // dropped: nothing is dispatched
    assert_eq!(reader.get_messages("orders", 0, 0, 100, None).unwrap().messages.len(), 6);
    assert_eq!(reader.committed_offset("billing", "orders", 0), Some(2), "nothing was committed");
    reader.close().unwrap();
    assert_eq!(tree_snapshot(dir.path()), before, "no file changed, none created or removed");
}

#[test]
fn works_on_a_tree_with_read_access_only_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    closed_store(&root, 9);
    // As if its owner were running: the marker a live store keeps.
    std::fs::write(root.join(STORE_ABORT_FILE), b"").unwrap();
    let before = tree_snapshot(&root);
    set_read_only_tree(&root, true);
    let read = || -> strata_log::Result<()> {
        let reader = MessageStore::open_read_only(&root, config())?;
        let got = reader.get_messages("orders", 0, 0, 100, Some("red"))?;
        assert_eq!(got.messages.len(), 9);
        assert_eq!(reader.queues().len(), 1);
        assert_eq!(reader.min_queue_offset("orders", 0)?, 0);
        assert_eq!(bodies(&reader.query_by_key("orders", "k4", 0, i64::MAX, 10)?), ["orders-0-4"]);
        assert_eq!(reader.committed_offsets().len(), 1);
        let time = got.messages[5].timestamp_ms();
        assert!(reader.queue_offset_for_timestamp("orders", 0, time)? <= 5);
        assert_eq!(reader.get_messages_wait("orders", 0, 9, 1, None, Duration::from_millis(20))?.messages.len(), 0);
        assert_eq!(reader.metrics().index_files, 1);
        reader.close()
    };
    let result = read();
    set_read_only_tree(&root, false);
    result.unwrap();
    assert_eq!(tree_snapshot(&root), before, "no file changed, none created or removed");
}

/// The `.cq` file of `orders` queue 0 holding queue offset 8 (files of 4 entries).
fn third_queue_file(root: &Path) -> std::path::PathBuf {
    root.join("consumequeue/orders/0/00000000000000000008.cq")
}

#[test]
fn a_queue_tail_being_written_reads_as_the_end() {
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path(), 11); // queue offsets 8, 9, 10 in the third file
    let path = third_queue_file(dir.path());
    let whole = std::fs::read(&path).unwrap();
    let entry = |n: usize| n * 20..(n + 1) * 20;
    // Its log offset written, its size not yet: the end, not an error.
    let mut torn = whole.clone();
    torn[entry(2)][8..].fill(0);
    std::fs::write(&path, &torn).unwrap();
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    let got = reader.get_messages("orders", 0, 8, 100, None).unwrap();
    assert_eq!((got.messages.len(), got.next_queue_offset, got.max_queue_offset), (2, 10, 10));
    assert_eq!(reader.max_queue_offset("orders", 0).unwrap(), 10);
    assert_eq!(reader.get_messages("orders", 0, 10, 100, None).unwrap().status, GetStatus::NoNewMessage);

    // Its size written, its tag hash half: while the owner may be writing (`abort`), the end too —
    // never a message left out by a tag filter reading a half-written hash.
    let mut torn = whole.clone();
    torn[entry(2)][17..].fill(0);
    std::fs::write(&path, &torn).unwrap();
    std::fs::write(dir.path().join(STORE_ABORT_FILE), b"").unwrap();
    for tag in [None, Some("red")] {
        let got = reader.get_messages("orders", 0, 8, 100, tag).unwrap();
        assert_eq!((got.messages.len(), got.next_queue_offset, got.max_queue_offset), (2, 10, 10), "{tag:?}");
    }
    assert_eq!(reader.queues()[0].max_offset, 10);
    // With no owner (no `abort`) nothing is being written: the entry is whole, its message returned.
    std::fs::remove_file(dir.path().join(STORE_ABORT_FILE)).unwrap();
    let got = reader.get_messages("orders", 0, 8, 100, Some("red")).unwrap();
    assert_eq!(bodies(&got.messages), ["orders-0-8", "orders-0-9", "orders-0-10"]);
    assert_eq!(std::fs::read(&path).unwrap(), torn, "nothing was repaired");
}

#[test]
fn damage_below_a_queues_tail_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path(), 11);
    let path = third_queue_file(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20 + 8..40].fill(0); // queue offset 9: size 0, below the tail at 10
    std::fs::write(&path, &bytes).unwrap();
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(reader.get_messages("orders", 0, 0, 8, None).unwrap().messages.len(), 8, "the files before it");
    assert!(matches!(reader.get_messages("orders", 0, 8, 100, None), Err(Error::Corrupt { .. })));
}

#[test]
fn an_index_header_behind_its_entries_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    closed_store(dir.path(), 6);
    let index = dir.path().join("index");
    let file = std::fs::read_dir(&index).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    // As an earlier flush left it: counting one entry of six.
    bytes[INDEX_FILE_INDEX_COUNT_POS..INDEX_FILE_INDEX_COUNT_POS + 4].copy_from_slice(&1u32.to_be_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    for i in 0..6 {
        let found = reader.query_by_key("orders", &format!("k{i}"), 0, i64::MAX, 10).unwrap();
        assert_eq!(bodies(&found), [format!("orders-0-{i}")], "every candidate re-checked, none lost");
    }
    assert!(reader.query_by_key("orders", "k99", 0, i64::MAX, 10).unwrap().is_empty());
}

#[test]
fn a_missing_store_is_an_error_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    assert!(matches!(MessageStore::open_read_only(&missing, config()), Err(Error::Io { .. })));
    assert!(!missing.exists());
    std::fs::create_dir(&missing).unwrap();
    assert!(matches!(MessageStore::open_read_only(&missing, config()), Err(Error::Io { .. })), "no commit log");
    assert_eq!(std::fs::read_dir(&missing).unwrap().count(), 0);
}
