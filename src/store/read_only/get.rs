//! A read-only store's gets: a queue's messages as the owner's `get.rs` reads them (consume-queue
//! entries from a queue offset, filtered by tag hash, then the messages they point at, each checked
//! to be the one its entry names), on the files as they are now; and the wait at a queue's end,
//! which polls (nothing in another process can wake it).
//!
//! The one difference is the queue's tail, the last entry found, which the owner may be writing
//! (`consume_queue/read_only.rs`). A tail with a size is whole up to its size (its log offset is
//! written before it), but its size and tag hash may be half copied: it is trusted once its message
//! is the one it names, with that size and tag hash. Until then, while the owner may be writing
//! (`abort` is there), the queue ends before it: a get returns what precedes it and its `max` is
//! the tail's offset, and the next get looks again. A tail pointing past the commit log's end (read
//! again) ends the queue the same way: it is being written, or what the next open cuts.

use std::time::{Duration, Instant};

use super::ReadOnlyStore;
use crate::error::Result;
use crate::log::{Log, RecordView};
use crate::store::consume_queue::{Entry, ReadOnlyQueue};
use crate::store::hash::tag_hash;
use crate::store::message::StoredMessage;
use crate::store::message_reader::MessageReader;
use crate::store::metrics::Counters;

/// How often a waiting get looks at the files again.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Entries read from a consume queue at once.
const ENTRIES_AT_ONCE: u64 = 1_024;

/// What a read-only get found. `get.rs` makes it a `GetResult` (this module cannot name that
/// type: `get.rs` calls it), with the status the owner's get would give.
#[derive(Debug)]
pub(crate) struct Got {
    /// The queue offset asked for.
    pub(crate) from: u64,
    /// Whether entries were examined; if not, `from` was outside `[min, max)`.
    pub(crate) examined: bool,
    /// The messages, in queue order.
    pub(crate) messages: Vec<StoredMessage>,
    /// Where to ask next.
    pub(crate) next: u64,
    /// The queue's first offset.
    pub(crate) min: u64,
    /// The queue's end (before a tail that is not whole yet).
    pub(crate) max: u64,
    /// Whether the queue exists (has a directory of files).
    pub(crate) exists: bool,
}

impl Got {
    /// Nothing (matching) before the queue's end: `NoNewMessage`, or `NoMatchedMessage` at the end.
    fn at_end(&self) -> bool {
        if !self.exists {
            return true; // a queue that does not exist yet is waited for
        }
        if self.examined { self.messages.is_empty() && self.next >= self.max } else { self.from == self.max }
    }
}

/// The message a queue entry points at, as a get takes it.
enum Read {
    /// The entry's message.
    Message(StoredMessage),
    /// Nothing to return for this entry (its message is gone, or the entry points at another).
    Skip,
    /// The tail is not whole yet: the queue ends before it for now.
    Unsettled,
}

impl ReadOnlyStore {
    /// `MessageStore::get_messages` on the files as they are: see the module documentation.
    pub(crate) fn get(
        &self,
        topic: &str,
        queue_id: u32,
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
    ) -> Result<Got> {
        self.config.check_queue(topic, queue_id)?;
        Counters::add(&self.counters.gets, 1);
        let got = self.get_from_queue(topic, queue_id, queue_offset, max, tag)?;
        Counters::add(&self.counters.messages_got, got.messages.len() as u64);
        Ok(got)
    }

    /// `MessageStore::get_messages_wait`: as the owner's, but at the queue's end it looks again
    /// every [`POLL_INTERVAL`] (or less, to meet `timeout`) instead of being woken.
    pub(crate) fn get_wait(
        &self,
        (topic, queue_id): (&str, u32),
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
        timeout: Duration,
    ) -> Result<Got> {
        // A timeout too long to add to now (`Duration::MAX`) is no limit, not a panic.
        let deadline = Instant::now().checked_add(timeout);
        let remaining = || deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
        let mut offset = queue_offset;
        loop {
            let got = self.get(topic, queue_id, offset, max, tag)?;
            if !got.messages.is_empty() || !got.at_end() || max == 0 {
                if got.messages.is_empty() && got.examined && !remaining().is_zero() {
                    // Entries that did not match, and more to examine: go on at once.
                    offset = got.next;
                    continue;
                }
                return Ok(got);
            }
            let wait = remaining();
            if wait.is_zero() {
                return Ok(got);
            }
            std::thread::sleep(wait.min(POLL_INTERVAL));
            offset = got.next;
        }
    }

    fn get_from_queue(
        &self,
        topic: &str,
        queue_id: u32,
        queue_offset: u64,
        max: usize,
        tag: Option<&str>,
    ) -> Result<Got> {
        let outside = |min: u64, end: u64| Got {
            from: queue_offset,
            examined: false,
            messages: Vec::new(),
            next: if queue_offset < min { min } else { end },
            min,
            max: end,
            exists: true,
        };
        let Some(queue) = self.queue(topic, queue_id)? else { return Ok(Got { exists: false, ..outside(0, 0) }) };
        let (mut min, mut end) = queue.bounds();
        let stale = queue_offset < min || queue_offset >= end;
        if stale {
            // At (or past) the end as last seen: the owner may have appended since (or retention
            // removed the first files).
            (min, end) = queue.refresh()?;
        }
        let min = self.live_min(&queue, (min, end))?;
        if queue_offset < min || queue_offset >= end {
            return Ok(outside(min, end));
        }
        let got = Got {
            from: queue_offset,
            examined: true,
            messages: Vec::new(),
            next: queue_offset,
            min,
            max: end,
            exists: true,
        };
        let got = self.examine(&queue, (topic, queue_id), got, max, tag)?;
        let limit = queue_offset.saturating_add(self.config.max_entries_examined);
        if stale || !got.examined || got.next < got.max || got.messages.len() >= max || got.next >= limit {
            return Ok(got);
        }
        // It reached the end as last seen wanting more: the owner may have appended since.
        let (_, end) = queue.refresh()?;
        if end <= got.max {
            return Ok(got);
        }
        self.examine(&queue, (topic, queue_id), Got { max: end, ..got }, max, tag)
    }

    /// The owner's examination loop: entries from `got.next`, at most `max_entries_examined`,
    /// until `max` messages matched.
    fn examine(
        &self,
        queue: &ReadOnlyQueue,
        (topic, queue_id): (&str, u32),
        mut got: Got,
        max: usize,
        tag: Option<&str>,
    ) -> Result<Got> {
        let wanted_hash = tag.map(|tag| tag_hash(Some(tag)));
        let limit = got.from.saturating_add(self.config.max_entries_examined);
        'examine: while got.next < got.max.min(limit) && got.messages.len() < max {
            // Unfiltered, the entries still wanted are enough (more only if records are gone).
            let wanted = if tag.is_none() { (max - got.messages.len()) as u64 } else { ENTRIES_AT_ONCE };
            let count = (got.max.min(limit) - got.next).min(wanted.clamp(1, ENTRIES_AT_ONCE));
            let run = queue.entries(got.next, count as usize)?;
            got.max = run.end;
            let Some(&(_, newest)) = run.entries.last() else { break };
            let log = self.log_covering(newest.log_offset)?;
            let mut reader = MessageReader::new(&log);
            for (i, &(at, entry)) in run.entries.iter().enumerate() {
                let tail = at + 1 == run.end;
                if !tail && wanted_hash.is_some_and(|hash| hash != entry.tag_hash) {
                    got.next = at + 1;
                    continue;
                }
                // If it has to read: about the bytes of the next messages wanted, batch headers included.
                let ahead =
                    || run.entries[i..].iter().take(max - got.messages.len()).map(|(_, e)| e.size as usize + 64);
                let record = reader.read(entry.log_offset, || ahead().sum())?;
                let read = if tail {
                    self.tail(record, &log, (topic, queue_id), at, entry)
                } else {
                    checked(record, (topic, queue_id), at)
                };
                let message = match read {
                    Read::Unsettled => {
                        got.max = at;
                        break 'examine;
                    }
                    Read::Skip => None,
                    Read::Message(message) => Some(message),
                };
                got.next = at + 1;
                // The tag itself, not only its hash: hashes collide (and a tail's was not trusted).
                if let Some(message) = message.filter(|m| tag.is_none() || m.tag() == tag) {
                    got.messages.push(message);
                    if got.messages.len() == max {
                        break 'examine;
                    }
                }
            }
        }
        if got.from >= got.max {
            // The entry asked for is a tail not whole yet: the queue's end for now.
            got.examined = false;
            got.next = got.max;
        }
        Ok(got)
    }

    /// The tail entry's message (see the module documentation).
    fn tail(
        &self,
        record: Option<RecordView>,
        log: &Log,
        (topic, queue_id): (&str, u32),
        at: u64,
        entry: Entry,
    ) -> Read {
        let Some(record) = record else {
            // Gone (retention), or past the commit log's end even read again.
            return if entry.log_offset < log.start_offset() { Read::Skip } else { Read::Unsettled };
        };
        let size = record.encoded_len();
        match checked(Some(record), (topic, queue_id), at) {
            Read::Message(message) if size != entry.size as usize || tag_hash(message.tag()) != entry.tag_hash => {
                if self.owner_may_be_writing() {
                    Read::Unsettled
                } else {
                    Read::Message(message)
                }
            }
            read => read,
        }
    }

    /// Where `topic`'s queue `queue_id`, found to end at `end`, ends once its tail is checked:
    /// `end`, or the tail's offset if the tail is not whole yet.
    pub(super) fn settled_end(&self, topic: &str, queue_id: u32, queue: &ReadOnlyQueue, end: u64) -> Result<u64> {
        let Some(at) = end.checked_sub(1) else { return Ok(end) };
        let run = queue.entries(at, 1)?;
        let Some(&(at, entry)) = run.entries.first().filter(|(at, _)| at + 1 == run.end) else {
            return Ok(run.end.min(end));
        };
        let log = self.log_covering(entry.log_offset)?;
        let record = MessageReader::new(&log).read(entry.log_offset, || entry.size as usize + 64)?;
        Ok(match self.tail(record, &log, (topic, queue_id), at, entry) {
            Read::Unsettled => at,
            Read::Skip | Read::Message(_) => run.end,
        })
    }
}

/// The message `record` holds if it is the one the entry at `at` of `topic`'s queue `queue_id`
/// names; else the entry is skipped (logged, as the owner's get does). `None`: gone (retention).
fn checked(record: Option<RecordView>, (topic, queue_id): (&str, u32), at: u64) -> Read {
    let Some(record) = record else { return Read::Skip };
    let log_offset = record.offset();
    match StoredMessage::decode(record) {
        Ok(message) if message.is_at(topic, queue_id, at) => Read::Message(message),
        _ => {
            tracing::warn!(
                topic,
                queue_id,
                queue_offset = at,
                log_offset,
                "a queue entry points at another message; skipped"
            );
            Read::Skip
        }
    }
}
