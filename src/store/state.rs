//! What a message store's calls, its dispatcher and its background events share: `StoreInner`,
//! the owner of the store's parts, and the put lock's state. Everything above it (the handle, the
//! dispatcher, recovery, the background work) depends on it; it depends on none of them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use crate::log::{Cursor, Log};
use crate::store::config::StoreConfig;
use crate::store::consumer_offsets::ConsumerOffsets;
use crate::store::dispatch::{BroadcastingOutput, CountingOutput};
use crate::store::error::{StoreError, StoreResult};
use crate::store::index::IndexFiles;
use crate::store::long_poll::LongPolls;
use crate::store::message::validate_topic;
use crate::store::metrics::Counters;
use crate::store::progress::Progress;
use crate::store::queues::Queues;

/// What the store's calls, its dispatcher and its background events share.
pub(crate) struct StoreInner {
    pub(crate) root: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) log: Log,
    pub(crate) queues: Arc<Queues>,
    pub(crate) index: Arc<IndexFiles>,
    pub(crate) offsets: ConsumerOffsets,
    /// The put lock: the next queue offset of each queue puts were made to since open.
    pub(crate) puts: PutOffsets,
    pub(crate) progress: Arc<Progress>,
    pub(crate) long_polls: Arc<LongPolls>,
    /// The dispatch lock: the cursor dispatch reads with and every dispatcher. Held while
    /// messages are dispatched (by the dispatcher thread, or by a put dispatching its own
    /// message) and while the dispatchers are flushed for a checkpoint.
    pub(crate) dispatch: Mutex<DispatchState>,
    pub(crate) dispatched: Arc<AtomicU64>,
    pub(crate) counters: Arc<Counters>,
    /// The commit log's start as dispatch last saw it (shared with the queue builder).
    pub(crate) dispatch_log_start: Arc<AtomicU64>,
    /// The last store checkpoint written, and the log start the last retention sweep saw.
    pub(crate) last_checkpoint: AtomicU64,
    pub(crate) last_swept_start: AtomicU64,
}

/// What the dispatch lock guards.
pub(crate) struct DispatchState {
    /// Where dispatch reads next (at `progress.dispatched()` between dispatches).
    pub(crate) cursor: Cursor,
    /// Every dispatcher, the store's own first.
    pub(crate) output: CountingOutput<BroadcastingOutput>,
}

/// The put lock and what it guards: the next queue offset of every queue put to since open (a
/// queue's first put starts from its consume queue's end, which dispatch brought to the log's end
/// before `open` returned).
#[derive(Default)]
pub(crate) struct PutOffsets {
    pub(crate) next: Mutex<HashMap<String, HashMap<u32, u64>>>,
}

impl StoreInner {
    /// `Ok` if `topic` and `queue_id` can name a queue of this store.
    pub(crate) fn check_queue(&self, topic: &str, queue_id: u32) -> StoreResult<()> {
        validate_topic(topic)?;
        let max = self.config.max_queues_per_topic;
        if queue_id >= max {
            return Err(StoreError::InvalidQueue { queue_id, max });
        }
        Ok(())
    }
}
