//! A message store opened read-only: [`ReadOnlyStore`], what `MessageStore::open_read_only` holds
//! instead of the store's own state (docs/DESIGN.md §11, "Inspecting a live store"). It reads the
//! files another process may be writing, without its lock and without changing any file: no
//! `abort` marker, no checkpoint, no `offsets.json` write, no derived file created, cut, deleted
//! or rebuilt, no recovery. It has no thread; every call reads the files as they are.
//!
//! | part | owns |
//! |---|---|
//! | the log view | a read-only `Log` of the commit log (`Log::open_read_only`), replaced by a fresh one when an entry points past it |
//! | the queues | each [`ReadOnlyQueue`] asked for so far (its directory looked for when first asked for) |
//! | [`ReadOnlyIndex`] | nothing but its directory: the index files are listed at each query |
//! | [`Counters`] | gets, messages got, key queries |
//!
//! Consumer offsets are read from `offsets.json` (or its backup) at each call: the owner rewrites
//! it atomically. The operations are `impl ReadOnlyStore` blocks beside this file: `get.rs` (a
//! queue's messages, the polling wait), `lookup.rs` (by key, by time).
//!
//! Lock order: 1 the queues' map → 2 a queue's view (`ReadOnlyQueue`); the log view's slot is a
//! leaf. No lock is held while a file is read or the commit log opened.

mod get;
mod lookup;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

pub(crate) use get::Got;

use crate::error::{Error, Result};
use crate::format::{STORE_ABORT_FILE, STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR};
use crate::log::Log;
use crate::storage;
use crate::store::checkpoint;
use crate::store::config::StoreConfig;
use crate::store::consume_queue::ReadOnlyQueue;
use crate::store::consumer_offsets::{CommittedOffset, ConsumerOffsets};
use crate::store::index::ReadOnlyIndex;
use crate::store::message::validate_topic;
use crate::store::metrics::{Counters, StoreMetrics};
use crate::store::queue_map::QueueMap;
use crate::store::queues::QueueInfo;

/// See the module documentation. `Send + Sync`.
pub(crate) struct ReadOnlyStore {
    root: PathBuf,
    config: StoreConfig,
    log: RwLock<Arc<Log>>,
    queues: RwLock<QueueMap<Arc<ReadOnlyQueue>>>,
    index: ReadOnlyIndex,
    counters: Counters,
}

impl ReadOnlyStore {
    /// The configuration in effect (the store's recorded parameters over the one given).
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Reads the store in `root`: its commit log's files (`Log::open_read_only`); queues and the
    /// index are found when asked for. Errors: `Error::InvalidConfig`, the log's read-only open's
    /// (a missing `root` or commit log is `Error::Io`, never a new store).
    pub(crate) fn open(root: &Path, config: StoreConfig) -> Result<ReadOnlyStore> {
        config.validate()?;
        storage::require_dir(root)?;
        // A newer format is refused, and the store's own parameters read, without writing.
        crate::store::meta::check(root)?;
        let config = crate::store::meta::recorded_parameters(root, &config)?.apply(config);
        let log = Log::open_read_only(root.join(STORE_COMMIT_LOG_DIR), config.log.clone())?;
        tracing::debug!(root = %root.display(), log_next = log.next_offset(), "message store open read-only");
        Ok(ReadOnlyStore {
            root: root.to_path_buf(),
            index: ReadOnlyIndex::new(&root.join(STORE_INDEX_DIR)),
            log: RwLock::new(Arc::new(log)),
            queues: RwLock::default(),
            counters: Counters::default(),
            config,
        })
    }

    /// The commit log as last read.
    fn log(&self) -> Arc<Log> {
        Arc::clone(&self.log.read())
    }

    /// The commit log as it is now (read again; the last view if that fails, logged).
    pub(crate) fn log_now(&self) -> Arc<Log> {
        self.log_covering(u64::MAX).unwrap_or_else(|error| {
            tracing::warn!(root = %self.root.display(), %error, "reading the commit log again failed");
            self.log()
        })
    }

    /// The commit log read again if `log_offset` is past it (the owner appended since): a view
    /// holding it if the log does.
    fn log_covering(&self, log_offset: u64) -> Result<Arc<Log>> {
        let log = self.log();
        if log_offset < log.visible_end() {
            return Ok(log);
        }
        let fresh = Arc::new(Log::open_read_only(self.root.join(STORE_COMMIT_LOG_DIR), self.config.log.clone())?);
        let mut slot = self.log.write();
        if fresh.next_offset() >= slot.next_offset() {
            *slot = Arc::clone(&fresh);
        }
        Ok(Arc::clone(&slot))
    }

    /// Whether the owner may be writing: `abort` is there (the store is open, or did not close
    /// cleanly). Without it nothing changes the files, and a queue's tail is as whole as it gets.
    fn owner_may_be_writing(&self) -> bool {
        self.root.join(STORE_ABORT_FILE).exists()
    }

    /// `topic`'s queue `queue_id` if its directory exists (looked for again each time it does not).
    fn queue(&self, topic: &str, queue_id: u32) -> Result<Option<Arc<ReadOnlyQueue>>> {
        if let Some(queue) = self.queues.read().get(topic, queue_id) {
            return Ok(Some(Arc::clone(queue)));
        }
        let dir = self.root.join(STORE_CONSUME_QUEUE_DIR);
        if !dir.join(topic).join(queue_id.to_string()).is_dir() {
            return Ok(None);
        }
        let opened = Arc::new(ReadOnlyQueue::open(&dir, topic, queue_id)?);
        let mut queues = self.queues.write();
        Ok(Some(Arc::clone(queues.get_or_insert_with(topic, queue_id, || opened))))
    }

    /// The queues on disk now, (topic, queue id) sorted: the directories `Queues::open` would open.
    fn listed_queues(&self) -> Result<Vec<(String, u32)>> {
        let dir = self.root.join(STORE_CONSUME_QUEUE_DIR);
        let mut found = Vec::new();
        for topic in names_in(&dir)?.into_iter().filter(|t| validate_topic(t).is_ok()) {
            for queue in names_in(&dir.join(&topic))? {
                match queue.parse::<u32>() {
                    Ok(id) if id.to_string() == queue && dir.join(&topic).join(&queue).is_dir() => {
                        found.push((topic.clone(), id));
                    }
                    _ => {}
                }
            }
        }
        found.sort();
        Ok(found)
    }

    /// Every queue on disk with its bounds now, sorted by topic and queue id (a queue that cannot
    /// be read is left out, logged).
    pub(crate) fn queues(&self) -> Vec<QueueInfo> {
        let listed = self.listed_queues().unwrap_or_else(|error| {
            tracing::warn!(%error, "listing the consume queues failed");
            Vec::new()
        });
        let start = self.log_now().start_offset();
        let info = |(topic, queue_id): (String, u32)| match self.bounds_now(&topic, queue_id, start) {
            Ok((min_offset, max_offset)) => Some(QueueInfo { topic, queue_id, min_offset, max_offset }),
            Err(error) => {
                tracing::warn!(topic, queue_id, %error, "a consume queue could not be read");
                None
            }
        };
        listed.into_iter().filter_map(info).collect()
    }

    /// `[min, max)` of `topic`'s queue `queue_id` now (0, 0 for a queue without messages).
    pub(crate) fn bounds(&self, topic: &str, queue_id: u32) -> Result<(u64, u64)> {
        self.config.check_queue(topic, queue_id)?;
        self.bounds_now(topic, queue_id, self.log_now().start_offset())
    }

    /// [`ReadOnlyStore::bounds`] of a queue on disk, whatever the configuration's limits (an
    /// earlier configuration may have allowed more queues), the commit log starting at `start`.
    fn bounds_now(&self, topic: &str, queue_id: u32, start: u64) -> Result<(u64, u64)> {
        let Some(queue) = self.queue(topic, queue_id)? else { return Ok((0, 0)) };
        let (min, end) = queue.refresh()?;
        let end = self.settled_end(topic, queue_id, &queue, end)?;
        let min = if start == 0 || min >= end { min } else { queue.search(start, (min, end))?.clamp(min, end) };
        Ok((min, end))
    }

    /// The queue's first offset as its owner counts it: retention moves it past the entries
    /// whose messages are below the commit log's start (the owner's files may still hold them
    /// until its next sweep).
    pub(crate) fn live_min(&self, queue: &ReadOnlyQueue, (min, end): (u64, u64)) -> Result<u64> {
        // The commit log's start as the view last read it (reading the log again for every get
        // would cost a scan of its last segment; the view is read again when an entry points
        // past it, and for `queues`).
        let start = self.log().start_offset();
        if start == 0 || min >= end {
            return Ok(min);
        }
        Ok(queue.search(start, (min, end))?.clamp(min, end))
    }

    /// The committed consumer offsets as `offsets.json` (or its backup) holds them now; none if
    /// neither can be read (logged).
    pub(crate) fn committed_offsets(&self) -> Vec<CommittedOffset> {
        match ConsumerOffsets::load(&self.root) {
            Ok(offsets) => offsets.all(),
            Err(error) => {
                tracing::warn!(root = %self.root.display(), %error, "the consumer offsets cannot be read");
                Vec::new()
            }
        }
    }

    /// The offset `group` committed for `topic`'s queue `queue_id`, as `offsets.json` holds it now.
    pub(crate) fn committed_offset(&self, group: &str, topic: &str, queue_id: u32) -> Option<u64> {
        let offsets = self.committed_offsets().into_iter();
        offsets.filter(|c| c.group == group && c.topic == topic && c.queue_id == queue_id).map(|c| c.next_offset).next()
    }

    /// The metrics a read-only store has: the commit log's as it is now, this handle's gets and
    /// queries, the queues and index files on disk, and as dispatched up to, the store checkpoint.
    /// What only the owner counts (puts, dispatch, long polls, checkpoints) is 0.
    pub(crate) fn metrics(&self) -> StoreMetrics {
        let log = self.log_now().metrics();
        let dispatched_up_to = checkpoint::read(&self.root).map_or(0, |c| c.dispatched_up_to);
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StoreMetrics {
            dispatch_lag_offsets: log.next_offset.saturating_sub(dispatched_up_to),
            log,
            puts: 0,
            put_failures: 0,
            gets: load(&self.counters.gets),
            messages_got: load(&self.counters.messages_got),
            key_queries: load(&self.counters.key_queries),
            dispatched: 0,
            dispatched_up_to,
            dispatch_lag_ms: 0,
            max_dispatch_lag_ms: 0,
            dispatch_failures: 0,
            not_messages: 0,
            entries_refused: 0,
            queues: self.listed_queues().map_or(0, |queues| queues.len()),
            index_files: self.index.file_count().unwrap_or(0),
            long_polls_held: 0,
            long_polls_woken: 0,
            checkpoints: 0,
            background_failures: 0,
        }
    }
}

/// The names in `dir`; none if it is not there (or not a directory): removed since it was listed.
fn names_in(dir: &Path) -> Result<Vec<String>> {
    match storage::list_dir(dir) {
        Ok(names) => Ok(names),
        Err(Error::Io { source, .. })
            if matches!(source.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) =>
        {
            Ok(Vec::new())
        }
        Err(error) => Err(error),
    }
}
