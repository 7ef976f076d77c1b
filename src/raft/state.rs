//! The log side of the Raft store, shared by the store and its readers: `RaftState`, the `Log`
//! (one Raft entry per batch, log offset == Raft index) and the entries stored but not yet
//! visible. Every method here blocks (it calls the log) and runs on tokio's blocking pool, never
//! on a worker. Entries are bytes here (postcard, encoded by the caller): nothing in this file
//! knows the type config.
//!
//! | part | owns |
//! |---|---|
//! | [`Log`] (`RaftState::log`) | the entries, one per batch at the offset equal to its index |
//! | `RaftState::pending` | the entries stored but not yet visible to the log's readers |
//!
//! The operations on them are the methods below: `store`, `read`, `truncate`, `purge_before`,
//! `wait_stored_durable`. The store (`store.rs`) keeps the rest behind `&mut self`, with no lock
//! (openraft makes one call of it at a time): the meta as last written to `raft-meta`, the
//! committed log id, the last log id.
//!
//! # Lock order
//!
//! A thread holding lock *n* takes only locks numbered above *n*:
//!
//! 1. the log's locks (its own order, `log/mod.rs`), taken inside every call of the log. The log
//!    holds none of them when it calls back (`Log::on_durable` callbacks, which only hand the
//!    result to openraft).
//! 2. leaves, which take nothing else: the pending lock (`RaftState::pending`), held to change or
//!    copy the queue and to load the log's visible end (an atomic, no lock), never across another
//!    call of the log.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::log::{AppendInfo, Log, Record};

/// How much one `Log::read` copies while reading entries.
const READ_CHUNK_BYTES: usize = 1 << 20;
/// How long a truncation keeps retrying `Error::Busy` (readers in the segment it cuts) before it
/// gives up; each attempt already waited `truncate_wait_ms`.
const TRUNCATE_RETRY_FOR: Duration = Duration::from_secs(120);

/// An entry stored, as its Raft index and encoded bytes.
pub(crate) type RawEntry = (u64, Vec<u8>);

/// The log and the entries appended to it that readers cannot see yet (see the module
/// documentation).
pub(crate) struct RaftState {
    pub log: Log,
    /// Entries stored but maybe not yet visible, with consecutive indexes. Under
    /// `FlushPolicy::Always` the log shows readers only durable records, while openraft reads
    /// an entry as soon as `append` returns (a leader replicates before its own flush): reads
    /// serve indexes from the front of this queue on from here. An entry leaves the front once
    /// the log's visible end is past it, so every index below the front is visible in the log.
    pending: Mutex<VecDeque<RawEntry>>,
}

impl RaftState {
    pub fn new(log: Log) -> RaftState {
        RaftState { log, pending: Mutex::new(VecDeque::new()) }
    }

    /// Stores `entries` (consecutive, the first at index `first`), one batch each, without
    /// waiting for durability, and returns the last batch's `AppendInfo`. An empty log restarts
    /// at `first` if it is not there already (a follower after a snapshot), provided `first` is
    /// not below `min_first` (the index after the last purged entry); otherwise `first` must be
    /// the log's next offset.
    pub fn store(&self, first: u64, entries: Vec<Vec<u8>>, min_first: u64) -> Result<AppendInfo> {
        let (start, next) = (self.log.start_offset(), self.log.next_offset());
        if first != next {
            if start != next || first < min_first {
                return Err(Error::RaftGap { index: first, start, next });
            }
            self.log.reset_at(first)?;
            self.pending.lock().clear();
        }
        let mut last = None;
        let mut stored = Vec::with_capacity(entries.len());
        let mut result = Ok(());
        for (index, bytes) in (first..).zip(entries) {
            match self.log.append_nowait(&[Record::new(&bytes)]) {
                Ok(info) if info.base_offset == index => {
                    last = Some(info);
                    stored.push((index, bytes));
                }
                Ok(info) => {
                    let (path, offset) = (self.log.dir().to_path_buf(), info.base_offset);
                    result = Err(Error::RaftEntryMisplaced { path, index, offset });
                    break;
                }
                Err(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        // What was stored is readable even if a later entry failed (openraft stops the node on
        // the error anyway, but a reader must not see a hole meanwhile).
        self.pending.lock().extend(stored);
        result?;
        Ok(last.expect("entries is not empty: the caller returns early for none"))
    }

    /// Entries with indexes in `[from, to)` that are in the log, in order and without a hole:
    /// those below the start are skipped, and a read meeting a concurrent truncation ends there.
    pub fn read(&self, from: u64, to: u64) -> Result<Vec<RawEntry>> {
        let (pending_from, tail) = {
            let mut pending = self.pending.lock();
            self.trim(&mut pending);
            let front = pending.front().map_or(u64::MAX, |(index, _)| *index);
            let tail: Vec<RawEntry> = pending.iter().filter(|(index, _)| (from..to).contains(index)).cloned().collect();
            (front, tail)
        };
        // Every index below `pending_from` was visible when it was looked at, and visibility
        // only moves back under a truncation, which a read may meet (it then stops).
        let log_to = to.min(pending_from);
        let from = from.max(self.log.start_offset());
        let mut entries = if from < log_to { self.read_log(from, log_to)? } else { Vec::new() };
        let reached = entries.last().map_or(from, |(index, _)| index + 1);
        if reached >= log_to {
            entries.extend(tail.into_iter().filter(|(index, _)| *index >= from));
        }
        Ok(entries)
    }

    /// Reads visible entries in `[from, to)` from the log.
    fn read_log(&self, from: u64, to: u64) -> Result<Vec<RawEntry>> {
        let mut entries = Vec::new();
        let mut next = from;
        while next < to {
            let reader = match self.log.read(next, READ_CHUNK_BYTES) {
                Ok(reader) => reader,
                // A purge or a truncation moved the log under the read: what was read stands.
                Err(Error::OffsetOutOfRange { .. } | Error::Truncated { .. }) => break,
                Err(error) => return Err(error),
            };
            let before = next;
            for record in reader {
                let record = match record {
                    Ok(record) => record,
                    Err(Error::Truncated { .. }) => return Ok(entries),
                    Err(error) => return Err(error),
                };
                if record.offset() >= to {
                    break;
                }
                debug_assert_eq!(record.offset(), next, "one entry per offset, no gaps");
                entries.push((record.offset(), record.value().unwrap_or_default().to_vec()));
                next = record.offset() + 1;
            }
            if next == before {
                break;
            }
        }
        Ok(entries)
    }

    /// Drops the pending entries the log now shows readers.
    fn trim(&self, pending: &mut VecDeque<RawEntry>) {
        let visible = self.log.visible_end();
        while pending.front().is_some_and(|(index, _)| *index < visible) {
            pending.pop_front();
        }
    }

    /// Removes exactly the entries at index `cut` and above, durably (the log's truncation
    /// lowers its recovery point first: nothing removed comes back after a crash). Retries
    /// `Error::Busy` (readers of the segment being cut) for up to `TRUNCATE_RETRY_FOR`.
    pub fn truncate(&self, cut: u64) -> Result<()> {
        let cut = cut.max(self.log.start_offset());
        if cut >= self.log.next_offset() {
            return Ok(());
        }
        // Before the log moves back, so that no reader finds a removed entry here once the log
        // has dropped it (entries below `cut` stay, and stay in order).
        self.pending.lock().retain(|(index, _)| *index < cut);
        let deadline = Instant::now() + TRUNCATE_RETRY_FOR;
        let mut pause = Duration::from_millis(1);
        let new_next = loop {
            match self.log.truncate_to(cut) {
                Ok(new_next) => break new_next,
                Err(Error::Busy { waited }) if Instant::now() < deadline => {
                    tracing::warn!(cut, ?waited, "readers kept the Raft log busy; truncating again");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(error) => return Err(error),
            }
        };
        // One entry per batch and no compaction: every cut is at a batch base.
        if new_next != cut {
            return Err(Error::RaftTruncationInexact { cut, next: new_next });
        }
        Ok(())
    }

    /// Removes every entry below `start` (a purge up to `start - 1`): the log start moves there,
    /// and a purge past the end restarts the log, empty, at `start`.
    pub fn purge_before(&self, start: u64) -> Result<()> {
        if start <= self.log.start_offset() {
            return Ok(());
        }
        if start <= self.log.next_offset() {
            self.log.delete_records_before(start)?;
        } else {
            self.log.reset_at(start)?;
        }
        let mut pending = self.pending.lock();
        pending.retain(|(index, _)| *index >= start);
        self.trim(&mut pending);
        Ok(())
    }

    /// Makes every entry stored so far durable before what comes next (a vote), so that writes
    /// reach the disk in the order openraft issued them.
    pub fn wait_stored_durable(&self) -> Result<()> {
        let next = self.log.next_offset();
        if self.log.durable_offset() >= next {
            return Ok(());
        }
        self.log.wait_durable(next - 1, Duration::from_secs(60))
    }
}
