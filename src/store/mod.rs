//! The message store (RocketMQ's layer, docs/DESIGN.md §11): topics and queues over one commit log.
//!
//! - `message_store`: `MessageStore`, the handle (open, close); `state`: `StoreState`, what its
//!   calls and threads share (the parts table and the lock order), of owners: `sequencer` (the
//!   put lock), `progress` (how far dispatch got), `maintenance` (what background work
//!   remembers), `metrics`.
//! - Its operations, by what they do: `put`, `get` (and long polls), `lookup` (by key, by time,
//!   with `key_query`, the re-check of the index's candidates);
//!   `recovery` (open), `background` (flushes, checkpoint, offsets, retention), `dispatcher` (the
//!   thread building queues and index).
//! - `message`: a message as one record of the commit log.
//! - `queues`: every consume queue; `consume_queue`: one queue (`.cq` files of 20-byte entries);
//!   `queue_map`: topic → queue id → `T`.
//! - `hash`: FNV-1a 64, the hash of tags (and of index keys).
//! - `index`: the IndexFile (`<root>/index/<begin_log_offset>.idx`) and `IndexFiles`, the set
//!   of them, RocketMQ's `IndexService`.
//! - `message_reader`: reads messages at log offsets with one cursor.
//! - `consumer_offsets`: `offsets.json`; `checkpoint`: `store.checkpoint` and `abort`; `meta`:
//!   `store.meta`, the format guard and the parameters the store's files are made with.
//! - `dispatch`: what the dispatcher hands on; `long_poll`: waiting at a queue's end.
//! - `config`: `StoreConfig`.
//! - `read_only`: the store opened read-only (`MessageStore::open_read_only`), reading the files
//!   another process may be writing; its queues and index are `consume_queue::ReadOnlyQueue` and
//!   `index::ReadOnlyIndex`.

pub(crate) mod background;
pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod consume_queue;
pub(crate) mod consumer_offsets;
pub(crate) mod dispatch;
pub(crate) mod dispatcher;
pub(crate) mod get;
pub(crate) mod hash;
pub(crate) mod index;
pub(crate) mod key_query;
pub(crate) mod long_poll;
pub(crate) mod lookup;
pub(crate) mod maintenance;
pub(crate) mod message;
pub(crate) mod message_reader;
pub(crate) mod message_store;
pub(crate) mod meta;
pub(crate) mod metrics;
pub(crate) mod progress;
pub(crate) mod put;
pub(crate) mod queue_checks;
pub(crate) mod queue_map;
pub(crate) mod queues;
pub(crate) mod read_only;
pub(crate) mod recovery;
#[cfg(test)]
mod recovery_tests;
pub(crate) mod sequencer;
pub(crate) mod state;

pub use config::StoreConfig;
pub use consumer_offsets::CommittedOffset;
pub use dispatch::{Dispatch, DispatchRequest};
pub use get::{GetResult, GetStatus};
pub use message::{Message, StoredMessage, validate_topic};
pub use message_store::MessageStore;
pub use metrics::StoreMetrics;
pub use put::{PutHandle, PutResult};
pub use queues::QueueInfo;
