#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod bench;
mod clock;
mod config;
mod error;
pub mod events;
pub mod failpoint;
pub mod format;
mod histogram;
pub mod inspect;
mod log;
mod producer;
mod records;
mod storage;
#[cfg(feature = "cli")]
pub mod tools;

pub use clock::{Clock, ManualClock};
pub use config::{CleanupPolicy, FlushPolicy, LogConfig, ReadPath, RecoveryMode};
pub use error::{Corruption, Error, Result};
pub use events::{EventHandle, EventManager, EventMetrics};
pub use histogram::LatencySummary;
pub use log::{
    AppendInfo, BatchHeader, Checkpoint, CleanShutdown, CompactionReport, Header, Log, LogMetrics, LogReader,
    OffsetEntry, Record, RecordView, RecoveryReport, TimeEntry,
};
pub use log::{BatchBuffer, BatchBuilder, BatchView, Batches};
pub use producer::{BufferPool, BufferPoolMetrics, PooledBuffer, Producer, ProducerConfig, SendHandle};
pub use records::Records;
