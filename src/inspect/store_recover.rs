//! `strata store recover`: a read-only check of the whole store first (so a refusal or a dry run
//! changes nothing), then the commit log's own recovery (`recover`), then every derived file —
//! consume queues and index — deleted and rebuilt from the commit log by an offline open, and
//! what was rebuilt, counted. A forced cut of the commit log is the one way a queue offset can be
//! handed out again: the queue offsets it removed are reported, queue by queue.

use std::path::Path;

use super::recover::{RecoverOptions, RecoverOutcome, recover};
use super::store::verify_store;
use super::verify_log::{Finding, Severity};
use crate::error::{Error, Result};
use crate::format::{STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR};
use crate::storage;
use crate::store::checkpoint::{self, Checkpoint};
use crate::store::index::IndexFiles;
use crate::store::queues::Queues;
use crate::store::{MessageStore, StoreConfig};

/// What `strata store recover` did, would do (`dry_run`), or refused to do (`refused`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StoreRecoverOutcome {
    /// Nothing was changed: this says what recovery would do.
    pub dry_run: bool,
    /// Nothing was changed: the commit log has damage below its recovery point and `force` was
    /// not given.
    pub refused: bool,
    /// The commit log's recovery (as `strata recover` of `commitlog/`).
    pub commit_log: RecoverOutcome,
    /// What the read-only check of the derived files found before (errors first; the commit
    /// log's findings are in `commit_log.found`).
    pub found: Vec<Finding>,
    /// Queues and index files there were before (deleted and rebuilt, unless a dry run).
    pub queues_before: u64,
    /// Index files before.
    pub index_files_before: u64,
    /// Queues after the rebuild (`None` for a dry run or a refusal).
    pub queues_after: Option<u64>,
    /// Index files after the rebuild.
    pub index_files_after: Option<u64>,
    /// The queue offsets a forced cut of the commit log removed (their messages are gone, and the
    /// queue hands them out again), queue by queue, as the consume queues before the rebuild
    /// knew them.
    pub queue_offsets_cut: Vec<QueueOffsetsCut>,
}

/// Queue offsets a forced cut of the commit log removed from one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct QueueOffsetsCut {
    /// The topic.
    pub topic: String,
    /// The queue.
    pub queue_id: u32,
    /// The first and last queue offset removed.
    pub offsets: [u64; 2],
}

/// `strata store recover`: checks the store in `root` read-only, recovers its commit log (refused
/// without `options.force` where that would lose acknowledged messages), then deletes every
/// consume queue and index file and rebuilds them from the commit log with an offline open under
/// `config` (consumer offsets and the store checkpoint's record of each queue's numbering are
/// kept). A dry run changes nothing and says what would be done. `Error::Locked` if a process
/// holds the store open.
pub fn recover_store(root: &Path, config: StoreConfig, options: RecoverOptions) -> Result<StoreRecoverOutcome> {
    let log_dir = root.join(STORE_COMMIT_LOG_DIR);
    if !log_dir.is_dir() {
        let reason = "no commitlog/ directory: not a message store, nothing to recover";
        return Err(Error::io("recover", root)(std::io::Error::other(reason)));
    }
    let mut outcome = StoreRecoverOutcome { dry_run: options.dry_run, ..StoreRecoverOutcome::default() };
    if let Ok(report) = verify_store(root) {
        outcome.found = report.findings.into_iter().filter(|f| f.severity == Severity::Error).collect();
        outcome.queues_before = report.queues;
        outcome.index_files_before = report.index_files;
    }
    outcome.commit_log = recover(&log_dir, options)?;
    if outcome.commit_log.refused || options.dry_run {
        outcome.refused = outcome.commit_log.refused;
        return Ok(outcome);
    }
    let log_next = outcome.commit_log.after.map(|after| after.next_offset);
    if let Some(log_next) = log_next.filter(|&next| next < outcome.commit_log.before.next_offset) {
        outcome.queue_offsets_cut = queue_offsets_at_or_past(root, &config, log_next)?;
    }
    discard_derived(root)?;
    let store = MessageStore::open(root, config)?;
    outcome.queues_after = Some(store.queues().len() as u64);
    outcome.index_files_after = Some(store.metrics().index_files as u64);
    store.close()?;
    Ok(outcome)
}

/// Per queue, the queue offsets whose entries point at or past `log_next`: what a cut of the
/// commit log there removed.
fn queue_offsets_at_or_past(root: &Path, config: &StoreConfig, log_next: u64) -> Result<Vec<QueueOffsetsCut>> {
    let dir = root.join(STORE_CONSUME_QUEUE_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let (queues, _) = Queues::open(&dir, config.queue_entries_per_file, config.log.read_path, None)?;
    let mut cut = Vec::new();
    for (topic, queue_id, queue) in queues.all() {
        let first = queue.queue_offset_for_log_offset(log_next)?;
        if first < queue.max_offset() {
            cut.push(QueueOffsetsCut { topic, queue_id, offsets: [first, queue.max_offset() - 1] });
        }
    }
    Ok(cut)
}

/// Deletes every consume queue and index file (durably): the next open rebuilds them from the
/// commit log's start. The store checkpoint keeps its record of each queue (the numbering a
/// rebuild must reach, or keep where retention removed the messages) and forgets the rest.
fn discard_derived(root: &Path) -> Result<()> {
    let kept = checkpoint::read(root)?;
    checkpoint::write(root, &Checkpoint { dispatched_up_to: 0, queues: kept.queues, index_files: Vec::new() })?;
    let queues = root.join(STORE_CONSUME_QUEUE_DIR);
    match std::fs::remove_dir_all(&queues) {
        Ok(()) => storage::sync_dir(root)?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(Error::io("remove the consume queues", &queues)(error)),
    }
    IndexFiles::discard(&root.join(STORE_INDEX_DIR))?;
    Ok(())
}
