//! Reading a queue (RocketMQ's `getMessage`): consume-queue entries from a queue offset, filtered
//! by tag hash, then the messages they point at, read from the commit log with one cursor; and
//! the long poll at the queue's end (RocketMQ's `PullRequestHoldService`).

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::BATCH_HEADER_LEN;
use crate::store::hash::tag_hash;
use crate::store::long_poll::Woken;
use crate::store::message::StoredMessage;
use crate::store::message_store::MessageStore;
use crate::store::metrics::Counters;
use crate::store::read_only::Got;
use crate::store::state::StoreState;

/// Entries read from a consume queue at once.
const ENTRIES_AT_ONCE: u64 = 1_024;

/// How a [`MessageStore::get_messages`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GetStatus {
    /// Messages were found.
    Found,
    /// Entries were examined but none matched the tag, or their messages are gone (retention);
    /// `next_queue_offset` is past them: ask again from there.
    NoMatchedMessage,
    /// The offset is the queue's end: nothing new yet.
    NoNewMessage,
    /// The offset is below the queue's first entry (retention removed it); `next_queue_offset`
    /// is the first.
    OffsetTooSmall,
    /// The offset is past the queue's end; `next_queue_offset` is the end.
    OffsetOverflow,
    /// The store has no such queue: the topic's queue never had a message (RocketMQ's
    /// `NO_MATCHED_LOGIC_QUEUE`). `next_queue_offset`, `min_queue_offset` and `max_queue_offset`
    /// are 0, where its first message will be. `get_messages_wait` waits for that message.
    NoMatchedLogicQueue,
}

/// What [`MessageStore::get_messages`] returns.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GetResult {
    /// How it went.
    pub status: GetStatus,
    /// The messages, in queue order.
    pub messages: Vec<StoredMessage>,
    /// Where to ask next: the entry after the last one examined (or as the status says).
    pub next_queue_offset: u64,
    /// The queue's first offset.
    pub min_queue_offset: u64,
    /// The queue's end: it holds `[min_queue_offset, max_queue_offset)`.
    pub max_queue_offset: u64,
}

impl MessageStore {
    /// Up to `max` messages of `topic`'s queue `queue_id` from `queue_offset` on, those with tag
    /// `tag` only if one is given. One call examines at most `max_entries_examined` entries.
    ///
    /// A queue holds `[min, max)`: below `min` the status is `OffsetTooSmall` (next = min), at
    /// `max` `NoNewMessage`, past it `OffsetOverflow` (next = max). A queue that never had a
    /// message is `NoMatchedLogicQueue` (next, min and max 0). Errors: `InvalidTopic`,
    /// `InvalidQueue`, and the log's read errors (damage).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use strata_log::{GetStatus, Message, MessageStore, StoreConfig};
    /// let dir = tempfile::tempdir()?;
    /// let store = MessageStore::open(dir.path(), StoreConfig::default())?;
    /// for (i, tag) in ["red", "blue", "red"].into_iter().enumerate() {
    ///     store.put(&Message::new("paint", 1, format!("can {i}")).with_tag(tag))?;
    /// }
    /// let red = store.get_messages("paint", 1, 0, 10, Some("red"))?;
    /// let bodies: Vec<&[u8]> = red.messages.iter().map(|m| m.body()).collect();
    /// assert_eq!(bodies, [b"can 0", b"can 2"]);
    /// assert_eq!(red.next_queue_offset, 3);
    /// assert_eq!(store.get_messages("paint", 1, 3, 10, None)?.status, GetStatus::NoNewMessage);
    /// # Ok(()) }
    /// ```
    pub fn get_messages(
        &self,
        topic: &str,
        queue_id: u32,
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
    ) -> Result<GetResult> {
        if let Some(view) = self.read_only_view() {
            return view.get(topic, queue_id, queue_offset, max, tag).map(GetResult::from);
        }
        let inner = self.inner();
        inner.check_queue(topic, queue_id)?;
        Counters::add(&inner.counters.gets, 1);
        let got = inner.get_from_queue(topic, queue_id, queue_offset, max, tag)?;
        let count = got.messages.len() as u64;
        Counters::add(&inner.counters.messages_got, count);
        Ok(got)
    }

    /// [`MessageStore::get_messages`] that waits at the queue's end: if nothing matching is
    /// there, it returns as soon as a matching message is dispatched, or with nothing (status
    /// `NoNewMessage`, or `NoMatchedMessage` with `next_queue_offset` past what did not match)
    /// once `timeout` has passed. A queue that does not exist yet is waited for the same way (a
    /// consumer may start before its producer): the wait ends when its first message is
    /// dispatched, or at the timeout with `NoMatchedLogicQueue`. It sleeps on the queue's
    /// condition variable, never polling (a read-only store, which another process writes, looks
    /// again every 100 ms).
    pub fn get_messages_wait(
        &self,
        topic: &str,
        queue_id: u32,
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
        timeout: Duration,
    ) -> Result<GetResult> {
        if let Some(view) = self.read_only_view() {
            return view.get_wait((topic, queue_id), queue_offset, max, tag, timeout).map(GetResult::from);
        }
        let inner = self.inner();
        // A timeout too long to add to now (`Duration::MAX`) is no limit, not a panic.
        let deadline = Instant::now().checked_add(timeout);
        let before_deadline = || deadline.is_none_or(|deadline| Instant::now() < deadline);
        let mut offset = queue_offset;
        loop {
            let got = self.get_messages(topic, queue_id, offset, max, tag)?;
            let no_queue = got.status == GetStatus::NoMatchedLogicQueue;
            let at_end = matches!(
                got.status,
                GetStatus::NoNewMessage | GetStatus::NoMatchedMessage | GetStatus::NoMatchedLogicQueue
            ) && got.next_queue_offset >= got.max_queue_offset;
            if !got.messages.is_empty() || !at_end || max == 0 {
                if got.messages.is_empty() && got.status == GetStatus::NoMatchedMessage && before_deadline() {
                    // Entries that did not match, and more to examine: go on at once.
                    offset = got.next_queue_offset;
                    continue;
                }
                return Ok(got);
            }
            let remaining =
                deadline.map_or(Duration::MAX, |deadline| deadline.saturating_duration_since(Instant::now()));
            if remaining.is_zero() {
                return Ok(got);
            }
            let end = || inner.queues.get(topic, queue_id).map_or(0, |queue| queue.max_offset());
            match inner.long_polls.wait(topic, queue_id, got.next_queue_offset, remaining, end) {
                // A queue that did not exist is read again from the offset asked for.
                Woken::Arrived if no_queue => {}
                Woken::Arrived => offset = got.next_queue_offset,
                Woken::TimedOut => return Ok(got),
                Woken::Closed => return Err(Error::Closed),
            }
        }
    }
}

impl StoreState {
    fn get_from_queue(
        &self,
        topic: &str,
        queue_id: u32,
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
    ) -> Result<GetResult> {
        let queue = self.queues.get(topic, queue_id);
        let (min, end) = queue.as_ref().map_or((0, 0), |queue| (queue.min_offset(), queue.max_offset()));
        let exists = queue.is_some();
        let result = |status, messages, next| GetResult {
            status,
            messages,
            next_queue_offset: next,
            min_queue_offset: min,
            max_queue_offset: end,
        };
        let Some(queue) = queue.filter(|_| queue_offset >= min && queue_offset < end) else {
            return Ok(match queue_offset {
                _ if !exists => result(GetStatus::NoMatchedLogicQueue, Vec::new(), 0),
                offset if offset < min => result(GetStatus::OffsetTooSmall, Vec::new(), min),
                offset if offset == end => result(GetStatus::NoNewMessage, Vec::new(), end),
                _ => result(GetStatus::OffsetOverflow, Vec::new(), end),
            });
        };
        let wanted_hash = tag.map(|tag| tag_hash(Some(tag)));
        let last = end.min(queue_offset.saturating_add(self.config.max_entries_examined));
        let mut messages = Vec::with_capacity(max.min(64));
        let mut next = queue_offset;
        let mut candidates = Vec::new();
        while next < last && messages.len() < max {
            // Unfiltered, the entries still wanted are enough (more only if records are gone).
            let needed = max - messages.len();
            let wanted = if tag.is_none() { needed as u64 } else { ENTRIES_AT_ONCE };
            let entries = queue.entries(next, (last - next).min(wanted.clamp(1, ENTRIES_AT_ONCE)) as usize)?;
            if entries.is_empty() {
                break; // retention moved the queue's start past `next` meanwhile
            }
            // The entries whose tag hash matches, as many as are still wanted: examined up to the
            // last of them (or every entry read, if fewer match).
            candidates.clear();
            for &(at, entry) in &entries {
                next = at + 1;
                if wanted_hash.is_some_and(|hash| hash != entry.tag_hash) {
                    continue;
                }
                candidates.push((at, entry));
                if candidates.len() == needed {
                    break;
                }
            }
            // Their messages, each read straight from its batch (other queues' messages between
            // them are not read).
            let offsets: Vec<u64> = candidates.iter().map(|(_, entry)| entry.log_offset).collect();
            // A batch of one message: its record and the batch header.
            let bytes: usize = candidates.iter().map(|(_, entry)| entry.size as usize + BATCH_HEADER_LEN).sum();
            let records = self.log.gather(&offsets, bytes)?;
            for (&(at, entry), record) in candidates.iter().zip(records) {
                let Some(record) = record else { continue }; // removed by retention
                let message = match StoredMessage::decode(record) {
                    Ok(message) if message.is_at(topic, queue_id, at) => message,
                    _ => {
                        tracing::warn!(
                            topic,
                            queue_id,
                            queue_offset = at,
                            log_offset = entry.log_offset,
                            "a queue entry points at another message; skipped"
                        );
                        continue;
                    }
                };
                if tag.is_some() && message.tag() != tag {
                    continue; // a hash collision
                }
                messages.push(message);
            }
        }
        let status = if messages.is_empty() { GetStatus::NoMatchedMessage } else { GetStatus::Found };
        Ok(result(status, messages, next))
    }
}

impl From<Got> for GetResult {
    /// A read-only store's get, with the status the owner's get gives the same bounds and entries.
    fn from(got: Got) -> GetResult {
        let status = match got {
            Got { exists: false, .. } => GetStatus::NoMatchedLogicQueue,
            Got { examined: true, ref messages, .. } if !messages.is_empty() => GetStatus::Found,
            Got { examined: true, .. } => GetStatus::NoMatchedMessage,
            Got { from, min, .. } if from < min => GetStatus::OffsetTooSmall,
            Got { from, max, .. } if from == max => GetStatus::NoNewMessage,
            Got { .. } => GetStatus::OffsetOverflow,
        };
        GetResult {
            status,
            messages: got.messages,
            next_queue_offset: got.next,
            min_queue_offset: got.min,
            max_queue_offset: got.max,
        }
    }
}
