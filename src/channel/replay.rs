//! Opening a channel: the log recovers (docs/DESIGN.md §7), then one pass over it from its start
//! rebuilds what the channel holds. Each event record is held from its offset on; each take
//! record releases the offsets its ranges list. What is left is every event whose put committed
//! and whose take did not, in put order; its first offset is the low watermark W. Events below W
//! were all taken (the background work deletes their records); a take record may name offsets
//! already deleted, which it then simply does not find.
//!
//! Memory stays bounded by what the channel holds (plus one read), whatever the log's length:
//! a released event is dropped as soon as its take record is read.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::log::{Log, RecordView};

use super::event::Event;
use super::take_record;

/// Bytes one read of the replay asks for.
const READ_BYTES: usize = 4 << 20;

/// The events `log` holds that were put and not taken, in log order.
pub(crate) fn replay(log: &Log) -> Result<Vec<(u64, Event)>> {
    if log.visible_end() < log.next_offset() {
        // What recovery kept is readable once it is durable (under `FlushPolicy::Always`).
        log.flush()?;
    }
    let mut held: BTreeMap<u64, Event> = BTreeMap::new();
    let mut cursor = log.cursor(log.start_offset())?;
    loop {
        let batches = cursor.next_batch(READ_BYTES)?;
        if batches.is_empty() {
            break;
        }
        for record in batches.iter().flat_map(|batch| batch.records()) {
            apply(&mut held, record, log.dir())?;
        }
    }
    let next = log.next_offset();
    if cursor.position() < next {
        let reason = "the log ends before its next offset (records not visible at open)";
        return Err(Error::NotAChannelRecord { path: log.dir().to_path_buf(), offset: cursor.position(), reason });
    }
    Ok(held.into_iter().collect())
}

/// Applies one record of the log to what is held.
fn apply(held: &mut BTreeMap<u64, Event>, record: &RecordView, dir: &Path) -> Result<()> {
    let refuse = |reason| Error::NotAChannelRecord { path: dir.to_path_buf(), offset: record.offset(), reason };
    match record.key() {
        None => {
            let event = Event::from_record(record).ok_or_else(|| refuse("an event record without a body"))?;
            held.insert(record.offset(), event);
        }
        Some(key) if take_record::is_take_key(key) => {
            let value = record.value().ok_or_else(|| refuse("a take record without a value"))?;
            let ranges = take_record::decode(value).ok_or_else(|| refuse("a take record that does not decode"))?;
            for (start, end) in ranges {
                if end > record.offset() {
                    return Err(refuse("a take record names an offset at or after its own"));
                }
                release(held, start, end);
            }
        }
        Some(_) => return Err(refuse("a record with a key other than the take record's")),
    }
    Ok(())
}

/// Releases the events held in `[start, end)` (touching only those held: a range may be wide).
fn release(held: &mut BTreeMap<u64, Event>, start: u64, end: u64) {
    let offsets: Vec<u64> = held.range(start..end).map(|(offset, _)| *offset).collect();
    for offset in offsets {
        held.remove(&offset);
    }
}
