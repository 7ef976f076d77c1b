//! What a channel's handles, its transactions and its background event share: `ChannelState`,
//! one owner per part, and `Queue`, what the channel lock guards. Everything else in `channel/`
//! depends on this file; it depends on none of them but the plain pieces (config, event,
//! metrics).
//!
//! | part | owns |
//! |---|---|
//! | `queue` (the channel lock) | the events held (ready, pending or taken), their offsets (the first is W) and bytes |
//! | `not_empty`, `room` | the takers waiting for an event and the commits waiting for room |
//! | `log` (the log slot) | the channel's log, until the close takes it |
//! | `events` | the background event thread (the periodic deletion), until the close stops it |
//! | `handles`, `closed` | the user's handles alive (the last one closes), and whether it is closed |
//! | [`Counters`] | the metrics' counts |
//!
//! The operations are in files named after them: `commit.rs` (take, commit, rollback),
//! `replay.rs` (what an open finds held), `background.rs` (deleting what was taken), `handle.rs`
//! (open), `close.rs`.
//!
//! # Lock order
//!
//! A thread holding lock *n* takes only locks numbered above *n*:
//!
//! 1. the channel lock (`ChannelState::queue`). Commits append to the log under it, so the order
//!    of the log is the order in which commits took their room.
//! 2. the log slot (`ChannelState::log`): read-locked for an append (under 1) and for a
//!    durability wait, written once by the close. A thread waiting for a batch to be durable
//!    holds the slot's read lock and nothing else: it takes the channel lock only after
//!    releasing it.
//! 3. the log's own locks (its order, `log/mod.rs`).
//! 4. leaves, which take nothing else: the event manager's slot (`ChannelState::events`).

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::events::EventManager;
use crate::log::Log;

use super::config::ChannelConfig;
use super::event::Event;
use super::metrics::Counters;

/// What a channel's handles, transactions and background event share (see the module
/// documentation).
pub(crate) struct ChannelState {
    /// The channel's directory (its log is in `log/`).
    pub(crate) dir: PathBuf,
    pub(crate) config: ChannelConfig,
    /// `config.byte_limit()`.
    pub(crate) byte_limit: u64,
    /// The channel lock (order 1). Commits append to the log under it, so the order of the log
    /// is the order in which commits took their room.
    pub(crate) queue: Mutex<Queue>,
    /// Takers wait here for events (a commit publishing its puts, a rollback returning takes,
    /// the close).
    pub(crate) not_empty: Condvar,
    /// Commits wait here for room (a take commit, the close).
    pub(crate) room: Condvar,
    /// The log (order 2): `None` once closed. Read-locked by a commit for its append and its
    /// durability wait, so the close waits for them.
    pub(crate) log: RwLock<Option<Log>>,
    /// The background event thread, taken by the close.
    pub(crate) events: Mutex<Option<EventManager>>,
    pub(crate) counters: Counters,
    /// The user's handles (`Channel`s and `Transaction`s, through `close::Handle`) alive: the
    /// last one dropped closes the channel.
    pub(crate) handles: AtomicUsize,
    /// Set once by the close, under the channel lock (so a waiter checking it under that lock
    /// cannot miss the wake-up that follows); read without it by puts and takes.
    pub(crate) closed: AtomicBool,
}

/// What the channel lock guards.
pub(crate) struct Queue {
    /// Events takers can take, in the order they get them (put order, rolled-back takes back at
    /// the head): (log offset, event).
    pub(crate) ready: VecDeque<(u64, Event)>,
    /// Committed batches not yet visible to the log's readers (under `FlushPolicy::Always`, not
    /// yet durable), in log order: their events join `ready` once it is.
    pub(crate) pending: VecDeque<Pending>,
    /// The offsets of every event held: committed, not take-committed (in `ready`, `pending`, or
    /// taken by an open transaction). Its first is the low watermark W; its length is what
    /// counts against the capacity.
    pub(crate) live: BTreeSet<u64>,
    /// Body bytes of the events held.
    pub(crate) bytes: u64,
    /// Events taken by open transactions.
    pub(crate) taken: u64,
}

/// A committed batch waiting to be visible.
pub(crate) struct Pending {
    /// The batch's last offset: visible once the log's visible end passes it.
    pub(crate) last_offset: u64,
    pub(crate) events: Vec<(u64, Event)>,
}

impl ChannelState {
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// `Error::Closed` once the channel is closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() { Err(Error::Closed) } else { Ok(()) }
    }

    /// Marks the channel closed and wakes every waiter; `false` if it was closed already.
    pub(crate) fn mark_closed(&self) -> bool {
        let _queue = self.queue.lock();
        let first = !self.closed.swap(true, Ordering::SeqCst);
        self.not_empty.notify_all();
        self.room.notify_all();
        first
    }

    /// The log, or `Error::Closed`, under the slot's read lock.
    pub(crate) fn with_log<T>(&self, f: impl FnOnce(&Log) -> Result<T>) -> Result<T> {
        let log = self.log.read();
        f(log.as_ref().ok_or(Error::Closed)?)
    }

    /// Publishes the pending batches the log now shows readers and wakes takers if it did.
    pub(crate) fn publish(&self, queue: &mut Queue, visible_end: u64) {
        if queue.publish(visible_end) > 0 {
            self.not_empty.notify_all();
        }
    }
}

impl Queue {
    /// The queue of the events a replay found held, in log order.
    pub(crate) fn recovered(events: Vec<(u64, Event)>) -> Queue {
        debug_assert!(events.windows(2).all(|w| w[0].0 < w[1].0), "replayed events are in log order");
        Queue {
            live: events.iter().map(|(offset, _)| *offset).collect(),
            bytes: events.iter().map(|(_, event)| event.cost()).sum(),
            ready: events.into(),
            pending: VecDeque::new(),
            taken: 0,
        }
    }

    /// Moves the pending batches below `visible_end` to the back of `ready`, in log order: every
    /// batch published earlier, and so every event in `ready`, is below them. Returns how many
    /// events it moved.
    fn publish(&mut self, visible_end: u64) -> usize {
        let mut moved = 0;
        while self.pending.front().is_some_and(|batch| batch.last_offset < visible_end) {
            let Some(batch) = self.pending.pop_front() else { break };
            moved += batch.events.len();
            self.ready.extend(batch.events);
        }
        moved
    }

    /// Events held: committed, not take-committed.
    pub(crate) fn held(&self) -> u64 {
        self.live.len() as u64
    }
}
