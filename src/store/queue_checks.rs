//! What an open checks of the consume queues before it trusts them (docs/DESIGN.md §11), clean
//! shutdown or not, all cheap: each queue's tail against the log's end (the structural check,
//! `ConsumeQueue::recover`), each queue against what the store checkpoint recorded of it (its next
//! queue offset and the log offset of its last entry), and each queue's last entry against the
//! message it points at (its topic, queue and `strata.qoffset`). One read of the log per queue.
//!
//! A queue that fails is rebuilt by dispatch before `open` returns: one that is missing, or
//! shorter than the checkpoint recorded, is refilled from after its last entry (from the log's
//! start if it has none); one whose entries belong to other messages (another store's copy, a
//! garbled file), or that lost first entries dispatched after the checkpoint, is removed and
//! built again from the log's start. The checkpoint's record of a
//! queue, checked against the log, is its floor: no queue offset below it is handed out again,
//! even when retention removed the messages a rebuild would need.

use crate::error::{Error, Result};
use crate::log::Log;
use crate::store::checkpoint::QueueSummary;
use crate::store::consume_queue::ConsumeQueue;
use crate::store::message::StoredMessage;
use crate::store::message_reader::MessageReader;
use crate::store::queue_map::QueueMap;
use crate::store::queues::Queues;

/// Files at the end of each queue checked at every open, clean or not (RocketMQ checks three):
/// a damaged file found there is cut and refilled from the commit log.
const CHECKED_FILES: u64 = 3;

/// What the checks found.
#[derive(Default)]
pub(crate) struct QueueChecks {
    /// The checkpoint's record of each queue that the log confirms: no queue offset below it is
    /// handed out again.
    pub(crate) floors: QueueMap<QueueSummary>,
    /// Dispatch must restart at or below this log offset to refill what the checks removed.
    pub(crate) refill_from: Option<u64>,
    /// The queues cut or rebuilt: a consumer offset past such a queue's end (or floor) is lowered
    /// to it once dispatch refilled it. A queue merely missing is rebuilt, not clamped.
    pub(crate) rebuilt: Vec<(String, u32)>,
    /// Whether the checkpoint's record of the queues is not this store's as it is (a record the
    /// log does not confirm, or a queue with entries it does not name): the open writes a new
    /// checkpoint, so the next open does not find a missing file against a record that cannot
    /// tell it.
    pub(crate) stale_record: bool,
}

impl QueueChecks {
    fn refill(&mut self, topic: &str, queue_id: u32, from: u64) {
        self.refill_from = Some(self.refill_from.map_or(from, |r| r.min(from)));
        self.rebuilt.push((topic.to_owned(), queue_id));
    }
}

/// Runs every check (see the module documentation) on `queues`, the store checkpoint's
/// `dispatched_up_to` being `from` and its summaries `summaries` (`summarised`: they name every
/// queue the store had).
pub(crate) fn check(
    queues: &Queues,
    log: &Log,
    from: u64,
    (summaries, summarised): (&[QueueSummary], bool),
    entries_per_file: u64,
) -> Result<QueueChecks> {
    let mut checks = QueueChecks::default();
    cut_tails(queues, log, from, entries_per_file, &mut checks)?;
    let mut reader = MessageReader::new(log);
    for summary in summaries {
        // The queue's own file and the checkpoint agree on its last entry, and the log reaches
        // it (a log that lost its tail had the queue cut below it): two records of the same
        // thing, so the log is not read. Otherwise the log decides.
        let agrees = queue_holds_last(queues, summary, log.next_offset())?;
        // A checkpoint written by this store's last close or flush agrees with every queue that
        // has entries; one that does not is stale (or another store's, its records all below the
        // log's start), even where the log cannot tell it wrong.
        checks.stale_record |= !agrees && !floor_only(queues, summary);
        if !agrees && !confirmed_by_log(&mut reader, log, summary)? {
            if summary.last_log_offset.is_some_and(|last| last >= log.next_offset()) {
                // The log lost the queue's last messages: the queue was cut (its tail check cut
                // the entries), and its consumers' offsets may be past its end now.
                checks.rebuilt.push((summary.topic.clone(), summary.queue_id));
            }
            continue;
        }
        checks.floors.insert(&summary.topic, summary.queue_id, summary.clone());
        against_summary(queues, summary, (log.start_offset(), from), &mut checks)?;
    }
    let mut named = QueueMap::default();
    summaries.iter().for_each(|s| named.insert(&s.topic, s.queue_id, ()));
    // Not named by the checkpoint (a named queue whose record the log did not confirm, its tail
    // lost, is the checkpoint's all the same).
    let unrecorded = |topic: &str, queue_id: u32| named.get(topic, queue_id).is_none();
    // Known stale before any queue is judged by what the checkpoint does not name.
    checks.stale_record |= summarised
        && queues.all().iter().any(|(t, q, queue)| unrecorded(t, *q) && queue.min_offset() != queue.max_offset());
    for (topic, queue_id, queue) in queues.all() {
        let unrecorded = unrecorded(&topic, queue_id);
        let empty = queue.min_offset() == queue.max_offset();
        // A queue a checkpoint naming every queue does not name was made after it: its entries
        // are for messages dispatched after it, at or past its offset.
        let before_its_time = unrecorded
            && summarised
            && !empty
            && queue.get(queue.min_offset()).ok().flatten().is_some_and(|entry| entry.log_offset < from);
        // Made after it, the queue began at offset 0: first entries it lost were for messages
        // past the checkpoint, which the log may still hold.
        let lost_first = unrecorded && summarised && !empty && lost_after(&queue, 0, (log.start_offset(), from))?;
        if before_its_time || lost_first {
            let reason = if before_its_time { "it has entries before the checkpoint" } else { LOST_AFTER };
            tracing::warn!(topic, queue_id, reason, "consume queue the store checkpoint does not know: rebuilt");
            queues.remove_damaged(&topic, queue_id)?;
            checks.refill(&topic, queue_id, 0);
            continue;
        }
        if empty && unrecorded && (queue.max_offset() == 0 || (summarised && !checks.stale_record)) {
            // No entry, and no record of it in a checkpoint that records every queue: nothing says
            // this store ever had the queue (another store's directory, cut to nothing). Its
            // messages, if any, are dispatched again. (Without such a checkpoint an empty queue
            // further on carries its numbering: kept, so no offset is handed out twice. So it is
            // with a checkpoint found stale, a backup's or another store's: it does not know
            // every queue, and the queue may be all that is left of a numbering retention
            // emptied.)
            tracing::warn!(topic, queue_id, "empty consume queue the store checkpoint does not know: removed");
            queues.remove_damaged(&topic, queue_id)?;
            continue;
        }
        let confirmed = checks.floors.get(&topic, queue_id);
        if let Some(reason) = end_entries_fault(&mut reader, &queue, (&topic, queue_id), confirmed)? {
            tracing::warn!(
                topic,
                queue_id,
                reason,
                "consume queue does not match the commit log: rebuilt from the log's start"
            );
            queues.remove_damaged(&topic, queue_id)?;
            checks.refill(&topic, queue_id, 0);
        }
    }
    Ok(checks)
}

/// Checks every queue from its entry for `from` (the store checkpoint: entries below it were
/// durable), and at least its last [`CHECKED_FILES`] files, and cuts it at its first entry that
/// does not fit the log (docs/DESIGN.md §11): zero, not above the previous entry's log offset, or
/// at or past the log's end. A cut queue is refilled from after the last entry it kept.
fn cut_tails(queues: &Queues, log: &Log, from: u64, entries_per_file: u64, checks: &mut QueueChecks) -> Result<()> {
    let log_next = log.next_offset();
    for (topic, queue_id, queue) in queues.all() {
        let durable_end = queue.queue_offset_for_log_offset(from)?;
        let last_files = queue.max_offset().saturating_sub(CHECKED_FILES * entries_per_file);
        let recovered = queue.recover_from(durable_end.min(last_files), durable_end, log_next)?;
        if recovered.removed == 0 {
            continue;
        }
        let after_kept = after_last_entry(&queue)?;
        tracing::warn!(
            topic,
            queue_id,
            removed = recovered.removed,
            end = recovered.end,
            refill_from = after_kept,
            "consume queue cut at its first entry that does not fit the commit log"
        );
        checks.refill(&topic, queue_id, after_kept);
        crate::failpoint::crash_point!("store_recovery_after_queue_cut");
    }
    Ok(())
}

/// The log offset after the queue's last entry (0 if it has none).
fn after_last_entry(queue: &ConsumeQueue) -> Result<u64> {
    let last = queue.max_offset().checked_sub(1).filter(|&q| q >= queue.min_offset());
    Ok(match last {
        Some(q) => queue.get(q)?.map_or(0, |entry| entry.log_offset + 1),
        None => 0,
    })
}

/// Whether the log still holds what `summary` says the queue's last entry pointed at (or
/// retention removed it): a log that lost its tail (an unclean shutdown before the log's
/// fsync) makes the summary stale, and the queue's numbering goes on from the log.
fn confirmed_by_log(reader: &mut MessageReader<'_>, log: &Log, summary: &QueueSummary) -> Result<bool> {
    let Some(last) = summary.last_log_offset else { return Ok(true) };
    let expected = summary.next_queue_offset.checked_sub(1);
    let fault = if last >= log.next_offset() {
        Some("the log ends before it")
    } else if last < log.start_offset() {
        None // removed by retention: the summary is all that is left of it
    } else {
        match message_at(reader, last)? {
            Some(m)
                if m.topic() == summary.topic
                    && m.queue_id() == summary.queue_id
                    && Some(m.queue_offset()) == expected =>
            {
                None
            }
            Some(_) => Some("the log holds another message there"),
            None => Some("the log does not hold a message there"),
        }
    };
    if let Some(reason) = fault {
        tracing::warn!(
            topic = summary.topic,
            queue_id = summary.queue_id,
            log_offset = last,
            reason,
            "the store checkpoint's record of a queue does not match the commit log: ignored"
        );
    }
    Ok(fault.is_none())
}

/// Whether the queue is empty at the numbering `summary` records (all that is left of it is its
/// numbering: `start_empty_at`).
fn floor_only(queues: &Queues, summary: &QueueSummary) -> bool {
    queues.get(&summary.topic, summary.queue_id).is_some_and(|queue| {
        queue.min_offset() == queue.max_offset() && queue.max_offset() == summary.next_queue_offset
    })
}

/// Whether the queue holds the last entry `summary` records, at the log offset it records, below
/// `log_next`.
fn queue_holds_last(queues: &Queues, summary: &QueueSummary, log_next: u64) -> Result<bool> {
    let (Some(last), Some(log_offset)) = (summary.next_queue_offset.checked_sub(1), summary.last_log_offset) else {
        return Ok(false);
    };
    let Some(queue) = queues.get(&summary.topic, summary.queue_id) else { return Ok(false) };
    if log_offset >= log_next || !(queue.min_offset()..queue.max_offset()).contains(&last) {
        return Ok(false);
    }
    Ok(matches!(queue.get(last), Ok(Some(entry)) if entry.log_offset == log_offset))
}

/// Compares a queue with the checkpoint's (confirmed) record of it: missing or short, it is
/// refilled from after its last entry; holding other entries than the record says, it is removed
/// and rebuilt.
/// `log_start` is the log's start, `checkpointed` the checkpoint's dispatched-up-to.
fn against_summary(
    queues: &Queues,
    summary: &QueueSummary,
    (log_start, checkpointed): (u64, u64),
    checks: &mut QueueChecks,
) -> Result<()> {
    let (topic, queue_id) = (summary.topic.as_str(), summary.queue_id);
    // Whether the log may still hold messages the queue lacks (its last one is not below the
    // log's start); if not, the summary is a floor only.
    let in_log = summary.last_log_offset.is_some_and(|last| last >= log_start);
    let Some(queue) = queues.get(topic, queue_id) else {
        if in_log {
            tracing::warn!(topic, queue_id, "consume queue missing: rebuilt from the commit log");
            checks.refill(topic, queue_id, 0);
        }
        return Ok(());
    };
    let was_cut = checks.rebuilt.iter().any(|(t, q)| t == topic && *q == queue_id);
    if let Some(fault) = summary_fault(&queue, summary, (log_start, checkpointed), was_cut)? {
        tracing::warn!(
            topic,
            queue_id,
            fault,
            "consume queue does not match the store checkpoint: rebuilt from the log's start"
        );
        queues.remove_damaged(topic, queue_id)?;
        checks.refill(topic, queue_id, 0);
    } else if in_log && queue.max_offset() < summary.next_queue_offset {
        let from = after_last_entry(&queue)?;
        tracing::warn!(
            topic,
            queue_id,
            end = queue.max_offset(),
            checkpointed = summary.next_queue_offset,
            refill_from = from,
            "consume queue shorter than the store checkpoint recorded: refilled from the commit log"
        );
        checks.refill(topic, queue_id, from);
    }
    Ok(())
}

/// Why the queue cannot be the one the checkpoint recorded (grown, or shrunk by retention), if it
/// cannot: its first offset rises only past entries pointing below the log's start (a reopen
/// may find it lower: it is not stored, the first file's first entry is); the entries the record
/// names hold the log offsets it names; its entries within the record's offsets point within the
/// record's log offsets, and the first past them at or past the checkpoint.
fn summary_fault(
    queue: &ConsumeQueue,
    summary: &QueueSummary,
    (log_start, checkpointed): (u64, u64),
    was_cut: bool,
) -> Result<Option<&'static str>> {
    let (min, max) = (queue.min_offset(), queue.max_offset());
    let alive = |log_offset: Option<u64>| log_offset.filter(|&offset| offset >= log_start);
    if max < summary.next_queue_offset && alive(summary.last_log_offset).is_none() {
        // Short, with nothing in the log to refill it from: retention never takes a queue's last
        // file, so these are not its files.
        return Ok(Some("it ends below the numbering recorded, and the log holds nothing to refill it"));
    }
    if min > summary.next_queue_offset && was_cut {
        // Its entries pointed past the log's end, and it starts past the numbering: not this
        // store's. (Uncut, a queue further on than the record keeps its numbering: a queue
        // offset is never handed out twice, and the record may be the stale one.)
        return Ok(Some("it starts past the numbering recorded, and its entries pointed past the log's end"));
    }
    if min > summary.min_queue_offset && alive(summary.first_log_offset).is_some() {
        // Retention deletes a queue's files only once every entry in them points below the log's
        // start: these pointed at messages the log still holds.
        return Ok(Some("it lost its first entries, not to retention"));
    }
    if lost_after(queue, summary.next_queue_offset, (log_start, checkpointed))? {
        return Ok(Some(LOST_AFTER));
    }
    let log_offset_at = |q: u64| -> Result<Option<u64>> {
        Ok(if (min..max).contains(&q) { queue.get(q)?.map(|entry| entry.log_offset) } else { None })
    };
    // Below the first entry recorded (a reopen starts a queue at its first file's first entry)
    // every entry points below the log's start: retention moved the record's first offset past
    // them, and the start only rises.
    if let Some(below) = summary.min_queue_offset.checked_sub(1)
        && let Some(held) = log_offset_at(below)?
        && held >= log_start
    {
        return Ok(Some("an entry below the first recorded points at a message the log holds"));
    }
    let recorded = [(summary.min_queue_offset, summary.first_log_offset)];
    let last = summary.next_queue_offset.checked_sub(1).map(|q| (q, summary.last_log_offset));
    for (q, expected) in recorded.into_iter().chain(last) {
        // An entry below the log's start is not compared: a rebuild writes a placeholder for a
        // removed message where it can.
        if let Some(expected) = alive(expected)
            && let Some(held) = log_offset_at(q)?
            && held != expected
        {
            return Ok(Some("an entry holds another log offset than recorded"));
        }
    }
    if let Some(after) = log_offset_at(summary.next_queue_offset)?
        && (after < checkpointed || summary.last_log_offset.is_some_and(|last| after <= last))
    {
        // An entry past the record was dispatched after the checkpoint was taken.
        return Ok(Some("an entry past the numbering recorded points before the checkpoint"));
    }
    if let (Some(first), Some(last_log)) = (summary.first_log_offset, summary.last_log_offset)
        && let Some(q) = max.checked_sub(1).filter(|&q| q >= min && q < summary.next_queue_offset)
        && let Some(held) = log_offset_at(q)?
        && !(first..=last_log).contains(&held)
    {
        return Ok(Some("its last entry points outside the log offsets recorded"));
    }
    Ok(None)
}

/// Why [`lost_after`] condemns a queue.
const LOST_AFTER: &str = "it starts past the numbering recorded, its first entry past the checkpoint";

/// Whether the queue starts past `next_recorded` (what the store checkpoint, taken at log offset
/// `checkpointed`, records of its numbering: 0 for a queue made after it) and so lost the entries
/// between, which were dispatched after the checkpoint (for messages at or past `checkpointed`)
/// and below its first entry's message: retention removes a queue's files only once the log's
/// start passed every entry in them, so if the log may hold one of those messages (its start is
/// below the first entry's message, and so is the checkpoint), they were lost, not retained
/// away. Which of them the log holds no cheap check can tell: the queue is rebuilt (a false
/// alarm, a file retention removed after the checkpoint, costs work, never data).
fn lost_after(queue: &ConsumeQueue, next_recorded: u64, (log_start, checkpointed): (u64, u64)) -> Result<bool> {
    let min = queue.min_offset();
    if min <= next_recorded || min >= queue.max_offset() {
        return Ok(false);
    }
    let first = match queue.get(min) {
        Ok(entry) => entry.map(|entry| entry.log_offset),
        Err(Error::Corrupt { .. }) => None, // the end entries' check condemns it
        Err(error) => return Err(error),
    };
    Ok(first.is_some_and(|first| checkpointed.max(log_start) < first))
}

/// Why the queue's first or last entry does not point at its own message, if one does not: the
/// message an entry points at must be of this topic and queue, carry the entry's queue offset and
/// have its size; an entry that does not read, or points at or past the log's end, is damage. An
/// entry below the log's start (retention, a placeholder) is not checked.
fn end_entries_fault(
    reader: &mut MessageReader<'_>,
    queue: &ConsumeQueue,
    (topic, queue_id): (&str, u32),
    confirmed: Option<&QueueSummary>,
) -> Result<Option<&'static str>> {
    let (min, max) = (queue.min_offset(), queue.max_offset());
    let Some(last) = max.checked_sub(1).filter(|&q| q >= min) else { return Ok(None) };
    // An entry the checkpoint recorded, at the log offset recorded, is two records of the same
    // thing (or was checked against the log with the record): a clean open reads no message.
    let recorded = |queue_offset: u64, log_offset: u64| {
        confirmed.is_some_and(|s| {
            (queue_offset == s.min_queue_offset && Some(log_offset) == s.first_log_offset)
                || (Some(queue_offset) == s.next_queue_offset.checked_sub(1) && Some(log_offset) == s.last_log_offset)
        })
    };
    for queue_offset in [min, last] {
        let entry = match queue.get(queue_offset) {
            Ok(Some(entry)) => entry,
            Ok(None) => continue, // retired meanwhile (nothing runs beside an open: never)
            Err(Error::Corrupt { .. }) => return Ok(Some("an entry at its ends does not read")),
            Err(error) => return Err(error),
        };
        if recorded(queue_offset, entry.log_offset) {
            continue;
        }
        if entry.log_offset >= reader.log_next() {
            return Ok(Some("an entry at its ends points past the commit log's end"));
        }
        let fault = match message_at(reader, entry.log_offset)? {
            None => None, // removed by retention
            Some(m) if m.topic() != topic || m.queue_id() != queue_id => {
                Some("an entry points at another queue's message")
            }
            Some(m) if m.queue_offset() != queue_offset => {
                Some("an entry points at a message with another queue offset")
            }
            Some(m) if u32::try_from(m.encoded_len()).ok() != Some(entry.size) => {
                Some("an entry has another size than its message")
            }
            Some(_) => None,
        };
        if fault.is_some() {
            return Ok(fault);
        }
    }
    Ok(None)
}

/// The message at `log_offset`, `None` if the log no longer holds it or the record there is not a
/// message.
fn message_at(reader: &mut MessageReader<'_>, log_offset: u64) -> Result<Option<StoredMessage>> {
    let Some(record) = reader.read(log_offset, || 1)? else { return Ok(None) };
    Ok(StoredMessage::decode(record).ok())
}
