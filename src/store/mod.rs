//! The message store (DESIGN.md §11; issue 11): topics and queues over one commit log, as
//! RocketMQ's store. Under construction: these are its building blocks, which the
//! `MessageStore`, the dispatcher and the API (issue 11) will put together.
//!
//! - `consume_queue`: the ConsumeQueue of one topic and queue (`.cq` files of 20-byte entries).
//! - `hash`: FNV-1a 64, the hash of tags (and, later, of index keys).

// Until MessageStore uses the building blocks (issue 11 in progress).
#![allow(dead_code)]

pub(crate) mod consume_queue;
pub(crate) mod hash;
