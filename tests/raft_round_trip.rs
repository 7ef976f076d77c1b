//! Entries go into a `RaftLogStore` and come back as they went in: blank, membership and
//! application entries, appended one at a time and 64 at a time, over many segments, read
//! through the store and through a reader of its own, also after a reopen.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use std::collections::BTreeSet;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use openraft::{Entry, EntryPayload, Membership};
use raft_common::{Kv, log_id, normals, open};

fn debug(entries: &[Entry<Kv>]) -> Vec<String> {
    entries.iter().map(|e| format!("{e:?}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_come_back_as_they_went_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = open(dir.path()).await;
    let membership = Membership::new(vec![BTreeSet::from([1, 2, 3])], None);
    let mut written = vec![
        Entry::<Kv> { log_id: log_id(1, 0), payload: EntryPayload::Blank },
        Entry::<Kv> { log_id: log_id(1, 1), payload: EntryPayload::Membership(membership) },
    ];
    written.extend(normals(1, 2..2000));
    store.blocking_append(written[..1].to_vec()).await.unwrap();
    store.blocking_append(written[1..2].to_vec()).await.unwrap();
    for chunk in written[2..].chunks(64) {
        store.blocking_append(chunk.to_vec()).await.unwrap();
    }
    assert!(store.log().segment_count() >= 3, "the entries span segments");
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 1999)));

    let read = store.try_get_log_entries(..).await.unwrap();
    assert_eq!(debug(&read), debug(&written));
    let mut reader = store.get_log_reader().await;
    let middle = reader.try_get_log_entries(500..=1500).await.unwrap();
    assert_eq!(debug(&middle), debug(&written[500..=1500]));
    let limited = reader.limited_get_log_entries(10, 2000).await.unwrap();
    assert!(!limited.is_empty() && limited.len() <= 1990);
    assert_eq!(debug(&limited), debug(&written[10..10 + limited.len()]));
    assert!(reader.try_get_log_entries(2000..3000).await.unwrap().is_empty(), "nothing past the end");
    drop(reader);
    store.close().await.unwrap();

    let mut store = open(dir.path()).await;
    assert_eq!(debug(&store.try_get_log_entries(..).await.unwrap()), debug(&written));
    store.close().await.unwrap();
}
