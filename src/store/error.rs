//! What the message store's calls fail with: the log's errors, and the store's own.

use crate::error::Error;

/// An error of the message store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The commit log refused or failed (a closed or poisoned log, an I/O error, damage).
    #[error(transparent)]
    Log(#[from] Error),
    /// A topic name the store does not accept (it names a directory).
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic {
        /// The name given.
        topic: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A queue id at or past `StoreConfig::max_queues_per_topic`.
    #[error("queue {queue_id} is out of range: a topic has queues 0..{max}")]
    InvalidQueue {
        /// The id given.
        queue_id: u32,
        /// Queues per topic.
        max: u32,
    },
    /// A message larger than `StoreConfig::max_message_bytes` once encoded.
    #[error("message of {size} bytes exceeds max_message_bytes {max}")]
    MessageTooLarge {
        /// Its encoded size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A property, tag or key the store cannot hold as given.
    #[error("invalid {what} {name:?}: {reason}")]
    InvalidField {
        /// `"property"`, `"tag"`, `"key"` or `"keys"` (too many).
        what: &'static str,
        /// The name or value given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A record of the commit log that is not a message of this store (a header is missing or
    /// malformed): never written by the store, so the log was changed behind its back.
    #[error("the record at log offset {log_offset} is not a message: {reason}")]
    NotAMessage {
        /// Where it is.
        log_offset: u64,
        /// What is missing or malformed.
        reason: &'static str,
    },
    /// The message was stored in the commit log at `log_offset`, but dispatch (writing its queue
    /// and index entries) is failing: `reason` says why. Dispatch retries; the message is in its
    /// queue once dispatch gets past it. If `reason` says the commit log failed (a poisoned log),
    /// the message may not be durable: reopen the store.
    #[error("message stored at log offset {log_offset} but not dispatched: {reason}")]
    DispatchFailed {
        /// The message's offset in the commit log.
        log_offset: u64,
        /// Why dispatch is stuck.
        reason: String,
    },
    /// A `put_batch` whose messages are not all for one topic and queue.
    #[error("a batch holds messages of one topic and queue; message {index} is for {topic:?} queue {queue_id}")]
    MixedBatch {
        /// The first message that differs from the first.
        index: usize,
        /// Its topic.
        topic: String,
        /// Its queue.
        queue_id: u32,
    },
}

/// The store's result.
pub type StoreResult<T> = std::result::Result<T, StoreError>;
