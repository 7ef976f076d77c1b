//! What a channel's handles, its transactions and its background event share: `ChannelState`,
//! the owner of the channel's parts, and `Queue`, what the channel lock guards. Everything else
//! in `channel/` depends on this file; it depends on none of them but the plain pieces (config,
//! event, metrics).
//!
//! Lock order: 1 the channel lock (`ChannelState::queue`) → 2 the log slot (`ChannelState::log`,
//! read for an append, written once by the close) → the log's own locks. A thread waiting for a
//! batch to be durable holds the log slot's read lock and nothing else: it takes the channel
//! lock only after releasing it. The event manager's slot is a leaf.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::events::EventManager;
use crate::log::Log;

use super::config::ChannelConfig;
use super::event::Event;
use super::metrics::Counters;

/// What a channel's handles, transactions and background event share.
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
    /// Set once by the close, under the channel lock (so a waiter checking it under that lock
    /// cannot miss the wake-up that follows); read without it by puts and takes.
    pub(crate) closed: AtomicBool,
}

/// What the user's handles (`Channel`s and `Transaction`s) share: the last one dropped closes
/// the channel there and then, so the directory can be opened again at once. The background
/// event holds the state only weakly and for a moment, so the state itself may outlive the
/// handles briefly (closed).
pub(crate) struct Handle(pub(crate) Arc<ChannelState>);

impl std::ops::Deref for Handle {
    type Target = ChannelState;

    fn deref(&self) -> &ChannelState {
        &self.0
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Err(error) = self.0.close() {
            tracing::error!(dir = %self.0.dir.display(), %error, "closing the channel on drop failed");
        }
    }
}

impl Drop for ChannelState {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::error!(dir = %self.dir.display(), %error, "closing the channel on drop failed");
        }
    }
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

    /// Closes the channel (see `Channel::close`); a second call does nothing.
    pub(crate) fn close(&self) -> Result<()> {
        if !self.mark_closed() {
            return Ok(());
        }
        let manager = self.events.lock().take();
        if let Some(manager) = manager
            && let Err(error) = manager.shutdown(Duration::from_secs(30))
        {
            tracing::error!(%error, "the channel's event thread did not stop");
        }
        let deleted = self.delete_taken();
        // Waits for the commits holding the log's slot (appending, or waiting for durability).
        let log = self.log.write().take();
        let closed = log.map_or(Ok(()), Log::close);
        deleted.and(closed)?;
        tracing::info!(dir = %self.dir.display(), "channel closed");
        Ok(())
    }

    /// Deletes the log's records below W, if W moved past the log's start (the background work,
    /// and the close). W only grows: new events get offsets past the log's next offset, which is
    /// past every event held.
    ///
    /// The take records that moved W are below the log's next offset as it was with W, and they
    /// are made durable first: the deletion writes the new start to the checkpoint at once, so a
    /// crash that then lost a take record (stored, its fsync not yet done, or never under a
    /// weaker flush policy) would lose the events it took instead of delivering them again.
    pub(crate) fn delete_taken(&self) -> Result<()> {
        let deleted = self.low_watermark().and_then(|(low_watermark, next)| {
            self.with_log(|log| {
                if low_watermark <= log.start_offset() {
                    return Ok(false);
                }
                if log.durable_offset() < next {
                    log.flush()?;
                }
                log.delete_records_before(low_watermark)?;
                Ok(true)
            })
        });
        match deleted {
            Ok(deleted) => {
                Counters::add(&self.counters.deletions, u64::from(deleted));
                Ok(())
            }
            Err(error) => {
                Counters::add(&self.counters.background_failures, 1);
                Err(error)
            }
        }
    }

    /// The low watermark W, the offset of the oldest event held, or the log's next offset if none
    /// is (every event appended was taken); and the log's next offset. Read under the channel
    /// lock, which every append holds, so they agree.
    pub(crate) fn low_watermark(&self) -> Result<(u64, u64)> {
        let queue = self.queue.lock();
        let next = self.with_log(|log| Ok(log.next_offset()))?;
        Ok((queue.live.first().copied().unwrap_or(next), next))
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
