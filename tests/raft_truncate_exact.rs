//! A truncation removes exactly the entries from its index on, also inside what one append
//! stored (64 entries in one call are 64 one-record batches, so the log's cut at a batch base
//! is the entry itself), and durably: after a reopen the removed entries stay removed and the
//! new ones of a later term are there. With a reader holding the segment being cut, the
//! truncation retries `Error::Busy` until the reader is done instead of stopping the node.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use raft_common::{Kv, log_id, normals, open};
use strata_log::RaftLogStore;

async fn ids(store: &mut RaftLogStore<Kv>) -> Vec<(u64, u64)> {
    let entries = store.try_get_log_entries(..).await.unwrap();
    entries.iter().map(|e| (e.log_id.leader_id.term, e.log_id.index)).collect()
}

fn expected(cut: u64, new_end: u64) -> Vec<(u64, u64)> {
    (0..cut).map(|i| (1, i)).chain((cut..new_end).map(|i| (2, i))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_inside_a_64_entry_append_is_exact_and_durable() {
    // The failpoint test below holds reads of every test in this binary: none may run beside it.
    #[cfg(feature = "failpoints")]
    let _alone = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    store.blocking_append(normals(1, 0..64)).await.unwrap();
    store.blocking_append(normals(1, 64..128)).await.unwrap();
    store.truncate(log_id(1, 100)).await.unwrap();
    assert_eq!(store.log().next_offset(), 100);
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 99)));
    assert_eq!(ids(&mut store).await, expected(100, 100));
    // The leader of term 2 overwrites from 100 on, then from 37 on (inside the first append).
    store.blocking_append(normals(2, 100..110)).await.unwrap();
    store.truncate(log_id(1, 37)).await.unwrap();
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 36)));
    store.blocking_append(normals(2, 37..50)).await.unwrap();
    assert_eq!(ids(&mut store).await, expected(37, 50));
    drop(store); // no clean close: what the truncation and the append made durable counts

    let mut store = open(dir.path()).await;
    assert_eq!(ids(&mut store).await, expected(37, 50), "no removed entry came back");
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(2, 49)));
    store.truncate(log_id(1, 0)).await.unwrap();
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, None);
    store.close().await.unwrap();
    let mut store = open(dir.path()).await;
    assert!(ids(&mut store).await.is_empty());
    store.close().await.unwrap();
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_retries_while_a_reader_keeps_the_segment_busy() {
    use std::sync::mpsc;
    use std::time::Duration;

    use strata_log::LogConfig;

    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { truncate_wait_ms: 20, ..raft_common::config() };
    let mut store = raft_common::open_retrying(dir.path(), config).await;
    store.blocking_append(normals(1, 0..64)).await.unwrap();
    let (entered, inside) = mpsc::channel();
    let entered = std::sync::Mutex::new(entered);
    // The first read to get there holds the segment for 300 ms: about 15 Busy truncations.
    fail::cfg_callback("read_holding_segment", move || {
        if entered.lock().unwrap().send(()).is_ok() {
            std::thread::sleep(Duration::from_millis(300));
        }
    })
    .unwrap();
    let mut reader = store.get_log_reader().await;
    let read = tokio::spawn(async move { reader.try_get_log_entries(0..64).await.unwrap().len() });
    tokio::task::spawn_blocking(move || inside.recv().unwrap()).await.unwrap();
    let started = std::time::Instant::now();
    store.truncate(log_id(1, 10)).await.unwrap();
    // One attempt gives up after 20 ms: taking most of the reader's 300 ms means it retried.
    assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());
    fail::remove("read_holding_segment");
    assert!(read.await.unwrap() <= 64);
    assert_eq!(ids(&mut store).await, expected(10, 10));
    assert_eq!(store.log().metrics().truncations, 1);
    store.close().await.unwrap();
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_past_the_end_changes_nothing() {
    // The failpoint test below holds reads of every test in this binary: none may run beside it.
    #[cfg(feature = "failpoints")]
    let _alone = fail::FailScenario::setup();
    // Regression: a cut past the end removed nothing but set the last log id from the (absent)
    // entry before the cut, so `get_log_state` reported an empty log that still held entries.
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    store.blocking_append(normals(1, 0..10)).await.unwrap();
    store.truncate(log_id(1, 20)).await.unwrap();
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 9)));
    store.truncate(log_id(1, 10)).await.unwrap();
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 9)));
    assert_eq!(ids(&mut store).await, expected(10, 10));
    store.close().await.unwrap();
}
