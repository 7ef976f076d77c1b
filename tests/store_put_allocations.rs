//! A put allocates per put, not per message: after warm-up, a `put` of one message allocates
//! once (its fields' buffer) and a `put_batch` of 100 messages a handful of times (the fields'
//! buffer, the header and record lists, the sizes, the results), so nothing on the put path —
//! numbering, encoding, the commit log's append, dispatch to the consume queue and the index —
//! allocates per message. Checked with a counting global allocator, alone in its test binary.
#![allow(clippy::unwrap_used)]

mod counting_alloc;

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

const ROUNDS: u64 = 2000;

fn message(queue_id: u32, i: u64) -> Message {
    Message::new("topic", queue_id, vec![b'x'; 100]).with_tag("tag").with_keys([format!("key-{i}")])
}

/// Allocations per call of `put` (each `put` gets `batch` messages for one queue), counted
/// over `ROUNDS` calls after as many of warm-up; the messages are built before counting.
fn allocations_per_put(batch: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let flush_policy = FlushPolicy::EveryInterval { ms: 60_000, messages: u64::MAX };
    let config = StoreConfig {
        log: LogConfig { flush_policy, zero_ahead_bytes: 0, ..StoreConfig::default().log },
        ..StoreConfig::default()
    };
    let store = MessageStore::open(dir.path(), config).unwrap();
    let batches = |from: u64| -> Vec<Vec<Message>> {
        (from..from + ROUNDS)
            .map(|round| (0..batch as u64).map(|i| message((round % 4) as u32, round * batch as u64 + i)).collect())
            .collect()
    };
    let put = |batches: &[Vec<Message>]| {
        for messages in batches {
            if let [one] = messages.as_slice() {
                store.put(one).unwrap();
            } else {
                store.put_batch(messages).unwrap();
            }
        }
    };
    put(&batches(0));
    let counted = batches(ROUNDS);
    let before = counting_alloc::allocations();
    put(&counted);
    let per_put = (counting_alloc::allocations() - before) as f64 / ROUNDS as f64;
    drop(counted);
    store.close().unwrap();
    per_put
}

#[test]
fn a_put_allocates_per_put_not_per_message() {
    let one = allocations_per_put(1);
    let hundred = allocations_per_put(100);
    println!("allocations per put of 1 message: {one:.3}; of 100 messages: {hundred:.3}");
    // The fields buffer, and a little for the background flush below if it ran meanwhile.
    assert!(one <= 1.5, "a put of one message allocates {one:.3} times");
    // The fields buffer, its ends, the header and record lists, the sizes, the results; the
    // commit log's position table takes a chunk per 4096 offsets (200,000 offsets: ~49 chunks
    // over 2000 puts); the store's background flush of the index (its own thread, counted too) a
    // buffer per run of pages it writes. Anything per message would add 100 a put.
    assert!(hundred <= 7.5, "a put of 100 messages allocates {hundred:.3} times");
}
