//! A consumer offset clamped at open (its queue was cut: the commit log lost its tail) is on disk
//! before the checkpoint that forgets the cut: a crash right after the open keeps the clamp, so
//! the consumer reads the messages put after it instead of skipping their queue offsets.
#![allow(clippy::unwrap_used)]

mod common;

use common::store_derived::{Shutdown, shut_down, store_with_a_cut_queue};
use strata_log::{Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig { flush_interval_ms: 3_600_000, offsets_flush_ms: 3_600_000, ..StoreConfig::default() }
}

#[test]
fn a_clamp_at_open_survives_a_crash_after_the_open() {
    let dir = tempfile::tempdir().unwrap();
    store_with_a_cut_queue(dir.path(), config());

    let store = MessageStore::open(dir.path(), config()).unwrap();
    assert_eq!(store.max_queue_offset("t", 0).unwrap(), 30);
    assert_eq!(store.committed_offset("g", "t", 0), Some(30), "clamped at open");
    // A crash before the first periodic offsets flush (the open's checkpoint is on disk).
    let crashed = shut_down(store, dir.path(), Shutdown::Crash);
    let store = MessageStore::open(&crashed, config()).unwrap();
    assert_eq!(store.committed_offset("g", "t", 0), Some(30), "the clamp survived");
    for i in 30..40 {
        assert_eq!(store.put(&Message::new("t", 0, format!("new{i}"))).unwrap().queue_offset, i);
    }
    let from_commit = store.get_messages("t", 0, 30, 100, None).unwrap();
    assert_eq!(from_commit.messages.first().map(|m| m.body().to_vec()), Some(b"new30".to_vec()));
    store.close().unwrap();
}
