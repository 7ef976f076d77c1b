#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
// docs.rs builds with `--cfg docsrs` and every feature: items behind a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]

// Files are read with `pread`, written with `pwrite`, locked with `flock` and preallocated with
// `fallocate` (or its emulation): Unix only. README.md "Platforms" says what is crash-tested where.
#[cfg(not(unix))]
compile_error!(
    "strata-log builds on Unix-like systems only (Linux, where it is crash-tested; macOS and the BSDs build): \
     it uses pread/pwrite, flock and fallocate"
);

// Every module is private: what a user may depend on is the `pub use` list below, nothing else.
// The `strata` command and the tests reach further through the hidden `internals` module (feature
// `internals`), which is not part of the API.
mod channel;
mod clock;
mod config;
mod error;
mod events;
mod failpoint;
mod format;
mod histogram;
#[cfg(feature = "internals")]
mod inspect;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;
mod log;
mod producer;
#[cfg(feature = "openraft")]
mod raft;
mod records;
mod storage;
mod store;

pub use channel::{Channel, ChannelConfig, ChannelMetrics, Event, Transaction};
pub use clock::{Clock, ManualClock};
pub use config::{CleanupPolicy, FlushPolicy, LogConfig, ReadPath, RecoveryMode};
pub use error::{Corruption, Error, Result};
pub use events::{EventHandle, EventManager, EventMetrics};
pub use histogram::LatencySummary;
pub use log::{AppendInfo, CompactionReport, Header, Log, LogMetrics, LogReader, Record, RecordView, RecoveryReport};
pub use log::{
    BatchBuffer, BatchBuilder, BatchRef, BatchView, Batches, Cursor, CursorInterrupt, RecordRef, RecordRefs,
};
/// The openraft this crate's [`RaftLogStore`] implements (feature `openraft`), re-exported so an
/// application names exactly the version the store was built for.
#[cfg(feature = "openraft")]
pub use openraft;
pub use producer::{BufferPool, BufferPoolMetrics, PooledBuffer, Producer, ProducerConfig, SendHandle};
#[cfg(feature = "openraft")]
pub use raft::{RaftLogStore, RaftLogStoreReader};
pub use records::Records;
pub use storage::map_budget::{MapBudget, MapBudgetConfig, MapBudgetMetrics};
pub use store::{
    CommittedOffset, Dispatch, DispatchRequest, GetResult, GetStatus, Message, MessageStore, PutHandle, PutResult,
    QueueInfo, StoreConfig, StoreMetrics, StoredMessage, validate_topic,
};
