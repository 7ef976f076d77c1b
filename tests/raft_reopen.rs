//! A reopened `RaftLogStore` has what it had: the vote, the committed log id (written with the
//! next vote or purge, or at close), the last purged log id (term included, also when the purge
//! went past the end) and the last log id. And `open` refuses a log configuration under which
//! the log could lose or delete entries by itself.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use openraft::storage::{LogState, RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{LogId, Vote};
use raft_common::{Kv, config, log_id, normals, open};
use strata_log::{CleanupPolicy, Error, FlushPolicy, LogConfig, RaftLogStore};

async fn state(store: &mut RaftLogStore<Kv>) -> LogState<Kv> {
    store.get_log_state().await.unwrap()
}

fn state_of(purged: Option<LogId<u64>>, last: Option<LogId<u64>>) -> LogState<Kv> {
    LogState { last_purged_log_id: purged, last_log_id: last }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_keeps_vote_committed_last_purged_and_last_log_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    store.blocking_append(normals(3, 0..100)).await.unwrap();
    store.save_committed(Some(log_id(3, 80))).await.unwrap();
    store.save_vote(&Vote::new_committed(3, 1)).await.unwrap();
    store.purge(log_id(3, 49)).await.unwrap();
    store.save_committed(Some(log_id(3, 90))).await.unwrap();
    store.close().await.unwrap();

    let mut store = open(dir.path()).await;
    assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new_committed(3, 1)));
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(3, 90)), "close writes the latest");
    assert_eq!(state(&mut store).await, state_of(Some(log_id(3, 49)), Some(log_id(3, 99))));
    let entries = store.try_get_log_entries(..).await.unwrap();
    assert_eq!(entries.first().map(|e| e.log_id), Some(log_id(3, 50)), "the purged entries stay gone");
    assert_eq!(entries.len(), 50);

    // A purge past the end: the log is empty, its last log id is the purged one.
    store.purge(log_id(4, 150)).await.unwrap();
    drop(store); // no close: the meta the purge wrote is what counts
    let mut store = open(dir.path()).await;
    assert_eq!(state(&mut store).await, state_of(Some(log_id(4, 150)), Some(log_id(4, 150))));
    assert!(store.try_get_log_entries(..).await.unwrap().is_empty());
    store.blocking_append(normals(5, 151..160)).await.unwrap();
    store.close().await.unwrap();

    let mut store = open(dir.path()).await;
    assert_eq!(state(&mut store).await, state_of(Some(log_id(4, 150)), Some(log_id(5, 159))));
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(3, 90)));
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_refuses_a_log_that_could_lose_or_delete_entries() {
    let dir = tempfile::tempdir().unwrap();
    let refused = [
        LogConfig { flush_policy: FlushPolicy::Never, ..config() },
        LogConfig { retention_bytes: Some(1 << 20), ..config() },
        LogConfig { retention_ms: Some(60_000), ..config() },
        LogConfig { cleanup_policy: CleanupPolicy::Compact, ..config() },
    ];
    for config in refused {
        let result = RaftLogStore::<Kv>::open(dir.path(), config.clone()).await;
        assert!(matches!(result, Err(Error::InvalidConfig { .. })), "{config:?} accepted");
    }
    assert!(!dir.path().join("log").exists(), "a refused open creates nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_open_of_a_live_store_leaves_its_meta_temp_file_alone() {
    // Regression: `open` removed `raft-meta.tmp` before taking the log's directory lock, so a
    // second open of a live store (refused with `Error::Locked`) could unlink the temporary file
    // the live store was writing; its rename then failed and the live node stopped.
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    store.save_vote(&Vote::new(1, 1)).await.unwrap();
    // The live store between writing its temporary meta file and renaming it.
    let tmp = dir.path().join("raft-meta.tmp");
    std::fs::write(&tmp, b"the live store's next meta").unwrap();
    let second = RaftLogStore::<Kv>::open(dir.path(), config()).await;
    assert!(matches!(second, Err(Error::Locked { .. })), "{:?}", second.err());
    assert!(tmp.exists(), "a refused open removed the live store's temporary meta file");
    std::fs::remove_file(&tmp).unwrap();
    store.save_vote(&Vote::new(2, 1)).await.unwrap();
    store.close().await.unwrap();
}
