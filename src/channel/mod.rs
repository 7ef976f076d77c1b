//! The channel (Flume's `MemoryChannel`, durable; docs/DESIGN.md §12): a staging buffer between
//! sources and sinks, with put and take transactions, capacity back-pressure, and at-least-once
//! delivery across crashes, on one log (docs/FORMAT.md "Channel records").
//!
//! - `handle`: `Channel` and its open; `transaction`: `Transaction`, the user's calls; `close`:
//!   the close, and `Handle`, the counted reference to the state they hold (the last one
//!   dropped closes).
//! - `state`: `ChannelState`, what every part shares (its parts table and lock order: the channel
//!   lock and its queue, the log slot); it depends on no other part but the plain ones below.
//! - `commit`: take, commit, rollback on the shared state; `replay`: rebuilding what the channel
//!   holds at open; `background`: deleting what was taken (periodically, and at the close).
//! - `event`: `Event` and its record; `take_record`: the take record; `config`:
//!   `ChannelConfig`; `metrics`: counters and `ChannelMetrics`.

pub(crate) mod background;
pub(crate) mod close;
pub(crate) mod commit;
pub(crate) mod config;
pub(crate) mod event;
pub(crate) mod handle;
pub(crate) mod metrics;
pub(crate) mod replay;
pub(crate) mod state;
pub(crate) mod take_record;
pub(crate) mod transaction;

pub use config::ChannelConfig;
pub use event::Event;
pub use handle::Channel;
pub use metrics::ChannelMetrics;
pub use transaction::Transaction;
