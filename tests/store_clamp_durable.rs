//! A consumer offset clamped at open (its queue was cut: the commit log lost its tail) is on disk
//! before the checkpoint that forgets the cut: a crash right after the open keeps the clamp, so
//! the consumer reads the messages put after it instead of skipping their queue offsets.
#![allow(clippy::unwrap_used)]

mod common;

use common::store_derived::{Shutdown, shut_down};
use strata_log::internals::format::STORE_COMMIT_LOG_DIR;
use strata_log::{Log, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig { flush_interval_ms: 3_600_000, offsets_flush_ms: 3_600_000, ..StoreConfig::default() }
}

#[test]
fn a_clamp_at_open_survives_a_crash_after_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let mut at = Vec::new();
    for i in 0..40 {
        at.push(store.put(&Message::new("t", 0, format!("m{i}"))).unwrap().log_offset);
    }
    store.commit_offset("g", "t", 0, 40).unwrap();
    store.close().unwrap();
    // The commit log loses its last ten messages (as `strata truncate`, or a lost tail, does).
    let log = Log::open(dir.path().join(STORE_COMMIT_LOG_DIR), config().log).unwrap();
    log.truncate_to(at[30]).unwrap();
    log.close().unwrap();

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
