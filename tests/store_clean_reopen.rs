//! A store closed cleanly reopens without cutting anything: its last queue entry crossing a
//! 512-byte sector boundary was dropped (and redispatched) at every open, logged as a cut "after
//! an unclean shutdown" that never happened. Only entries past the store checkpoint may be torn.
#![allow(clippy::unwrap_used)]

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        queue_entries_per_file: 100,
        index_slots: 64,
        index_entries: 256,
        ..StoreConfig::default()
    }
}

#[test]
fn a_clean_reopen_cuts_no_entry_that_crosses_a_sector() {
    let root = tempfile::tempdir().unwrap();
    let store = MessageStore::open(root.path(), config()).unwrap();
    // Entry 25 lies at bytes 500..520 of its file: across the 512-byte boundary.
    for i in 0..26 {
        store.put(&Message::new("t", 0, format!("m{i}"))).unwrap();
    }
    store.close().unwrap();
    for _ in 0..2 {
        let store = MessageStore::open(root.path(), config()).unwrap();
        assert_eq!(store.metrics().dispatched, 0, "nothing cut, so nothing dispatched again");
        assert_eq!(store.get_messages("t", 0, 0, 100, None).unwrap().messages.len(), 26);
        store.close().unwrap();
    }
}
