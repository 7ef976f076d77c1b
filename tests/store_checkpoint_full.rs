//! An open that must lower the store checkpoint (derived files lost after a crash) on a disk too
//! full for the new file: the store still opens and reads, puts are refused with the disk-full
//! error until a checkpoint is written (a message put meanwhile could be skipped by an open after
//! a crash that trusted the old claim), and once space returns everything reads back, numbered
//! without reuse.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::store_derived::{Shutdown, shut_down};
use strata_log::internals::format::{STORE_ABORT_FILE, STORE_CONSUME_QUEUE_DIR};
use strata_log::{Error, FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, flush_policy: FlushPolicy::Always, ..StoreConfig::default().log },
        flush_interval_ms: 3_600_000,
        queue_entries_per_file: 64,
        index_slots: 16,
        index_entries: 1000,
        ..StoreConfig::default()
    }
}

fn bodies(store: &MessageStore) -> Vec<String> {
    let got = store.get_messages("t", 0, 0, 1000, None).unwrap();
    got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect()
}

#[test]
fn an_overclaiming_checkpoint_on_a_full_disk_refuses_puts_until_one_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    let mut want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    for body in &want {
        store.put(&Message::new("t", 0, body.clone())).unwrap();
    }
    store.close().unwrap();
    // A run that did not close (its `abort` stays), then the queue files lost: the next open
    // rebuilds them from the commit log and must lower the checkpoint, which claims all 20.
    std::fs::write(dir.path().join(STORE_ABORT_FILE), b"").unwrap();
    std::fs::remove_dir_all(dir.path().join(STORE_CONSUME_QUEUE_DIR)).unwrap();

    fail::cfg("new_file_enospc", "return").unwrap();
    let store = MessageStore::open(dir.path(), config());
    let refused = store.as_ref().ok().map(|store| store.put(&Message::new("t", 0, "refused")));
    let read = store.as_ref().ok().map(bodies);
    fail::remove("new_file_enospc");
    let store = store.unwrap();
    assert!(matches!(refused, Some(Err(Error::DiskFull { .. }))), "{refused:?}");
    assert_eq!(read.unwrap(), want, "the rebuilt queue reads on the full disk");

    // Space is back: the put writes the checkpoint first, then goes in after the others.
    let put = store.put(&Message::new("t", 0, "m20")).unwrap();
    assert_eq!(put.queue_offset, 20);
    want.push("m20".to_owned());
    assert_eq!(bodies(&store), want);
    // A crash now (a copy of the open store): the next open finds everything, numbered once.
    let crashed = shut_down(store, dir.path(), Shutdown::Crash);
    let store = MessageStore::open(&crashed, config()).unwrap();
    assert_eq!(bodies(&store), want);
    assert_eq!(store.put(&Message::new("t", 0, "m21")).unwrap().queue_offset, 21);
    store.close().unwrap();
}
