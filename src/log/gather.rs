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
    /// that it holds; `bytes_hint` is about the bytes of their batches), `None` for each the log does not hold (below its start, past its visible
    /// end, removed by compaction). Damage is `Error::Corrupt`. Not for a read-only log (whose view
    /// of the files may need taking again): its reads go through `LogReader`.
    pub(crate) fn gather(&self, offsets: &[u64], bytes_hint: usize) -> Result<Vec<Option<RecordView>>> {
        debug_assert!(!self.is_read_only(), "a read-only log is read through LogReader");
        'attempt: for _ in 0..LOCATE_ATTEMPTS {
            let epoch = self.durability.truncations();
            let (start, upper) = (self.offsets.start(), self.offsets.visible());
            let mut chunk = Vec::with_capacity(bytes_hint);
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
