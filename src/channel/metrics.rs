//! The channel's counters and the snapshot `Channel::metrics` returns.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::log::LogMetrics;

/// What the channel counts as it runs (relaxed atomics: each is a count, none orders anything).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) put_attempts: AtomicU64,
    pub(crate) put_successes: AtomicU64,
    pub(crate) take_attempts: AtomicU64,
    pub(crate) take_successes: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) rollbacks: AtomicU64,
    pub(crate) channel_full: AtomicU64,
    pub(crate) bytes_put: AtomicU64,
    pub(crate) bytes_taken: AtomicU64,
    pub(crate) deletions: AtomicU64,
    pub(crate) background_failures: AtomicU64,
    pub(crate) events_recovered: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn load(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A snapshot of a channel's metrics (Flume's `ChannelCounter`, and the channel's log).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChannelMetrics {
    /// Events takers can take now: committed, and not taken by an open transaction.
    pub size: u64,
    /// Events taken by open transactions (they still count against the capacity).
    pub taken: u64,
    /// Events held: committed and not take-committed. Besides `size` and `taken`, the events of
    /// commits not yet durable (under `FlushPolicy::Always` takers see them once they are).
    pub held: u64,
    /// `ChannelConfig::capacity`.
    pub capacity: u64,
    /// Events a commit may still add: `capacity` minus `held`, or 0.
    pub remaining_capacity: u64,
    /// The events held as a percentage of `capacity` (above 100 only after a reopen with a
    /// lower capacity).
    pub fill_percentage: f64,
    /// Body bytes held (committed, not take-committed).
    pub bytes: u64,
    /// The limit on `bytes`: `byte_capacity × (100 − byte_capacity_buffer_percentage) / 100`.
    pub byte_limit: u64,
    /// `Transaction::put` calls.
    pub put_attempts: u64,
    /// Events whose put was committed.
    pub put_successes: u64,
    /// `Transaction::take` calls (those that found nothing too).
    pub take_attempts: u64,
    /// Events whose take was committed.
    pub take_successes: u64,
    /// Transactions committed (an empty one too).
    pub commits: u64,
    /// Transactions rolled back (by `rollback` or by being dropped), empty ones not counted.
    pub rollbacks: u64,
    /// Commits that failed with `Error::ChannelFull`.
    pub channel_full: u64,
    /// Body bytes of the events whose put was committed.
    pub bytes_put: u64,
    /// Body bytes of the events whose take was committed.
    pub bytes_taken: u64,
    /// The low watermark W: every event below this offset of the log was taken (the log's
    /// records below it may be deleted).
    pub low_watermark: u64,
    /// Times the background work deleted taken events' segments (`delete_records_before(W)`
    /// moved the log's start).
    pub deletions: u64,
    /// Background deletions that failed (logged; retried at their next turn).
    pub background_failures: u64,
    /// Events the replay at open found committed and not taken.
    pub events_recovered: u64,
    /// The channel's log.
    pub log: LogMetrics,
}
