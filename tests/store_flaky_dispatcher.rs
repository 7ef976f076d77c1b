//! A user dispatcher that fails and panics now and then, with puts of one to six keys
//! from several threads and tiny index files: every dispatch it fails is retried, and the index
//! must end up with each key of each message exactly once (counted in the files' headers after a
//! close) and find every one.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use strata_log::internals::format::{INDEX_FILE_INDEX_COUNT_POS, STORE_INDEX_DIR};
use strata_log::{Dispatch, DispatchRequest, Error, LogConfig, Message, MessageStore, StoreConfig};

struct Flaky(Arc<AtomicU64>);

impl Dispatch for Flaky {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> strata_log::Result<()> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        if n % 13 == 12 {
            panic!("flaky dispatcher panics at {}", request.log_offset);
        }
        if n % 5 == 4 {
            return Err(Error::Closed);
        }
        Ok(())
    }
}

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 64 << 10, ..StoreConfig::default().log },
        queue_entries_per_file: 32,
        index_slots: 4,
        index_entries: 8,
        flush_interval_ms: 5,
        ..StoreConfig::default()
    }
}

#[test]
fn a_flaky_user_dispatcher_indexes_every_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    store.register_dispatcher(Box::new(Flaky(Arc::clone(&calls))));
    let keys_total = AtomicU64::new(0);
    let messages: Vec<Message> = (0..1500u64)
        .map(|i| {
            let keys = if i % 3 == 0 { 1 + i % 6 } else { 1 };
            Message::new("t", (i % 3) as u32, format!("m{i}")).with_keys((0..keys).map(|k| format!("m{i}.{k}")))
        })
        .collect();
    std::thread::scope(|s| {
        for t in 0..3usize {
            let (store, messages, keys_total) = (&store, &messages, &keys_total);
            s.spawn(move || {
                for m in messages.iter().skip(t).step_by(3) {
                    keys_total.fetch_add(m.keys().len() as u64, Ordering::Relaxed);
                    match if t == 2 { store.put_nowait(m).and_then(|h| h.wait()) } else { store.put(m) } {
                        Ok(_) | Err(Error::DispatchFailed { .. }) => {}
                        Err(error) => panic!("{error}"),
                    }
                }
            });
        }
    });
    // Wait until everything is dispatched (the dispatcher thread retries).
    let next = store.metrics().log.next_offset;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while store.metrics().dispatched_up_to < next && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for (i, m) in messages.iter().enumerate() {
        for key in m.keys() {
            let found = store.query_by_key("t", key, 0, i64::MAX, 4).unwrap();
            assert_eq!(found.len(), 1, "message {i} key {key}");
        }
    }
    let failures = store.metrics().dispatch_failures;
    store.close().unwrap();
    let mut entries = 0u64;
    for entry in std::fs::read_dir(dir.path().join(STORE_INDEX_DIR)).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let at = INDEX_FILE_INDEX_COUNT_POS;
        entries += u64::from(u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()));
    }
    eprintln!("{} keys, {entries} index entries, {failures} dispatch failures", keys_total.load(Ordering::Relaxed));
    assert!(failures > 10, "the dispatcher failed now and then");
    assert_eq!(entries, keys_total.load(Ordering::Relaxed), "each key of each message once in the index");
}
