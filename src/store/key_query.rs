//! A query by key, around the index: its arguments checked, how many candidates to ask the index
//! for, and the candidates re-read from the commit log and re-checked (topic, key, time), so hash
//! collisions never leak through. Shared by a store's own `query_by_key` (`lookup.rs`) and a
//! read-only store's (`read_only/lookup.rs`), whose indexes differ.

use crate::error::{Error, Result};
use crate::log::Log;
use crate::store::message::{StoredMessage, validate_topic};
use crate::store::message_reader::MessageReader;

/// Candidates asked of the index per message wanted: hashes collide, and the candidates are
/// re-checked against the message.
const CANDIDATES_PER_RESULT: usize = 2;
/// At least this many candidates are asked for.
const MIN_CANDIDATES: usize = 32;
/// What a candidate's batch takes, about, to size the chunk they are read into.
const GUESSED_BATCH_BYTES: usize = 512;

/// `Ok` if `topic` and `key` can be queried: a valid topic and a key that is not empty.
pub(crate) fn check(topic: &str, key: &str) -> Result<()> {
    validate_topic(topic)?;
    if key.is_empty() {
        return Err(Error::InvalidField { what: "key", name: String::new(), reason: "empty" });
    }
    Ok(())
}

/// How many candidates to ask the index for, for `max` messages.
pub(crate) fn candidates(max: usize) -> usize {
    max.saturating_mul(CANDIDATES_PER_RESULT).max(MIN_CANDIDATES)
}

/// The newest `max` messages among those at `offsets` (ascending) that are of `topic`, carry
/// `key` and were stored in `[begin_ms, end_ms]`, read from `log`, in ascending log offset. An
/// offset the log no longer holds (retention) or that holds no message is left out.
pub(crate) fn matching(
    log: &Log,
    offsets: Vec<u64>,
    (topic, key): (&str, &str),
    (begin_ms, end_ms): (i64, i64),
    max: usize,
) -> Result<Vec<StoredMessage>> {
    let records = if log.is_read_only() {
        let mut reader = MessageReader::new(log);
        offsets.iter().map(|&log_offset| reader.read(log_offset, || 1)).collect::<Result<Vec<_>>>()?
    } else {
        // Each candidate's batch alone, into one shared chunk.
        log.gather(&offsets, offsets.len() * GUESSED_BATCH_BYTES)?
    };
    let mut found = Vec::new();
    for record in records.into_iter().flatten() {
        // Cheap checks first (a collision is rejected before anything is copied out).
        let time = record.timestamp_ms();
        if !(begin_ms..=end_ms).contains(&time) {
            continue;
        }
        let Ok(message) = StoredMessage::decode(record) else { continue };
        if message.topic() == topic && message.has_key(key) {
            found.push(message);
        }
    }
    // The newest `max`.
    let surplus = found.len().saturating_sub(max);
    found.drain(..surplus);
    Ok(found)
}
