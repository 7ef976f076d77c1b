//! A read-only store's lookups: messages by key (the index as the owner last flushed it,
//! `index/read_only.rs`) and queue positions by time (the commit log's time index and the queue).

use super::ReadOnlyStore;
use crate::error::Result;
use crate::store::index::key_hash;
use crate::store::key_query;
use crate::store::message::StoredMessage;
use crate::store::metrics::Counters;

impl ReadOnlyStore {
    /// `MessageStore::query_by_key` on the files as they are: the index finds what the owner's
    /// last flush wrote (every `flush_interval_ms`), and each candidate is re-checked against its
    /// message as the owner's query does.
    pub(crate) fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        (begin_ms, end_ms): (i64, i64),
        max: usize,
    ) -> Result<Vec<StoredMessage>> {
        key_query::check(topic, key)?;
        Counters::add(&self.counters.key_queries, 1);
        if max == 0 || begin_ms > end_ms {
            return Ok(Vec::new());
        }
        let offsets = self.index.query(key_hash(topic, key), begin_ms, end_ms, key_query::candidates(max))?;
        let log = match offsets.last() {
            Some(&newest) => self.log_covering(newest)?,
            None => return Ok(Vec::new()),
        };
        key_query::matching(&log, offsets, (topic, key), (begin_ms, end_ms), max)
    }

    /// `MessageStore::queue_offset_for_timestamp` on the files as they are.
    pub(crate) fn queue_offset_for_timestamp(&self, topic: &str, queue_id: u32, timestamp_ms: i64) -> Result<u64> {
        self.config.check_queue(topic, queue_id)?;
        let Some(queue) = self.queue(topic, queue_id)? else { return Ok(0) };
        let (_, end) = queue.refresh()?;
        let end = self.settled_end(topic, queue_id, &queue, end)?;
        // The commit log as it is now: the queue may point past the view last read.
        let log = self.log_covering(u64::MAX)?;
        let found = match log.offset_for_timestamp(timestamp_ms)? {
            Some(log_offset) => queue.queue_offset_for_log_offset(log_offset)?,
            None => end,
        };
        Ok(found.min(end))
    }
}
