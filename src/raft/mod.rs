//! strata as the Raft log storage of [openraft](https://docs.rs/openraft/0.9.25) (feature
//! `openraft`, docs/DESIGN.md §12): how a user who outgrows one machine replicates a strata log
//! with an existing Raft engine. Built on the log's public API only.
//!
//! - `store.rs`: [`RaftLogStore`] (openraft's `RaftLogStorage` and `RaftLogReader`) and
//!   [`RaftLogStoreReader`], with the open-time checks.
//! - `state.rs`: `RaftState`, the log and the entries stored but not yet visible, shared by the
//!   store and its readers (its parts table and lock order); every blocking call of the log, run
//!   on tokio's blocking pool.
//! - `meta.rs`: the `raft-meta` file (vote, committed, last purged), replaced atomically.
//!
//! One Raft entry is one record in a batch of its own, at the log offset equal to its Raft
//! index, so `Log::truncate_to` (which cuts at the base of the batch holding the offset) always
//! cuts exactly at the entry (ARCHITECTURE.md, "Raft").

mod meta;
mod state;
mod store;

pub use store::{RaftLogStore, RaftLogStoreReader};
