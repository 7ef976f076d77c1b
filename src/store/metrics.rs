//! The store's counters and the snapshot `MessageStore::metrics` returns.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::log::LogMetrics;

/// What the store counts as it runs (relaxed atomics: each is a count, none orders anything).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) puts: AtomicU64,
    pub(crate) put_failures: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) messages_got: AtomicU64,
    pub(crate) key_queries: AtomicU64,
    pub(crate) dispatch_failures: AtomicU64,
    pub(crate) not_messages: AtomicU64,
    pub(crate) entries_refused: AtomicU64,
    pub(crate) last_dispatch_lag_ms: AtomicI64,
    pub(crate) max_dispatch_lag_ms: AtomicI64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) background_failures: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A dispatched message was appended `lag_ms` before it was dispatched.
    pub(crate) fn dispatch_lag(&self, lag_ms: i64) {
        let lag_ms = lag_ms.max(0);
        self.last_dispatch_lag_ms.store(lag_ms, Ordering::Relaxed);
        self.max_dispatch_lag_ms.fetch_max(lag_ms, Ordering::Relaxed);
    }
}

/// A snapshot of a message store's metrics.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreMetrics {
    /// The commit log's metrics.
    pub log: LogMetrics,
    /// Messages put (each message of a batch counts).
    pub puts: u64,
    /// Puts refused or failed.
    pub put_failures: u64,
    /// `get_messages` calls (each round of a long poll counts).
    pub gets: u64,
    /// Messages those calls returned.
    pub messages_got: u64,
    /// `query_by_key` calls.
    pub key_queries: u64,
    /// Messages handed to the dispatchers.
    pub dispatched: u64,
    /// The commit-log offset below which every message is dispatched.
    pub dispatched_up_to: u64,
    /// Messages stored but not yet dispatched (the log's next offset minus `dispatched_up_to`).
    pub dispatch_lag_offsets: u64,
    /// Milliseconds between the append and the dispatch of the last message dispatched.
    pub dispatch_lag_ms: i64,
    /// The largest such lag since open.
    pub max_dispatch_lag_ms: i64,
    /// Times dispatch failed and was retried.
    pub dispatch_failures: u64,
    /// Records of the commit log that are not messages (skipped by dispatch; logged).
    pub not_messages: u64,
    /// Messages a consume queue refused because their queue offset does not continue it
    /// (damage; logged): they stay in the commit log and the index.
    pub entries_refused: u64,
    /// Consume queues.
    pub queues: usize,
    /// Index files.
    pub index_files: usize,
    /// Long polls that found nothing and waited, and those a new message woke.
    pub long_polls_held: u64,
    /// See `long_polls_held`.
    pub long_polls_woken: u64,
    /// Store checkpoints written.
    pub checkpoints: u64,
    /// Background flushes, checkpoints, offset writes or retention sweeps that failed (logged;
    /// retried at their next turn).
    pub background_failures: u64,
}
