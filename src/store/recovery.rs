//! Opening a store (docs/DESIGN.md §11): the commit log recovers first; then the index and the
//! consume queues are loaded — rebuilt from the commit log if missing or damaged. At every open,
//! clean or not, each queue is checked from the store checkpoint on (and over its last three
//! files) and cut where it stops matching the log; only after an unclean shutdown (`abort`
//! present) is the index checked and cut too. Dispatch then reaches the log's end before `open`
//! returns, retention's leftovers are deleted, and consumer offsets past a queue's end clamped.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR};
use crate::log::{Cursor, Log};
use crate::storage;
use crate::store::checkpoint;
use crate::store::config::StoreConfig;
use crate::store::consumer_offsets::CommittedOffset;
use crate::store::consumer_offsets::ConsumerOffsets;
use crate::store::dispatch::BroadcastingOutput;
use crate::store::dispatcher::{IndexBuilder, QueueBuilder};
use crate::store::index::IndexFiles;
use crate::store::long_poll::LongPolls;
use crate::store::maintenance::Maintenance;
use crate::store::meta;
use crate::store::metrics::Counters;
use crate::store::progress::Progress;
use crate::store::queues::Queues;
use crate::store::sequencer::PutSequencer;
use crate::store::state::Dispatching;
use crate::store::state::StoreState;

/// Opens and recovers the store in `root`.
pub(crate) fn open(root: &Path, config: StoreConfig) -> Result<StoreState> {
    config.validate()?;
    // The format guard, before anything is created or changed (`abort`, a lock file, the log).
    meta::check(root)?;
    storage::prepare_dir(root)?;
    // The log's directory lock keeps a second store (or log) out.
    let log = Log::open(root.join(STORE_COMMIT_LOG_DIR), config.log.clone())?;
    // Under that lock, before any derived file: the parameters the store's files are made with.
    let config = meta::settle(root, config)?;
    let aborted = checkpoint::mark_open(root)?;
    crate::failpoint::crash_point!("store_after_abort_created");
    // `abort` goes last at a clean close (after the log closed): without it, everything was
    // flushed, or the store is new.
    let derived = load_derived(root, &config, &log, aborted)?;
    let (from, recovered) = (derived.from, aborted || derived.rebuilt);
    let offsets = ConsumerOffsets::load(root)?;
    let cursor = log.cursor(from)?;
    let inner = assemble(root, config, log, derived, offsets, cursor);
    inner.finish_open(recovered)?;
    tracing::info!(
        root = %inner.root.display(), queues = inner.queues.count(), index_files = inner.index.file_count(),
        dispatched_from = from, log_next = inner.log.next_offset(), "message store open"
    );
    Ok(inner)
}

/// The consume queues and the index as loaded and checked, and where dispatch starts.
struct Derived {
    queues: Queues,
    index: IndexFiles,
    /// Dispatch starts here: the store checkpoint, or lower where the derived files lost entries.
    from: u64,
    /// Whether a queue or the index is being rebuilt from the commit log.
    rebuilt: bool,
}

/// Loads the index and the consume queues (rebuilt if missing or damaged), checks them against
/// the log (the index only after an unclean shutdown), and lowers the store checkpoint to where
/// dispatch must start again.
fn load_derived(root: &Path, config: &StoreConfig, log: &Log, unclean: bool) -> Result<Derived> {
    let (log_start, log_next) = (log.start_offset(), log.next_offset());
    let checkpointed = checkpoint::read(root)?;
    let mut from = checkpointed.min(log_next);
    let (index, index_rebuilt) = open_index(root, config)?;
    let queue_dir = root.join(STORE_CONSUME_QUEUE_DIR);
    let queues_existed = queue_dir.is_dir();
    let (queues, discarded) =
        Queues::open(&queue_dir, config.queue_entries_per_file, config.log.read_path, config.log.map_budget.clone())?;
    if let Some(refill_from) = check_queues(&queues, from, log_next, config.queue_entries_per_file)? {
        from = from.min(refill_from.max(log_start));
    }
    let rebuilt = index_rebuilt || !queues_existed || discarded > 0;
    if rebuilt && log_start < log_next {
        tracing::warn!(root = %root.display(), from = log_start, "rebuilding consume queues and index from the commit log");
        from = log_start;
    }
    if unclean {
        tracing::warn!(root = %root.display(), from, log_next, "the store did not close cleanly: checking its index");
        let recovered = index.recover(from)?;
        crate::failpoint::crash_point!("store_recovery_after_index");
        if !recovered.removed.is_empty() {
            tracing::warn!(
                files = recovered.removed.len(),
                "index files past the store checkpoint removed in recovery"
            );
        }
    }
    let from = from.max(log_start);
    if from < checkpointed {
        // What dispatch is about to redo is not on disk any more (a rebuild, a refill, a log that
        // lost its tail): the checkpoint must not claim it, or a crash before the next checkpoint
        // would leave it undone for good.
        checkpoint::write(root, from)?;
    }
    Ok(Derived { queues, index, from, rebuilt })
}

/// The store's state, its dispatch reading from `derived.from` with `cursor` into the store's
/// own dispatchers (the queue and index builders).
fn assemble(
    root: &Path,
    config: StoreConfig,
    log: Log,
    derived: Derived,
    offsets: ConsumerOffsets,
    cursor: Cursor,
) -> StoreState {
    let Derived { queues, index, from, .. } = derived;
    let (queues, index) = (Arc::new(queues), Arc::new(index));
    let (long_polls, counters) = (Arc::new(LongPolls::default()), Arc::new(Counters::default()));
    let mut output = BroadcastingOutput::default();
    output.push(Box::new(QueueBuilder {
        queues: Arc::clone(&queues),
        long_polls: Arc::clone(&long_polls),
        counters: Arc::clone(&counters),
    }));
    output.push(Box::new(IndexBuilder { index: Arc::clone(&index) }));
    StoreState {
        root: root.to_path_buf(),
        config,
        log,
        puts: PutSequencer::default(),
        dispatch: Dispatching::new(cursor, output),
        progress: Arc::new(Progress::new(from)),
        queues,
        index,
        offsets,
        long_polls,
        maintenance: Maintenance::default(),
        counters,
    }
}

/// Opens the index; a damaged file discards the whole index, which is rebuilt (logged). Returns
/// whether it was (or the directory was missing).
fn open_index(root: &Path, config: &StoreConfig) -> Result<(IndexFiles, bool)> {
    let dir = root.join(STORE_INDEX_DIR);
    let existed = dir.is_dir();
    match IndexFiles::open_budgeted(&dir, config.index_slots, config.index_entries, config.log.map_budget.clone()) {
        Ok(index) => Ok((index, !existed)),
        Err(error @ Error::Corrupt { .. }) => {
            tracing::warn!(%error, "an index file is damaged: the index is rebuilt from the commit log");
            IndexFiles::discard(&dir)?;
            Ok((
                IndexFiles::open_budgeted(
                    &dir,
                    config.index_slots,
                    config.index_entries,
                    config.log.map_budget.clone(),
                )?,
                true,
            ))
        }
        Err(error) => Err(error),
    }
}

/// Files at the end of each queue checked at every open, clean or not (RocketMQ checks three):
/// a damaged file found there is cut and refilled from the commit log.
const CHECKED_FILES: u64 = 3;

/// Checks every queue from its entry for `from` (the store checkpoint: entries below it were
/// durable), and at least its last [`CHECKED_FILES`] files, and cuts it at its first entry that
/// does not fit the log (docs/DESIGN.md §11): zero, not above the previous entry's log offset, or
/// at or past `log_next`. A cut queue is refilled by dispatch: returns the log offset it must start
/// from (after the last entry a cut queue kept; 0 if one kept none), if any queue was cut.
fn check_queues(queues: &Queues, from: u64, log_next: u64, entries_per_file: u64) -> Result<Option<u64>> {
    let mut refill_from: Option<u64> = None;
    for (topic, queue_id, queue) in queues.all() {
        let durable_end = queue.queue_offset_for_log_offset(from)?;
        let last_files = queue.max_offset().saturating_sub(CHECKED_FILES * entries_per_file);
        let recovered = queue.recover_from(durable_end.min(last_files), durable_end, log_next)?;
        if recovered.removed == 0 {
            continue;
        }
        let kept = recovered.end.checked_sub(1).filter(|&q| q >= queue.min_offset());
        let after_kept = match kept {
            Some(q) => queue.get(q)?.map_or(0, |entry| entry.log_offset + 1),
            None => 0,
        };
        tracing::warn!(
            topic,
            queue_id,
            removed = recovered.removed,
            end = recovered.end,
            refill_from = after_kept,
            "consume queue cut at its first entry that does not fit the commit log"
        );
        refill_from = Some(refill_from.map_or(after_kept, |r| r.min(after_kept)));
        crate::failpoint::crash_point!("store_recovery_after_queue_cut");
    }
    Ok(refill_from)
}

impl StoreState {
    /// Dispatches to the log's end, deletes retention's leftovers, clamps consumer offsets past a
    /// queue's end, and (after a recovery or a rebuild) writes a checkpoint.
    fn finish_open(&self, recovered: bool) -> Result<()> {
        self.catch_up()?;
        self.sweep()?;
        for CommittedOffset { topic, queue_id, .. } in self.offsets.all() {
            let end = self.queues.get(&topic, queue_id).map_or(0, |queue| queue.max_offset());
            self.offsets.clamp(&topic, queue_id, end);
        }
        if recovered {
            // Saves the next open this work, and only that: a checkpoint left lower costs work,
            // never data. On a full disk it cannot be written (a new file needs a block), and the
            // store must still open, so messages can be deleted to make room.
            match self.write_checkpoint() {
                Err(error @ Error::DiskFull { .. }) => {
                    tracing::warn!(%error, "the store checkpoint could not be written after recovery; it is retried");
                }
                checkpointed => checkpointed?,
            }
        }
        Ok(())
    }
}
