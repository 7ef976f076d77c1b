//! `Channel`: the handle users hold, and its open.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::Result;
use crate::events::EventManager;
use crate::format::CHANNEL_LOG_DIR;
use crate::log::Log;
use crate::storage;

use super::background;
use super::close::Handle;
use super::config::ChannelConfig;
use super::metrics::{ChannelMetrics, Counters};
use super::replay::replay;
use super::state::{ChannelState, Queue};
use super::transaction::Transaction;

/// A durable staging buffer between sources and sinks, with Flume `MemoryChannel`'s transactions
/// and back-pressure, that survives a crash.
///
/// Sources [`put`](Transaction::put) events and sinks [`take`](Transaction::take) them inside
/// [`Transaction`]s. A commit appends one batch to the channel's log in `<dir>/log/`: its put
/// events, and a take record listing the offsets it took. Opening replays the log: every event
/// whose put committed and whose take did not is there again, in put order (at-least-once);
/// nothing that was not committed ever is. Events are held in memory too, so takes never read the
/// log; a background event deletes the log's segments below the oldest event held.
///
/// Limits (Flume's): at most `capacity` events and `byte_limit()` bytes of bodies are held
/// (events taken but not committed still count); a commit that would pass them waits up to
/// `keep_alive_ms` for room, then fails with `Error::ChannelFull`. A take on an empty channel
/// waits up to `keep_alive_ms`, then returns `None`. Waits are on the channel's own condition
/// variables, never by polling.
///
/// Durability is promised under `FlushPolicy::Always` (the default): a commit returns once its
/// batch is fsynced, and puts reach takers only then. Under `EveryInterval` or `Never` a commit
/// returns once the batch is written (a killed process loses nothing) and takers see it at once;
/// a power cut or OS crash then loses the commits of the last interval — puts lost (not
/// at-least-once any more), takes delivered again.
///
/// `Clone` makes another handle to the same channel; `Send + Sync`.
///
/// ```
/// # fn main() -> strata_log::Result<()> {
/// use strata_log::{Channel, ChannelConfig, Event};
/// let dir = tempfile::tempdir().unwrap();
/// let channel = Channel::open(dir.path(), ChannelConfig::default())?;
/// let mut tx = channel.transaction();
/// tx.put(Event::new("order 17").with_header("kind", "created"))?;
/// tx.commit()?;
/// assert_eq!(channel.size(), 1);
/// channel.close()?;
///
/// // Committed and not taken: there again after a reopen (after a crash too).
/// let channel = Channel::open(dir.path(), ChannelConfig::default())?;
/// let mut tx = channel.transaction();
/// let event = tx.take()?.expect("the event is still there");
/// assert_eq!((event.body(), event.header("kind")), (&b"order 17"[..], Some(&b"created"[..])));
/// tx.commit()?;
/// assert_eq!(channel.remaining_capacity(), 100);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Channel {
    state: Handle,
}

const _: () = {
    const fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<Channel>();
};

impl Channel {
    /// Opens the channel in `dir` (created if missing): its log in `<dir>/log/` recovers, then a
    /// replay of it finds every event committed and not taken.
    ///
    /// Errors: `Error::InvalidConfig` (among others if `transaction_capacity > capacity`),
    /// `Error::Locked` if another channel or log has it open, `Error::NotAChannelRecord` if the
    /// log holds a record the channel never writes, and the log's errors.
    pub fn open(dir: impl AsRef<Path>, config: ChannelConfig) -> Result<Channel> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        storage::prepare_dir(&dir)?;
        let log = Log::open(dir.join(CHANNEL_LOG_DIR), config.log.clone())?;
        let events = replay(&log)?;
        tracing::info!(dir = %dir.display(), events = events.len(), "channel opened");
        let counters = Counters::default();
        Counters::add(&counters.events_recovered, events.len() as u64);
        let manager = EventManager::start("strata-channel")?;
        let state = Arc::new(ChannelState {
            dir,
            byte_limit: config.byte_limit(),
            config,
            queue: Mutex::new(Queue::recovered(events)),
            not_empty: Condvar::new(),
            room: Condvar::new(),
            log: RwLock::new(Some(log)),
            events: Mutex::new(None),
            counters,
            handles: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        });
        background::schedule(&state, &manager.handle());
        *state.events.lock() = Some(manager);
        Ok(Channel { state: Handle::first(state) })
    }

    /// Closes the channel: every later call of any of its handles and transactions returns
    /// `Error::Closed` (waiting ones wake with it), the background work stops, the taken
    /// events' segments are deleted, and the log closes cleanly (after the commits in flight).
    /// Open transactions keep what they took; it is held again at the next open. Dropping the
    /// last handle (and transaction) without closing does the same, but can only log a failure.
    pub fn close(self) -> Result<()> {
        self.state.close()
    }

    /// A new, empty transaction on this channel.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.state.clone())
    }

    /// Events takers can take now: committed, and not taken by an open transaction.
    pub fn size(&self) -> u64 {
        self.state.queue.lock().ready.len() as u64
    }

    /// Events commits may still add: `capacity` minus the events held (committed and not
    /// take-committed, those taken by open transactions included), or 0.
    pub fn remaining_capacity(&self) -> u64 {
        self.state.config.capacity.saturating_sub(self.state.queue.lock().held())
    }

    /// The configuration the channel was opened with.
    pub fn config(&self) -> &ChannelConfig {
        &self.state.config
    }

    /// The channel's directory.
    pub fn dir(&self) -> &Path {
        &self.state.dir
    }

    /// A snapshot of the channel's metrics (and its log's; `Error::Closed` once closed).
    pub fn metrics(&self) -> Result<ChannelMetrics> {
        let state = &self.state;
        let (size, taken, held, bytes, oldest) = {
            let queue = state.queue.lock();
            (queue.ready.len() as u64, queue.taken, queue.held(), queue.bytes, queue.live.first().copied())
        };
        let log = state.with_log(|log| Ok(log.metrics()))?;
        let capacity = state.config.capacity;
        let c = &state.counters;
        Ok(ChannelMetrics {
            size,
            taken,
            held,
            capacity,
            remaining_capacity: capacity.saturating_sub(held),
            fill_percentage: held as f64 * 100.0 / capacity as f64,
            bytes,
            byte_limit: state.byte_limit,
            put_attempts: Counters::load(&c.put_attempts),
            put_successes: Counters::load(&c.put_successes),
            take_attempts: Counters::load(&c.take_attempts),
            take_successes: Counters::load(&c.take_successes),
            commits: Counters::load(&c.commits),
            rollbacks: Counters::load(&c.rollbacks),
            channel_full: Counters::load(&c.channel_full),
            bytes_put: Counters::load(&c.bytes_put),
            bytes_taken: Counters::load(&c.bytes_taken),
            low_watermark: oldest.unwrap_or(log.next_offset),
            deletions: Counters::load(&c.deletions),
            background_failures: Counters::load(&c.background_failures),
            events_recovered: Counters::load(&c.events_recovered),
            log,
        })
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("dir", &self.state.dir).field("size", &self.size()).finish()
    }
}
