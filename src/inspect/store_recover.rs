//! `strata store recover`: a read-only check of the whole store first (so a refusal or a dry run
//! changes nothing), then the commit log's own recovery (`recover`), then every derived file —
//! consume queues and index — deleted and rebuilt from the commit log by an offline open, and
//! what was rebuilt, counted. A forced cut of the commit log is the one way a queue offset can be
//! handed out again: the queue offsets it removed are reported, queue by queue.

use std::path::Path;

use super::dirs::held_by_a_writer;
use super::recover::{RecoverOptions, RecoverOutcome, recover};
use super::store::verify_store;
use super::verify_log::{Finding, Severity};
use crate::error::{Error, Result};
use crate::format::{LOCK_FILE, STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR};
use crate::log::Log;
use crate::storage;
use crate::store::checkpoint::{self, Checkpoint, QueueSummary};
use crate::store::consume_queue::{ConsumeQueue, Entry};
use crate::store::message::StoredMessage;
use crate::store::message_reader::MessageReader;
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
    let log_next = outcome.commit_log.after.map_or(outcome.commit_log.before.next_offset, |after| after.next_offset);
    let cut = log_next < outcome.commit_log.before.next_offset;
    let (numbering, queue_offsets_cut) = queues_below(root, &config, log_next)?;
    if cut {
        outcome.queue_offsets_cut = queue_offsets_cut;
    }
    if held_by_a_writer(&log_dir) == Some(true) {
        return Err(Error::Locked { path: log_dir.join(LOCK_FILE) });
    }
    discard_derived(root, numbering, log_next)?;
    let store = MessageStore::open(root, config)?;
    outcome.queues_after = Some(store.queues().len() as u64);
    outcome.index_files_after = Some(store.metrics().index_files as u64);
    store.close()?;
    Ok(outcome)
}

/// What each queue's own files say of it below `log_next` (its numbering, as a checkpoint
/// records it: the rebuild must not lose it where retention removed the messages; files that
/// contradict the store checkpoint's record of the queue say nothing of it), and per queue
/// the queue offsets whose entries point at or past `log_next` (what a cut of the commit log
/// there removed).
fn queues_below(root: &Path, config: &StoreConfig, log_next: u64) -> Result<(Vec<QueueSummary>, Vec<QueueOffsetsCut>)> {
    let dir = root.join(STORE_CONSUME_QUEUE_DIR);
    if !dir.is_dir() {
        return Ok((Vec::new(), Vec::new()));
    }
    let (queues, _) = Queues::open(&dir, config.queue_entries_per_file, config.log.read_path, None)?;
    let log = Log::open_read_only(root.join(STORE_COMMIT_LOG_DIR), config.log.clone())?;
    let mut reader = MessageReader::new(&log);
    let checkpointed = checkpoint::read(root)?;
    let (mut numbering, mut cut) = (Vec::new(), Vec::new());
    for (topic, queue_id, queue) in queues.all() {
        // Entries that break the queue's rules (garbage, a torn tail) say nothing of its numbering:
        // cut first (the files are deleted anyway).
        let (min, max) = (queue.min_offset(), queue.max_offset());
        let cut_from = queue.queue_offset_for_log_offset(log_next)?;
        queue.recover_from(min, min, log_next)?;
        let next = cut_from.min(queue.max_offset());
        if cut_from < max {
            cut.push(QueueOffsetsCut { topic: topic.clone(), queue_id, offsets: [cut_from, max - 1] });
        }
        let log_offset_at = |q: Option<u64>| -> Result<Option<u64>> {
            match q.filter(|&q| q >= min && q < next) {
                Some(q) => Ok(queue.get(q).ok().flatten().map(|entry| entry.log_offset)),
                None => Ok(None),
            }
        };
        let (first_log_offset, last_log_offset) = (log_offset_at(Some(min))?, log_offset_at(next.checked_sub(1))?);
        let next_queue_offset = next.max(min);
        let record = checkpointed.queues.iter().find(|s| s.topic == topic && s.queue_id == queue_id);
        if let Some(record) = record
            && let Some(fault) = contradicts(&queue, (min, next), record, checkpointed.dispatched_up_to)?
        {
            // Where retention removed the messages, no log read can tell another store's file;
            // the store checkpoint's record of the queue can, as the open judges it.
            tracing::warn!(
                topic,
                queue_id,
                fault,
                "a consume queue's files do not fit the store checkpoint: their numbering is not kept"
            );
            continue;
        }
        // Its last entry must point at its own message (unless retention removed it): a file that
        // is another store's, or garbage that keeps the rules, says nothing of this numbering.
        if let (Some(last), Some(q)) = (last_log_offset, next.checked_sub(1))
            && last >= log.start_offset()
        {
            let record = reader.read(last, || 1)?;
            let message = record.and_then(|record| StoredMessage::decode(record).ok());
            if !message.is_some_and(|m| m.topic() == topic && m.queue_id() == queue_id && m.queue_offset() == q) {
                continue;
            }
        }
        numbering.push(QueueSummary {
            topic,
            queue_id,
            min_queue_offset: min,
            first_log_offset,
            next_queue_offset,
            last_log_offset,
        });
    }
    Ok((numbering, cut))
}

/// Why the queue's entries in `[min, next)` cannot be the queue the checkpoint's `record` (taken
/// with `dispatched_up_to`) describes, if they cannot: the entry at the last queue offset recorded
/// holds another log offset (a placeholder, size 1, may have replaced a removed message's entry
/// in a rebuild), or an entry past it is for a message at or below the last recorded one, or
/// below the checkpoint. Files only grow past a record, and retention removes whole files from
/// their front: a queue that is this store's agrees with its record wherever both speak.
fn contradicts(
    queue: &ConsumeQueue,
    (min, next): (u64, u64),
    record: &QueueSummary,
    dispatched_up_to: u64,
) -> Result<Option<&'static str>> {
    let at = |q: u64| -> Result<Option<Entry>> {
        Ok(if (min..next).contains(&q) { queue.get(q).ok().flatten().filter(|entry| entry.size != 1) } else { None })
    };
    let Some(last) = record.next_queue_offset.checked_sub(1) else { return Ok(None) };
    if let (Some(entry), Some(recorded)) = (at(last)?, record.last_log_offset)
        && entry.log_offset != recorded
    {
        return Ok(Some("the entry at the last queue offset recorded holds another log offset"));
    }
    if let Some(after) = at(record.next_queue_offset)?
        && (after.log_offset < dispatched_up_to || record.last_log_offset.is_some_and(|l| after.log_offset <= l))
    {
        return Ok(Some("an entry past the numbering recorded points before the checkpoint"));
    }
    Ok(None)
}

/// `kept` (the checkpoint's records) with `found` (the queues' own), the further on of the two
/// for each queue.
fn merged(kept: Vec<QueueSummary>, found: Vec<QueueSummary>) -> Vec<QueueSummary> {
    let mut all: std::collections::BTreeMap<(String, u32), QueueSummary> = std::collections::BTreeMap::new();
    for summary in kept.into_iter().chain(found) {
        let key = (summary.topic.clone(), summary.queue_id);
        match all.get(&key) {
            Some(held) if held.next_queue_offset >= summary.next_queue_offset => {}
            _ => {
                all.insert(key, summary);
            }
        }
    }
    all.into_values().collect()
}

/// Deletes every consume queue and index file: the next open rebuilds them from the commit log's
/// start. Both directories are first renamed aside (`<name>.discarded`) and the root fsynced, so
/// a crash leaves them whole or gone, never half deleted (a half-deleted index would look whole
/// to an open); then the store checkpoint keeps the record of each queue's numbering below
/// `log_next` (`numbering` merged in: what the queues' own files said) and forgets the index's;
/// then the directories go.
fn discard_derived(root: &Path, numbering: Vec<QueueSummary>, log_next: u64) -> Result<()> {
    let names = [STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR];
    let aside = |name: &str| root.join(format!("{name}.discarded"));
    for name in names {
        remove_dir_if_exists(&aside(name))?;
    }
    for name in names {
        match std::fs::rename(root.join(name), aside(name)) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::io("set a derived directory aside", root.join(name))(error)),
        }
    }
    storage::sync_dir(root)?;
    // A record naming a message past the (possibly cut) log's end is stale: the queue's own
    // files below the end say what is left.
    let mut kept = checkpoint::read(root)?.queues;
    kept.retain(|summary| summary.last_log_offset.is_none_or(|last| last < log_next));
    let queues = merged(kept, numbering);
    checkpoint::write(root, &Checkpoint { dispatched_up_to: 0, queues, index_files: Vec::new(), summarised: true })?;
    for name in names {
        remove_dir_if_exists(&aside(name))?;
    }
    storage::sync_dir(root)
}

fn remove_dir_if_exists(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::io("remove a derived directory", dir)(error)),
    }
}
