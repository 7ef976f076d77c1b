//! Rewriting one batch for the cleaner (docs/DESIGN.md §10): the kept records' bytes are copied
//! verbatim (the batch keeps its base offset, base timestamp and last offset delta, so every
//! record's deltas stay right), bit 4 is set and the CRC recomputed, also for a batch copied whole:
//! a normal batch after a dropped one would break the expected-offset rule.

use crate::error::Corruption;
use crate::format::{ATTR_CLEANER, BATCH_HEADER_LEN, LOG_OVERHEAD};
use crate::log::batch::{self, BatchHeader, RawRecord, RecordIter};

/// What a rewrite kept and dropped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rewritten {
    pub kept: u64,
    pub dropped: u64,
    /// Whether a batch was written (an emptied batch is not, unless asked to keep it).
    pub written: bool,
}

/// Appends to `out` the cleaned copy of the valid batch `batch`, keeping the records for which
/// `keep(offset, record)` holds. An emptied batch is written (with no records) only if
/// `keep_empty`: a segment's last batch, so the segment still ends where it did.
pub(crate) fn rewrite_batch(
    batch: &[u8],
    header: &BatchHeader,
    keep_empty: bool,
    mut keep: impl FnMut(u64, &RawRecord) -> bool,
    out: &mut Vec<u8>,
) -> Result<Rewritten, Corruption> {
    let start = out.len();
    out.resize(start + BATCH_HEADER_LEN, 0);
    let mut records = RecordIter::new(batch, header);
    let mut result = Rewritten::default();
    let mut max_timestamp: Option<i64> = None;
    loop {
        let from = records.position();
        let Some(record) = records.next() else { break };
        let record = record?;
        let offset = header.base_offset + u64::from(record.offset_delta);
        if keep(offset, &record) {
            out.extend_from_slice(&batch[from..records.position()]);
            max_timestamp = Some(max_timestamp.map_or(record.timestamp_ms, |m| m.max(record.timestamp_ms)));
            result.kept += 1;
        } else {
            result.dropped += 1;
        }
    }
    if result.kept == 0 && !keep_empty {
        out.truncate(start);
        return Ok(result);
    }
    let cleaned = BatchHeader {
        batch_length: (out.len() - start - LOG_OVERHEAD) as u32,
        crc: 0,
        attributes: header.attributes | ATTR_CLEANER,
        // An emptied batch keeps the old maximum: the segment's age for time retention is unchanged.
        max_timestamp: max_timestamp.unwrap_or(header.max_timestamp),
        record_count: result.kept as u32,
        ..*header
    };
    cleaned.encode_into(&mut out[start..]);
    batch::write_crc(&mut out[start..]);
    result.written = true;
    Ok(result)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::log::batch::{BatchEncoder, Record};

    fn batch(base: u64) -> Vec<u8> {
        let records = [Record::new(b"a").with_key(b"k1"), Record::new(b"b").with_key(b"k2"), Record::tombstone(b"k3")];
        BatchEncoder::default().encode(base, &records, &[10, 20, 30], 0).to_vec()
    }

    #[test]
    fn kept_records_are_copied_with_their_offsets_and_the_batch_validates() {
        let bytes = batch(100);
        let header = BatchHeader::decode_from(&bytes).unwrap();
        let mut out = Vec::new();
        let done = rewrite_batch(&bytes, &header, false, |offset, _| offset != 101, &mut out).unwrap();
        assert_eq!(done, Rewritten { kept: 2, dropped: 1, written: true });
        let summary = batch::validate(&out, Some(100)).unwrap();
        assert!(summary.header.is_cleaner());
        assert_eq!(
            (summary.header.record_count, summary.header.last_offset(), summary.header.max_timestamp),
            (2, 102, 30)
        );
        let offsets: Vec<u64> =
            RecordIter::new(&out, &summary.header).map(|r| 100 + u64::from(r.unwrap().offset_delta)).collect();
        assert_eq!(offsets, [100, 102]);
    }

    #[test]
    fn an_emptied_batch_is_dropped_or_kept_empty() {
        let bytes = batch(7);
        let header = BatchHeader::decode_from(&bytes).unwrap();
        let mut out = vec![1, 2, 3];
        let dropped = rewrite_batch(&bytes, &header, false, |_, _| false, &mut out).unwrap();
        assert_eq!((dropped.written, out.len()), (false, 3));
        let kept = rewrite_batch(&bytes, &header, true, |_, _| false, &mut out).unwrap();
        assert!(kept.written);
        let summary = batch::validate(&out[3..], Some(7)).unwrap();
        assert_eq!((summary.header.record_count, summary.header.next_offset()), (0, 10));
    }
}
