//! Reading records: `LogReader` copies whole batches out of a segment under its read guard, verifies
//! each (CRC, structure, expected offset) outside the guard, and hands out `RecordView`s that share
//! the copied chunk. The appender is never blocked, and a reader never sees bytes that can change.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::BATCH_HEADER_LEN;
use crate::log::batch::{self, BatchHeader, Header, RawRecord, Span};
use crate::log::segment::LogSegment;
use crate::log::state::LogState;
use crate::log::walk::BatchPos;

/// How often a read of a read-only log takes its view of the files again after an error before it
/// reports the error: a live writer may change them again and again during one read (a compaction
/// pass renames every sealed segment). Damage fails every time; after the first few, each retry
/// waits a millisecond, so real damage is reported within about 20 ms.
pub(crate) const READ_ONLY_REFRESHES: u32 = 20;

/// Refreshes of a read-only view that follow one another at once; each later one waits first.
const QUICK_REFRESHES: u32 = 3;

/// Before the `refreshes`-th refresh of a read-only view (counting from 1): after the first
/// [`QUICK_REFRESHES`], waits a millisecond for the writer to finish what it is changing.
pub(crate) fn pause_before_refresh(refreshes: u32) {
    if refreshes > QUICK_REFRESHES {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Bytes copied per chunk at most (a larger batch is copied whole).
const CHUNK_BYTES: u64 = 64 << 10;

/// One record returned by a read. Cheap to clone; keeps its chunk of the log alive.
#[derive(Clone)]
pub struct RecordView {
    chunk: Arc<Vec<u8>>,
    offset: u64,
    timestamp_ms: i64,
    key: Span,
    value: Span,
    headers: Span,
    header_count: u32,
    encoded_len: u32,
}

impl RecordView {
    /// The record's offset.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The record's timestamp (ms since the Unix epoch).
    pub fn timestamp_ms(&self) -> i64 {
        self.timestamp_ms
    }

    /// The key, if any.
    pub fn key(&self) -> Option<&[u8]> {
        self.key.get(&self.chunk)
    }

    /// The value (`None` for a tombstone).
    pub fn value(&self) -> Option<&[u8]> {
        self.value.get(&self.chunk)
    }

    /// The headers, in order.
    pub fn headers(&self) -> impl Iterator<Item = Header<'_>> {
        batch::decode_headers(self.header_bytes(), self.header_count)
    }

    /// The encoded headers (what [`RecordView::headers`] decodes): a header's value borrows them.
    pub(crate) fn header_bytes(&self) -> &[u8] {
        self.headers.get(&self.chunk).unwrap_or_default()
    }

    /// Bytes the record takes in its batch, its length prefix included: what a consume-queue
    /// entry stores as the record's size. A batch's size is its 43-byte header plus
    /// its records' encoded lengths.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len as usize
    }
}

impl RecordView {
    /// The record `raw` at `offset` of the batch at `batch_start` in `chunk`.
    pub(crate) fn in_chunk(
        chunk: &Arc<Vec<u8>>,
        offset: u64,
        raw: &RawRecord,
        batch_start: usize,
        encoded_len: u32,
    ) -> RecordView {
        RecordView {
            chunk: Arc::clone(chunk),
            offset,
            timestamp_ms: raw.timestamp_ms,
            key: raw.key.shifted(batch_start),
            value: raw.value.shifted(batch_start),
            headers: raw.headers.shifted(batch_start),
            header_count: raw.header_count,
            encoded_len,
        }
    }
}

impl fmt::Debug for RecordView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordView")
            .field("offset", &self.offset)
            .field("timestamp_ms", &self.timestamp_ms)
            .field("key", &self.key())
            .field("value_len", &self.value().map(<[u8]>::len))
            .field("header_count", &self.header_count)
            .field("encoded_len", &self.encoded_len)
            .finish()
    }
}

/// One batch of a read ([`LogReader::batches`]): the fields of its header, and the records of it
/// the read returns. The header describes the batch as stored; a read that starts inside a batch
/// returns only its records from that offset on, so `records()` may hold fewer than
/// `record_count()`. The records share the copied bytes of the batch (nothing is copied again).
#[derive(Clone)]
pub struct BatchView {
    header: BatchHeader,
    records: Vec<RecordView>,
}

/// The accessors of a batch's header fields, for the batch views of a read (`BatchView` here,
/// `BatchRef` of the in-place read): each has a `header: BatchHeader` field.
macro_rules! batch_header_accessors {
    () => {
        /// Offset of the batch's first record as written.
        pub fn base_offset(&self) -> u64 {
            self.header.base_offset
        }

        /// The last offset the batch covers (after compaction, possibly of a removed record).
        pub fn last_offset(&self) -> u64 {
            self.header.last_offset()
        }

        /// Records stored in the batch (a read that starts inside it returns fewer).
        pub fn record_count(&self) -> u32 {
            self.header.record_count
        }

        /// The batch's attributes (bits 0–2 compression, always 0; bit 3 create time; bit 4 written
        /// by the cleaner).
        pub fn attributes(&self) -> u16 {
            self.header.attributes
        }

        /// Whether the timestamps are the producer's (create time) rather than the log's append
        /// time.
        pub fn is_create_time(&self) -> bool {
            self.header.attributes & $crate::format::ATTR_CREATE_TIME != 0
        }

        /// The batch's first timestamp (its base timestamp: the first record's as written).
        pub fn first_timestamp_ms(&self) -> i64 {
            self.header.base_timestamp
        }

        /// The largest record timestamp in the batch.
        pub fn max_timestamp_ms(&self) -> i64 {
            self.header.max_timestamp
        }
    };
}
pub(crate) use batch_header_accessors;

impl BatchView {
    batch_header_accessors!();

    /// Bytes the batch takes in its segment.
    pub fn encoded_len(&self) -> u64 {
        self.header.size()
    }

    /// The batch's records that the read returns, in offset order.
    pub fn records(&self) -> &[RecordView] {
        &self.records
    }

    /// [`BatchView::records`], owned.
    pub fn into_records(self) -> Vec<RecordView> {
        self.records
    }
}

impl fmt::Debug for BatchView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchView")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("record_count", &self.record_count())
            .field("attributes", &self.attributes())
            .field("first_timestamp_ms", &self.first_timestamp_ms())
            .field("max_timestamp_ms", &self.max_timestamp_ms())
            .field("encoded_len", &self.encoded_len())
            .field("records", &self.records.len())
            .finish()
    }
}

/// The batches of one read: see [`LogReader::batches`].
pub struct Batches<'a> {
    reader: LogReader<'a>,
}

impl Batches<'_> {
    /// The offset the next record will have at the earliest (where to continue reading).
    pub fn next_offset(&self) -> u64 {
        self.reader.next_offset()
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<BatchView>;

    fn next(&mut self) -> Option<Result<BatchView>> {
        self.reader.next_with(LogReader::next_batch_view)
    }
}

/// Iterator over the records of one [`Log::read`](crate::Log::read). Ends at the visible end the read started with,
/// or when `max_bytes` of batches were returned (at least one batch always is). After an error it
/// returns `None`.
pub struct LogReader<'a> {
    log: &'a LogState,
    /// The next offset to return; records below it are skipped.
    cursor: u64,
    /// Offsets at or past this are never returned.
    upper: u64,
    /// Bytes of batches that may still be returned.
    budget: u64,
    /// Whether a record has been returned (until then a batch is taken whatever its size).
    started: bool,
    /// Where the next chunk starts, if known.
    resume: Option<(Arc<LogSegment>, BatchPos)>,
    chunk: Arc<Vec<u8>>,
    /// The copied chunk: where it came from, and the next batch in it.
    chunk_origin: Option<(Arc<LogSegment>, BatchPos)>,
    chunk_position: usize,
    /// Records of the current batch, decoded while validating it; `records_next` is the next one.
    records: Vec<RawRecord>,
    records_next: usize,
    batch_base: u64,
    /// The current batch's header.
    batch_header: Option<BatchHeader>,
    /// The offset after the current batch: the cursor moves there once its records are used up.
    batch_next: u64,
    batch_start: usize,
    done: bool,
    /// The log's truncation count when `upper` was last known good.
    epoch: u64,
    /// A truncation lowered `upper`: reaching it is `Error::Truncated`, not the end of the read.
    cut_short: bool,
    /// Times a read-only log's view was taken again after an error.
    refreshes: u32,
}

impl<'a> LogReader<'a> {
    /// A reader of `[offset, upper)`; `epoch` is the log's truncation count read before `upper`.
    pub(crate) fn new(log: &'a LogState, offset: u64, upper: u64, max_bytes: u64, epoch: u64) -> LogReader<'a> {
        LogReader {
            epoch,
            cut_short: false,
            refreshes: 0,
            log,
            cursor: offset,
            upper,
            budget: max_bytes,
            started: false,
            resume: None,
            chunk: Arc::new(Vec::new()),
            chunk_origin: None,
            chunk_position: 0,
            records: Vec::new(),
            records_next: 0,
            batch_base: 0,
            batch_header: None,
            batch_next: 0,
            batch_start: 0,
            done: false,
        }
    }

    /// The offset the next record will have at the earliest (where to continue reading).
    pub fn next_offset(&self) -> u64 {
        self.cursor
    }

    /// The rest of the read batch by batch: each batch that has records for the read, with its
    /// header's fields and those records (the same records, bounds and errors as iterating the
    /// reader itself). A batch the reader was part-way through comes first, with its records not
    /// yet returned.
    ///
    /// ```
    /// # fn main() -> strata_log::Result<()> {
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"a"), Record::new(b"bb")])?;
    /// log.append(&[Record::new(b"ccc").with_timestamp(log.config().clock.now_ms())])?;
    /// let batches: Vec<_> = log.read(0, 1 << 20)?.batches().collect::<Result<_, _>>()?;
    /// assert_eq!(batches.len(), 2);
    /// assert_eq!((batches[0].base_offset(), batches[0].record_count()), (0, 2));
    /// assert!(!batches[0].is_create_time() && batches[1].is_create_time());
    /// let sizes: usize = batches[0].records().iter().map(|r| r.encoded_len()).sum();
    /// assert_eq!(43 + sizes as u64, batches[0].encoded_len());
    /// # Ok(()) }
    /// ```
    pub fn batches(self) -> Batches<'a> {
        Batches { reader: self }
    }

    /// The records of the current batch not yet returned, with its header; the next batch's if
    /// none are left.
    fn next_batch_view(&mut self) -> Result<Option<BatchView>> {
        loop {
            let mut records = Vec::with_capacity(self.records.len() - self.records_next);
            while let Some(view) = self.take_decoded() {
                records.push(view);
            }
            if let Some(header) = self.batch_header.filter(|_| !records.is_empty()) {
                return Ok(Some(BatchView { header, records }));
            }
            if !self.next_batch()? && !self.fetch_chunk()? {
                return Ok(None);
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<RecordView>> {
        loop {
            if let Some(view) = self.take_decoded() {
                return Ok(Some(view));
            }
            if !self.next_batch()? && !self.fetch_chunk()? {
                return Ok(None);
            }
        }
    }

    /// The next decoded record of the current batch at or after the cursor.
    fn take_decoded(&mut self) -> Option<RecordView> {
        while let Some(raw) = self.records.get(self.records_next) {
            // A record starts where the one before it ends (the first, after the batch header).
            let start = match self.records_next.checked_sub(1) {
                Some(before) => self.records[before].end(),
                None => BATCH_HEADER_LEN,
            };
            self.records_next += 1;
            let offset = self.batch_base + u64::from(raw.offset_delta);
            if offset >= self.upper {
                self.records_next = self.records.len();
                return None;
            }
            if offset < self.cursor {
                continue;
            }
            self.cursor = offset + 1;
            self.started = true;
            return Some(RecordView {
                chunk: Arc::clone(&self.chunk),
                offset,
                timestamp_ms: raw.timestamp_ms,
                key: raw.key.shifted(self.batch_start),
                value: raw.value.shifted(self.batch_start),
                headers: raw.headers.shifted(self.batch_start),
                header_count: raw.header_count,
                encoded_len: (raw.end() - start) as u32,
            });
        }
        // Offsets the cleaner removed at the end of the batch are skipped too.
        self.cursor = self.cursor.max(self.batch_next.min(self.upper));
        None
    }

    /// Validates and decodes the next batch of the chunk. `false` if the chunk is used up.
    fn next_batch(&mut self) -> Result<bool> {
        let Some((segment, origin)) = &mut self.chunk_origin else { return Ok(false) };
        let start = self.chunk_position;
        if start >= self.chunk.len() {
            self.chunk_origin = None;
            return Ok(false);
        }
        let bytes = &self.chunk[start..];
        let position = origin.position + start as u64;
        self.records.clear();
        let summary = batch::validate_into(bytes, Some(origin.expected), &mut self.records)
            .map_err(|reason| Error::corrupt(segment.log_path(), position, reason))?;
        let header: BatchHeader = summary.header;
        origin.expected = header.next_offset();
        self.chunk_position += header.size() as usize;
        self.batch_start = start;
        self.batch_header = Some(header);
        self.batch_base = header.base_offset;
        self.batch_next = header.next_offset();
        self.records_next = 0;
        Ok(true)
    }

    /// Copies the next chunk of batches. `false` when the read is complete.
    fn fetch_chunk(&mut self) -> Result<bool> {
        // A segment can be retired (deleted) under us: re-resolve, which ends in OffsetOutOfRange.
        for _ in 0..crate::log::locate::LOCATE_ATTEMPTS {
            self.catch_up_truncations()?;
            if self.cursor >= self.upper && self.cut_short {
                return Err(Error::Truncated { next_offset: self.log.offsets.next() });
            }
            if self.cursor >= self.upper || (self.started && self.budget == 0) {
                return Ok(false);
            }
            let (segment, at) = match self.resume.take() {
                Some(resume) => resume,
                None => match self.log.locate(self.cursor, self.upper, self.epoch) {
                    Ok(Some(found)) => found,
                    Ok(None) => return Ok(false),
                    // Catch up with the truncation at the top of the loop.
                    Err(Error::Truncated { .. }) => continue,
                    Err(e) => return Err(e),
                },
            };
            // Reuse the chunk buffer unless a returned RecordView still holds it.
            if Arc::strong_count(&self.chunk) > 1 {
                self.chunk = Arc::new(Vec::new());
            }
            let buf = Arc::make_mut(&mut self.chunk);
            buf.clear();
            let limit = self.budget.min(CHUNK_BYTES);
            let Some(end) = segment.copy_batches(at, self.upper, limit, self.budget, !self.started, buf)? else {
                continue;
            };
            if self.log.durability.truncations() != self.epoch {
                // A truncation finished during the copy: the chunk may hold batches past the cut.
                continue;
            }
            if end.bytes == 0 {
                if !end.end_of_data {
                    return Ok(false);
                }
                // This segment is exhausted: continue in the next one.
                self.cursor = self.cursor.max(end.next.expected);
                continue;
            }
            // `started` is set by the first record returned, not here: a chunk of batches the
            // cleaner emptied must not use up the read's one guaranteed batch.
            self.budget = self.budget.saturating_sub(end.bytes);
            self.resume = Some((Arc::clone(&segment), end.next));
            self.chunk_origin = Some((segment, at));
            self.chunk_position = 0;
            return Ok(true);
        }
        Err(Error::Unsettled { attempts: crate::log::locate::LOCATE_ATTEMPTS })
    }

    /// After truncations, ends the read at the lowest cut, or fails with `Error::Truncated` if the
    /// cursor is already past it: offsets there may now hold other records.
    fn catch_up_truncations(&mut self) -> Result<()> {
        if catch_up_truncations(self.log, self.cursor, &mut self.epoch, &mut self.upper, &mut self.cut_short)? {
            self.resume = None;
        }
        Ok(())
    }
}

/// A read at `cursor` with bounds `upper` as of truncation `epoch` catches up with the truncations
/// since: its upper bound drops to the lowest cut (`cut_short` then), or, if the cursor is already
/// past that cut, it fails with `Error::Truncated` (offsets there may now hold other records).
/// Returns whether the epoch moved (where the read was is then stale).
pub(crate) fn catch_up_truncations(
    log: &LogState,
    cursor: u64,
    epoch: &mut u64,
    upper: &mut u64,
    cut_short: &mut bool,
) -> Result<bool> {
    let now = log.durability.truncations();
    if now == *epoch {
        return Ok(false);
    }
    if let Some(cut) = log.durability.lowest_cut_since(*epoch) {
        if cursor >= cut {
            return Err(Error::Truncated { next_offset: log.offsets.next() });
        }
        if cut < *upper {
            *upper = cut;
            *cut_short = true;
        }
    }
    *epoch = now;
    Ok(true)
}

impl Iterator for LogReader<'_> {
    type Item = Result<RecordView>;

    fn next(&mut self) -> Option<Result<RecordView>> {
        self.next_with(LogReader::next_record)
    }
}

impl LogReader<'_> {
    /// The next item `step` makes (a record, a batch), with the reader's error handling: the end
    /// and errors end the read, an error a read-only view's refresh explains is retried.
    fn next_with<T>(&mut self, mut step: impl FnMut(&mut Self) -> Result<Option<T>>) -> Option<Result<T>> {
        if self.done {
            return None;
        }
        loop {
            match step(self) {
                Ok(Some(view)) => return Some(Ok(view)),
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    let Some(e) = self.log.judge_read_error(e) else {
                        self.done = true;
                        return None;
                    };
                    if self.retry_after_refresh(&e) {
                        continue;
                    }
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl LogReader<'_> {
    /// On a read-only log, an error may come from a live writer changing the files under the view
    /// taken at open: the view is taken again and the read resumes at the same offset (a few
    /// times at most; damage fails every time). Returns whether to retry.
    fn retry_after_refresh(&mut self, error: &Error) -> bool {
        if !refresh_for_retry(self.log, error, &mut self.refreshes, &mut self.upper) {
            return false;
        }
        self.resume = None;
        self.chunk_origin = None;
        self.records.clear();
        self.records_next = 0;
        true
    }
}

/// For a read of a read-only log that met `error`: takes the view of the files again (at most
/// [`READ_ONLY_REFRESHES`] times per read, counted in `refreshes`) and lowers the read's `upper`
/// to the new visible end. Returns whether the read should resume at its cursor.
pub(crate) fn refresh_for_retry(log: &LogState, error: &Error, refreshes: &mut u32, upper: &mut u64) -> bool {
    if !log.is_read_only() || *refreshes >= READ_ONLY_REFRESHES {
        return false;
    }
    *refreshes += 1;
    pause_before_refresh(*refreshes);
    if let Err(refresh) = log.refresh_read_only() {
        tracing::debug!(%error, %refresh, "re-reading the log's files failed");
        return false;
    }
    *upper = (*upper).min(log.offsets.visible());
    true
}
