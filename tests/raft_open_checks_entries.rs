//! `RaftLogStore::open` checks the first and last entries of its log, and names what it finds
//! wrong with the Raft store's own errors: a record that does not decode as an entry is
//! `Error::NotARaftEntry`, an entry at another offset than its index `Error::RaftEntryMisplaced`
//! (both were `Error::Corrupt` with the index as a byte position). The log is changed behind the
//! store's back here, through a plain `Log` on its directory.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use std::path::Path;

use openraft::storage::RaftLogStorageExt;
use raft_common::{Kv, config, normals, open};
use strata_log::{Error, Log, RaftLogStore, Record};

/// A store in `dir` holding entries 0..3, closed.
async fn three_entries(dir: &Path) {
    let mut store = open(dir).await;
    store.blocking_append(normals(1, 0..3)).await.unwrap();
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_is_no_entry_is_not_a_raft_entry() {
    let dir = tempfile::tempdir().unwrap();
    three_entries(dir.path()).await;
    let log = Log::open(dir.path().join("log"), config()).unwrap();
    log.append(&[Record::new(b"")]).unwrap();
    log.close().unwrap();
    let opened = RaftLogStore::<Kv>::open(dir.path(), config()).await;
    assert!(matches!(&opened, Err(Error::NotARaftEntry { offset: 3, .. })), "{:?}", opened.err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_at_another_offset_is_misplaced() {
    let dir = tempfile::tempdir().unwrap();
    three_entries(dir.path()).await;
    let log = Log::open(dir.path().join("log"), config()).unwrap();
    let first = log.read(0, 1 << 20).unwrap().next().unwrap().unwrap();
    let entry_0 = first.value().unwrap().to_vec();
    log.append(&[Record::new(&entry_0)]).unwrap();
    log.close().unwrap();
    let opened = RaftLogStore::<Kv>::open(dir.path(), config()).await;
    assert!(matches!(&opened, Err(Error::RaftEntryMisplaced { index: 0, offset: 3, .. })), "{:?}", opened.err());
}
