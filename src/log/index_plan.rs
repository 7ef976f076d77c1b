//! Deciding sparse index entries (docs/DESIGN.md §6) the same way for appends and for rebuilds, and
//! writing rebuilt index files.

use std::path::Path;

use crate::error::Result;
use crate::format::{INDEX_SUFFIX, TIME_INDEX_SUFFIX, file_name};
use crate::log::batch::BatchHeader;
use crate::log::index::IndexEntry;
use crate::log::offset_index::OffsetEntry;
use crate::log::time_index::TimeEntry;
use crate::storage;

/// Decides the sparse index entries, the same way for appends and for rebuilds.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexPlanner {
    pub(crate) bytes_since_entry: u64,
    /// Largest timestamp so far and the base offset of the first batch that reached it.
    pub(crate) max_timestamp: Option<(i64, u64)>,
    pub(crate) last_time_entry_ms: i64,
}

impl IndexPlanner {
    /// The entries to add for the batch at `position`, before counting its bytes.
    pub(crate) fn on_batch(
        &mut self,
        base: u64,
        position: u64,
        header: &BatchHeader,
        interval: u64,
    ) -> (Option<OffsetEntry>, Option<TimeEntry>) {
        if self.max_timestamp.is_none_or(|(max, _)| header.max_timestamp > max) {
            self.max_timestamp = Some((header.max_timestamp, header.base_offset));
        }
        let due = position > 0 && self.bytes_since_entry >= interval;
        self.bytes_since_entry += header.size();
        if !due {
            return (None, None);
        }
        self.bytes_since_entry = header.size();
        let relative_offset = (header.base_offset - base) as u32;
        let offset_entry = OffsetEntry { relative_offset, position: position as u32 };
        (Some(offset_entry), self.time_entry(base))
    }

    /// A time entry for the largest timestamp so far, if it grew since the last entry.
    pub(crate) fn time_entry(&mut self, base: u64) -> Option<TimeEntry> {
        let (timestamp_ms, offset) = self.max_timestamp?;
        if timestamp_ms <= self.last_time_entry_ms {
            return None;
        }
        self.last_time_entry_ms = timestamp_ms;
        Some(TimeEntry { timestamp_ms, relative_offset: (offset - base) as u32 })
    }
}

/// The index entries of a segment's valid batches, and where its valid data ends.
#[derive(Debug, Default)]
pub(crate) struct PlannedIndexes {
    pub offsets: Vec<OffsetEntry>,
    pub times: Vec<TimeEntry>,
    pub planner: IndexPlanner,
}

impl PlannedIndexes {
    pub(crate) fn add(&mut self, base: u64, position: u64, header: &BatchHeader, interval: u64) {
        let (offset_entry, time_entry) = self.planner.on_batch(base, position, header, interval);
        self.offsets.extend(offset_entry);
        self.times.extend(time_entry);
    }

    /// Adds the final time entry of a sealed segment.
    pub(crate) fn finish(&mut self, base: u64) {
        let last = self.planner.time_entry(base);
        self.times.extend(last);
    }
}

/// Writes planned index files atomically; returns their lengths.
pub(crate) fn write_index_files(dir: &Path, base_offset: u64, plan: &PlannedIndexes) -> Result<(u64, u64)> {
    write_index_files_as(dir, base_offset, plan, "")
}

/// [`write_index_files`] under the segment's names plus `suffix` (the cleaner's `.cleaned`).
pub(crate) fn write_index_files_as(
    dir: &Path,
    base_offset: u64,
    plan: &PlannedIndexes,
    suffix: &str,
) -> Result<(u64, u64)> {
    let index_bytes = encode_entries(&plan.offsets);
    let time_bytes = encode_entries(&plan.times);
    let name = |kind| format!("{}{suffix}", file_name(base_offset, kind));
    storage::write_derived(dir, &name(INDEX_SUFFIX), &index_bytes)?;
    storage::write_derived(dir, &name(TIME_INDEX_SUFFIX), &time_bytes)?;
    Ok((index_bytes.len() as u64, time_bytes.len() as u64))
}

fn encode_entries<E: IndexEntry>(entries: &[E]) -> Vec<u8> {
    let mut bytes = vec![0u8; entries.len() * E::LEN];
    for (entry, out) in entries.iter().zip(bytes.chunks_exact_mut(E::LEN)) {
        entry.encode_into(out);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planner_never_indexes_position_zero() {
        let mut planner = IndexPlanner::default();
        let header = BatchHeader {
            base_offset: 0,
            batch_length: 100,
            magic: 1,
            crc: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 5,
            max_timestamp: 5,
            record_count: 1,
        };
        assert_eq!(planner.on_batch(0, 0, &header, 0), (None, None), "position 0 is implied");
        let next = BatchHeader { base_offset: 1, max_timestamp: 9, ..header };
        let (offset_entry, time_entry) = planner.on_batch(0, 112, &next, 0);
        assert_eq!(offset_entry, Some(OffsetEntry { relative_offset: 1, position: 112 }));
        assert_eq!(time_entry, Some(TimeEntry { timestamp_ms: 9, relative_offset: 1 }));
    }
}
