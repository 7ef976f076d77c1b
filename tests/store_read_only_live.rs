//! `MessageStore::open_read_only` beside a store another process holds open and writes: a child
//! process (this test binary run again, `store_child`) puts messages from several threads; the
//! parent reads the same store read-only meanwhile. The child's puts keep succeeding while the
//! parent reads; the parent sees every message the child acknowledged, at its place, finds them
//! by key once the child's index flushed them, never sees a queue with a gap, a duplicate or a
//! message out of order, and a waiting get returns a message the child put after it began.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::store_child::{self, Ack, StoreChild};
use strata_log::{MessageStore, QueueInfo};

#[test]
#[ignore = "the child process of the tests in this file"]
fn store_child() {
    store_child::main();
}

/// Every acknowledged message at its place.
fn check_acked(reader: &MessageStore, acked: &[Ack]) {
    for ack in acked {
        let got = reader.get_messages(&ack.topic, ack.queue_id, ack.queue_offset, 1, None).unwrap();
        let message = got.messages.first().unwrap_or_else(|| panic!("acknowledged {ack:?} is missing: {got:?}"));
        assert_eq!(message.body(), ack.body.as_bytes(), "{ack:?}");
        assert_eq!((message.log_offset(), message.queue_offset()), (ack.log_offset, ack.queue_offset));
    }
}

/// Every queue dense from its first offset to its end, in log order, without duplicates.
fn check_queues(reader: &MessageStore) -> u64 {
    let mut total = 0;
    for QueueInfo { topic, queue_id, min_offset: min, max_offset: max, .. } in reader.queues() {
        let got = reader.get_messages(&topic, queue_id, min, usize::MAX, None).unwrap();
        assert!(got.messages.len() as u64 >= max - min, "{topic}/{queue_id}: [{min}, {max}) read whole");
        let mut seen = HashSet::new();
        let mut last_log_offset = None;
        for (i, message) in got.messages.iter().enumerate() {
            assert_eq!(message.queue_offset(), min + i as u64, "{topic}/{queue_id}: no gap");
            assert!(seen.insert(message.body().to_vec()), "{topic}/{queue_id}: a message twice");
            assert!(last_log_offset < Some(message.log_offset()), "log offsets increase along the queue");
            last_log_offset = Some(message.log_offset());
        }
        total += got.messages.len() as u64;
    }
    total
}

#[test]
fn reads_a_store_another_process_writes_while_its_puts_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = StoreChild::spawn(dir.path(), "put", 0, "");
    let mut acked = Vec::new();
    child.read_acks(50, &mut acked);
    assert_eq!(acked.len(), 50, "the child puts");
    let reader = MessageStore::open_read_only(dir.path(), store_child::config()).unwrap();
    let mut read_so_far = 0;
    for _ in 0..5 {
        let before = acked.len();
        child.read_acks(40, &mut acked);
        assert!(acked.len() > before, "the child's puts go on while the store is read");
        check_acked(&reader, &acked);
        let total = check_queues(&reader);
        assert!(total >= acked.len() as u64 && total >= read_so_far, "the reader sees more as the child puts");
        read_so_far = total;
    }
    // Keys: once the child's index flushed them (every 20 ms).
    let deadline = Instant::now() + Duration::from_secs(30);
    for ack in acked.iter().step_by(17) {
        loop {
            let found = reader.query_by_key(&ack.topic, &ack.body, 0, i64::MAX, 10).unwrap();
            assert!(found.len() <= 1 && found.iter().all(|m| m.body() == ack.body.as_bytes()), "{ack:?}: {found:?}");
            if found.len() == 1 {
                break;
            }
            assert!(Instant::now() < deadline, "{ack:?} never found by key");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // A waiting get returns what the child puts after it began.
    let last = acked.last().unwrap().clone();
    let end = reader.max_queue_offset(&last.topic, last.queue_id).unwrap();
    let got = reader.get_messages_wait(&last.topic, last.queue_id, end, 1, None, Duration::from_secs(30)).unwrap();
    assert_eq!(got.messages.first().map(|m| m.queue_offset()), Some(end), "{got:?}");
    child.finish(true, &mut acked);
    check_acked(&reader, &acked);
}
