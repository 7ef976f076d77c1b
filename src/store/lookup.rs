//! Finding messages by key (the index) and queue positions by time (the commit log's time index
//! and the consume queue).

use crate::error::{Error, Result};
use crate::store::index::key_hash;
use crate::store::message::{StoredMessage, validate_topic};
use crate::store::message_reader::MessageReader;
use crate::store::message_store::MessageStore;
use crate::store::metrics::Counters;

/// Candidates asked of the index per message wanted: hashes collide, and the candidates are
/// re-checked against the message.
const CANDIDATES_PER_RESULT: usize = 2;
/// At least this many candidates are asked for.
const MIN_CANDIDATES: usize = 32;

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
        let inner = self.inner();
        validate_topic(topic)?;
        if key.is_empty() {
            return Err(Error::InvalidField { what: "key", name: String::new(), reason: "empty" });
        }
        Counters::add(&inner.counters.key_queries, 1);
        if max == 0 || begin_ms > end_ms {
            return Ok(Vec::new());
        }
        let candidates = max.saturating_mul(CANDIDATES_PER_RESULT).max(MIN_CANDIDATES);
        let offsets = inner.index.query(key_hash(topic, key), begin_ms, end_ms, candidates)?;
        let mut reader = MessageReader::new(&inner.log);
        let mut found = Vec::new();
        for log_offset in offsets {
            let Some(record) = reader.read(log_offset, || 1)? else { continue };
            let Ok(message) = StoredMessage::decode(record) else { continue };
            let time = message.timestamp_ms();
            if message.topic() == topic
                && message.keys().iter().any(|k| k == key)
                && (begin_ms..=end_ms).contains(&time)
            {
                found.push(message);
            }
        }
        // The newest `max`.
        let surplus = found.len().saturating_sub(max);
        found.drain(..surplus);
        Ok(found)
    }

    /// The first queue offset of `topic`'s queue `queue_id` whose message was stored at or after
    /// `timestamp_ms` (the store's append time, which never goes backwards), or the queue's end
    /// if none was. Clamped to the queue's `[min, max]`.
    pub fn queue_offset_for_timestamp(&self, topic: &str, queue_id: u32, timestamp_ms: i64) -> Result<u64> {
        let inner = self.inner();
        inner.check_queue(topic, queue_id)?;
        let Some(queue) = inner.queues.get(topic, queue_id) else { return Ok(0) };
        match inner.log.offset_for_timestamp(timestamp_ms)? {
            Some(log_offset) => Ok(queue.queue_offset_for_log_offset(log_offset)?),
            None => Ok(queue.max_offset()),
        }
    }
}
