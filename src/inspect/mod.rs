//! `strata dump` and `strata verify` as library functions returning values: read-only inspection of
//! every file kind. Files are read with `pread`, never mapped, so inspecting a live log is safe.
//! The message store's files (`.cq`, `.idx`, `offsets.json`, `store.checkpoint`, a store root) are
//! in `store`, which uses this module's findings and dumps.
//!
//! The files, each using only those listed before it:
//!
//! | file | what it is |
//! | --- | --- |
//! | `dirs.rs` | what is at a log directory, who holds it, how a tool opens it; file-name kinds |
//! | `walk.rs` | a `.log` read batch by batch, an index entry by entry (`BatchInfo`, `Walked`) |
//! | `dump.rs` | `dump`: a file or a directory, by kind (`Dump`, `DumpOptions`) |
//! | `listing.rs` | what a live writer changes under a check, listed at one moment |
//! | `verify_log.rs` | `verify`: the findings (`Finding`, `VerifyReport`) and the checks behind them |
//! | `index_sanity.rs` | `dump --index-sanity-check`: index files checked as `verify` does |
//! | `recover.rs` | `recover`: the read-only check, the offline open, what changed |
//! | `store.rs` | the message store's files: their dumps and `verify_store` |
//! | `store_recover.rs` | `store recover`: the commit log recovered, every derived file rebuilt |
//!
//! `verify_log.rs` is not `verify.rs`: a module named like the `verify` function it exports would
//! make a doc link to `super::verify` (in `store.rs`) ambiguous.

mod dirs;
mod dump;
mod index_sanity;
mod listing;
mod recover;
pub mod store;
mod store_recover;
mod verify_log;
mod walk;

pub use dirs::{DirState, dir_state, ends_in_data, held_by_a_writer, offline_config, open_or_undo};
pub use dump::{Dump, DumpOptions, dump_dir, dump_dir_with, dump_file, dump_file_with};
pub use index_sanity::{IndexSanity, index_sanity};
pub use recover::{LogShape, Projection, RecoverOptions, RecoverOutcome, projection, recover};
pub use store_recover::{QueueOffsetsCut, StoreRecoverOutcome, recover_store};
pub use verify_log::{Finding, SegmentCheck, Severity, VerifyReport, empty_foreign_files, verify};
pub use walk::{BatchInfo, RecordInfo};

/// Where a file stops making sense.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Damage {
    /// Byte position of the damage.
    pub position: u64,
    /// What is wrong there.
    pub reason: String,
}

#[cfg(test)]
mod tests;
