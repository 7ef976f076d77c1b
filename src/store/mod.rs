//! The message store (RocketMQ's layer, DESIGN.md §11): topics and queues over one commit log.
//! Under construction (issue 11): the building blocks come first — the message's record form
//! (`message.rs`), the store's errors — then the consume queues, the index files, the dispatcher
//! and the `MessageStore` API on top of them.

// Until `MessageStore` uses the building blocks (issue 11 in progress).
#![allow(dead_code)]

pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod consumer_offsets;
pub(crate) mod dispatch;
pub(crate) mod error;
pub(crate) mod long_poll;
pub(crate) mod message;
