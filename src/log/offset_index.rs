//! The `.index` file (docs/DESIGN.md §6): sparse `[relative_offset u32][position u32]` entries
//! mapping a batch's base offset to its byte position in the segment's `.log`.

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::format::OFFSET_INDEX_ENTRY_LEN;
use crate::log::index::{IndexEntry, SparseIndex};

/// One `.index` entry. Never all-zero: position 0 (the segment's first batch) is never indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct OffsetEntry {
    /// Batch base offset − segment base offset.
    pub relative_offset: u32,
    /// Byte position of the batch in the `.log`.
    pub position: u32,
}

impl IndexEntry for OffsetEntry {
    const LEN: usize = OFFSET_INDEX_ENTRY_LEN;

    fn decode_from(bytes: &[u8]) -> OffsetEntry {
        OffsetEntry { relative_offset: BigEndian::read_u32(bytes), position: BigEndian::read_u32(&bytes[4..]) }
    }

    fn encode_into(&self, out: &mut [u8]) {
        BigEndian::write_u32(out, self.relative_offset);
        BigEndian::write_u32(&mut out[4..], self.position);
    }

    fn is_zero(&self) -> bool {
        self.relative_offset == 0 && self.position == 0
    }

    fn check_follows(&self, previous: &OffsetEntry, entry: u64) -> Result<(), Corruption> {
        if self.relative_offset <= previous.relative_offset {
            let (previous, found) = (previous.relative_offset, self.relative_offset);
            return Err(Corruption::IndexOffsetNotIncreasing { entry, previous, found });
        }
        if self.position <= previous.position {
            return Err(Corruption::IndexPositionNotIncreasing {
                entry,
                previous: previous.position,
                found: self.position,
            });
        }
        Ok(())
    }
}

/// The offset index of the segment starting at `base_offset`.
pub(crate) type OffsetIndex = SparseIndex<OffsetEntry>;

impl OffsetIndex {
    /// The greatest entry whose batch starts at or before `offset`, as (base offset, position);
    /// `None` means "start at position 0".
    pub(crate) fn lookup(&self, base_offset: u64, offset: u64) -> Result<Option<(u64, u64)>> {
        let found = self.floor(|e| base_offset.saturating_add(u64::from(e.relative_offset)) <= offset)?;
        Ok(found.map(|e| (base_offset.saturating_add(u64::from(e.relative_offset)), u64::from(e.position))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trip() {
        let entry = OffsetEntry { relative_offset: 0x0102_0304, position: 0xfffe_fdfc };
        let mut bytes = [0u8; OFFSET_INDEX_ENTRY_LEN];
        entry.encode_into(&mut bytes);
        assert_eq!(bytes, [1, 2, 3, 4, 0xff, 0xfe, 0xfd, 0xfc]);
        assert_eq!(OffsetEntry::decode_from(&bytes), entry);
    }

    #[test]
    fn lookup_at_and_between_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = OffsetIndex::create(&dir.path().join("i"), 1024, crate::config::ReadPath::Mmap).expect("create");
        assert_eq!(index.lookup(100, 150).expect("lookup"), None, "empty index: start at 0");
        for (rel, pos) in [(10, 4000), (20, 8100), (30, 12_300)] {
            index.append(OffsetEntry { relative_offset: rel, position: pos }).expect("append");
        }
        assert_eq!(index.lookup(100, 109).expect("lookup"), None, "before the first entry");
        assert_eq!(index.lookup(100, 110).expect("lookup"), Some((110, 4000)), "exactly at an entry");
        assert_eq!(index.lookup(100, 125).expect("lookup"), Some((120, 8100)), "between entries");
        assert_eq!(index.lookup(100, 10_000).expect("lookup"), Some((130, 12_300)), "after the last");
    }
}
