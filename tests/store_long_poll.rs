//! Long polling at a queue's end: woken by a put (of a matching message when a tag is given),
//! empty at the timeout; and the other ways of following a store: user
//! dispatchers and time lookups.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_log::{
    Dispatch, DispatchRequest, GetStatus, LogConfig, ManualClock, Message, MessageStore, Result, StoreConfig,
};

#[test]
fn a_long_poll_wakes_on_a_put_and_times_out_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(dir.path(), StoreConfig::default()).unwrap());
    let started = Instant::now();
    let empty = store.get_messages_wait("t", 0, 0, 10, None, Duration::from_millis(200)).unwrap();
    assert_eq!((empty.status, empty.messages.len()), (GetStatus::NoMatchedLogicQueue, 0), "no such queue yet");
    assert!(started.elapsed() >= Duration::from_millis(200), "it waited the timeout out");

    let poller = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let started = Instant::now();
            let got = store.get_messages_wait("t", 0, 0, 10, None, Duration::from_secs(30)).unwrap();
            (got, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    store.put(&Message::new("t", 0, "wake")).unwrap();
    let (got, waited) = poller.join().unwrap();
    assert_eq!(got.messages[0].body(), b"wake");
    assert!(waited < Duration::from_secs(10), "woken by the put, not the timeout: {waited:?}");
    let metrics = store.metrics();
    assert!(metrics.long_polls_held >= 2 && metrics.long_polls_woken >= 1, "{metrics:?}");
}

/// A consumer may start before its producer: a wait on a queue that does not exist yet waits for
/// it, and ends at its first message (read from the offset asked for), not at the timeout.
#[test]
fn a_long_poll_on_a_queue_that_does_not_exist_yet_ends_at_its_first_message() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        StoreConfig { queue_entries_per_file: 64, index_slots: 64, index_entries: 256, ..StoreConfig::default() };
    let store = Arc::new(MessageStore::open(dir.path(), config).unwrap());
    store.put(&Message::new("other", 0, "elsewhere")).unwrap();
    let wait = |offset| {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store.get_messages_wait("late", 3, offset, 10, None, Duration::from_secs(60)).unwrap()
        })
    };
    let (from_start, past_it) = (wait(0), wait(5));
    let producer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            store.put(&Message::new("late", 3, "first")).unwrap();
        })
    };
    let got = from_start.join().unwrap();
    assert_eq!((got.status, got.messages.len()), (GetStatus::Found, 1), "{got:?}");
    assert_eq!(got.messages[0].body(), b"first");
    let got = past_it.join().unwrap();
    assert_eq!((got.status, got.next_queue_offset), (GetStatus::OffsetOverflow, 1), "from 5, past the new queue's end");
    producer.join().unwrap();
}

#[test]
fn a_tagged_long_poll_skips_other_tags_and_wakes_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(dir.path(), StoreConfig::default()).unwrap());
    let poller = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store.get_messages_wait("t", 1, 0, 10, Some("red"), Duration::from_secs(30)).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..3 {
        store.put(&Message::new("t", 1, format!("blue {i}")).with_tag("blue")).unwrap();
    }
    store.put(&Message::new("t", 1, "red").with_tag("red")).unwrap();
    let got = poller.join().unwrap();
    assert_eq!(got.messages.len(), 1);
    assert_eq!(got.messages[0].body(), b"red");
    assert_eq!(got.next_queue_offset, 4);

    let timed_out = store.get_messages_wait("t", 1, 4, 10, Some("red"), Duration::from_millis(100));
    store.put(&Message::new("t", 1, "blue").with_tag("blue")).unwrap();
    let timed_out = timed_out.unwrap();
    assert!(timed_out.messages.is_empty());
}

#[test]
fn a_non_matching_message_during_a_long_poll_advances_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(dir.path(), StoreConfig::default()).unwrap());
    let poller = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            store.get_messages_wait("t", 0, 0, 10, Some("red"), Duration::from_millis(500)).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    store.put(&Message::new("t", 0, "blue").with_tag("blue")).unwrap();
    let got = poller.join().unwrap();
    assert!(got.messages.is_empty());
    assert_eq!(got.next_queue_offset, 1, "past the entry that did not match");
}

/// Records the log offsets it is handed.
struct Recorder(Arc<Mutex<Vec<(String, u64, u64)>>>, Arc<AtomicU64>);

impl Dispatch for Recorder {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        self.0.lock().push((request.topic.to_owned(), request.queue_offset, request.log_offset));
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.1.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_user_dispatcher_sees_every_message_after_it_registered_and_is_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), StoreConfig::default()).unwrap();
    store.put(&Message::new("a", 0, "before")).unwrap();
    let (seen, flushes) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicU64::new(0)));
    store.register_dispatcher(Box::new(Recorder(Arc::clone(&seen), Arc::clone(&flushes))));
    store.put(&Message::new("a", 0, "x")).unwrap();
    store.put(&Message::new("b", 2, "y")).unwrap();
    assert_eq!(*seen.lock(), [("a".to_owned(), 1, 1), ("b".to_owned(), 0, 2)], "seen by the time put returns");
    assert_eq!(store.metrics().dispatched, 3);
    store.close().unwrap();
    assert!(flushes.load(Ordering::Relaxed) >= 1, "flushed before the close's checkpoint");
}

#[test]
fn queue_offsets_are_found_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config =
        StoreConfig { log: LogConfig { clock: clock.clock(), ..StoreConfig::default().log }, ..StoreConfig::default() };
    let store = MessageStore::open(dir.path(), config).unwrap();
    for i in 0..10 {
        clock.advance(1_000);
        store.put(&Message::new("t", 0, format!("m{i}"))).unwrap();
        store.put(&Message::new("other", 0, "noise")).unwrap();
    }
    // Message i was stored at 1_001_000 + i * 1000.
    assert_eq!(store.queue_offset_for_timestamp("t", 0, 0).unwrap(), 0);
    assert_eq!(store.queue_offset_for_timestamp("t", 0, 1_004_000).unwrap(), 3);
    assert_eq!(store.queue_offset_for_timestamp("t", 0, 1_004_500).unwrap(), 4);
    assert_eq!(store.queue_offset_for_timestamp("t", 0, 2_000_000).unwrap(), 10, "after the last: the end");
    assert_eq!(store.queue_offset_for_timestamp("none", 0, 0).unwrap(), 0);
    let found = store.get_messages("t", 0, 3, 1, None).unwrap();
    assert_eq!(found.messages[0].timestamp_ms(), 1_004_000);
}
