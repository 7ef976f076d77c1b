//! Putting messages: queue offsets are taken under the store's put lock and the batch is appended
//! there with `append_nowait`; the wait (for durability under the flush policy, and for dispatch,
//! so a put reads its own write) happens after the lock is released, so concurrent puts share one
//! fsync (group commit).

use std::sync::Arc;
use std::time::Duration;

use crate::config::FlushPolicy;
use crate::error::{Error, Result};
use crate::log::{AppendInfo, FOREVER, Header, batch};
use crate::store::message::Message;
use crate::store::message_store::MessageStore;
use crate::store::progress::Progress;
use crate::store::state::StoreState;

/// Where a put message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PutResult {
    /// Its offset in the commit log.
    pub log_offset: u64,
    /// Its offset in its queue.
    pub queue_offset: u64,
}

/// A put in flight ([`MessageStore::put_nowait`]): where the message went is known at once; wait
/// for it to be durable (under the flush policy) and in its queue with [`PutHandle::wait`].
#[must_use = "a put is acknowledged only once `wait` returns Ok"]
pub struct PutHandle {
    result: PutResult,
    /// The log offset of the batch's last message.
    last_log_offset: u64,
    progress: Arc<Progress>,
}

impl std::fmt::Debug for PutHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PutHandle").field("result", &self.result).field("done", &self.is_done()).finish()
    }
}

impl PutHandle {
    /// Where the message is (or, for a batch, its first message).
    pub fn result(&self) -> PutResult {
        self.result
    }

    /// Waits until the message is durable under the flush policy and dispatched to its queue.
    /// `Error::DispatchFailed` if dispatch is failing at it (the message is stored; dispatch
    /// retries), `Error::Closed` if the store closed first.
    pub fn wait(self) -> Result<PutResult> {
        self.progress.wait_past(self.last_log_offset, None)?;
        Ok(self.result)
    }

    /// [`PutHandle::wait`] up to `timeout`: `Ok(None)` if it is not done by then.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Option<PutResult>> {
        Ok(self.progress.wait_past(self.last_log_offset, Some(timeout))?.then_some(self.result))
    }

    /// Whether [`PutHandle::wait`] would return at once with `Ok`.
    pub fn is_done(&self) -> bool {
        self.progress.dispatched() > self.last_log_offset
    }
}

impl MessageStore {
    /// Puts `message` and returns once it is durable under the commit log's flush policy and
    /// dispatched to its queue (a `get_messages` after it sees it). Concurrent puts share fsyncs.
    ///
    /// Errors, with nothing stored: `Error::InvalidTopic`, `InvalidQueue`, `InvalidField`,
    /// `MessageTooLarge`, and the log's refusals (a full disk). After it was stored:
    /// `Error::DispatchFailed`, or the log's failure to make it durable (the log is
    /// poisoned: reopen).
    pub fn put(&self, message: &Message) -> Result<PutResult> {
        let messages = std::slice::from_ref(message);
        let stored = self.put_all(messages)?;
        self.settle(stored, messages)
    }

    /// Stores `message` and returns without waiting for durability or dispatch; the handle says
    /// where it went and waits for it. Puts from one thread are numbered in call order.
    pub fn put_nowait(&self, message: &Message) -> Result<PutHandle> {
        let stored = self.put_all(std::slice::from_ref(message))?;
        let progress = Arc::clone(&self.inner().progress);
        // Nobody waits to dispatch it: the dispatcher thread does.
        progress.want(stored.info.last_offset);
        Ok(PutHandle { result: stored.result, last_log_offset: stored.info.last_offset, progress })
    }

    /// Puts `messages`, all for one topic and queue, as one batch of the commit log: all or
    /// nothing, consecutive queue offsets. Returns where each went, once all are durable and
    /// dispatched. An empty slice puts nothing.
    pub fn put_batch(&self, messages: &[Message]) -> Result<Vec<PutResult>> {
        self.writer()?;
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let stored = self.put_all(messages)?;
        let first = self.settle(stored, messages)?;
        let results = (0..messages.len() as u64)
            .map(|i| PutResult { log_offset: first.log_offset + i, queue_offset: first.queue_offset + i });
        Ok(results.collect())
    }

    /// Waits for a stored batch (of `messages`): durable (under `FlushPolicy::Always`, leading the
    /// group commit if no one else does), then dispatched — by this thread, from what it holds, if
    /// no other did it first.
    fn settle(&self, stored: Stored, messages: &[Message]) -> Result<PutResult> {
        let inner = self.inner();
        if inner.config.log.flush_policy == FlushPolicy::Always {
            inner.log.wait_batch_durable(&stored.info, FOREVER)?;
        }
        inner.dispatch_put(&stored.info, stored.result.queue_offset, messages, stored.sizes.as_slice())?;
        Ok(stored.result)
    }

    fn put_all(&self, messages: &[Message]) -> Result<Stored> {
        let inner = self.writer()?;
        let put = inner.check_puts(messages).and_then(|()| inner.append_puts(messages));
        let counter = if put.is_ok() { &inner.counters.puts } else { &inner.counters.put_failures };
        counter.fetch_add(messages.len() as u64, std::sync::atomic::Ordering::Relaxed);
        put
    }
}

/// A batch appended, not yet waited for.
struct Stored {
    result: PutResult,
    info: AppendInfo,
    sizes: RecordSizes,
}

/// Each record's size in a stored batch (what its queue entry stores): inline for a put of one.
enum RecordSizes {
    One(u32),
    Many(Vec<u32>),
}

impl RecordSizes {
    fn as_slice(&self) -> &[u32] {
        match self {
            RecordSizes::One(size) => std::slice::from_ref(size),
            RecordSizes::Many(sizes) => sizes,
        }
    }
}

impl StoreState {
    /// Refuses what the store cannot hold before anything is stored.
    fn check_puts(&self, messages: &[Message]) -> Result<()> {
        let config = &self.config;
        let Some(first) = messages.first() else { return Ok(()) };
        self.format.ensure(&self.root)?;
        self.check_checkpoint()?;
        for (index, message) in messages.iter().enumerate() {
            if message.topic() != first.topic() || message.queue_id() != first.queue_id() {
                let (topic, queue_id) = (message.topic().to_owned(), message.queue_id());
                return Err(Error::MixedBatch { index, topic, queue_id });
            }
            message.validate(config.max_queues_per_topic)?;
            // Every key is one index entry, and a message's entries must fit in one index file (entry
            // 0 unused): dispatch could never index more, and would retry it forever.
            let keys = message.keys().len() as u64;
            if keys >= u64::from(config.index_entries) {
                let reason = "more keys than an index file holds (`StoreConfig::index_entries` - 1)";
                return Err(Error::InvalidField { what: "keys", name: format!("{keys} keys"), reason });
            }
        }
        Ok(())
    }

    /// Numbers `messages` (one topic and queue) and appends them under the put lock.
    fn append_puts(&self, messages: &[Message]) -> Result<Stored> {
        let Some(first) = messages.first() else { unreachable!("put_all is never called with no messages") };
        let (topic, queue_id) = (first.topic(), first.queue_id());
        let seed = || self.queues.get(topic, queue_id).map_or(0, |queue| queue.max_offset());
        self.puts.sequence(topic, queue_id, messages.len() as u64, seed, |queue_offset| match messages {
            [message] => self.append_one(message, queue_offset),
            _ => self.append_many(messages, queue_offset),
        })
    }

    /// The common put, one message: its fields in one buffer, the only allocation when it has no
    /// properties (its header and record are on the stack).
    fn append_one(&self, message: &Message, queue_offset: u64) -> Result<Stored> {
        let mut fields = Vec::with_capacity(message.fields_len());
        message.encode_fields(queue_offset, &mut fields);
        let (only, more);
        let headers: &[Header<'_>] = if message.header_count() == 1 {
            only = [message.fields_header(&fields)];
            &only
        } else {
            more = {
                let mut headers = Vec::with_capacity(message.header_count());
                message.push_headers(&fields, &mut headers);
                headers
            };
            &more
        };
        let record = message.record(headers);
        // Its size as the batch stores it (offset and timestamp deltas 0) is its encoded size.
        let size = record.encoded_len();
        self.check_size(size)?;
        let info = self.log.append_nowait(std::slice::from_ref(&record))?;
        let result = PutResult { log_offset: info.base_offset, queue_offset };
        Ok(Stored { result, info, sizes: RecordSizes::One(size as u32) })
    }

    /// A batch: every message's fields in one buffer, every record's headers in one list — five
    /// allocations whatever the number of messages (`tests/store_put_allocations.rs`).
    fn append_many(&self, messages: &[Message], queue_offset: u64) -> Result<Stored> {
        let mut fields = Vec::with_capacity(messages.iter().map(Message::fields_len).sum());
        let mut fields_ends = Vec::with_capacity(messages.len());
        for (message, offset) in messages.iter().zip(queue_offset..) {
            message.encode_fields(offset, &mut fields);
            fields_ends.push(fields.len());
        }
        let mut headers = Vec::with_capacity(messages.iter().map(Message::header_count).sum());
        let mut fields_start = 0;
        for (message, &end) in messages.iter().zip(&fields_ends) {
            message.push_headers(&fields[fields_start..end], &mut headers);
            fields_start = end;
        }
        let mut rest = &headers[..];
        let records: Vec<_> = messages
            .iter()
            .map(|message| {
                let (own, after) = rest.split_at(message.header_count());
                rest = after;
                message.record(own)
            })
            .collect();
        records.iter().try_for_each(|record| self.check_size(record.encoded_len()))?;
        // Each record's size as the batch stores it: its offset delta is its index, its
        // timestamp delta 0 (the log's append time, the same for the whole batch).
        let sizes = records.iter().zip(0..).map(|(record, i)| batch::record_len(record, 0, i) as u32).collect();
        let info = self.log.append_nowait(&records)?;
        let result = PutResult { log_offset: info.base_offset, queue_offset };
        Ok(Stored { result, info, sizes: RecordSizes::Many(sizes) })
    }

    /// The size limit on a record itself (`encoded_len`: the store's fields have fixed sizes, so a
    /// record's size does not depend on its queue offset).
    fn check_size(&self, encoded_len: usize) -> Result<()> {
        let (size, max) = (encoded_len as u64, self.config.max_message_bytes);
        if size > max {
            return Err(Error::MessageTooLarge { size, max });
        }
        Ok(())
    }
}
