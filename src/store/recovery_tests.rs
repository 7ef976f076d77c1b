//! Tests of a store's open against hostile or half-finished states: a checkpoint with a valid CRC
//! naming an impossible queue, a floor at the end of the numbering, a crash in the middle of an
//! index rebuild, a crash inside `strata store recover`'s discard.

use crate::store::checkpoint::{self, QueueSummary};
use crate::store::{Message, MessageStore, StoreConfig};

fn small() -> StoreConfig {
    // A checkpoint at every turn of the open's dispatch, as a long rebuild makes them.
    StoreConfig {
        index_slots: 16,
        index_entries: 100,
        queue_entries_per_file: 64,
        flush_interval_ms: 1,
        ..StoreConfig::default()
    }
}

/// A closed store of 1,000 messages in `t`/0, keyed `k{i}`.
fn thousand(dir: &std::path::Path) {
    let store = MessageStore::open(dir, small()).expect("open");
    for i in 0..1000u32 {
        store.put(&Message::new("t", 0, format!("m{i}")).with_keys([format!("k{i}")])).expect("put");
    }
    store.close().expect("close");
}

fn summary(topic: &str, next: u64) -> QueueSummary {
    QueueSummary {
        topic: topic.into(),
        queue_id: 0,
        min_queue_offset: 0,
        first_log_offset: None,
        next_queue_offset: next,
        last_log_offset: None,
    }
}

#[test]
fn a_checkpoint_naming_an_impossible_queue_is_damage_not_a_panic() {
    for bad in [summary("a/b", 5), summary("t", u64::MAX)] {
        let dir = tempfile::tempdir().expect("tempdir");
        MessageStore::open(dir.path(), small()).expect("open").close().expect("close");
        let mut read = checkpoint::read(dir.path()).expect("read");
        read.queues.push(bad.clone());
        checkpoint::write(dir.path(), &read).expect("write");
        let store = MessageStore::open(dir.path(), small()).expect("a damaged checkpoint costs work");
        let put = store.put(&Message::new("t", 0, "x")).expect("put");
        assert_eq!(put.queue_offset, 0, "{bad:?} was not taken as a floor");
        store.close().expect("close");
    }
}

#[test]
fn a_crash_after_store_recover_set_the_derived_files_aside_rebuilds_them_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    thousand(dir.path());
    for name in ["consumequeue", "index"] {
        std::fs::rename(dir.path().join(name), dir.path().join(format!("{name}.discarded"))).expect("aside");
    }
    let store = MessageStore::open(dir.path(), small()).expect("open");
    for key in ["k3", "k500", "k990"] {
        assert_eq!(store.query_by_key("t", key, 0, i64::MAX, 4).expect("query").len(), 1, "{key}");
    }
    assert_eq!(store.put(&Message::new("t", 0, "next")).expect("put").queue_offset, 1000);
    store.close().expect("close");
}

#[cfg(feature = "failpoints")]
#[test]
fn a_crash_in_the_middle_of_an_index_rebuild_keeps_what_it_rebuilt() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    // 4 MiB of messages: the open dispatches them in several reads, with a checkpoint between.
    let store = MessageStore::open(dir.path(), small()).expect("open");
    for i in 0..4000u32 {
        store.put(&Message::new("t", 0, vec![b'x'; 1000]).with_keys([format!("k{i}")])).expect("put");
    }
    store.close().expect("close");
    let index_dir = dir.path().join("index");
    std::fs::remove_dir_all(&index_dir).expect("rm");
    // The next open rebuilds the index, and dies half-way (a child process, killed by a
    // failpoint).
    let status = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", "store::recovery_tests::child_open", "--nocapture", "--test-threads=1"])
        .env("STRATA_REBUILD_DIR", dir.path())
        .status()
        .expect("child");
    assert!(!status.success(), "the child died in the rebuild");
    let first = index_dir.join("00000000000000000000.idx");
    let ino = std::fs::metadata(&first).expect("the rebuild's first file").ino();
    // Held by a second name, so a new file cannot take its inode number.
    std::fs::hard_link(&first, dir.path().join("keep-alive")).expect("link");
    let store = MessageStore::open(dir.path(), small()).expect("open again");
    let ino_after = std::fs::metadata(&first).expect("first file").ino();
    assert_eq!(store.query_by_key("t", "k3", 0, i64::MAX, 4).expect("query").len(), 1);
    store.close().expect("close");
    assert_eq!(ino, ino_after, "the files the crashed rebuild made were kept, not rebuilt again");
}

/// The child of [`a_crash_in_the_middle_of_an_index_rebuild_keeps_what_it_rebuilt`].
#[cfg(feature = "failpoints")]
#[test]
fn child_open() {
    let Some(dir) = std::env::var_os("STRATA_REBUILD_DIR") else { return };
    fail::cfg("store_after_queue_entry", "3000*off->return").expect("failpoint");
    let _ = MessageStore::open(std::path::Path::new(&dir), small());
    std::process::exit(3);
}
