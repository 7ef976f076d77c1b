//! The message store (DESIGN.md §11, issue 11), under construction: RocketMQ's store layered on the
//! commit log. Topics and queues over one shared log, a consume queue per queue and a hash-slot
//! index by key, built by a dispatcher that follows the log. So far only the building blocks exist;
//! the `MessageStore` that ties them together comes later.
//!
//! - `index_file`: the IndexFile (`<root>/index/<begin_log_offset>.idx`) and `IndexFiles`, the set
//!   of them, RocketMQ's `IndexService`.

// Until MessageStore uses the building blocks (issue 11 in progress).
#![allow(dead_code)]

pub(crate) mod index_file;
