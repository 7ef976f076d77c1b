//! Opening a store (docs/DESIGN.md §11): the commit log recovers first; then the index and the
//! consume queues are loaded and checked, cheaply, whatever the shutdown was: a missing or damaged
//! derived file is rebuilt from the commit log (`queue_checks.rs` for the queues; the index's
//! headers, slot bounds and the entries the store checkpoint recorded). Only after an unclean
//! shutdown (`abort` present) is the newest index file checked entry by entry and cut. Then a few
//! entries and messages of each index file are checked against the log (another store's sound
//! files fit every other check), and a mismatch rebuilds the index too. Dispatch
//! then reaches the log's end before `open` returns, retention's leftovers are deleted, and
//! consumer offsets past the end of a queue that was cut or rebuilt are clamped to it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::{STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR};
use crate::log::{Cursor, Log};
use crate::storage;
use crate::store::checkpoint::{self, Checkpoint};
use crate::store::config::StoreConfig;
use crate::store::consumer_offsets::ConsumerOffsets;
use crate::store::dispatch::BroadcastingOutput;
use crate::store::dispatcher::{IndexBuilder, QueueBuilder};
use crate::store::index::{IndexFiles, key_hash};
use crate::store::long_poll::LongPolls;
use crate::store::maintenance::Maintenance;
use crate::store::message::StoredMessage;
use crate::store::message_reader::MessageReader;
use crate::store::meta;
use crate::store::metrics::Counters;
use crate::store::progress::Progress;
use crate::store::queue_checks::{self, QueueChecks};
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
    let (config, format) = meta::settle(root, config)?;
    let aborted = checkpoint::mark_open(root)?;
    crate::failpoint::crash_point!("store_after_abort_created");
    // `abort` goes last at a clean close (after the log closed): without it, everything was
    // flushed, or the store is new.
    let mut derived = load_derived(root, &config, &log, aborted)?;
    let (from, recovered) = (derived.from, aborted || derived.rebuilt);
    let rebuilt = std::mem::take(&mut derived.checks.rebuilt);
    let offsets = ConsumerOffsets::load(root)?;
    let cursor = log.cursor(from)?;
    let inner = assemble(root, config, log, derived, offsets, cursor, format);
    inner.finish_open(recovered, &rebuilt)?;
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
    /// What the queue checks found: floors, and the queues rebuilt.
    checks: QueueChecks,
    /// The store checkpoint claims more than the derived files hold and could not be lowered (a
    /// full disk): puts wait for a checkpoint written ([`StoreState::check_checkpoint`]).
    overclaims: bool,
}

/// Loads the index and the consume queues, checks them (cheaply: `queue_checks.rs`, and the
/// index's headers, slot bounds, checkpointed entries and a few entries and messages of each file)
/// against the store checkpoint and the log, and lowers the checkpoint to where dispatch must start again to rebuild what failed.
fn load_derived(root: &Path, config: &StoreConfig, log: &Log, unclean: bool) -> Result<Derived> {
    let (log_start, log_next) = (log.start_offset(), log.next_offset());
    let usable = checkpoint::read_usable(root)?;
    // Without one, the queues' numbering lives only in their files until a checkpoint is written:
    // the open writes one.
    let checkpoint_lost = usable.is_none();
    let checkpointed = usable.unwrap_or_default();
    let mut from = checkpointed.dispatched_up_to.min(log_next);
    let mut overclaims = false;
    let (mut index, index_rebuilt) = open_index(root, config, &checkpointed, (log_start, log_next), unclean)?;
    let queue_dir = root.join(STORE_CONSUME_QUEUE_DIR);
    let queues_existed = queue_dir.is_dir();
    let (queues, discarded) =
        Queues::open(&queue_dir, config.queue_entries_per_file, config.log.read_path, config.log.map_budget.clone())?;
    let checks = queue_checks::check(
        &queues,
        log,
        from,
        (&checkpointed.queues, checkpointed.summarised),
        config.queue_entries_per_file,
    )?;
    if let Some(refill_from) = checks.refill_from {
        from = from.min(refill_from.max(log_start));
    }
    let mut rebuilt = index_rebuilt || !queues_existed || discarded > 0;
    if rebuilt && log_start < log_next {
        tracing::warn!(root = %root.display(), from = log_start, "rebuilding consume queues and index from the commit log");
        from = log_start;
    }
    if unclean {
        tracing::warn!(root = %root.display(), from, log_next, "the store did not close cleanly: checking its index");
        let recovered = index.recover(from)?;
        crate::failpoint::crash_point!("store_recovery_after_index");
        if let Some(newest) = recovered.newest
            && newest.kept < newest.counted
        {
            // Entries a flush had made durable were cut (damage): the checkpoint may cover their
            // messages, so dispatch redoes them from the last message the index still holds.
            let resume = index.end_log_offset().unwrap_or(log_start);
            tracing::warn!(
                kept = newest.kept,
                counted = newest.counted,
                resume,
                "index entries the checkpoint covered were cut: indexed again"
            );
            from = from.min(resume);
        }
        if !recovered.removed.is_empty() {
            tracing::warn!(
                files = recovered.removed.len(),
                "index files past the store checkpoint removed in recovery"
            );
        }
    }
    if !index_rebuilt && let Some(fault) = index_against_log(&index, log)? {
        // Sound files, but not this log's (another store's `index/`): only their entries tell.
        tracing::warn!(fault, "the index does not match the commit log: it is rebuilt from the commit log");
        drop(index);
        index = rebuild_index(root, config)?;
        rebuilt = true;
        from = log_start;
    }
    let from = from.max(log_start);
    if from < checkpointed.dispatched_up_to {
        // What dispatch is about to redo is not on disk any more (a rebuild, a refill, a log that
        // lost its tail): the checkpoint must not claim it, or a crash before the next checkpoint
        // would leave it undone for good. Its summaries stay: they are what the rebuild must reach.
        // The index's record goes: the index is being rebuilt or recovered from here, and a crash
        // before the next checkpoint must not find the files it rebuilt "missing" or "short" and
        // start over (the queues' records stay: they hold the numbering).
        let lowered = Checkpoint { dispatched_up_to: from, index_files: Vec::new(), ..checkpointed.clone() };
        match checkpoint::write(root, &lowered) {
            // A full disk: the store must still open (so messages can be read, and deleted to
            // make room), and a new file cannot be made. The checkpoint is lowered in place.
            Err(error @ Error::DiskFull { .. }) => {
                tracing::warn!(%error, from, "the store checkpoint is lowered in place (the disk is full)");
                if let Err(error) = checkpoint::lower_in_place(root, &checkpointed, from) {
                    // Not even that: it still claims too much. Safe while no message is added and
                    // what is rebuilt meanwhile survives (an open after a crash checks the files
                    // against the same summaries); a message put under the claim could be skipped
                    // by such an open, so puts write a checkpoint first (`check_checkpoint`).
                    tracing::warn!(
                        %error, from, claimed = checkpointed.dispatched_up_to,
                        "the store checkpoint could not be lowered: puts are refused until one is written"
                    );
                    overclaims = true;
                }
            }
            written => written?,
        }
    }
    // A lost or stale checkpoint is replaced at the end of the open, not at the first flush: until
    // then it is the next open's only record of the queues' numbering.
    let rebuilt = rebuilt || checks.refill_from.is_some() || checkpoint_lost || checks.stale_record;
    Ok(Derived { queues, index, from, rebuilt, checks, overclaims })
}

/// The store's state, its dispatch reading from `derived.from` with `cursor` into the store's
/// own dispatchers (the queue and index builders); messages below `replay_end` may have been
/// dispatched by an earlier run.
fn assemble(
    root: &Path,
    config: StoreConfig,
    log: Log,
    derived: Derived,
    offsets: ConsumerOffsets,
    cursor: Cursor,
    format: meta::FormatGuard,
) -> StoreState {
    let Derived { queues, index, from, checks, overclaims, .. } = derived;
    let (queues, index) = (Arc::new(queues), Arc::new(index));
    let (long_polls, counters) = (Arc::new(LongPolls::default()), Arc::new(Counters::default()));
    let mut output = BroadcastingOutput::default();
    output.push(Box::new(QueueBuilder::new(Arc::clone(&queues), Arc::clone(&long_polls), Arc::clone(&counters))));
    output.push(Box::new(IndexBuilder { index: Arc::clone(&index) }));
    let replay_end = log.next_offset();
    StoreState {
        root: root.to_path_buf(),
        config,
        format,
        log,
        puts: PutSequencer::with_floors(checks.floors),
        dispatch: Dispatching::new(cursor, output, replay_end),
        progress: Arc::new(Progress::new(from)),
        queues,
        index,
        offsets,
        long_polls,
        maintenance: Maintenance::default(),
        checkpoint_overclaims: AtomicBool::new(overclaims),
        clamp_unflushed: AtomicBool::new(false),
        counters,
    }
}

/// Opens the index and checks it: a file failing its header check, a slot pointing past its
/// entries, or a file the checkpoint recorded that is missing, shorter, or holds another last
/// entry (`IndexFiles::check`) discards the whole index, which is rebuilt (logged). Returns
/// whether it was (or the directory was missing).
fn open_index(
    root: &Path,
    config: &StoreConfig,
    checkpointed: &Checkpoint,
    log_bounds: (u64, u64),
    unclean: bool,
) -> Result<(IndexFiles, bool)> {
    let dir = root.join(STORE_INDEX_DIR);
    let existed = dir.is_dir();
    let open =
        || IndexFiles::open_budgeted(&dir, config.index_slots, config.index_entries, config.log.map_budget.clone());
    let fault = match open() {
        Ok(index) => match index.check(&checkpointed.index_files, log_bounds, unclean)? {
            None => return Ok((index, !existed)),
            Some(fault) => fault,
        },
        Err(error @ Error::Corrupt { .. }) => error.to_string(),
        Err(error) => return Err(error),
    };
    tracing::warn!(fault, "the index is damaged: it is rebuilt from the commit log");
    Ok((rebuild_index(root, config)?, true))
}

/// Discards every index file (the caller dropped its `IndexFiles`) and opens the empty set, which
/// dispatch fills from the log's start.
fn rebuild_index(root: &Path, config: &StoreConfig) -> Result<IndexFiles> {
    let dir = root.join(STORE_INDEX_DIR);
    IndexFiles::discard(&dir)?;
    IndexFiles::open_budgeted(&dir, config.index_slots, config.index_entries, config.log.map_budget.clone())
}

/// Why `index` is not `log`'s, if it is not (`IndexFiles::check_against_log`: a few entries and
/// messages of each file, one log read each).
fn index_against_log(index: &IndexFiles, log: &Log) -> Result<Option<String>> {
    let mut reader = MessageReader::new(log);
    let mut keys_at = |log_offset: u64| -> Result<Option<Vec<u32>>> {
        let Some(record) = reader.read(log_offset, || 1)? else { return Ok(None) };
        let hashes = |m: StoredMessage| m.keys().iter().map(|key| key_hash(m.topic(), key)).collect();
        Ok(StoredMessage::decode(record).ok().map(hashes))
    };
    index.check_against_log((log.start_offset(), log.next_offset()), &mut keys_at)
}

impl StoreState {
    /// Dispatches to the log's end, writing the store checkpoint every `flush_interval_ms` on the
    /// way, as the running store does: a long rebuild killed half-way resumes where it got to
    /// instead of starting over (an unclean open deletes the index files past the checkpoint).
    /// With `clamp_pending` (queues were cut or rebuilt, and their consumers' offsets are clamped
    /// only after this), no checkpoint is written on the way: it would replace the records that
    /// tell the next open those queues were cut, should this one die before the clamp.
    fn catch_up_checkpointed(&self, clamp_pending: bool) -> Result<()> {
        if clamp_pending {
            return self.catch_up();
        }
        let every = Duration::from_millis(self.config.flush_interval_ms);
        loop {
            let deadline = Instant::now().checked_add(every);
            if self.dispatch_until(&mut self.dispatch.lock(), deadline)? {
                return Ok(());
            }
            self.checkpoint_unless_full("while the open dispatches")?;
        }
    }

    /// Dispatches to the log's end, deletes retention's leftovers, clamps consumer offsets past the
    /// end of a queue in `rebuilt`, and (after a recovery or a rebuild) writes a checkpoint.
    fn finish_open(&self, recovered: bool, rebuilt: &[(String, u32)]) -> Result<()> {
        self.catch_up_checkpointed(!rebuilt.is_empty())?;
        for floor in self.puts.floors().values() {
            let held = self.queues.get(&floor.topic, floor.queue_id).map_or(0, |queue| queue.max_offset());
            if held < floor.next_queue_offset {
                // Nothing of it is left but its numbering: it is listed, empty, from there, and
                // its directory keeps the numbering too (a failure leaves it in the checkpoint).
                let queue = self.queues.get_or_open(&floor.topic, floor.queue_id)?;
                if let Err(error) = queue.start_empty_at(floor.next_queue_offset) {
                    tracing::warn!(topic = floor.topic, queue_id = floor.queue_id, %error, "an empty queue's file could not be created");
                }
            }
        }
        self.sweep()?;
        let mut clamped = 0;
        for (topic, queue_id) in rebuilt {
            // A queue cut or rebuilt may end below what a consumer committed (the log lost its
            // tail): never below the offsets it handed out (its floor). A queue merely missing
            // is not clamped.
            let end = self.queues.get(topic, *queue_id).map_or(0, |queue| queue.max_offset());
            clamped += self.offsets.clamp(topic, *queue_id, end.max(self.puts.floor(topic, *queue_id)));
        }
        if clamped > 0 {
            // The next checkpoint replaces the record that these queues were cut, which is what
            // makes an open clamp: the clamped offsets go to disk first (`write_checkpoint`).
            self.clamp_unflushed.store(true, Ordering::Release);
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
