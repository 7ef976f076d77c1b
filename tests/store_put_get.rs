//! The message store's put and get: queue numbering, the statuses at a queue's bounds, tag
//! filtering (with a forced hash collision re-checked on the tag string), batches, bad input,
//! put_nowait, and reopening.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use strata_log::{Error, FlushPolicy, GetStatus, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig { queue_entries_per_file: 4, ..StoreConfig::default() }
}

fn bodies(got: &strata_log::GetResult) -> Vec<String> {
    got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect()
}

#[test]
fn puts_are_numbered_per_queue_and_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    for i in 0..10u64 {
        let a = store.put(&Message::new("a", 0, format!("a{i}"))).unwrap();
        let b = store.put(&Message::new("b", 3, format!("b{i}"))).unwrap();
        assert_eq!((a.queue_offset, b.queue_offset), (i, i));
        assert_eq!((a.log_offset, b.log_offset), (2 * i, 2 * i + 1));
    }
    let got = store.get_messages("a", 0, 2, 5, None).unwrap();
    assert_eq!(got.status, GetStatus::Found);
    assert_eq!(bodies(&got), ["a2", "a3", "a4", "a5", "a6"]);
    assert_eq!((got.next_queue_offset, got.min_queue_offset, got.max_queue_offset), (7, 0, 10));
    let m = &got.messages[0];
    assert_eq!((m.topic(), m.queue_id(), m.queue_offset(), m.log_offset()), ("a", 0, 2, 4));
    let queues: Vec<_> =
        store.queues().into_iter().map(|q| (q.topic, q.queue_id, q.min_offset, q.max_offset)).collect();
    assert_eq!(queues, [("a".to_owned(), 0, 0, 10), ("b".to_owned(), 3, 0, 10)]);
    store.close().unwrap();
}

#[test]
fn the_bounds_of_a_queue_have_their_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    for offset in [0, 5] {
        let none = store.get_messages("never", 0, offset, 10, None).unwrap();
        let bounds = (none.next_queue_offset, none.min_queue_offset, none.max_queue_offset);
        assert_eq!((none.status, bounds), (GetStatus::NoMatchedLogicQueue, (0, 0, 0)), "no such queue");
    }
    for i in 0..3 {
        store.put(&Message::new("t", 1, format!("m{i}"))).unwrap();
    }
    let at_end = store.get_messages("t", 1, 3, 10, None).unwrap();
    assert_eq!((at_end.status, at_end.next_queue_offset), (GetStatus::NoNewMessage, 3));
    let past = store.get_messages("t", 1, 9, 10, None).unwrap();
    assert_eq!((past.status, past.next_queue_offset), (GetStatus::OffsetOverflow, 3));
    let none = store.get_messages("t", 1, 0, 0, None).unwrap();
    assert!(none.messages.is_empty());
}

#[test]
fn one_call_examines_a_bounded_number_of_entries() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { max_entries_examined: 5, ..config() };
    let store = MessageStore::open(dir.path(), config).unwrap();
    for i in 0..12 {
        let tag = if i == 7 { "rare" } else { "common" };
        store.put(&Message::new("t", 0, format!("m{i}")).with_tag(tag)).unwrap();
    }
    let first = store.get_messages("t", 0, 0, 10, Some("rare")).unwrap();
    assert_eq!((first.status, first.next_queue_offset), (GetStatus::NoMatchedMessage, 5));
    let second = store.get_messages("t", 0, 5, 10, Some("rare")).unwrap();
    assert_eq!(bodies(&second), ["m7"]);
    assert_eq!(second.next_queue_offset, 10, "the entry after the last one examined");
    let all = store.get_messages("t", 0, 0, 100, None).unwrap();
    assert_eq!(all.messages.len(), 5, "max examined bounds an unfiltered call too");
}

#[test]
fn tags_filter_and_a_colliding_hash_is_rechecked_on_the_tag() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    store.put(&Message::new("t", 0, "x").with_tag("red")).unwrap();
    store.put(&Message::new("t", 0, "y").with_tag("blue")).unwrap();
    store.put(&Message::new("t", 0, "z")).unwrap();
    store.put(&Message::new("t", 0, "w").with_tag("red")).unwrap();
    let got = store.get_messages("t", 0, 0, 10, Some("red")).unwrap();
    assert_eq!(bodies(&got), ["x", "w"]);
    assert_eq!(got.messages[0].tag(), Some("red"));

    // A collision, made by hand: the "blue" message's entry gets the hash of "red" (entry 1,
    // tag_hash at bytes 12..20). The filter must re-check the tag string on the message.
    use std::os::unix::fs::FileExt as _;
    let cq = dir.path().join("consumequeue/t/0/00000000000000000000.cq");
    let file = std::fs::OpenOptions::new().write(true).open(&cq).unwrap();
    file.write_all_at(&fnv1a_64(b"red").to_be_bytes(), 20 + 12).unwrap();
    let got = store.get_messages("t", 0, 0, 10, Some("red")).unwrap();
    assert_eq!(bodies(&got), ["x", "w"], "the colliding entry's message is not returned");
    assert_eq!(got.next_queue_offset, 4);
}

/// FNV-1a 64, as docs/FORMAT.md defines the tag hash.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[test]
fn a_batch_is_one_topic_and_queue_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    store.put(&Message::new("t", 0, "before")).unwrap();
    let batch: Vec<Message> = (0..6).map(|i| Message::new("t", 0, format!("b{i}"))).collect();
    let results = store.put_batch(&batch).unwrap();
    assert_eq!(results.iter().map(|r| r.queue_offset).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
    assert_eq!(results.iter().map(|r| r.log_offset).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
    let mixed = [Message::new("t", 0, "x"), Message::new("t", 1, "y")];
    assert!(matches!(store.put_batch(&mixed), Err(Error::MixedBatch { index: 1, .. })));
    let too_big = [Message::new("t", 0, "ok"), Message::new("t", 0, vec![0u8; 5 << 20])];
    assert!(matches!(store.put_batch(&too_big), Err(Error::MessageTooLarge { .. })));
    assert_eq!(store.max_queue_offset("t", 0).unwrap(), 7, "refused batches stored nothing");
    assert!(store.put_batch(&[]).unwrap().is_empty());
    let got = store.get_messages("t", 0, 0, 100, None).unwrap();
    assert_eq!(bodies(&got), ["before", "b0", "b1", "b2", "b3", "b4", "b5"]);
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { max_queues_per_topic: 4, max_message_bytes: 1024, ..config() };
    let store = MessageStore::open(dir.path(), config).unwrap();
    for topic in ["", ".", "..", "a/b", "a\\b", "nul\0", &"x".repeat(128)] {
        let put = store.put(&Message::new(topic, 0, "x"));
        assert!(matches!(put, Err(Error::InvalidTopic { .. })), "{topic:?}: {put:?}");
        assert!(matches!(store.get_messages(topic, 0, 0, 1, None), Err(Error::InvalidTopic { .. })));
    }
    assert!(matches!(store.put(&Message::new("t", 4, "x")), Err(Error::InvalidQueue { queue_id: 4, max: 4 })));
    assert!(matches!(store.get_messages("t", 4, 0, 1, None), Err(Error::InvalidQueue { .. })));
    let big = store.put(&Message::new("t", 0, vec![1u8; 1024]));
    assert!(matches!(big, Err(Error::MessageTooLarge { max: 1024, .. })), "{big:?}");
    assert!(matches!(store.put(&Message::new("t", 0, "x").with_tag("")), Err(Error::InvalidField { .. })));
    assert!(matches!(store.commit_offset("", "t", 0, 1), Err(Error::InvalidField { .. })));
    assert_eq!(store.metrics().log.next_offset, 0, "nothing reached the log");
    assert!(!dir.path().join("consumequeue").join("a").exists());
    assert_eq!(std::fs::read_dir(dir.path().join("consumequeue")).unwrap().count(), 0);
}

#[test]
fn put_nowait_hands_back_the_position_and_waits_later() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let handles: Vec<_> = (0..50).map(|i| store.put_nowait(&Message::new("t", 2, format!("m{i}"))).unwrap()).collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.result().queue_offset, i as u64);
        assert_eq!(handle.wait().unwrap().queue_offset, i as u64);
    }
    assert_eq!(store.get_messages("t", 2, 0, 100, None).unwrap().messages.len(), 50);
    let handle = store.put_nowait(&Message::new("t", 2, "last")).unwrap();
    assert!(handle.wait_timeout(Duration::from_secs(10)).unwrap().is_some());
    assert!(handle.is_done());
}

#[test]
fn queues_keys_and_offsets_survive_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for policy in [FlushPolicy::Always, FlushPolicy::Never] {
        let root = dir.path().join(format!("{policy:?}").replace(['{', '}', ' ', ':', ','], "_"));
        let config = StoreConfig { log: LogConfig { flush_policy: policy, ..config().log }, ..config() };
        let store = MessageStore::open(&root, config.clone()).unwrap();
        for i in 0..9 {
            store.put(&Message::new("t", 0, format!("m{i}")).with_keys([format!("k{i}")])).unwrap();
        }
        store.commit_offset("g", "t", 0, 4).unwrap();
        store.close().unwrap();
        assert!(!root.join("abort").exists(), "a clean close removes the abort marker");

        let store = MessageStore::open(&root, config).unwrap();
        assert_eq!(store.committed_offset("g", "t", 0), Some(4));
        assert_eq!(store.max_queue_offset("t", 0).unwrap(), 9);
        let next = store.put(&Message::new("t", 0, "m9")).unwrap();
        assert_eq!(next.queue_offset, 9, "numbering goes on after a reopen");
        let got = store.get_messages("t", 0, 4, 100, None).unwrap();
        assert_eq!(bodies(&got), ["m4", "m5", "m6", "m7", "m8", "m9"]);
        let found = store.query_by_key("t", "k3", 0, i64::MAX, 10).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].body(), b"m3");
        store.close().unwrap();
    }
}

#[test]
fn a_second_open_of_the_same_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let second = MessageStore::open(dir.path(), config());
    assert!(matches!(second, Err(Error::Locked { .. })), "{:?}", second.err());
    drop(store);
}

#[test]
fn compaction_of_the_commit_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogConfig { cleanup_policy: strata_log::CleanupPolicy::Compact, ..LogConfig::default() };
    let opened = MessageStore::open(dir.path(), StoreConfig { log, ..StoreConfig::default() });
    assert!(matches!(opened, Err(Error::InvalidConfig { field: "log.cleanup_policy", .. })));
}
