//! openraft's own conformance suite for storage (`openraft::testing::Suite::test_all`) run
//! against `RaftLogStore`, each case on a fresh store in a temporary directory, with the
//! tests' in-memory state machine. A plain `#[test]`: the suite makes a tokio runtime per case.
#![cfg(feature = "openraft")]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use openraft::StorageError;
use openraft::testing::{StoreBuilder, Suite};
use raft_common::{Kv, MemStateMachine, config};
use strata_log::RaftLogStore;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<Kv, RaftLogStore<Kv>, MemStateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, RaftLogStore<Kv>, MemStateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().unwrap();
        let store = RaftLogStore::open(dir.path(), config()).await.unwrap();
        Ok((dir, store, MemStateMachine::default()))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    Suite::test_all(Builder).unwrap();
}
