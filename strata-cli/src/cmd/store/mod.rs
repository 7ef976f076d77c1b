//! `strata store`: the message store's commands, one file each. `put` (and `get --commit`) open
//! the store read-write, say what the open repaired, and close it cleanly; `get`, `query` and
//! `stats` read it read-only (`MessageStore::open_read_only`): beside a running store, with read
//! access only, changing nothing. Reading commands never create a store.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use super::Notes;
use crate::tools::ToolError;
use crate::tools::store::{self as store_tools, StoreFiles};
use strata_log::{MessageStore, StoreConfig};

mod get;
mod put;
mod query;
mod recover;
mod stats;

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Put one message per line of stdin (the line is the body) into a topic's queue; prints
    /// what was stored. Creates the store if needed.
    Put(put::PutArgs),
    /// Print messages of one queue: queue offset, log offset, time, tag, keys, body.
    Get(get::GetArgs),
    /// Find a topic's messages by key (the index), newest `--max`, in log order.
    Query(query::QueryArgs),
    /// Print the topics and queues with their offsets, the index files, and each consumer
    /// group's committed offset and lag per queue.
    Stats(stats::StatsArgs),
    /// Repair a store offline: recover its commit log (refused without `--force` where that
    /// would lose acknowledged messages), then rebuild every consume queue and index file from
    /// it; says what was rebuilt. `--dry-run` changes nothing.
    Recover(recover::RecoverArgs),
}

pub(super) fn run(command: StoreCommand, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    match command {
        StoreCommand::Put(args) => put::run(args, out, notes),
        StoreCommand::Get(args) => get::run(args, out, notes),
        StoreCommand::Query(args) => query::run(args, out),
        StoreCommand::Stats(args) => stats::run(args, out),
        StoreCommand::Recover(args) => recover::run(args, out),
    }
}

/// Opens an existing store read-only: beside the process that may have it open.
fn open_reading(root: &Path) -> Result<MessageStore, ToolError> {
    store_tools::require_store(root)?;
    store_tools::open_read_only(root, store_tools::store_config(root, &StoreFiles::default())?)
}

/// Opens an existing store read-write to commit a consumer offset in it (a live store owns its
/// `offsets.json`): another process holding it is refused in one line saying what to do instead.
fn open_to_commit(root: &Path, notes: Notes) -> Result<MessageStore, ToolError> {
    store_tools::require_store(root)?;
    let config = store_tools::store_config(root, &StoreFiles::default())?;
    let store = store_tools::open_to_commit(root, config)?;
    let commit_log = root.join(strata_log::internals::format::STORE_COMMIT_LOG_DIR);
    notes.recovery(&commit_log, &store.metrics().log.recovery);
    Ok(store)
}

/// Opens the store, saying in one line what the open repaired in its commit log.
fn open_noted(root: &Path, config: StoreConfig, notes: Notes) -> Result<MessageStore, ToolError> {
    let store = store_tools::open_store(root, config)?;
    let commit_log = root.join(strata_log::internals::format::STORE_COMMIT_LOG_DIR);
    notes.recovery(&commit_log, &store.metrics().log.recovery);
    Ok(store)
}

/// Runs `work` on the store and closes it, whatever `work` returned (a failed close is the error).
fn closing<T>(
    root: &Path,
    store: MessageStore,
    work: impl FnOnce(&MessageStore) -> Result<T, ToolError>,
) -> Result<T, ToolError> {
    let done = work(&store);
    store.close().map_err(|e| store_tools::store_error(root, e))?;
    done
}
