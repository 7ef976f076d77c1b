//! Helpers of the Raft store's tests (feature `openraft`): the type config, a small in-memory
//! key-value state machine (openraft's suite needs one beside the log store), entries, and a
//! log configuration with small segments. Included by path (`#[path = "common/raft.rs"]`) by
//! the Raft tests alone: `common/mod.rs` is shared with `strata-cli`'s tests, which have no
//! `openraft` feature.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StoredMembership,
};
use strata_log::{LogConfig, RaftLogStore};

openraft::declare_raft_types!(
    /// The tests' type config: commands are `key=value` strings, a response is the old value.
    pub Kv: D = String, R = String
);

/// Small segments (entries roll many), preallocation off (many stores in one test).
pub fn config() -> LogConfig {
    LogConfig { segment_bytes: 64 << 10, index_bytes: 4096, preallocate: false, ..LogConfig::default() }
}

/// Opens the store in `dir` with [`config`].
pub async fn open(dir: &Path) -> RaftLogStore<Kv> {
    open_retrying(dir, config()).await
}

/// `RaftLogStore::open`, retried while the directory lock is still held by a store closing on
/// the blocking pool (a drop closes there) or by a child process between fork and exec.
pub async fn open_retrying(dir: &Path, config: LogConfig) -> RaftLogStore<Kv> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match RaftLogStore::open(dir, config.clone()).await {
            Err(strata_log::Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            other => return other.unwrap(),
        }
    }
}

/// The log id of term `term` (leader node 1) at `index`.
pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// An application entry `key<index>=value<index>` of term `term`.
pub fn normal(term: u64, index: u64) -> Entry<Kv> {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(format!("key{index}=value{index}")) }
}

/// Entries `range` of term `term`.
pub fn normals(term: u64, range: std::ops::Range<u64>) -> Vec<Entry<Kv>> {
    range.map(|index| normal(term, index)).collect()
}

/// What the state machine holds.
#[derive(Debug, Default)]
struct State {
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    data: BTreeMap<String, String>,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// An in-memory key-value state machine; clones share it (the application reads through one).
#[derive(Debug, Clone, Default)]
pub struct MemStateMachine {
    state: Arc<Mutex<State>>,
}

impl MemStateMachine {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<String> {
        self.state.lock().unwrap().data.get(key).cloned()
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap().data.len()
    }
}

impl RaftSnapshotBuilder<Kv> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Kv>, StorageError<u64>> {
        let mut state = self.state.lock().unwrap();
        state.snapshots_built += 1;
        let last = state.last_applied;
        let snapshot_id = format!("{}-{}", last.map_or(0, |id| id.index), state.snapshots_built);
        let meta = SnapshotMeta { last_log_id: last, last_membership: state.membership.clone(), snapshot_id };
        let bytes = serde_json::to_vec(&state.data).unwrap();
        state.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<Kv> for MemStateMachine {
    type SnapshotBuilder = MemStateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let state = self.state.lock().unwrap();
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<Kv>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut state = self.state.lock().unwrap();
        let mut replies = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let reply = match entry.payload {
                EntryPayload::Blank => String::new(),
                EntryPayload::Normal(command) => {
                    let (key, value) = command.split_once('=').unwrap_or((&command, ""));
                    state.data.insert(key.to_owned(), value.to_owned()).unwrap_or_default()
                }
                EntryPayload::Membership(membership) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), membership);
                    String::new()
                }
            };
            replies.push(reply);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> MemStateMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let mut state = self.state.lock().unwrap();
        state.data = serde_json::from_slice(&bytes).unwrap();
        state.last_applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        state.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<Kv>>, StorageError<u64>> {
        let state = self.state.lock().unwrap();
        Ok(state.snapshot.clone().map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}
