//! Key queries when keys collide: in the hash slots (tiny `index_slots`: every key shares a few
//! chains) and in the 32-bit key hash itself (two keys found by a birthday search): every
//! candidate is re-read and its key checked, so a query returns exactly the messages with its key.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use strata_log::{Message, MessageStore, StoreConfig};

/// The index's key hash: the low 32 bits of FNV-1a 64 of `topic#key` (docs/FORMAT.md).
fn key_hash(topic: &str, key: &str) -> u32 {
    format!("{topic}#{key}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)) as u32
}

/// Two different keys of `topic` with the same key hash.
fn colliding_keys(topic: &str) -> (String, String) {
    let mut seen: HashMap<u32, String> = HashMap::new();
    for i in 0.. {
        let key = format!("key-{i}");
        if let Some(other) = seen.insert(key_hash(topic, &key), key.clone()) {
            return (other, key);
        }
    }
    unreachable!("a 32-bit hash collides within a few hundred thousand keys")
}

#[test]
fn colliding_key_hashes_and_shared_slots_never_leak_into_a_query() {
    let (a, b) = colliding_keys("t");
    assert_ne!(a, b);
    assert_eq!(key_hash("t", &a), key_hash("t", &b));
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { index_slots: 3, index_entries: 16, ..StoreConfig::default() };
    let store = MessageStore::open(dir.path(), config).unwrap();
    for i in 0..40 {
        let key = match i % 4 {
            0 => a.clone(),
            1 => b.clone(),
            _ => format!("other-{i}"),
        };
        store.put(&Message::new("t", 0, format!("m{i}")).with_keys([key])).unwrap();
    }
    // The same key on another topic is another key.
    store.put(&Message::new("u", 0, "elsewhere").with_keys([a.clone()])).unwrap();
    let found = store.query_by_key("t", &a, 0, i64::MAX, 100).unwrap();
    let bodies: Vec<String> = found.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
    let expected: Vec<String> = (0..40).filter(|i| i % 4 == 0).map(|i| format!("m{i}")).collect();
    assert_eq!(bodies, expected, "only {a}'s messages, not {b}'s nor the other topic's");
    let newest = store.query_by_key("t", &b, 0, i64::MAX, 3).unwrap();
    let bodies: Vec<String> = newest.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
    assert_eq!(bodies, ["m29", "m33", "m37"], "the newest 3, ascending");
    assert!(store.metrics().index_files > 1, "the tiny files rolled");
}
