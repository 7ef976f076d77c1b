//! Kill test of the message store: a child process (this test binary run again, `store_child`)
//! puts messages from several threads under `FlushPolicy::Always` and prints each one once `put`
//! returned; the parent SIGKILLs it at a random moment, reopens the store and checks that every
//! acknowledged message is in its queue exactly once, at the queue offset it was acknowledged
//! with, in order, and findable by key; that every queue is dense (no gaps, no duplicates); then
//! the next child goes on on the same store.
//!
//! Rounds: 6 by default, `STRATA_STORE_KILL_LOOPS` for more. Seeded: `STRATA_SEED` replays.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::store_child::{self, StoreChild, check, open_unlocked};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[test]
#[ignore = "the child process of the tests in this file"]
fn store_child() {
    store_child::main();
}

#[test]
fn acknowledged_messages_survive_kills_once_and_in_order() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let loops: u64 = std::env::var("STRATA_STORE_KILL_LOOPS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    println!("seed {seed} (STRATA_SEED replays), {loops} kills");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    let mut per_queue: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for round in 0..loops {
        let mut child = StoreChild::spawn(dir.path(), "put", round, "");
        let mut acks = Vec::new();
        child.read_acks(rng.random_range(1..400), &mut acks);
        assert!(!acks.is_empty(), "seed {seed}: the child acknowledged nothing");
        std::thread::sleep(Duration::from_micros(rng.random_range(0..5_000)));
        child.finish(true, &mut acks);
        for ack in &acks {
            let end = per_queue.entry((ack.topic.clone(), ack.queue_id)).or_default();
            *end = (*end).max(ack.queue_offset + 1);
        }
        acked.extend(acks);
        let store = open_unlocked(dir.path());
        check(&store, &acked);
        for ((topic, queue_id), end) in &per_queue {
            assert!(store.max_queue_offset(topic, *queue_id).unwrap() >= *end, "seed {seed}: {topic}/{queue_id}");
        }
        if rng.random_bool(0.5) {
            store.close().unwrap();
        } else {
            drop(store);
        }
    }
}
