//! Every consume queue of a store (`<root>/consumequeue/<topic>/<queue_id>/`): found on disk at
//! open, created by the dispatcher when a queue gets its first message, looked up by readers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::config::ReadPath;
use crate::error::{Error, Result};
use crate::storage;
use crate::storage::map_budget::MapBudget;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::message::validate_topic;
use crate::store::queue_map::QueueMap;

/// A queue of a store, as [`MessageStore::queues`](crate::MessageStore::queues) lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct QueueInfo {
    /// The topic.
    pub topic: String,
    /// The queue.
    pub queue_id: u32,
    /// The first queue offset it holds.
    pub min_offset: u64,
    /// The queue offset its next message gets.
    pub max_offset: u64,
}

/// The queues of a store. Readers take a short read lock to find a queue; the dispatcher takes
/// the write lock only to add one.
pub(crate) struct Queues {
    dir: PathBuf,
    entries_per_file: u64,
    reads: ReadPath,
    /// The map budget every queue's files are under.
    budget: Option<MapBudget>,
    map: RwLock<QueueMap<Arc<ConsumeQueue>>>,
    /// How many queues were removed: a holder of queues it looked up ([`QueueBuilder`]'s own map)
    /// forgets them when this moves.
    ///
    /// [`QueueBuilder`]: crate::store::dispatcher::QueueBuilder
    removals: AtomicU64,
}

impl Queues {
    /// Opens every queue under `dir` (created if missing). Directories that are not a valid topic
    /// or queue id are left alone (logged). Any queue id is opened: `max_queues_per_topic` limits
    /// puts and gets, not what an earlier configuration stored. A queue that fails to open is removed (logged) and
    /// counted in the second value: it is derived data, rebuilt by dispatching the commit log
    /// again.
    pub(crate) fn open(
        dir: &Path,
        entries_per_file: u64,
        reads: ReadPath,
        budget: Option<MapBudget>,
    ) -> Result<(Queues, usize)> {
        storage::prepare_dir(dir)?;
        let mut map = QueueMap::default();
        let mut discarded = 0;
        for topic in storage::list_dir(dir)? {
            let topic_dir = dir.join(&topic);
            if validate_topic(&topic).is_err() || !topic_dir.is_dir() {
                tracing::warn!(path = %topic_dir.display(), "not a topic's consume-queue directory; left alone");
                continue;
            }
            for queue in storage::list_dir(&topic_dir)? {
                let queue_dir = topic_dir.join(&queue);
                let queue_id = match queue.parse::<u32>() {
                    Ok(id) if id.to_string() == queue && queue_dir.is_dir() => id,
                    _ => {
                        tracing::warn!(path = %queue_dir.display(), "not a queue's directory; left alone");
                        continue;
                    }
                };
                match ConsumeQueue::open_budgeted(dir, &topic, queue_id, entries_per_file, reads, budget.clone()) {
                    Ok(opened) => {
                        map.insert(&topic, queue_id, Arc::new(opened));
                    }
                    Err(error) => {
                        tracing::warn!(queue = %queue_dir.display(), %error, "consume queue unreadable: removed, rebuilt from the commit log");
                        std::fs::remove_dir_all(&queue_dir).map_err(Error::io("remove a damaged queue", &queue_dir))?;
                        storage::sync_dir(&topic_dir)?;
                        discarded += 1;
                    }
                }
            }
        }
        let map = RwLock::new(map);
        let queues =
            Queues { dir: dir.to_path_buf(), entries_per_file, reads, budget, map, removals: AtomicU64::new(0) };
        Ok((queues, discarded))
    }

    /// The queue, if it has ever had a message.
    pub(crate) fn get(&self, topic: &str, queue_id: u32) -> Option<Arc<ConsumeQueue>> {
        self.map.read().get(topic, queue_id).cloned()
    }

    /// The queue, opened (empty) if it is new. The caller has validated `topic`.
    pub(crate) fn get_or_open(&self, topic: &str, queue_id: u32) -> Result<Arc<ConsumeQueue>> {
        if let Some(queue) = self.get(topic, queue_id) {
            return Ok(queue);
        }
        let mut map = self.map.write();
        let queue = map.get_or_try_insert(topic, queue_id, || {
            let (dir, reads, budget) = (&self.dir, self.reads, self.budget.clone());
            ConsumeQueue::open_budgeted(dir, topic, queue_id, self.entries_per_file, reads, budget).map(Arc::new)
        })?;
        Ok(Arc::clone(queue))
    }

    /// Removes a queue found damaged at open, and its directory (fsynced): it is derived, and
    /// dispatch builds it again from the commit log. Only at open, before anything reads it —
    /// and before anything dispatches: a dispatcher that looked the queue up before `removals`
    /// moved could append to the removed queue.
    pub(crate) fn remove_damaged(&self, topic: &str, queue_id: u32) -> Result<()> {
        self.map.write().remove_if(topic, queue_id, |_| true);
        self.removals.fetch_add(1, Ordering::AcqRel);
        let topic_dir = self.dir.join(topic);
        let queue_dir = topic_dir.join(queue_id.to_string());
        match std::fs::remove_dir_all(&queue_dir) {
            Ok(()) => storage::sync_dir(&topic_dir),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(Error::io("remove a damaged queue", &queue_dir)(error)),
        }
    }

    /// How many queues were removed so far: a queue looked up before it moved may be gone.
    pub(crate) fn removals(&self) -> u64 {
        self.removals.load(Ordering::Acquire)
    }

    /// Every queue: (topic, queue id, queue), sorted by topic and queue id.
    pub(crate) fn all(&self) -> Vec<(String, u32, Arc<ConsumeQueue>)> {
        let map = self.map.read();
        map.sorted().into_iter().map(|(topic, id, queue)| (topic.to_owned(), id, Arc::clone(queue))).collect()
    }

    /// How many queues there are.
    pub(crate) fn count(&self) -> usize {
        self.map.read().len()
    }
}
