//! The `.cq` format in one place (docs/FORMAT.md, "Consume queue"): the 20-byte entry
//! `[log_offset u64][size u32][tag_hash u64]`, big-endian, at the field positions `format.rs`
//! derives one from the other; its codec; the files' names (`<first queue offset>.cq`); and the
//! rules every entry inside a queue keeps ([`Entry::check`]), which recovery, checked reads and
//! `strata verify` share.

use byteorder::{BigEndian, ByteOrder};

use crate::error::Corruption;
use crate::format::{self, CQ_ENTRY_LEN, CQ_LOG_OFFSET_POS, CQ_SIZE_POS, CQ_SUFFIX, CQ_TAG_HASH_POS};

/// [`CQ_ENTRY_LEN`] as a byte count.
pub(super) const ENTRY_LEN: u64 = CQ_ENTRY_LEN as u64;

/// One consume-queue entry: where the message is in the commit log, its encoded size, its tag's
/// hash (`store::hash::tag_hash`; 0 = no tag). Never all zero: `size` is never 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The message's offset in the commit log.
    pub(crate) log_offset: u64,
    /// The record's encoded size in bytes.
    pub(crate) size: u32,
    /// FNV-1a 64 of the message's tag, 0 for none.
    pub(crate) tag_hash: u64,
}

impl Entry {
    /// Decodes an entry from the first [`CQ_ENTRY_LEN`] bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Entry {
        Entry {
            log_offset: BigEndian::read_u64(&bytes[CQ_LOG_OFFSET_POS..]),
            size: BigEndian::read_u32(&bytes[CQ_SIZE_POS..]),
            tag_hash: BigEndian::read_u64(&bytes[CQ_TAG_HASH_POS..]),
        }
    }

    /// The entry's [`CQ_ENTRY_LEN`] bytes.
    pub(crate) fn encode(&self) -> [u8; CQ_ENTRY_LEN] {
        let mut out = [0u8; CQ_ENTRY_LEN];
        BigEndian::write_u64(&mut out[CQ_LOG_OFFSET_POS..], self.log_offset);
        BigEndian::write_u32(&mut out[CQ_SIZE_POS..], self.size);
        BigEndian::write_u64(&mut out[CQ_TAG_HASH_POS..], self.tag_hash);
        out
    }

    /// An entry of all-zero bytes: never written, so it marks the unused tail of a file.
    pub(crate) fn is_zero(&self) -> bool {
        self.log_offset == 0 && self.size == 0 && self.tag_hash == 0
    }

    /// Checks the entry at `queue_offset` against the rules every entry inside a queue keeps, in
    /// the order recovery applies them, and returns the first one it breaks: it is not all zero
    /// (unused space: a queue ends at its first zero entry), its size is not 0 (a record's encoded
    /// size never is: the entry is torn), its log offset is above `previous`, the log offset of
    /// the entry before it if known (a queue's messages are in log order, each at its own offset),
    /// and it is below `log_next`, the commit log's next offset if known (the log holds the
    /// message).
    pub(crate) fn check(
        &self,
        queue_offset: u64,
        previous: Option<u64>,
        log_next: Option<u64>,
    ) -> Result<(), Corruption> {
        if self.is_zero() {
            return Err(Corruption::QueueEntryUnused { queue_offset });
        }
        if self.size == 0 {
            return Err(Corruption::QueueEntrySizeZero { queue_offset });
        }
        if let Some(previous) = previous.filter(|&p| self.log_offset <= p) {
            let found = self.log_offset;
            return Err(Corruption::QueueLogOffsetNotIncreasing { queue_offset, previous, found });
        }
        if let Some(log_next) = log_next.filter(|&next| self.log_offset >= next) {
            let log_offset = self.log_offset;
            return Err(Corruption::QueueEntryPastLogEnd { queue_offset, log_offset, log_next });
        }
        Ok(())
    }
}

/// The name of the file whose first slot is queue offset `first`: `00000000000000300000.cq`.
pub(super) fn file_name(first: u64) -> String {
    format::file_name(first, CQ_SUFFIX)
}

/// The queue offset of the first slot of the file named `name`; `None` if `name` is not a
/// queue file's name.
pub(super) fn parse_file_name(name: &str) -> Option<u64> {
    match format::parse_file_name(name) {
        Some((first, CQ_SUFFIX)) => Some(first),
        _ => None,
    }
}

/// The first entry of `entries` (queue offsets from `first`) that is all zero, of size 0, whose log offset
/// is not above the one before it (`previous` for the first), or that points at or past
/// `log_next`, with why ([`Entry::check`]).
pub(super) fn first_bad_entry(
    first: u64,
    mut previous: Option<u64>,
    entries: &[Entry],
    log_next: Option<u64>,
) -> Option<(u64, Corruption)> {
    // Not `(first..).zip(entries)`: that steps past the last entry's offset, which may be
    // `u64::MAX - 1`.
    for (entry, i) in entries.iter().zip(0u64..) {
        let queue_offset = first + i;
        if let Err(reason) = entry.check(queue_offset, previous, log_next) {
            return Some((queue_offset, reason));
        }
        previous = Some(entry.log_offset);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_layout_and_round_trip() {
        let e = Entry { log_offset: 0x0102_0304_0506_0708, size: 0x090a_0b0c, tag_hash: 0x0d0e_0f10_1112_1314 };
        let bytes = e.encode();
        assert_eq!(bytes.to_vec(), (1..=20).collect::<Vec<u8>>(), "big-endian, in field order");
        assert_eq!(Entry::decode(&bytes), e);
        assert!(!e.is_zero());
        assert!(Entry::decode(&[0; CQ_ENTRY_LEN]).is_zero());
        assert!(!Entry { log_offset: 0, size: 1, tag_hash: 0 }.is_zero(), "log offset 0 is data");
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_name(300_000), "00000000000000300000.cq");
        assert_eq!(parse_file_name(&file_name(300_000)), Some(300_000));
        assert_eq!(parse_file_name("00000000000000300000.idx"), None, "another file kind");
    }

    #[test]
    fn check_reports_the_first_rule_broken_in_recoverys_order() {
        let entry = |log_offset, size| Entry { log_offset, size, tag_hash: 0 };
        assert_eq!(entry(10, 1).check(7, Some(9), Some(11)), Ok(()));
        assert_eq!(entry(0, 1).check(0, None, Some(1)), Ok(()), "log offset 0 is data");
        assert_eq!(entry(0, 0).check(7, Some(9), Some(11)), Err(Corruption::QueueEntryUnused { queue_offset: 7 }));
        let size_first = entry(10, 0).check(7, Some(10), Some(5));
        assert_eq!(size_first, Err(Corruption::QueueEntrySizeZero { queue_offset: 7 }), "size 0 before the order");
        let not_increasing = Corruption::QueueLogOffsetNotIncreasing { queue_offset: 7, previous: 10, found: 10 };
        assert_eq!(entry(10, 1).check(7, Some(10), Some(5)), Err(not_increasing), "the order before the log's end");
        let past_end = Corruption::QueueEntryPastLogEnd { queue_offset: 7, log_offset: 10, log_next: 10 };
        assert_eq!(entry(10, 1).check(7, Some(9), Some(10)), Err(past_end));
        assert_eq!(entry(10, 1).check(7, None, None), Ok(()), "no previous entry, no log end known");
    }

    #[test]
    fn first_bad_entry_carries_the_previous_log_offset_along_the_run() {
        let entries = [entry_at(5), entry_at(15), entry_at(15), entry_at(25)];
        let found = first_bad_entry(100, Some(1), &entries, None);
        let reason = Corruption::QueueLogOffsetNotIncreasing { queue_offset: 102, previous: 15, found: 15 };
        assert_eq!(found, Some((102, reason)));
        assert_eq!(first_bad_entry(100, Some(5), &entries[..1], None).map(|(at, _)| at), Some(100), "previous");
        assert_eq!(first_bad_entry(u64::MAX - 2, None, &entries[..2], None), None, "no overflow at the last offsets");
    }

    fn entry_at(log_offset: u64) -> Entry {
        Entry { log_offset, size: 1, tag_hash: 0 }
    }
}
