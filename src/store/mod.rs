//! The message store (RocketMQ's layer, DESIGN.md §11): topics and queues over one commit log.
//! Under construction (issue 11): these are its building blocks, which the `MessageStore`, the
//! dispatcher and the API will put together.
//!
//! - `message`: a message as one record of the commit log; `error`: `StoreError`.
//! - `consume_queue`: the ConsumeQueue of one topic and queue (`.cq` files of 20-byte entries).
//! - `hash`: FNV-1a 64, the hash of tags (and of index keys).
//! - `index_file`: the IndexFile (`<root>/index/<begin_log_offset>.idx`) and `IndexFiles`, the set
//!   of them, RocketMQ's `IndexService`.
//! - `consumer_offsets`: `offsets.json`; `checkpoint`: `store.checkpoint` and `abort`.
//! - `dispatch`: what the dispatcher hands on; `long_poll`: waiting at a queue's end.
//! - `config`: `StoreConfig`.

// Until `MessageStore` uses the building blocks (issue 11 in progress).
#![allow(dead_code)]

pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod consume_queue;
pub(crate) mod consumer_offsets;
pub(crate) mod dispatch;
pub(crate) mod error;
pub(crate) mod hash;
pub(crate) mod index_file;
pub(crate) mod long_poll;
pub(crate) mod message;
