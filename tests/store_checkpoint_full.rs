//! An open that must lower the store checkpoint (derived files lost after a crash) on a disk too
//! full for a new file: the checkpoint is lowered in place, and the store opens, reads and takes
//! puts; if even that fails, puts are refused with the disk-full error until a checkpoint is
//! written (a message put meanwhile could be skipped by an open after a crash that trusted the
//! old claim). Either way a crash afterwards loses nothing and numbers nothing twice.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::store_derived::{Shutdown, shut_down};
use std::path::Path;
use std::sync::Mutex;

use strata_log::internals::format::{STORE_ABORT_FILE, STORE_CHECKPOINT_FILE, STORE_CONSUME_QUEUE_DIR};
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

/// Failpoints are the process's: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A store of 20 messages whose last run did not close and whose queue files are lost: its next
/// open rebuilds them from the commit log and must lower the checkpoint, which claims all 20.
fn store_to_rebuild(dir: &Path) -> Vec<String> {
    let store = MessageStore::open(dir, config()).unwrap();
    let want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    for body in &want {
        store.put(&Message::new("t", 0, body.clone())).unwrap();
    }
    store.close().unwrap();
    std::fs::write(dir.join(STORE_ABORT_FILE), b"").unwrap();
    std::fs::remove_dir_all(dir.join(STORE_CONSUME_QUEUE_DIR)).unwrap();
    want
}

/// The `dispatched_up_to` the checkpoint file claims (version 2: after the magic and version).
fn claimed(dir: &Path) -> u64 {
    let bytes = std::fs::read(dir.join(STORE_CHECKPOINT_FILE)).unwrap();
    u64::from_be_bytes(bytes[6..14].try_into().unwrap())
}

/// The usual case: no new file can be made, so the checkpoint is lowered in place; the store
/// opens, reads, and takes puts (the claim is honest); a crash after them loses nothing.
#[test]
fn on_a_full_disk_the_checkpoint_is_lowered_in_place() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut want = store_to_rebuild(dir.path());
    assert_eq!(claimed(dir.path()), 20);
    fail::cfg("new_file_enospc", "return").unwrap();
    let store = MessageStore::open(dir.path(), config());
    let claim = claimed(dir.path());
    let put = store.as_ref().ok().map(|store| store.put(&Message::new("t", 0, "m20")));
    let read = store.as_ref().ok().map(bodies);
    fail::remove("new_file_enospc");
    let store = store.unwrap();
    assert!(claim < 20, "lowered to where the rebuild starts: {claim}");
    assert_eq!(put.unwrap().unwrap().queue_offset, 20);
    want.push("m20".to_owned());
    assert_eq!(read.unwrap(), want, "the rebuilt queue reads on the full disk");
    let crashed = shut_down(store, dir.path(), Shutdown::Crash);
    let store = MessageStore::open(&crashed, config()).unwrap();
    assert_eq!(bodies(&store), want);
    assert_eq!(store.put(&Message::new("t", 0, "m21")).unwrap().queue_offset, 21);
    store.close().unwrap();
}

/// When even the in-place write fails, the checkpoint still claims too much: puts are refused
/// with the disk-full error until a checkpoint is written.
#[test]
fn an_overclaiming_checkpoint_on_a_full_disk_refuses_puts_until_one_is_written() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut want = store_to_rebuild(dir.path());
    fail::cfg("new_file_enospc", "return").unwrap();
    fail::cfg("lower_store_checkpoint", "return").unwrap();
    let store = MessageStore::open(dir.path(), config());
    fail::remove("lower_store_checkpoint");
    assert_eq!(claimed(dir.path()), 20, "still the old claim");
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
