//! A read-only store agrees with the store's owner where the owner's files lag: the queue bounds
//! after retention (the owner's files keep entries below the commit log's start until its next
//! sweep), and an index file created but whose header is not written yet.
#![allow(clippy::unwrap_used)]

use strata_log::{GetStatus, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 4096, ..StoreConfig::default().log },
        queue_entries_per_file: 64,
        index_slots: 16,
        index_entries: 100,
        ..StoreConfig::default()
    }
}

#[test]
fn read_only_bounds_follow_retention_as_the_owners_do() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let mut last = 0;
    for i in 0..40u32 {
        last = store.put(&Message::new("t", 0, format!("message {i} {}", "x".repeat(200)))).unwrap().log_offset;
    }
    let start = store.delete_messages_before(last).unwrap();
    assert!(start > 0);
    let owner = (store.min_queue_offset("t", 0).unwrap(), store.max_queue_offset("t", 0).unwrap());
    let owner_get = store.get_messages("t", 0, 0, 10, None).unwrap();
    let when = "beside the owner";
    {
        let view = MessageStore::open_read_only(dir.path(), config()).unwrap();
        let bounds = (view.min_queue_offset("t", 0).unwrap(), view.max_queue_offset("t", 0).unwrap());
        assert_eq!(bounds, owner, "{when}");
        let got = view.get_messages("t", 0, 0, 10, None).unwrap();
        assert_eq!((got.status, got.next_queue_offset), (owner_get.status, owner_get.next_queue_offset), "{when}");
        assert_eq!(got.status, GetStatus::OffsetTooSmall, "{when}");
        let listed = view.queues();
        assert_eq!((listed[0].min_offset, listed[0].max_offset), owner, "{when}");
    }
    store.close().unwrap();
}

#[test]
fn an_index_file_whose_header_is_not_written_yet_is_empty_to_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    for i in 0..5u32 {
        store.put(&Message::new("t", 0, format!("m{i}")).with_keys([format!("k{i}")])).unwrap();
    }
    store.close().unwrap();
    // The next file as `create` leaves it before its header is written: full size, all zeros.
    let index = dir.path().join("index");
    let first = std::fs::read_dir(&index).unwrap().next().unwrap().unwrap().path();
    let len = std::fs::metadata(&first).unwrap().len();
    std::fs::write(index.join("00000000000000000005.idx"), vec![0u8; len as usize]).unwrap();
    let view = MessageStore::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(view.query_by_key("t", "k3", 0, i64::MAX, 10).unwrap().len(), 1);
}
