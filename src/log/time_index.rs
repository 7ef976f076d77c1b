//! The `.timeindex` file (docs/DESIGN.md §6): sparse `[timestamp_ms i64][relative_offset u32]`
//! entries, added with offset-index entries when the largest timestamp so far grew, plus a final
//! entry with the segment's max timestamp at seal (retention reads it; KAFKA-10207).

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::format::TIME_INDEX_ENTRY_LEN;
use crate::log::index::{IndexEntry, SparseIndex};

/// One `.timeindex` entry. Timestamps are > 0 (entries are added only when the largest timestamp
/// exceeds the last entry's, starting from 0), so an all-zero entry is never data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TimeEntry {
    /// Largest timestamp in the segment up to and including the batch at `relative_offset`.
    pub timestamp_ms: i64,
    /// Base offset − segment base of the first batch that reached `timestamp_ms`.
    pub relative_offset: u32,
}

impl IndexEntry for TimeEntry {
    const LEN: usize = TIME_INDEX_ENTRY_LEN;

    fn decode_from(bytes: &[u8]) -> TimeEntry {
        TimeEntry { timestamp_ms: BigEndian::read_i64(bytes), relative_offset: BigEndian::read_u32(&bytes[8..]) }
    }

    fn encode_into(&self, out: &mut [u8]) {
        BigEndian::write_i64(out, self.timestamp_ms);
        BigEndian::write_u32(&mut out[8..], self.relative_offset);
    }

    fn is_zero(&self) -> bool {
        self.timestamp_ms == 0 && self.relative_offset == 0
    }

    fn check_follows(&self, previous: &TimeEntry, entry: u64) -> Result<(), Corruption> {
        if self.timestamp_ms <= previous.timestamp_ms {
            return Err(Corruption::TimeNotIncreasing {
                entry,
                previous: previous.timestamp_ms,
                found: self.timestamp_ms,
            });
        }
        if self.relative_offset < previous.relative_offset {
            let (previous, found) = (previous.relative_offset, self.relative_offset);
            return Err(Corruption::TimeOffsetBackwards { entry, previous, found });
        }
        Ok(())
    }
}

/// The time index of one segment.
pub(crate) type TimeIndex = SparseIndex<TimeEntry>;

impl TimeIndex {
    /// The offset of the last entry with a timestamp strictly below `timestamp_ms`: no record
    /// before that batch can have a timestamp ≥ `timestamp_ms`, so a search may start there.
    pub(crate) fn lookup(&self, base_offset: u64, timestamp_ms: i64) -> Result<Option<u64>> {
        let found = self.floor(|e| e.timestamp_ms < timestamp_ms)?;
        Ok(found.map(|e| base_offset.saturating_add(u64::from(e.relative_offset))))
    }

    /// The largest timestamp recorded, or 0 for an empty index.
    pub(crate) fn last_timestamp(&self) -> Result<i64> {
        Ok(self.last()?.map_or(0, |e| e.timestamp_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip() {
        let entry = TimeEntry { timestamp_ms: 1_700_000_000_123, relative_offset: 77 };
        let mut bytes = [0u8; TIME_INDEX_ENTRY_LEN];
        entry.encode_into(&mut bytes);
        assert_eq!(TimeEntry::decode_from(&bytes), entry);
    }

    #[test]
    fn lookup_finds_a_safe_starting_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = TimeIndex::create(&dir.path().join("t"), 1200, crate::config::ReadPath::Mmap).expect("create");
        assert_eq!(index.lookup(50, 1000).expect("lookup"), None);
        for (ts, rel) in [(1000, 5), (2000, 9), (3000, 9)] {
            index.append(TimeEntry { timestamp_ms: ts, relative_offset: rel }).expect("append");
        }
        assert_eq!(index.lookup(50, 1000).expect("lookup"), None, "an entry at the target is not before it");
        assert_eq!(index.lookup(50, 1001).expect("lookup"), Some(55));
        assert_eq!(index.lookup(50, 2500).expect("lookup"), Some(59));
        assert_eq!(index.lookup(50, i64::MAX).expect("lookup"), Some(59));
        assert_eq!(index.last_timestamp().expect("last"), 3000);
    }
}
