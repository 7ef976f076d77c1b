//! `MessageStore`: the handle users hold, what its threads share, and its life (open, close).
//! The calls live beside it by what they do: `put`, `get` (and long polls), `lookup` (by key and
//! time), `background` (flushes, checkpoints, offsets, retention), `recovery` (open).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::EventManager;
use crate::store::checkpoint;
use crate::store::config::StoreConfig;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::consumer_offsets::CommittedOffset;
use crate::store::dispatch::Dispatch;
use crate::store::dispatcher::Dispatcher;
use crate::store::metrics::StoreMetrics;
use crate::store::queues::QueueInfo;
use crate::store::read_only::ReadOnlyStore;
use crate::store::state::StoreState;
use crate::store::{background, recovery};

/// A message store (RocketMQ's layer): topics and queues over one commit log.
///
/// Producers [`put`](MessageStore::put) messages for any topic and queue into one shared commit
/// log; a dispatcher thread builds, per topic and queue, a consume queue, and an index by key;
/// consumers [`get_messages`](MessageStore::get_messages) from a queue in order, keep their
/// position with [`commit_offset`](MessageStore::commit_offset), and find messages by key and time.
/// `Send + Sync`: share it between threads by reference or in an `Arc`.
///
/// [`MessageStore::open_read_only`] opens a store another process may have open, to read it
/// beside that process (no lock, no file changed); its writes return `Error::ReadOnly`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use strata_log::{GetStatus, Message, MessageStore, StoreConfig};
/// let dir = tempfile::tempdir()?;
/// let store = MessageStore::open(dir.path(), StoreConfig::default())?;
/// let put = store.put(&Message::new("orders", 0, b"order 17").with_tag("created").with_keys(["order-17"]))?;
/// assert_eq!(put.queue_offset, 0);
///
/// let got = store.get_messages("orders", 0, 0, 32, None)?;
/// assert_eq!(got.status, GetStatus::Found);
/// assert_eq!(got.messages[0].body(), b"order 17");
/// store.commit_offset("billing", "orders", 0, got.next_queue_offset)?;
///
/// let found = store.query_by_key("orders", "order-17", 0, i64::MAX, 10)?;
/// assert_eq!(found[0].log_offset(), put.log_offset);
/// store.close()?;
/// # Ok(()) }
/// ```
pub struct MessageStore {
    /// `None` once closed, and for a read-only store.
    shared: Option<Arc<StoreState>>,
    dispatcher: Option<Dispatcher>,
    events: Option<EventManager>,
    /// A read-only store's view of the files (`None` for the store's owner). An optional part
    /// beside the owner's, not an enum of the two: the owner's state, threads and calls stay as
    /// they are, and each public call first asks this one `Option` (`read_only/mod.rs`).
    view: Option<ReadOnlyStore>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<MessageStore>();
};

impl MessageStore {
    /// Opens the store in `root` (created if missing), recovering what the last run left: the
    /// commit log recovers first; at every open each consume queue is checked from the store
    /// checkpoint on (and over its last three files) and cut where it stops matching the log, and
    /// if the last run did not close the store, so is the newest index file; dispatch reaches the
    /// log's end before `open` returns. A deleted or damaged `consumequeue/` or `index/` is
    /// rebuilt from the commit log (logged).
    ///
    /// The store's parameters (`queue_entries_per_file`, `index_slots`, `index_entries`) are
    /// recorded in `store.meta` when it is created; an existing store keeps its own, whatever
    /// `config` says (see [`StoreConfig`]; [`MessageStore::config`] shows them).
    ///
    /// Errors: `Error::InvalidConfig`, `Error::Locked` if another store or log has it open,
    /// `Error::UnsupportedFormat` for a store (or its commit log) written by a newer build — with
    /// nothing in the directory changed — and the log's errors.
    pub fn open(root: impl AsRef<Path>, config: StoreConfig) -> Result<MessageStore> {
        let config = StoreConfig { log: config.log.budget_or_default(), ..config };
        let inner = recovery::open(root.as_ref(), config)?;
        let inner = Arc::new(inner);
        let events = EventManager::start("strata-store")?;
        background::schedule(&inner, &events.handle());
        let dispatcher = Dispatcher::spawn(Arc::clone(&inner))?;
        Ok(MessageStore { shared: Some(inner), dispatcher: Some(dispatcher), events: Some(events), view: None })
    }

    /// Opens the store in `root` to read it, beside the process that may have it open (as
    /// RocketMQ's admin tools inspect a live broker): no lock is taken and no file is changed (no
    /// `abort` marker, checkpoint or `offsets.json` written, no queue or index file created, cut,
    /// deleted or rebuilt, no recovery), so it works with read access only, and the owner's puts
    /// go on meanwhile. Files are read with `pread`, never mapped.
    ///
    /// Reads see the files as they are at each call: a get at a queue's end looks again, so
    /// messages put since (by another process) appear, as do new queues; a queue's last entry is
    /// trusted once it is whole (the owner may be writing it). A key query finds what the owner's
    /// index holds on disk: its last flush (every `flush_interval_ms`, the store's checkpoint).
    /// Committed offsets are read from `offsets.json`. [`get_messages_wait`] polls every 100 ms.
    /// Every write (`put*`, `commit_offset`, `flush_offsets`, `delete_messages_before`) returns
    /// `Error::ReadOnly`; a dispatcher registered is never called (nothing is dispatched).
    /// Damage is never hidden: every message returned is checked against its queue entry, and a
    /// damaged entry below a queue's last is `Error::Corrupt`.
    ///
    /// Errors: `Error::InvalidConfig`, and the commit log's read-only open's (a missing `root` or
    /// commit log is `Error::Io`: nothing is created).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Error, GetStatus, Message, MessageStore, StoreConfig};
    /// let dir = tempfile::tempdir()?;
    /// let owner = MessageStore::open(dir.path(), StoreConfig::default())?;
    /// owner.put(&Message::new("orders", 0, b"order 17"))?;
    ///
    /// // Beside the owner (here in the same process; as well in another).
    /// let reader = MessageStore::open_read_only(dir.path(), StoreConfig::default())?;
    /// let got = reader.get_messages("orders", 0, 0, 32, None)?;
    /// assert_eq!(got.messages[0].body(), b"order 17");
    /// owner.put(&Message::new("orders", 0, b"order 18"))?;
    /// let more = reader.get_messages("orders", 0, got.next_queue_offset, 32, None)?;
    /// assert_eq!((more.status, more.messages[0].body()), (GetStatus::Found, &b"order 18"[..]));
    /// assert!(matches!(reader.put(&Message::new("orders", 0, b"no")), Err(Error::ReadOnly)));
    /// owner.close()?;
    /// # Ok(()) }
    /// ```
    ///
    /// [`get_messages_wait`]: MessageStore::get_messages_wait
    pub fn open_read_only(root: impl AsRef<Path>, config: StoreConfig) -> Result<MessageStore> {
        let view = ReadOnlyStore::open(root.as_ref(), config)?;
        Ok(MessageStore { shared: None, dispatcher: None, events: None, view: Some(view) })
    }

    /// Whether the store was opened with [`MessageStore::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.view.is_some()
    }

    /// A read-only store's view of the files (`None` for the store's owner).
    pub(crate) fn read_only_view(&self) -> Option<&ReadOnlyStore> {
        self.view.as_ref()
    }

    /// What a write works on: `Error::ReadOnly` for a read-only store.
    pub(crate) fn writer(&self) -> Result<&StoreState> {
        if self.view.is_some() { Err(Error::ReadOnly) } else { Ok(self.inner()) }
    }

    /// Closes the store cleanly: dispatches what the log holds, flushes the queues and the index,
    /// writes the store checkpoint and the consumer offsets, closes the commit log and, last,
    /// removes the `abort` marker, so the next open does not recover. Dropping the store does the
    /// same but can only log a failure. A read-only store wrote nothing: its close only lets go.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    /// The configuration the store runs with: the one given to [`MessageStore::open`], with the
    /// parameters the store's files are made with (`queue_entries_per_file`, `index_slots`,
    /// `index_entries`) as its `store.meta` records them.
    ///
    /// ```
    /// use strata_log::{MessageStore, StoreConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let small = StoreConfig { queue_entries_per_file: 1_000, index_slots: 64, index_entries: 256, ..StoreConfig::default() };
    /// MessageStore::open(dir.path(), small.clone())?.close()?;
    /// // Reopened asking for other sizes: the store keeps those its files were made with.
    /// let store = MessageStore::open(dir.path(), StoreConfig { queue_entries_per_file: 50, ..small })?;
    /// assert_eq!(store.config().queue_entries_per_file, 1_000);
    /// # store.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(&self) -> &StoreConfig {
        match &self.view {
            Some(view) => view.config(),
            None => &self.inner().config,
        }
    }

    /// What every call works on.
    pub(crate) fn inner(&self) -> &StoreState {
        self.shared.as_deref().expect("a store is used only until it closes")
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(shared) = self.shared.take() else { return Ok(()) };
        let finished = shared.close_down(self.dispatcher.take(), self.events.take());
        // Nothing else holds the store now (its threads are stopped; events hold it weakly).
        let inner = match Arc::try_unwrap(shared) {
            Ok(inner) => inner,
            Err(_) => {
                tracing::error!(
                    "the store is still referenced at close: its commit log closes when the last reference goes"
                );
                return finished.and(Err(Error::Closed));
            }
        };
        let StoreState { root, log, .. } = inner;
        let closed = log.close();
        finished?;
        closed?;
        crate::failpoint::crash_point!("store_before_abort_removed");
        checkpoint::mark_closed(&root)?;
        tracing::info!(root = %root.display(), "message store closed cleanly");
        Ok(())
    }

    /// Registers a dispatcher: from now on it receives every message dispatched, after the
    /// store's own consume-queue and index builders (Flink's `Output`). See [`Dispatch`] for what
    /// it must tolerate.
    /// On a read-only store nothing is dispatched: the dispatcher is dropped (logged).
    pub fn register_dispatcher(&self, dispatcher: Box<dyn Dispatch>) {
        if self.view.is_some() {
            tracing::warn!("a read-only message store dispatches nothing: the dispatcher is dropped");
            return;
        }
        self.inner().dispatch.lock().output.inner_mut().push(dispatcher);
    }

    /// The commit log's first offset: messages below it are gone (retention,
    /// [`MessageStore::delete_messages_before`]).
    pub fn commit_log_start_offset(&self) -> u64 {
        if let Some(view) = &self.view {
            return view.log_now().start_offset();
        }
        self.inner().log.start_offset()
    }

    /// Deletes the messages below `log_offset` (whole segments, as `Log::delete_records_before`),
    /// then the queue and index files that only pointed at them. Returns the new start offset.
    /// Messages below `log_offset` not yet in their queues are dispatched first (a message
    /// deleted before dispatch reached it would leave a hole in its queue's numbering, and the
    /// queue would refuse every later message): `Error::DispatchFailed` if that fails.
    pub fn delete_messages_before(&self, log_offset: u64) -> Result<u64> {
        let inner = self.writer()?;
        let wanted = log_offset.min(inner.log.next_offset());
        if wanted > inner.progress.dispatched() {
            inner.dispatch_through(wanted - 1)?;
        }
        // The checkpoint records each queue's numbering before its messages go: should the queue's
        // files be lost later, that is all that is left of it (the queue's last file keeps it
        // too: retention never deletes it). A full disk, which this call may be freeing, does
        // not stop the deletion; the background checkpoint retries.
        inner.checkpoint_unless_full("before deleting messages")?;
        let start = inner.log.delete_records_before(wanted.min(inner.progress.dispatched()))?;
        inner.sweep()?;
        inner.checkpoint_unless_full("after deleting messages")?;
        Ok(start)
    }

    /// Stores `offset` as the next queue offset `group` will consume from `topic`'s queue
    /// `queue_id`. Durable within `offsets_flush_ms`, or at [`MessageStore::flush_offsets`] or
    /// close.
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: u32, offset: u64) -> Result<()> {
        let inner = self.writer()?;
        inner.check_queue(topic, queue_id)?;
        if group.is_empty() {
            return Err(Error::InvalidField { what: "group", name: String::new(), reason: "empty" });
        }
        inner.offsets.commit(group, topic, queue_id, offset);
        Ok(())
    }

    /// The next queue offset `group` will consume from `topic`'s queue `queue_id`, if it ever
    /// committed one.
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: u32) -> Option<u64> {
        if let Some(view) = &self.view {
            return view.committed_offset(group, topic, queue_id);
        }
        self.inner().offsets.committed(group, topic, queue_id)
    }

    /// Every committed consumer offset, sorted by group, topic and queue.
    pub fn committed_offsets(&self) -> Vec<CommittedOffset> {
        if let Some(view) = &self.view {
            return view.committed_offsets();
        }
        self.inner().offsets.all()
    }

    /// Writes the committed consumer offsets to `offsets.json` now.
    pub fn flush_offsets(&self) -> Result<()> {
        self.writer()?.offsets.flush()
    }

    /// Every queue that ever had a message, sorted by topic and queue id.
    pub fn queues(&self) -> Vec<QueueInfo> {
        if let Some(view) = &self.view {
            return view.queues();
        }
        let queues = self.inner().queues.all();
        let info = |(topic, queue_id, queue): (String, u32, Arc<ConsumeQueue>)| QueueInfo {
            topic,
            queue_id,
            min_offset: queue.min_offset(),
            max_offset: queue.max_offset(),
        };
        queues.into_iter().map(info).collect()
    }

    /// The first queue offset `topic`'s queue `queue_id` holds (0 for a queue without messages).
    pub fn min_queue_offset(&self, topic: &str, queue_id: u32) -> Result<u64> {
        if let Some(view) = &self.view {
            return view.bounds(topic, queue_id).map(|(min, _)| min);
        }
        let inner = self.inner();
        inner.check_queue(topic, queue_id)?;
        Ok(inner.queues.get(topic, queue_id).map_or(0, |queue| queue.min_offset()))
    }

    /// The queue offset the next message of `topic`'s queue `queue_id` gets, once dispatched: the
    /// queue holds `[min, max)`.
    pub fn max_queue_offset(&self, topic: &str, queue_id: u32) -> Result<u64> {
        if let Some(view) = &self.view {
            return view.bounds(topic, queue_id).map(|(_, max)| max);
        }
        let inner = self.inner();
        inner.check_queue(topic, queue_id)?;
        Ok(inner.queues.get(topic, queue_id).map_or(0, |queue| queue.max_offset()))
    }

    /// A snapshot of the store's metrics.
    pub fn metrics(&self) -> StoreMetrics {
        if let Some(view) = &self.view {
            return view.metrics();
        }
        let inner = self.inner();
        let log = inner.log.metrics();
        let counters = &inner.counters;
        let dispatched_up_to = inner.progress.dispatched();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StoreMetrics {
            dispatch_lag_offsets: inner.log.next_offset().saturating_sub(dispatched_up_to),
            log,
            puts: load(&counters.puts),
            put_failures: load(&counters.put_failures),
            gets: load(&counters.gets),
            messages_got: load(&counters.messages_got),
            key_queries: load(&counters.key_queries),
            dispatched: inner.dispatch.count(),
            dispatched_up_to,
            dispatch_lag_ms: counters.last_dispatch_lag_ms.load(Ordering::Relaxed),
            max_dispatch_lag_ms: counters.max_dispatch_lag_ms.load(Ordering::Relaxed),
            dispatch_failures: load(&counters.dispatch_failures),
            not_messages: load(&counters.not_messages),
            entries_refused: load(&counters.entries_refused),
            queues: inner.queues.count(),
            index_files: inner.index.file_count(),
            long_polls_held: load(&inner.long_polls.held),
            long_polls_woken: load(&inner.long_polls.woken),
            checkpoints: load(&counters.checkpoints),
            background_failures: load(&counters.background_failures),
        }
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            tracing::error!(%error, "closing the message store failed");
        }
    }
}

impl StoreState {
    /// The first steps of a close, before the log closes: the dispatcher reaches the log's end (after
    /// a flush makes everything stored visible), waiters are released, the background thread stops,
    /// and a last checkpoint and offsets write run. The first failure is returned; every step runs.
    fn close_down(&self, dispatcher: Option<Dispatcher>, events: Option<EventManager>) -> Result<()> {
        let flushed = self.log.flush();
        let stopped = dispatcher.map_or(Ok(()), |dispatcher| dispatcher.stop(self));
        let caught_up = match (flushed, stopped) {
            (Ok(()), Ok(())) => self.catch_up(),
            (Err(error), _) | (_, Err(error)) => Err(error),
        };
        self.progress.stop();
        self.long_polls.close();
        if let Some(events) = events
            && let Err(error) = events.shutdown(Duration::from_secs(30))
        {
            tracing::error!(%error, "the store's event thread did not stop");
        }
        let checkpointed = caught_up.and_then(|()| self.write_checkpoint());
        let offsets = self.offsets.flush();
        checkpointed?;
        offsets
    }
}
