//! Entries `append` stored but the log has not made durable yet (so its readers cannot see them
//! under `FlushPolicy::Always`): openraft reads them as soon as `append` returns, before the flush
//! is reported. Every sync round is slowed by the `sync_round` failpoint (`sleep`), and a reader
//! reads while appends wait for their flush: it sees every entry an `append` stored, in order,
//! never a hole, from the log and the pending queue together.
#![cfg(all(feature = "openraft", feature = "failpoints"))]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use std::time::Duration;

use openraft::EntryPayload;
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use raft_common::{Kv, normals, open};

/// Checks that `entries` are the entries `from..` of term-agnostic `normals`, without a hole.
fn check_run(entries: &[openraft::Entry<Kv>], from: u64) {
    for (index, entry) in (from..).zip(entries) {
        assert_eq!(entry.log_id.index, index, "a hole or a reordering");
        let EntryPayload::Normal(command) = &entry.payload else { panic!("{entry:?}") };
        assert_eq!(*command, format!("key{index}=value{index}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_readable_while_their_flush_is_pending() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    store.blocking_append(normals(1, 0..64)).await.unwrap();
    let mut reader = store.get_log_reader().await;
    fail::cfg("sync_round", "sleep(150)").unwrap();
    // Appends of 1..40 entries, each waiting for its flush, while the reader reads. The watch
    // holds (the end after the append under way, whether its flush was reported).
    let (progress, watch) = tokio::sync::watch::channel((64u64, true));
    let appender = tokio::spawn(async move {
        let mut next = 64;
        for size in [1, 7, 40, 3, 16, 1, 25, 2, 9] {
            progress.send((next + size, false)).unwrap();
            store.blocking_append(normals(1, next..next + size)).await.unwrap();
            next += size;
            progress.send((next, true)).unwrap();
        }
        (store, next)
    });
    let mut read_before_flush = std::collections::BTreeSet::new();
    while !appender.is_finished() {
        let all = reader.try_get_log_entries(0..).await.unwrap();
        check_run(&all, 0);
        let end = all.len() as u64;
        // Every entry read, when its append's flush is still pending: readable from the queue.
        if *watch.borrow() == (end, false) {
            read_before_flush.insert(end);
        }
        // Ranges starting anywhere, the pending queue's front included.
        for from in [0, 50, 63, 64, 65, end.saturating_sub(3), end.saturating_sub(1), end] {
            let part = reader.try_get_log_entries(from..end + 5).await.unwrap();
            check_run(&part, from);
            assert!(part.len() as u64 >= end.saturating_sub(from), "fewer entries than an earlier read saw");
            let limited = reader.limited_get_log_entries(from, end).await.unwrap();
            check_run(&limited, from);
            assert_eq!(limited.len() as u64, end.saturating_sub(from));
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let (mut store, next) = appender.await.unwrap();
    fail::remove("sync_round");
    assert!(read_before_flush.len() >= 3, "entries read before their flush after only {read_before_flush:?}");
    let all = store.try_get_log_entries(..).await.unwrap();
    assert_eq!(all.len() as u64, next);
    check_run(&all, 0);
    drop(reader);
    store.close().await.unwrap();
    scenario.teardown();
}
