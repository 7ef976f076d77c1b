//! `Log::read_batches`: reads without a copy. Each batch is verified where it lies (in the
//! segment's mapping, or the `pread` buffer under `ReadPath::Pread`), under the file's read guard,
//! and handed to the caller's visitor as a [`BatchRef`] whose records borrow those bytes. The
//! records are decoded once, by the verification, into a reused vector of spans; a [`RecordRef`]
//! is only that span read back.
//!
//! The guard is held for one window of batches (`WINDOW` bytes) while the visitor runs on them:
//! a truncation or a retention deletion of that segment waits for it (as for any reader), a seal
//! does not (`MappedFile::seal` defers its unmapping to the last reader).

use std::fmt;
use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::format::BATCH_HEADER_LEN;
use crate::log::Log;
use crate::log::batch::{self, BatchHeader, Header, RawRecord};
use crate::log::locate::LOCATE_ATTEMPTS;
use crate::log::reader::{batch_header_accessors, catch_up_truncations, refresh_for_retry};
use crate::log::state::LogState;
use crate::log::walk::Stop;

/// Bytes of batches visited under one hold of a segment's read guard (a larger batch alone).
const WINDOW: u64 = 256 << 10;

/// One verified batch of [`Log::read_batches`], in place: its header's fields, its bytes as
/// stored, and the records of it the read returns.
#[derive(Clone, Copy)]
pub struct BatchRef<'a> {
    header: BatchHeader,
    bytes: &'a [u8],
    /// The decoded records the read returns (offsets in its range), in order.
    records: &'a [RawRecord],
    /// Where the first of `records` starts in `bytes`.
    first_start: usize,
}

impl<'a> BatchRef<'a> {
    batch_header_accessors!();

    /// The batch exactly as stored (header, CRC and every record), verified: what a
    /// replica appends with [`Log::append_batch`] (which gives it offsets of its own).
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The records of the batch the read returns, in offset order: those in its range (a read
    /// that starts inside the batch skips the records before its offset).
    pub fn records(&self) -> RecordRefs<'a> {
        RecordRefs {
            bytes: self.bytes,
            records: self.records.iter(),
            base: self.header.base_offset,
            start: self.first_start,
        }
    }
}

impl fmt::Debug for BatchRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchRef")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("record_count", &self.record_count())
            .field("attributes", &self.attributes())
            .field("encoded_len", &self.bytes.len())
            .field("records", &self.records.len())
            .finish()
    }
}

/// The records of a [`BatchRef`].
#[derive(Clone)]
pub struct RecordRefs<'a> {
    bytes: &'a [u8],
    records: std::slice::Iter<'a, RawRecord>,
    base: u64,
    /// Where the next record starts in the batch.
    start: usize,
}

impl<'a> Iterator for RecordRefs<'a> {
    type Item = RecordRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<RecordRef<'a>> {
        let raw = self.records.next()?;
        let (start, end) = (self.start, raw.end());
        self.start = end;
        Some(RecordRef {
            offset: self.base + u64::from(raw.offset_delta),
            timestamp_ms: raw.timestamp_ms,
            key: raw.key.get(self.bytes),
            value: raw.value.get(self.bytes),
            headers: raw.headers.get(self.bytes).unwrap_or_default(),
            header_count: raw.header_count,
            encoded_len: (end - start) as u32,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.records.size_hint()
    }
}

impl ExactSizeIterator for RecordRefs<'_> {}

/// One record of a [`BatchRef`], borrowing the log's bytes: valid inside the visitor only (copy
/// what you keep, or use [`Log::read`], whose records are owned).
#[derive(Clone, Copy)]
pub struct RecordRef<'a> {
    offset: u64,
    timestamp_ms: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [u8],
    header_count: u32,
    encoded_len: u32,
}

impl<'a> RecordRef<'a> {
    /// The record's offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The record's timestamp (ms since the Unix epoch).
    pub fn timestamp_ms(&self) -> i64 {
        self.timestamp_ms
    }

    /// The key, if any.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The value (`None` for a tombstone).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// The headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = Header<'a>> + use<'a> {
        batch::decode_headers(self.headers, self.header_count)
    }

    /// Bytes the record takes in its batch, its length prefix included (as
    /// [`RecordView::encoded_len`](crate::RecordView::encoded_len)).
    pub fn encoded_len(&self) -> usize {
        self.encoded_len as usize
    }
}

impl fmt::Debug for RecordRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordRef")
            .field("offset", &self.offset)
            .field("timestamp_ms", &self.timestamp_ms)
            .field("key", &self.key)
            .field("value_len", &self.value.map(<[u8]>::len))
            .field("header_count", &self.header_count)
            .field("encoded_len", &self.encoded_len)
            .finish()
    }
}

impl Log {
    /// Reads batches in place, without copying them: from `offset` (in `[start_offset,
    /// next_offset]`, as for [`Log::read`]), each batch that has records at or after it and below
    /// the visible end is verified (CRC and every record) and passed to `visit` as a [`BatchRef`]
    /// whose records borrow the log's bytes, until `max_bytes` of batches were visited (at least
    /// one batch always is), the visible end the read started with, or `visit` breaks. Returns
    /// the offset to continue at: after the last batch visited.
    ///
    /// The same bounds, checks and errors as [`Log::read`], at a fraction of its cost per record
    /// (no copy, no allocation, no reference count): the read for consumers that look at each
    /// record once. An error met after some batches were visited (damage, a truncation) is not
    /// returned by this call: it returns where to continue, and the next call, which starts at the
    /// error, returns it. Records to keep are copied out, or read with [`Log::read`].
    ///
    /// `visit` runs while the segment's read guard is held, so it should be short and must not
    /// call into the log: a truncation, retention deletion or close of that segment waits for it
    /// (a nested read of the same segment behind such a waiter would deadlock), and so does an
    /// append that must first grow a segment opened on a full disk. Other appends, seals and
    /// fsyncs never wait for it.
    ///
    /// ```
    /// # fn main() -> strata_log::Result<()> {
    /// use std::ops::ControlFlow;
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"a"), Record::new(b"bb")])?;
    /// log.append(&[Record::new(b"ccc")])?;
    /// let mut bytes = 0;
    /// let next = log.read_batches(1, 1 << 20, |batch| {
    ///     for record in batch.records() {
    ///         bytes += record.value().map_or(0, <[u8]>::len);
    ///     }
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!((bytes, next), (5, 3));
    /// # Ok(()) }
    /// ```
    pub fn read_batches(
        &self,
        offset: u64,
        max_bytes: usize,
        mut visit: impl FnMut(BatchRef<'_>) -> ControlFlow<()>,
    ) -> Result<u64> {
        let (epoch, end) = self.read_bounds(offset)?;
        let mut read = InPlaceRead::new(&self.shared, offset, end, max_bytes, epoch);
        match read.run(&mut visit) {
            // Met again, and returned, by a read from the offset returned (after every batch
            // visited): a caller that continues there never sees a batch twice.
            Err(_) if read.visited() > 0 => Ok(read.next_offset()),
            Err(error) => Err(error),
            Ok(()) => Ok(read.next_offset()),
        }
    }
}

/// Why a walk of one segment stopped early.
enum Halt {
    /// Done: the budget is used, the upper bound reached, or the visitor broke.
    Done,
    /// A truncation happened: catch up with it and locate again.
    Truncated,
    /// A batch failed its verification.
    Failed(Error),
}

/// What to do after one segment's walk.
enum Next {
    /// The read is complete.
    Done,
    /// The cursor moved: go on in the next segment.
    Moved,
    /// Something changed under the read (a truncation, a deleted or replaced segment): look
    /// again, a bounded number of times.
    Retry,
}

/// The state of one in-place read ([`Log::read_batches`], [`Cursor::read_batches`](crate::Cursor::read_batches)).
pub(crate) struct InPlaceRead<'a> {
    log: &'a LogState,
    /// The next offset to return; records below it are skipped.
    cursor: u64,
    /// Offsets at or past this are never returned.
    upper: u64,
    /// Bytes of batches that may still be visited.
    budget: u64,
    /// Whether a batch has been visited (until then one is taken whatever its size).
    started: bool,
    epoch: u64,
    cut_short: bool,
    refreshes: u32,
    /// Batches passed to the visitor.
    visited: usize,
}

impl<'a> InPlaceRead<'a> {
    /// A read of `[offset, upper)`; `epoch` is the log's truncation count read before `upper`.
    pub(crate) fn new(log: &'a LogState, offset: u64, upper: u64, max_bytes: usize, epoch: u64) -> InPlaceRead<'a> {
        InPlaceRead {
            log,
            cursor: offset,
            upper,
            budget: max_bytes as u64,
            started: false,
            epoch,
            cut_short: false,
            refreshes: 0,
            visited: 0,
        }
    }

    /// Where to continue: after the last batch visited (and offsets the cleaner removed).
    pub(crate) fn next_offset(&self) -> u64 {
        self.cursor
    }

    /// Batches passed to the visitor so far.
    pub(crate) fn visited(&self) -> usize {
        self.visited
    }

    /// Visits batches until the read is complete, `visit` breaks, or an error (after which
    /// [`InPlaceRead::next_offset`] is where the error is, past every batch visited).
    pub(crate) fn run(&mut self, visit: &mut dyn FnMut(BatchRef<'_>) -> ControlFlow<()>) -> Result<()> {
        let mut records = Vec::new();
        let mut retries = 0;
        loop {
            match self.step(visit, &mut records) {
                Ok(Next::Moved) => retries = 0,
                Ok(Next::Retry) => {
                    retries += 1;
                    if retries >= LOCATE_ATTEMPTS {
                        return Err(Error::Unsettled { attempts: LOCATE_ATTEMPTS });
                    }
                }
                Ok(Next::Done) => return Ok(()),
                Err(error) => {
                    let Some(error) = self.log.judge_read_error(error) else { return Ok(()) };
                    // A read-only log takes its view again, and the read resumes at the cursor.
                    if !refresh_for_retry(self.log, &error, &mut self.refreshes, &mut self.upper) {
                        return Err(error);
                    }
                }
            }
        }
    }

    /// Visits the batches of the segment holding the cursor.
    fn step(
        &mut self,
        visit: &mut dyn FnMut(BatchRef<'_>) -> ControlFlow<()>,
        records: &mut Vec<RawRecord>,
    ) -> Result<Next> {
        catch_up_truncations(self.log, self.cursor, &mut self.epoch, &mut self.upper, &mut self.cut_short)?;
        if self.cursor >= self.upper && self.cut_short {
            return Err(Error::Truncated { next_offset: self.log.offsets.next() });
        }
        if self.cursor >= self.upper || (self.started && self.budget == 0) {
            return Ok(Next::Done);
        }
        let (segment, at) = match self.log.locate(self.cursor, self.upper, self.epoch) {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(Next::Done),
            Err(Error::Truncated { .. }) => return Ok(Next::Retry),
            Err(e) => return Err(e),
        };
        let before = self.cursor;
        let end = segment.walk_in(at, WINDOW, |position, header, bytes| {
            let size = header.size();
            if header.base_offset >= self.upper || (self.started && size > self.budget) {
                return ControlFlow::Break(Halt::Done);
            }
            // A truncation that finished since the read began may have cut what follows: the bytes
            // here are still the ones that were visible (a cut waits for this guard), but what
            // the read may return is decided again.
            if self.log.durability.truncations() != self.epoch {
                return ControlFlow::Break(Halt::Truncated);
            }
            #[cfg(feature = "failpoints")]
            fail::fail_point!("read_holding_segment");
            records.clear();
            if let Err(reason) = batch::validate_into(bytes, Some(position.expected), records) {
                return ControlFlow::Break(Halt::Failed(segment.corrupt(position.position, reason)));
            }
            self.budget = self.budget.saturating_sub(size);
            let base = header.base_offset;
            let first = records.partition_point(|r| base + u64::from(r.offset_delta) < self.cursor);
            let last = records.partition_point(|r| base + u64::from(r.offset_delta) < self.upper);
            self.cursor = self.cursor.max(header.next_offset().min(self.upper));
            if first < last {
                self.started = true;
                let first_start = first.checked_sub(1).map_or(BATCH_HEADER_LEN, |before| records[before].end());
                let batch = BatchRef { header: *header, bytes, records: &records[first..last], first_start };
                self.visited += 1;
                if visit(batch).is_break() {
                    return ControlFlow::Break(Halt::Done);
                }
            }
            ControlFlow::Continue(())
        });
        let end = match end? {
            Some(end) => end,
            // The segment was deleted or replaced under the read: locate again.
            None => return Ok(if self.cursor > before { Next::Moved } else { Next::Retry }),
        };
        match end.stop {
            Stop::End => {
                // This segment's data is used up: continue in the next one.
                self.cursor = self.cursor.max(end.at.expected.min(self.upper));
                Ok(if self.cursor > before { Next::Moved } else { Next::Retry })
            }
            Stop::Break(Halt::Done) => Ok(Next::Done),
            // Retries are bounded per position: a read that moved on starts a fresh count.
            Stop::Break(Halt::Truncated) if self.cursor > before => Ok(Next::Moved),
            Stop::Break(Halt::Truncated) => Ok(Next::Retry),
            Stop::Break(Halt::Failed(error)) => Err(error),
            Stop::Invalid(reason) => Err(segment.corrupt(end.at.position, reason)),
        }
    }
}
