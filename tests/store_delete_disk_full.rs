//! Deleting messages is how a user frees space on a full disk: the store checkpoint written
//! around the deletion (a new file) cannot be written then, and must not stop it.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use strata_log::{Error, LogConfig, Message, MessageStore, StoreConfig};

#[test]
fn deleting_messages_on_a_full_disk_deletes_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        log: LogConfig { segment_bytes: 4096, ..StoreConfig::default().log },
        flush_interval_ms: 3_600_000,
        queue_entries_per_file: 64,
        index_slots: 16,
        index_entries: 1000,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(dir.path(), config).unwrap();
    let mut last = 0;
    for i in 0..200u32 {
        last = store.put(&Message::new("t", 0, format!("message {i} {}", "x".repeat(64)))).unwrap().log_offset;
    }
    // The disk fills: no new file can get a block (the checkpoint is written as a new file).
    fail::cfg("new_file_enospc", "return").unwrap();
    let deleted = store.delete_messages_before(last / 2);
    let start = store.commit_log_start_offset();
    fail::remove("new_file_enospc");
    assert!(!matches!(deleted, Err(Error::DiskFull { .. })), "{deleted:?}");
    assert!(start > 0, "the messages were deleted: the log starts at {start}");
    assert_eq!(deleted.unwrap(), start);
    store.close().unwrap();
}
