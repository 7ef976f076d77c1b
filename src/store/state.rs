//! The state a `MessageStore` shares with its dispatcher thread, its background events and the
//! puts that dispatch their own messages: one owner per piece, composed here.
//!
//! | part | owns |
//! |---|---|
//! | [`Log`] | the commit log: every message, in put order |
//! | [`PutSequencer`] | the put lock: each queue's next queue offset, decided once per put |
//! | [`Dispatching`] | the dispatch lock: the cursor dispatch reads with, and every dispatcher |
//! | [`Progress`] | how far dispatch got, and the puts waiting for it |
//! | [`Queues`] | every consume queue (its own locks within) |
//! | [`IndexFiles`] | the key and time index (its own lock order within) |
//! | [`ConsumerOffsets`] | the consumer groups' committed offsets |
//! | [`LongPolls`] | the gets waiting at a queue's end |
//! | [`Maintenance`] | what the background work remembers between turns |
//! | [`Counters`] | the metrics' counts |
//!
//! The operations are `impl StoreState` blocks (and `impl MessageStore`, the API) in files named
//! after them: `put.rs`, `get.rs`, `lookup.rs`, `dispatcher.rs`, `background.rs`,
//! `recovery.rs` (open), `message_store.rs` (close).
//!
//! # Lock order
//!
//! A thread holding lock *n* takes only locks numbered above *n*:
//!
//! 1. the put lock ([`PutSequencer`]): held while a batch gets its queue offsets (reading, at a
//!    queue's first put, where its consume queue ends: 3, 4) and is appended to the log (6).
//! 2. the dispatch lock ([`Dispatching`]): held while messages are dispatched (the user's
//!    dispatchers run under it) and while the dispatchers are flushed for a checkpoint. Never
//!    taken under the put lock, nor the put lock under it.
//! 3. the queues' map ([`Queues`]): read to find a queue, written to add one.
//! 4. a consume queue's own locks, then the index's ([`IndexFiles`]' order).
//! 5. the consumer offsets' lock.
//! 6. the commit log's locks (its own order, `log/mod.rs`).
//! 7. the long polls' map, then a queue's signal (a wait or a close takes the signal under the
//!    map; a wait asks the queue's end, 3, before it takes the signal).
//! 8. leaves, which take nothing else: [`Progress`], the counters.
//!
//! No store lock is held while waiting for the commit log's durability.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::store::meta::FormatGuard;

use crate::error::Result;
use crate::log::{Cursor, Log};
use crate::store::config::StoreConfig;
use crate::store::consumer_offsets::ConsumerOffsets;
use crate::store::dispatch::{BroadcastingOutput, CountingOutput};
use crate::store::index::IndexFiles;
use crate::store::long_poll::LongPolls;
use crate::store::maintenance::Maintenance;
use crate::store::metrics::Counters;
use crate::store::progress::Progress;
use crate::store::queues::Queues;
use crate::store::sequencer::PutSequencer;

/// What a store's calls, its dispatcher and its background events share (see the module
/// documentation).
pub(crate) struct StoreState {
    pub(super) root: PathBuf,
    pub(super) config: StoreConfig,
    /// Whether `store.meta` records the message encoding puts write.
    pub(super) format: FormatGuard,
    pub(super) log: Log,
    pub(super) puts: PutSequencer,
    pub(super) dispatch: Dispatching,
    pub(super) progress: Arc<Progress>,
    pub(super) queues: Arc<Queues>,
    pub(super) index: Arc<IndexFiles>,
    pub(super) offsets: ConsumerOffsets,
    pub(super) long_polls: Arc<LongPolls>,
    pub(super) maintenance: Maintenance,
    /// The store checkpoint on disk claims messages dispatched that the derived files lost (an
    /// open could not lower it: a full disk); cleared by the next checkpoint written.
    pub(super) checkpoint_overclaims: AtomicBool,
    /// Consumer offsets clamped at open (their queues were cut) are not yet on disk: the next
    /// checkpoint, which forgets that the queues were cut, writes them first.
    pub(super) clamp_unflushed: AtomicBool,
    pub(super) counters: Arc<Counters>,
}

/// The dispatch lock and what it guards, and the count of messages every dispatcher took.
pub(crate) struct Dispatching {
    state: Mutex<DispatchState>,
    count: Arc<AtomicU64>,
    /// The log's end at open: a message below it may have been dispatched by an earlier run
    /// (`DispatchRequest::replayed`).
    replay_end: u64,
}

/// What the dispatch lock guards.
pub(crate) struct DispatchState {
    /// Where dispatch reads next (at `Progress::dispatched` between dispatches).
    pub(crate) cursor: Cursor,
    /// Every dispatcher, the store's own first.
    pub(crate) output: CountingOutput<BroadcastingOutput>,
}

impl Dispatching {
    /// Dispatch reading with `cursor` into `output` (the store's own dispatchers).
    /// Messages below `replay_end` may have been dispatched before this open.
    pub(crate) fn new(cursor: Cursor, output: BroadcastingOutput, replay_end: u64) -> Dispatching {
        let count = Arc::new(AtomicU64::new(0));
        let output = CountingOutput::new(output, Arc::clone(&count));
        Dispatching { state: Mutex::new(DispatchState { cursor, output }), count, replay_end }
    }

    /// Whether the message at `log_offset` may have been dispatched by an earlier run.
    pub(crate) fn is_replay(&self, log_offset: u64) -> bool {
        log_offset < self.replay_end
    }

    /// Takes the dispatch lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, DispatchState> {
        self.state.lock()
    }

    /// Messages every dispatcher took since open.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl StoreState {
    /// `Ok` if `topic` and `queue_id` can name a queue of this store.
    pub(crate) fn check_queue(&self, topic: &str, queue_id: u32) -> Result<()> {
        self.config.check_queue(topic, queue_id)
    }
}
