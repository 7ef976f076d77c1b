//! Finding messages by key (the index) and queue positions by time (the commit log's time index
//! and the consume queue).

use crate::error::Result;
use crate::store::index::key_hash;
use crate::store::key_query;
use crate::store::message::StoredMessage;
use crate::store::message_store::MessageStore;
use crate::store::metrics::Counters;

impl MessageStore {
    /// The newest `max` messages of `topic` with key `key` stored in `[begin_ms, end_ms]` (the
    /// store's append time), in ascending log offset. Every candidate the index gives is
    /// re-read and its topic, keys and time checked, so hash collisions never leak through.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{Message, MessageStore, StoreConfig};
    /// let dir = tempfile::tempdir()?;
    /// let store = MessageStore::open(dir.path(), StoreConfig::default())?;
    /// store.put(&Message::new("orders", 0, b"created").with_keys(["order-17"]))?;
    /// store.put(&Message::new("orders", 1, b"paid").with_keys(["order-17", "payment-3"]))?;
    /// let found = store.query_by_key("orders", "order-17", 0, i64::MAX, 10)?;
    /// let bodies: Vec<&[u8]> = found.iter().map(|m| m.body()).collect();
    /// assert_eq!(bodies, [&b"created"[..], b"paid"]);
    /// # Ok(()) }
    /// ```
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        begin_ms: i64,
        end_ms: i64,
        max: usize,
    ) -> Result<Vec<StoredMessage>> {
        if let Some(view) = self.read_only_view() {
            return view.query_by_key(topic, key, (begin_ms, end_ms), max);
        }
        let inner = self.inner();
        key_query::check(topic, key)?;
        Counters::add(&inner.counters.key_queries, 1);
        if max == 0 || begin_ms > end_ms {
            return Ok(Vec::new());
        }
        let candidates = key_query::candidates(max);
        let offsets = inner.index.query(key_hash(topic, key), begin_ms, end_ms, candidates)?;
        key_query::matching(&inner.log, offsets, (topic, key), (begin_ms, end_ms), max)
    }

    /// The first queue offset of `topic`'s queue `queue_id` whose message was stored at or after
    /// `timestamp_ms` (the store's append time, which never goes backwards), or the queue's end
    /// if none was. Clamped to the queue's `[min, max]`.
    pub fn queue_offset_for_timestamp(&self, topic: &str, queue_id: u32, timestamp_ms: i64) -> Result<u64> {
        if let Some(view) = self.read_only_view() {
            return view.queue_offset_for_timestamp(topic, queue_id, timestamp_ms);
        }
        let inner = self.inner();
        inner.check_queue(topic, queue_id)?;
        let Some(queue) = inner.queues.get(topic, queue_id) else { return Ok(0) };
        match inner.log.offset_for_timestamp(timestamp_ms)? {
            Some(log_offset) => Ok(queue.queue_offset_for_log_offset(log_offset)?),
            None => Ok(queue.max_offset()),
        }
    }
}
