//! The Raft store on a full disk, for real (a small ext4 image filled by another writer): appends
//! fail with a `StorageError` (or the flush callback's error), never a panic; votes and purges
//! still work (the meta file's next write has its space reserved), also after a reopen; nothing
//! acknowledged is lost; once space returns the reopened store goes on.
//!
//! Needs root and loop devices: `cargo test --all-features --test raft_disk_full_ext4 -- --ignored`.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/raft.rs"]
mod raft_common;

use common::ext4::{Mount, fill};
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{Entry, EntryPayload, Vote};
use raft_common::{Kv, log_id, open};

fn big(term: u64, index: u64) -> Entry<Kv> {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(format!("k{index}={}", "v".repeat(3000))) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root, loop devices, mkfs.ext4 and losetup (tests/common/ext4.rs)"]
async fn a_full_disk_fails_raft_writes_with_errors_and_loses_nothing() {
    let mount = Mount::new(16, None);
    let dir = mount.path().join("raft");
    let mut store = open(&dir).await;
    store.save_vote(&Vote::new_committed(1, 1)).await.unwrap();
    for index in 0..100 {
        store.blocking_append([big(1, index)]).await.unwrap();
    }
    let filler = fill(mount.path());
    let mut acked = 99;
    let mut failed = None;
    for index in 100..20_000 {
        match store.blocking_append([big(1, index)]).await {
            Ok(()) => acked = index,
            Err(error) => {
                failed = Some(error.to_string());
                break;
            }
        }
    }
    let failed = failed.expect("appends on a full disk failed at some point");
    eprintln!("append on the full disk: {failed}");
    // A purge is how Raft frees space: the meta write it starts with must not need a new block
    // (regression: the temporary meta file was created anew, and the write failed with ENOSPC).
    store.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
    store.purge(log_id(1, 29)).await.unwrap();
    let truncate = store.truncate(log_id(1, acked)).await;
    eprintln!("truncate on the full disk: {truncate:?}");
    drop(store);
    // Reopen on the full disk: everything acknowledged (the truncation may have cut `acked`).
    let mut store = open(&dir).await;
    let last = store.get_log_state().await.unwrap().last_log_id.unwrap().index;
    assert!(last + 1 >= acked, "the log ends at {last}, {acked} was acknowledged");
    store.purge(log_id(1, 49)).await.unwrap();
    assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new_committed(2, 1)));
    drop(store);
    std::fs::remove_file(filler).unwrap();
    let mut store = open(&dir).await;
    let state = store.get_log_state().await.unwrap();
    let entries = store.try_get_log_entries(..).await.unwrap();
    let first = state.last_purged_log_id.map_or(0, |id| id.index + 1);
    assert_eq!(entries.first().unwrap().log_id.index, first);
    let last = state.last_log_id.unwrap().index;
    assert_eq!(entries.len() as u64, last + 1 - first, "a hole");
    store.blocking_append([big(2, last + 1)]).await.unwrap();
    store.save_vote(&Vote::new_committed(3, 1)).await.unwrap();
    store.purge(log_id(1, 60)).await.unwrap();
    store.close().await.unwrap();
}
