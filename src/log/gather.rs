//! Reading the records at given offsets, each straight from the batch that holds it (docs/DESIGN.md
//! §8, "gathered reads"): what a consume queue asks of the commit log, whose messages for one
//! queue lie between other queues' messages. Only the batches holding the offsets are copied and
//! verified, found through the segments' position tables (or their indexes), all into one
//! chunk that the returned records share: one allocation per call, not one per batch.
//!
//! Every batch is verified as a sequential read verifies it (CRC, structure, offsets from the
//! one it was found at); a truncation during the call makes it start again (the bytes copied may
//! be of records it cut).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::batch::{self, RawRecord};
use crate::log::locate::LOCATE_ATTEMPTS;
use crate::log::reader::RecordView;
use crate::log::state::LogState;

/// Bytes read at first for a batch (a larger one is read again whole): most messages' batches.
const FIRST_READ_BYTES: u64 = 1024;

/// The most bytes reserved at once from the caller's hint: it comes from sizes in derived files
/// (a consume queue's entries), which may be damaged; the chunk grows past it as batches come.
const MAX_RESERVED_BYTES: usize = 1 << 20;

/// A record found: where its batch starts in the chunk, and the record decoded from it.
struct Found {
    offset: u64,
    batch_start: usize,
    raw: RawRecord,
    /// The record's bytes in its batch, its length prefix included.
    encoded_len: u32,
}

/// The batch the last offset was found in: the next offsets may be in it too.
struct Current {
    base: u64,
    last: u64,
    start: usize,
    records: Vec<RawRecord>,
}

impl Current {
    /// The record at `offset` of this batch, if it holds one (compaction removes some).
    fn find(&self, offset: u64) -> Option<Found> {
        let delta = u32::try_from(offset.checked_sub(self.base)?).ok()?;
        let at = self.records.binary_search_by_key(&delta, |r| r.offset_delta).ok()?;
        let raw = self.records[at];
        let start = match at.checked_sub(1) {
            Some(before) => self.records[before].end(),
            None => crate::format::BATCH_HEADER_LEN,
        };
        let encoded_len = (raw.end() - start) as u32;
        Some(Found { offset, batch_start: self.start, raw, encoded_len })
    }
}

impl LogState {
    /// The records at `offsets` (best ascending: a batch is copied once for the offsets in a row
    /// that it holds; `bytes_hint` is about the bytes of their batches, reserved up to 1 MiB),
    /// `None` for each the log does not hold (below its start, past its visible end, removed by
    /// compaction). Damage is `Error::Corrupt`. Not for a read-only log (whose view of the files
    /// may need taking again): its reads go through `LogReader`.
    pub(crate) fn gather(&self, offsets: &[u64], bytes_hint: usize) -> Result<Vec<Option<RecordView>>> {
        debug_assert!(!self.is_read_only(), "a read-only log is read through LogReader");
        'attempt: for _ in 0..LOCATE_ATTEMPTS {
            let epoch = self.durability.truncations();
            let (start, upper) = (self.offsets.start(), self.offsets.visible());
            let mut chunk = Vec::with_capacity(bytes_hint.min(MAX_RESERVED_BYTES));
            let mut found = Vec::with_capacity(offsets.len());
            let mut current: Option<Current> = None;
            for &offset in offsets {
                if offset < start || offset >= upper {
                    found.push(None);
                    continue;
                }
                if let Some(batch) = current.as_ref().filter(|b| (b.base..=b.last).contains(&offset)) {
                    found.push(batch.find(offset));
                    continue;
                }
                let batch_start = chunk.len();
                // Straight to the batch where the segment's position table says it is (one read);
                // else located through the index, as any read is.
                let noted = self.segments.floor(offset).and_then(|segment| {
                    let at = segment.copy_noted_batch(offset, FIRST_READ_BYTES, &mut chunk)?;
                    Some((segment, at))
                });
                let (segment, at) = match noted {
                    Some(noted) => noted,
                    None => {
                        let (segment, at) = match self.locate(offset, upper, epoch) {
                            Ok(Some(located)) => located,
                            Ok(None) | Err(Error::OffsetOutOfRange { .. }) => {
                                found.push(None);
                                continue;
                            }
                            Err(Error::Truncated { .. }) => continue 'attempt,
                            Err(error) => return Err(error),
                        };
                        let Some(copied) = segment.copy_batch(at, FIRST_READ_BYTES, &mut chunk)? else {
                            continue 'attempt; // retired under us: look again
                        };
                        if copied == 0 {
                            found.push(None);
                            continue;
                        }
                        (segment, at)
                    }
                };
                self.check_continuity(&segment)?;
                let mut records = current.take().map(|c| c.records).unwrap_or_default();
                records.clear();
                let summary = batch::validate_into(&chunk[batch_start..], Some(at.expected), &mut records)
                    .map_err(|reason| Error::corrupt(segment.log_path(), at.position, reason))?;
                let header = summary.header;
                let batch =
                    Current { base: header.base_offset, last: header.last_offset(), start: batch_start, records };
                // The batch found holds `offset` or, after compaction, is the first after it.
                found.push(batch.find(offset));
                current = Some(batch);
            }
            if self.durability.truncations() != epoch {
                continue; // a truncation finished meanwhile: what was copied may be past its cut
            }
            let chunk = Arc::new(chunk);
            return Ok(found
                .into_iter()
                .map(|f| f.map(|f| RecordView::in_chunk(&chunk, f.offset, &f.raw, f.batch_start, f.encoded_len)))
                .collect());
        }
        Err(Error::Unsettled { attempts: LOCATE_ATTEMPTS })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{FlushPolicy, LogConfig};
    use crate::error::Error;
    use crate::log::{Log, Record};

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            index_bytes: 8 * 32,
            index_interval_bytes: 200,
            flush_policy: FlushPolicy::Never,
            ..LogConfig::default()
        }
    }

    fn value(offset: u64, round: u8) -> Vec<u8> {
        format!("record {offset} of round {round} {}", "x".repeat((offset % 7) as usize)).into_bytes()
    }

    /// Appends `count` records, alone or in batches of three, with values of `round`.
    fn fill(log: &Log, count: u64, round: u8) {
        let mut offset = log.next_offset();
        while offset < count {
            let values: Vec<Vec<u8>> = (offset..count.min(offset + 1 + offset % 3)).map(|o| value(o, round)).collect();
            let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
            log.append(&records).expect("append");
            offset = log.next_offset();
        }
    }

    fn gathered(log: &Log, offsets: &[u64]) -> Vec<Option<Vec<u8>>> {
        let records = log.gather(offsets, 0).expect("gather");
        assert_eq!(records.len(), offsets.len());
        for (record, &offset) in records.iter().zip(offsets) {
            if let Some(record) = record {
                assert_eq!(record.offset(), offset);
            }
        }
        records.into_iter().map(|r| r.map(|r| r.value().unwrap_or_default().to_vec())).collect()
    }

    #[test]
    fn every_fourth_record_across_segments_old_and_new() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 600, 0);
        assert!(log.segment_count() > 5, "older segments have no position table");
        for queue in 0..4 {
            let offsets: Vec<u64> = (queue..600).step_by(4).collect();
            let expected: Vec<Option<Vec<u8>>> = offsets.iter().map(|&o| Some(value(o, 0))).collect();
            assert_eq!(gathered(&log, &offsets), expected, "queue {queue}");
        }
        // Out of order and repeated, and past the end.
        assert_eq!(
            gathered(&log, &[5, 2, 5, 599, 600, 10_000]),
            [5, 2, 5, 599].map(|o| Some(value(o, 0))).into_iter().chain([None, None]).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_reopened_log_is_read_through_its_indexes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 300, 0);
        log.close().expect("close");
        let log = Log::open(dir.path(), config()).expect("reopen");
        fill(&log, 400, 0);
        let offsets: Vec<u64> = (1..400).step_by(3).collect();
        let expected: Vec<Option<Vec<u8>>> = offsets.iter().map(|&o| Some(value(o, 0))).collect();
        assert_eq!(gathered(&log, &offsets), expected);
    }

    #[test]
    fn after_a_truncation_the_new_records_and_none_past_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 200, 0);
        let before: Vec<u64> = (150..200).collect();
        assert!(gathered(&log, &before).iter().all(Option::is_some));
        log.truncate_to(150).expect("truncate");
        assert!(gathered(&log, &before).iter().all(Option::is_none), "cut: not held");
        fill(&log, 190, 1);
        let expected: Vec<Option<Vec<u8>>> = before.iter().map(|&o| (o < 190).then(|| value(o, 1))).collect();
        assert_eq!(gathered(&log, &before), expected, "the records appended after the cut");
        assert_eq!(gathered(&log, &[149]), [Some(value(149, 0))]);
    }

    #[test]
    fn below_the_start_is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 300, 0);
        let start = log.delete_records_before(120).expect("delete");
        assert!(start > 0);
        let records = gathered(&log, &[0, start - 1, start, 299]);
        assert_eq!(records, [None, None, Some(value(start, 0)), Some(value(299, 0))]);
    }

    #[test]
    fn a_damaged_batch_is_corrupt_not_returned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 40, 0);
        let target = log.gather(&[30], 0).expect("gather").pop().flatten().expect("held");
        let needle = value(30, 0);
        drop(target);
        let path = dir.path().join(crate::format::file_name(0, crate::format::LOG_SUFFIX));
        let mut bytes = std::fs::read(&path).expect("read");
        let at = bytes.windows(needle.len()).position(|w| w == needle.as_slice()).expect("the value is in the file");
        bytes[at] ^= 0x55;
        std::fs::write(&path, &bytes).expect("write");
        // Through the position table (the mapping sees the write) and through the index.
        assert!(matches!(log.gather(&[30], 0), Err(Error::Corrupt { .. })));
        log.close().expect("close");
        let log =
            Log::open(dir.path(), config()).expect("reopen (the damage is below the recovery point of a clean log)");
        assert!(matches!(log.gather(&[30], 0), Err(Error::Corrupt { .. })));
    }

    /// Whether a read of `offset` goes straight to its batch through its segment's position table.
    fn noted(log: &Log, offset: u64) -> bool {
        let segment = log.shared.segments.floor(offset).expect("a segment");
        segment.copy_noted_batch(offset, 1024, &mut Vec::new()).is_some()
    }

    /// The active segment keeps a position table for what this process appends to it, also when
    /// it was reopened (a restart) or cut (a truncation), not only when it was created.
    #[test]
    fn an_active_segment_reopened_or_cut_notes_its_new_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), config()).expect("open");
        fill(&log, 300, 0);
        assert!(noted(&log, 299), "appended to a segment created by this process");
        log.close().expect("close");
        let log = Log::open(dir.path(), config()).expect("reopen");
        let segments = log.segment_count();
        fill(&log, 303, 0);
        assert_eq!(log.segment_count(), segments, "no roll: the reopened segment takes them");
        assert!(!noted(&log, 299), "appended before the reopen: searched in the index");
        assert!(noted(&log, 302), "appended to the reopened segment");
        log.truncate_to(301).expect("truncate");
        fill(&log, 304, 1);
        assert_eq!(log.segment_count(), segments, "no roll: the cut segment takes them");
        assert!(noted(&log, 303), "appended to the cut segment");
        assert_eq!(gathered(&log, &[299, 302, 303]), [299, 302, 303].map(|o| Some(value(o, u8::from(o >= 301)))));
    }

    /// A batch whose base offset was damaged (it is not under the CRC, so only its neighbours tell)
    /// where the position table points is `Error::Corrupt`, from a gather and from a read, as
    /// the index lookup's walk finds it: never a panic (not even a debug assertion), never a
    /// record returned under another record's offset.
    #[test]
    #[cfg(unix)]
    fn a_damaged_base_offset_where_a_position_points_is_corrupt() {
        use std::os::unix::fs::FileExt;

        for (shift, name) in [(1_000, "far off"), (1, "still covering the offset read")] {
            let dir = tempfile::tempdir().expect("tempdir");
            let log = Log::open(dir.path(), config()).expect("open");
            fill(&log, 40, 0);
            let path = dir.path().join(crate::format::file_name(0, crate::format::LOG_SUFFIX));
            let bytes = std::fs::read(&path).expect("read");
            // The first batch of at least two records from offset 20 on (`fill`: 1 + offset % 3).
            let mut at = 0;
            let header = loop {
                let header = crate::log::batch::BatchHeader::decode_from(&bytes[at..]).expect("a header");
                if header.base_offset >= 20 && header.record_count >= 2 {
                    break header;
                }
                at += header.size() as usize;
            };
            let target = header.base_offset + 1;
            assert_eq!(gathered(&log, &[target]), [Some(value(target, 0))], "{name}: before the damage");
            let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open the .log");
            let damaged = header.base_offset + shift;
            file.write_all_at(&damaged.to_be_bytes(), (at + crate::format::BASE_OFFSET_POS) as u64).expect("damage");
            let gathered =
                log.gather(&[target], 0).map(|r| r.into_iter().flatten().map(|r| r.offset()).collect::<Vec<_>>());
            assert!(matches!(gathered, Err(Error::Corrupt { .. })), "{name}: gathered {gathered:?}");
            let read = log.read(target, 1 << 16).and_then(|mut records| records.next().transpose());
            let read = read.map(|r| r.map(|r| (r.offset(), r.value().map(<[u8]>::to_vec))));
            assert!(matches!(read, Err(Error::Corrupt { .. })), "{name}: read {read:?}");
        }
    }
}
