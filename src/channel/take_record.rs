//! The take record (docs/FORMAT.md "Channel records"): the offsets a commit took, as ranges, so
//! takers committing out of order are each recorded exactly. Key `strata.take`, value
//! `[version u8 = 1]` then `[start u64][end u64]` per range (big-endian, `end` exclusive, ranges
//! increasing and not touching).

use crate::format::{CHANNEL_TAKE_HEADER_LEN, CHANNEL_TAKE_KEY, CHANNEL_TAKE_RANGE_LEN, CHANNEL_TAKE_VERSION};
use crate::log::Record;

use super::event::record_len_at;

/// The offsets `taken` (in any order, no repeats) as increasing ranges `[start, end)`.
pub(crate) fn ranges(taken: impl IntoIterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut offsets: Vec<u64> = taken.into_iter().collect();
    offsets.sort_unstable();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for offset in offsets {
        match ranges.last_mut() {
            Some((_, end)) if *end == offset => *end += 1,
            _ => ranges.push((offset, offset + 1)),
        }
    }
    ranges
}

/// The take record's value for `ranges`.
pub(crate) fn encode(ranges: &[(u64, u64)]) -> Vec<u8> {
    let mut value = Vec::with_capacity(value_len(ranges.len()));
    value.push(CHANNEL_TAKE_VERSION);
    for (start, end) in ranges {
        debug_assert!(start < end, "a taken range is not empty");
        value.extend_from_slice(&start.to_be_bytes());
        value.extend_from_slice(&end.to_be_bytes());
    }
    value
}

/// The ranges a take record's value lists; `None` if it is not one this version writes.
pub(crate) fn decode(value: &[u8]) -> Option<Vec<(u64, u64)>> {
    let (&version, body) = value.split_first()?;
    if version != CHANNEL_TAKE_VERSION || !body.len().is_multiple_of(CHANNEL_TAKE_RANGE_LEN) {
        return None;
    }
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(body.len() / CHANNEL_TAKE_RANGE_LEN);
    for chunk in body.chunks_exact(CHANNEL_TAKE_RANGE_LEN) {
        let (start, end) = chunk.split_at(8);
        let start = u64::from_be_bytes(start.try_into().ok()?);
        let end = u64::from_be_bytes(end.try_into().ok()?);
        if start >= end || ranges.last().is_some_and(|&(_, last)| start <= last) {
            return None;
        }
        ranges.push((start, end));
    }
    Some(ranges)
}

/// The take record for an encoded `value`.
pub(crate) fn record(value: &[u8]) -> Record<'_> {
    Record::new(value).with_key(CHANNEL_TAKE_KEY)
}

/// Whether a record key is the take record's.
pub(crate) fn is_take_key(key: &[u8]) -> bool {
    key == CHANNEL_TAKE_KEY
}

/// The most bytes a take record of `takes` taken offsets takes at `index` of a batch: one range
/// per offset, the most they can need.
pub(crate) fn max_record_len(takes: usize, index: usize) -> usize {
    let value_len = value_len(takes);
    let empty = Record::new(&[]).with_key(CHANNEL_TAKE_KEY).encoded_len();
    // The value's length varint and the record's length prefix grow with the value: each by
    // at most 4 bytes (a varint of up to 5).
    record_len_at(empty + value_len + 8, index)
}

fn value_len(ranges: usize) -> usize {
    CHANNEL_TAKE_HEADER_LEN + ranges * CHANNEL_TAKE_RANGE_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_taken_out_of_order_become_increasing_ranges() {
        assert_eq!(ranges([7, 3, 4, 9, 8, 5, 20]), [(3, 6), (7, 10), (20, 21)]);
        assert_eq!(ranges([]), []);
        assert_eq!(ranges([0]), [(0, 1)]);
    }

    #[test]
    fn ranges_round_trip_and_bad_values_are_refused() {
        for ranges in [vec![], vec![(0, 1)], vec![(3, 6), (7, 10), (u64::MAX - 1, u64::MAX)]] {
            let value = encode(&ranges);
            assert_eq!(value.len(), value_len(ranges.len()));
            assert_eq!(decode(&value), Some(ranges));
        }
        assert_eq!(decode(&[]), None, "no version");
        assert_eq!(decode(&[2]), None, "another version");
        assert_eq!(decode(&encode(&[(1, 2)])[..9]), None, "a range cut short");
        let mut empty = vec![CHANNEL_TAKE_VERSION];
        empty.extend_from_slice(&[2u64.to_be_bytes(), 2u64.to_be_bytes()].concat());
        assert_eq!(decode(&empty), None, "an empty range");
        let mut overlapping = encode(&[(1, 5)]);
        overlapping.extend_from_slice(&encode(&[(4, 6)])[1..]);
        assert_eq!(decode(&overlapping), None, "ranges overlap");
    }

    #[test]
    fn the_bound_covers_the_record_of_every_range_count() {
        for takes in [1, 2, 100, 5000] {
            let value = encode(&(0..takes as u64).map(|i| (2 * i, 2 * i + 1)).collect::<Vec<_>>());
            for index in [0, 1, 100, 10_000] {
                let exact = record(&value).encoded_len() + zigzag_extra(index);
                assert!(max_record_len(takes, index) >= exact, "{takes} takes at {index}");
                assert!(max_record_len(takes, index) <= exact + 12, "{takes} takes at {index}: not far above");
            }
        }
    }

    fn zigzag_extra(index: usize) -> usize {
        ((64 - ((index as u64) << 1).leading_zeros() as usize).div_ceil(7).max(1)) - 1
    }
}
