//! The one description of the `.idx` bytes (docs/FORMAT.md, "`.idx`"): the header and entry
//! codecs, where each slot and entry lies (derived from the field positions in `format.rs`), the
//! size and header checks, and the rules one entry is held to ([`EntryRules::check`]), shared by
//! the files, their recovery and `strata verify`. Everything here is pure but [`read_header`],
//! which reads the header it checks.

use std::ops::Bound;
use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Error, Result};
use crate::format::{
    INDEX_ENTRY_KEY_HASH_POS, INDEX_ENTRY_LOG_OFFSET_POS, INDEX_ENTRY_PREV_POS, INDEX_ENTRY_TIME_DIFF_POS,
    INDEX_FILE_BEGIN_LOG_OFFSET_POS, INDEX_FILE_BEGIN_TIMESTAMP_POS, INDEX_FILE_END_LOG_OFFSET_POS,
    INDEX_FILE_END_TIMESTAMP_POS, INDEX_FILE_ENTRY_LEN, INDEX_FILE_HEADER_LEN, INDEX_FILE_INDEX_COUNT_POS,
    INDEX_FILE_MAX_SLOTS, INDEX_FILE_SLOT_COUNT_POS, INDEX_FILE_SLOT_LEN, INDEX_FILE_SUFFIX, parse_file_name,
};
use crate::storage;
use crate::store::hash::fnv1a_64_of;

/// The hash a key is indexed under: the low 32 bits of FNV-1a 64 of `topic#key`.
pub(crate) fn key_hash(topic: &str, key: &str) -> u32 {
    fnv1a_64_of(&[topic.as_bytes(), b"#", key.as_bytes()]) as u32
}

/// An IndexFile's header as stored (docs/FORMAT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexHeader {
    /// Timestamp (ms) of the put that created the file; entry times are seconds since it.
    pub begin_timestamp_ms: i64,
    /// The largest timestamp put (ms); `begin_timestamp_ms` while empty.
    pub end_timestamp_ms: i64,
    /// The log offset the file was created for (its name); no entry is below it.
    pub begin_log_offset: u64,
    /// The largest log offset put; `begin_log_offset` while empty.
    pub end_log_offset: u64,
    /// Hash slots in the file.
    pub slot_count: u32,
    /// Entries used, numbered 1 to `index_count` (entry 0 is never used).
    pub index_count: u32,
}

impl IndexHeader {
    pub(crate) fn encode(&self) -> [u8; INDEX_FILE_HEADER_LEN] {
        let mut b = [0u8; INDEX_FILE_HEADER_LEN];
        BigEndian::write_i64(&mut b[INDEX_FILE_BEGIN_TIMESTAMP_POS..], self.begin_timestamp_ms);
        BigEndian::write_i64(&mut b[INDEX_FILE_END_TIMESTAMP_POS..], self.end_timestamp_ms);
        BigEndian::write_u64(&mut b[INDEX_FILE_BEGIN_LOG_OFFSET_POS..], self.begin_log_offset);
        BigEndian::write_u64(&mut b[INDEX_FILE_END_LOG_OFFSET_POS..], self.end_log_offset);
        BigEndian::write_u32(&mut b[INDEX_FILE_SLOT_COUNT_POS..], self.slot_count);
        BigEndian::write_u32(&mut b[INDEX_FILE_INDEX_COUNT_POS..], self.index_count);
        b
    }

    pub(crate) fn decode(b: &[u8; INDEX_FILE_HEADER_LEN]) -> IndexHeader {
        IndexHeader {
            begin_timestamp_ms: BigEndian::read_i64(&b[INDEX_FILE_BEGIN_TIMESTAMP_POS..]),
            end_timestamp_ms: BigEndian::read_i64(&b[INDEX_FILE_END_TIMESTAMP_POS..]),
            begin_log_offset: BigEndian::read_u64(&b[INDEX_FILE_BEGIN_LOG_OFFSET_POS..]),
            end_log_offset: BigEndian::read_u64(&b[INDEX_FILE_END_LOG_OFFSET_POS..]),
            slot_count: BigEndian::read_u32(&b[INDEX_FILE_SLOT_COUNT_POS..]),
            index_count: BigEndian::read_u32(&b[INDEX_FILE_INDEX_COUNT_POS..]),
        }
    }
}

/// An IndexFile entry as stored (docs/FORMAT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexFileEntry {
    pub key_hash: u32,
    pub log_offset: u64,
    /// Whole seconds from the file's begin timestamp.
    pub time_diff_s: u32,
    /// The entry the slot held before this one (0: the chain ends here).
    pub prev_entry: u32,
}

impl IndexFileEntry {
    pub(crate) fn encode(&self) -> [u8; INDEX_FILE_ENTRY_LEN] {
        let mut b = [0u8; INDEX_FILE_ENTRY_LEN];
        BigEndian::write_u32(&mut b[INDEX_ENTRY_KEY_HASH_POS..], self.key_hash);
        BigEndian::write_u64(&mut b[INDEX_ENTRY_LOG_OFFSET_POS..], self.log_offset);
        BigEndian::write_u32(&mut b[INDEX_ENTRY_TIME_DIFF_POS..], self.time_diff_s);
        BigEndian::write_u32(&mut b[INDEX_ENTRY_PREV_POS..], self.prev_entry);
        b
    }

    /// Decodes the first [`INDEX_FILE_ENTRY_LEN`] bytes of `b`.
    pub(crate) fn decode(b: &[u8]) -> IndexFileEntry {
        IndexFileEntry {
            key_hash: BigEndian::read_u32(&b[INDEX_ENTRY_KEY_HASH_POS..]),
            log_offset: BigEndian::read_u64(&b[INDEX_ENTRY_LOG_OFFSET_POS..]),
            time_diff_s: BigEndian::read_u32(&b[INDEX_ENTRY_TIME_DIFF_POS..]),
            prev_entry: BigEndian::read_u32(&b[INDEX_ENTRY_PREV_POS..]),
        }
    }

    /// Whether every byte is zero: what an unused entry looks like.
    pub(super) fn is_zero(&self) -> bool {
        *self == IndexFileEntry { key_hash: 0, log_offset: 0, time_diff_s: 0, prev_entry: 0 }
    }
}

/// The slot `key_hash` is indexed in, in a file of `slot_count` slots.
pub(crate) const fn slot_of(key_hash: u32, slot_count: u32) -> u32 {
    key_hash % slot_count
}

/// Byte position of slot `slot` (the slot table follows the header).
pub(crate) const fn slot_position(slot: u64) -> u64 {
    INDEX_FILE_HEADER_LEN as u64 + slot * INDEX_FILE_SLOT_LEN as u64
}

/// Byte position of entry `n` in a file of `slots` slots (the entries follow the slot table,
/// entry 0 first).
pub(crate) const fn entry_position(slots: u32, n: u64) -> u64 {
    slot_position(slots as u64) + n * INDEX_FILE_ENTRY_LEN as u64
}

/// Bytes of an IndexFile with `slots` slots and room for `entries` entries (entry 0 included).
pub(crate) const fn index_file_len(slots: u32, entries: u32) -> u64 {
    entry_position(slots, entries as u64)
}

/// `Error::InvalidConfig` unless a file of `slots` slots and `entries` entries can be made: at
/// least one slot, and room for one entry besides the unused entry 0.
pub(super) fn check_sizes(slots: u32, entries: u32) -> Result<()> {
    if slots == 0 || slots > INDEX_FILE_MAX_SLOTS {
        let reason = format!("must be 1 to {INDEX_FILE_MAX_SLOTS} (the active file's slots are held in memory)");
        return Err(Error::InvalidConfig { field: "index_slots", reason });
    }
    if entries < 2 {
        let reason = "must be at least 2 (entry 0 is never used)".to_owned();
        return Err(Error::InvalidConfig { field: "index_entries", reason });
    }
    Ok(())
}

/// Reads and checks the header of the file at `path`: its header, length and entry capacity.
pub(crate) fn read_header(path: &Path) -> Result<(IndexHeader, u64, u32)> {
    let (head, file_len) = storage::read_head(path, INDEX_FILE_HEADER_LEN)?;
    let Ok(head) = <[u8; INDEX_FILE_HEADER_LEN]>::try_from(head.as_slice()) else {
        let reason = Corruption::ShortFile { len: file_len, expected: INDEX_FILE_HEADER_LEN as u64 };
        return Err(Error::corrupt(path, file_len, reason));
    };
    let header = IndexHeader::decode(&head);
    let capacity = check_header(path, &header, file_len)?;
    Ok((header, file_len, capacity))
}

/// The entries (entry 0 included) a file of `file_len` bytes with `header` holds, or why it is not
/// an index file.
fn check_header(path: &Path, header: &IndexHeader, file_len: u64) -> Result<u32> {
    let bad = |position: usize, what: &'static str| Error::corrupt(path, position as u64, Corruption::BadFile(what));
    let name = path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name);
    if name != Some((header.begin_log_offset, INDEX_FILE_SUFFIX)) {
        return Err(bad(INDEX_FILE_BEGIN_LOG_OFFSET_POS, "index file begin_log_offset differs from its name"));
    }
    if header.slot_count == 0 {
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file has hash_slot_count 0"));
    }
    if header.slot_count > INDEX_FILE_MAX_SLOTS {
        // The active file's slot table is held in memory: a hostile count must not exhaust it.
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file has more hash slots than an index file may have"));
    }
    let smallest = index_file_len(header.slot_count, 2);
    if file_len < smallest {
        return Err(Error::corrupt(path, file_len, Corruption::ShortFile { len: file_len, expected: smallest }));
    }
    let entry_bytes = file_len - index_file_len(header.slot_count, 0);
    if !entry_bytes.is_multiple_of(INDEX_FILE_ENTRY_LEN as u64) {
        let reason = Corruption::IndexLength { len: file_len, entry_len: INDEX_FILE_ENTRY_LEN as u64 };
        return Err(Error::corrupt(path, file_len, reason));
    }
    let Ok(capacity) = u32::try_from(entry_bytes / INDEX_FILE_ENTRY_LEN as u64) else {
        return Err(bad(INDEX_FILE_SLOT_COUNT_POS, "index file holds more than 2^32 entries"));
    };
    if header.index_count >= capacity {
        return Err(bad(INDEX_FILE_INDEX_COUNT_POS, "index file index_count exceeds its entries"));
    }
    if header.end_log_offset < header.begin_log_offset {
        return Err(bad(INDEX_FILE_END_LOG_OFFSET_POS, "index file end_log_offset is below begin_log_offset"));
    }
    if header.end_timestamp_ms < header.begin_timestamp_ms {
        return Err(bad(INDEX_FILE_END_TIMESTAMP_POS, "index file end_timestamp is before begin_timestamp"));
    }
    Ok(capacity)
}

/// What an entry is checked against: the file's first log offset and the end no entry reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryRules {
    /// The file's `begin_log_offset`: no entry is below it.
    pub begin_log_offset: u64,
    /// The end of the entries' log offsets: the header's `end_log_offset` (included) where the
    /// header is trusted, the log's recovered end (excluded) in recovery.
    pub end_log_offset: Bound<u64>,
}

/// The rules of docs/FORMAT.md, "`.idx`", that an entry breaks, each judged on its own: the
/// callers report them in their own words and order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EntryFaults {
    /// `prev_entry` is not below the entry's own number: a chain only points back.
    pub link_not_back: bool,
    /// The log offset is below the file's `begin_log_offset`.
    pub below_begin: bool,
    /// The log offset is past [`EntryRules::end_log_offset`].
    pub past_end: bool,
    /// The log offset is below the previous entry's.
    pub log_offset_goes_back: bool,
    /// `time_diff_s` is below the previous entry's.
    pub time_goes_back: bool,
}

impl EntryRules {
    /// The rules entry `n` breaks, `previous` being entry `n - 1` (`None` for entry 1). The rules
    /// between two entries only; a chain link's slot needs the other entries (recovery tracks each
    /// slot's newest entry, `verify` looks the link up).
    pub(crate) fn check(&self, n: u32, entry: &IndexFileEntry, previous: Option<&IndexFileEntry>) -> EntryFaults {
        let past_end = match self.end_log_offset {
            Bound::Included(end) => entry.log_offset > end,
            Bound::Excluded(end) => entry.log_offset >= end,
            Bound::Unbounded => false,
        };
        EntryFaults {
            link_not_back: entry.prev_entry >= n,
            below_begin: entry.log_offset < self.begin_log_offset,
            past_end,
            log_offset_goes_back: previous.is_some_and(|p| entry.log_offset < p.log_offset),
            time_goes_back: previous.is_some_and(|p| entry.time_diff_s < p.time_diff_s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::hash::fnv1a_64;

    #[test]
    fn key_hash_is_the_low_half_of_fnv1a_64() {
        // FNV-1a 64 itself is checked against its reference vectors in `store/hash.rs`.
        assert_eq!(key_hash("orders", "id-7"), fnv1a_64(b"orders#id-7") as u32);
        assert_ne!(key_hash("orders", "id-7"), key_hash("order", "sid-7"), "the separator is hashed");
    }

    #[test]
    fn header_and_entry_round_trip() {
        let header = IndexHeader {
            begin_timestamp_ms: -5,
            end_timestamp_ms: i64::MAX,
            begin_log_offset: 7,
            end_log_offset: u64::MAX,
            slot_count: 3,
            index_count: u32::MAX,
        };
        assert_eq!(IndexHeader::decode(&header.encode()), header);
        let entry = IndexFileEntry { key_hash: 0xdead_beef, log_offset: 1 << 40, time_diff_s: 9, prev_entry: 2 };
        assert_eq!(IndexFileEntry::decode(&entry.encode()), entry);
        // Big-endian, in the documented order.
        assert_eq!(&entry.encode()[..4], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&header.encode()[INDEX_FILE_SLOT_COUNT_POS..INDEX_FILE_INDEX_COUNT_POS], &[0, 0, 0, 3]);
    }

    #[test]
    fn positions_follow_the_documented_layout() {
        // docs/FORMAT.md: `40 + 4 × hash_slot_count + 20 × entries` bytes, entry 0 included.
        assert_eq!(index_file_len(8, 16), 40 + 4 * 8 + 20 * 16);
        assert_eq!((slot_position(0), slot_position(3)), (40, 52));
        assert_eq!((entry_position(8, 0), entry_position(8, 2)), (72, 112));
        assert_eq!(slot_of(11, 4), 3);
    }

    #[test]
    fn entry_rules_judge_each_rule_alone() {
        let rules = EntryRules { begin_log_offset: 10, end_log_offset: Bound::Excluded(20) };
        let entry =
            |log_offset, time_diff_s, prev_entry| IndexFileEntry { key_hash: 1, log_offset, time_diff_s, prev_entry };
        let previous = entry(12, 5, 0);
        assert_eq!(rules.check(1, &entry(10, 0, 0), None), EntryFaults::default(), "entry 1 at the begin");
        assert_eq!(rules.check(2, &entry(12, 5, 1), Some(&previous)), EntryFaults::default(), "equal to the previous");
        let faults = |n, e| rules.check(n, &e, Some(&previous));
        assert_eq!(faults(2, entry(12, 5, 2)), EntryFaults { link_not_back: true, ..EntryFaults::default() });
        assert_eq!(faults(2, entry(20, 5, 0)), EntryFaults { past_end: true, ..EntryFaults::default() });
        assert_eq!(faults(2, entry(11, 5, 0)), EntryFaults { log_offset_goes_back: true, ..EntryFaults::default() });
        assert_eq!(faults(2, entry(12, 4, 0)), EntryFaults { time_goes_back: true, ..EntryFaults::default() });
        let below = EntryFaults { below_begin: true, log_offset_goes_back: true, ..EntryFaults::default() };
        assert_eq!(faults(2, entry(9, 5, 0)), below);
        let included = EntryRules { end_log_offset: Bound::Included(20), ..rules };
        assert_eq!(included.check(1, &entry(20, 0, 0), None), EntryFaults::default(), "the header's end is included");
        assert!(included.check(1, &entry(21, 0, 0), None).past_end);
    }
}
