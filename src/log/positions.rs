//! Where each offset's batch starts in a segment's `.log`, for the batches appended to it in this
//! process (docs/DESIGN.md §6, "position table"): a read of one offset goes straight to its batch
//! instead of searching the sparse offset index and walking headers from its entry. Kept at batch
//! granularity (every offset of a batch names the batch's start), so it serves compressed batches
//! as well; filled by the appender, read without a lock.
//!
//! A position is a hint, never trusted alone: the reader checks the batch header it finds there
//! (it holds the offset, and its base and last offsets are the batch's as noted) and falls back
//! to the index when it does not. The table belongs to one `LogSegment` object, made with it when
//! it becomes the active segment (created, reopened, or cut by a truncation; a compaction swap's
//! segments have none).
//!
//! Memory: 4 bytes per offset (1.5 % of a log of 260-byte records), in chunks allocated as the
//! segment fills. The log keeps tables for its newest segments only ([`POSITION_TABLES`]).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// How many segments (the active one and the newest sealed ones) keep their table: reads of older
/// segments search their index, as before.
pub(crate) const POSITION_TABLES: usize = 3;

/// Offsets per chunk.
const CHUNK: usize = 4096;

/// The smallest batch, bytes (a header and one empty record): a segment of `bytes` holds at most
/// `bytes / MIN_BATCH_BYTES` batches. Only sizes the chunk list; an offset past it is not kept.
const MIN_BATCH_BYTES: u64 = 64;

/// See the module documentation.
pub(crate) struct Positions {
    /// Position + 1 of the batch holding each relative offset (0: not known).
    chunks: Box<[OnceLock<Box<[AtomicU32]>>]>,
}

impl std::fmt::Debug for Positions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let allocated = self.chunks.iter().filter(|c| c.get().is_some()).count();
        f.debug_struct("Positions").field("chunks", &self.chunks.len()).field("allocated", &allocated).finish()
    }
}

impl Positions {
    /// A table for a segment of up to `segment_bytes` (more batches than fit are not kept).
    pub(crate) fn new(segment_bytes: u64) -> Positions {
        let offsets = (segment_bytes / MIN_BATCH_BYTES).clamp(1, u64::from(u32::MAX));
        let chunks = offsets.div_ceil(CHUNK as u64) as usize;
        Positions { chunks: (0..chunks).map(|_| OnceLock::new()).collect() }
    }

    /// Notes that the batch at `position` holds relative offsets `first..=last`. A position that
    /// does not fit the table's 32 bits, or offsets past its end, are not kept (reads search).
    pub(crate) fn note(&self, first: u64, last: u64, position: u64) {
        let Some(stored) = u32::try_from(position).ok().and_then(|p| p.checked_add(1)) else { return };
        for relative in first..=last {
            let (chunk, slot) = (relative / CHUNK as u64, (relative % CHUNK as u64) as usize);
            let Some(cell) = usize::try_from(chunk).ok().and_then(|c| self.chunks.get(c)) else { return };
            let chunk = cell.get_or_init(|| (0..CHUNK).map(|_| AtomicU32::new(0)).collect());
            chunk[slot].store(stored, Ordering::Release);
        }
    }

    /// The position of the batch holding relative offset `relative`, if noted.
    pub(crate) fn get(&self, relative: u64) -> Option<u64> {
        let chunk = self.chunks.get(usize::try_from(relative / CHUNK as u64).ok()?)?.get()?;
        let stored = chunk[(relative % CHUNK as u64) as usize].load(Ordering::Acquire);
        stored.checked_sub(1).map(u64::from)
    }

    /// Whether the batch at `position` was noted as holding exactly relative offsets
    /// `first..=last`: what the header read there must say. A batch's base offset is outside its
    /// CRC, so a damaged one is told only by this (as a walk tells it by the batch before): one
    /// covering the offset read, trusted, would return a neighbour's record under its offset.
    pub(crate) fn noted_exactly(&self, first: u64, last: u64, position: u64) -> bool {
        let at = Some(position);
        // Positions differ between batches and each batch's offsets are noted together: both
        // ends naming `position`, and neither neighbour, is the whole extent.
        first <= last
            && self.get(first) == at
            && self.get(last) == at
            && first.checked_sub(1).is_none_or(|before| self.get(before) != at)
            && last.checked_add(1).is_none_or(|after| self.get(after) != at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offset_of_a_batch_names_its_start() {
        let table = Positions::new(1 << 20);
        table.note(0, 0, 0);
        table.note(1, 3, 100);
        table.note(4100, 4100, 7_000);
        assert_eq!([0, 1, 2, 3].map(|r| table.get(r)), [Some(0), Some(100), Some(100), Some(100)]);
        assert_eq!(table.get(4), None, "not noted");
        assert_eq!(table.get(4100), Some(7_000), "a second chunk");
        assert_eq!(table.get(u64::MAX), None, "past the table");
        assert!(table.noted_exactly(0, 0, 0) && table.noted_exactly(1, 3, 100), "as noted");
        assert!(!table.noted_exactly(2, 4, 100), "a base offset moved up (damaged)");
        assert!(!table.noted_exactly(1, 2, 100) && !table.noted_exactly(0, 3, 100), "other extents");
        assert!(!table.noted_exactly(4100, 4100, 100), "another position");
    }

    #[test]
    fn what_does_not_fit_is_left_out() {
        let table = Positions::new(MIN_BATCH_BYTES * 10);
        table.note(0, 0, u64::from(u32::MAX));
        assert_eq!(table.get(0), None, "a position past 32 bits");
        table.note(CHUNK as u64, CHUNK as u64, 5);
        assert_eq!(table.get(CHUNK as u64), None, "an offset past the table");
    }
}
