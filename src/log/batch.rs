//! Record batches (docs/DESIGN.md §4): encoding what `append` writes, and the validity check every
//! batch passes before a byte of it is returned or trusted by recovery.

use byteorder::{BigEndian, ByteOrder};

use crate::error::Corruption;
use crate::format::{
    ATTR_CLEANER, ATTR_COMPRESSION_MASK, ATTR_KNOWN, ATTRIBUTES_POS, BASE_OFFSET_POS, BASE_TIMESTAMP_POS,
    BATCH_HEADER_LEN, BATCH_LENGTH_POS, BATCH_MAGIC, CRC_POS, LAST_OFFSET_DELTA_POS, LOG_OVERHEAD, MAGIC_POS,
    MAX_BATCH_LEN, MAX_TIMESTAMP_POS, NULL_LENGTH, RECORD_ATTRIBUTES, RECORD_COUNT_POS,
};
use crate::log::varint;

/// A record to append. Borrowed, so building one allocates nothing.
///
/// ```
/// use strata_log::{Header, Record};
/// let headers = [Header { key: "trace", value: Some(b"42") }];
/// let record = Record::new(b"payload").with_key(b"user-7").with_headers(&headers);
/// assert_eq!(record.value, Some(&b"payload"[..]));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Record<'a> {
    /// Optional key (compaction keeps the latest record per key).
    pub key: Option<&'a [u8]>,
    /// The value; `None` with a key is a tombstone.
    pub value: Option<&'a [u8]>,
    /// Application headers.
    pub headers: &'a [Header<'a>],
    /// Create time chosen by the caller; `None` takes the log's append time.
    pub timestamp_ms: Option<i64>,
}

/// A record header: a UTF-8 key and an optional value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// Header name.
    pub key: &'a str,
    /// Header value.
    pub value: Option<&'a [u8]>,
}

impl<'a> Record<'a> {
    /// A record with `value`, no key, no headers, stamped with append time.
    pub fn new(value: &'a [u8]) -> Record<'a> {
        Record { value: Some(value), ..Record::default() }
    }

    /// A key with no value: deletes the key when the log is compacted.
    pub fn tombstone(key: &'a [u8]) -> Record<'a> {
        Record { key: Some(key), ..Record::default() }
    }

    /// Sets the key.
    pub fn with_key(self, key: &'a [u8]) -> Record<'a> {
        Record { key: Some(key), ..self }
    }

    /// Sets the headers.
    pub fn with_headers(self, headers: &'a [Header<'a>]) -> Record<'a> {
        Record { headers, ..self }
    }

    /// Sets a create-time timestamp (checked against `max_timestamp_skew_ms`).
    pub fn with_timestamp(self, timestamp_ms: i64) -> Record<'a> {
        Record { timestamp_ms: Some(timestamp_ms), ..self }
    }

    /// The bytes this record takes as the first record of a batch (length prefix included); later
    /// in a batch its offset and timestamp deltas may add a few bytes. What a layer with its own
    /// size limit (the message store's `max_message_bytes`) checks before appending.
    ///
    /// ```
    /// use strata_log::Record;
    /// assert_eq!(Record::new(b"payload").encoded_len(), 14);
    /// ```
    pub fn encoded_len(&self) -> usize {
        record_len(self, 0, 0)
    }
}

/// The fixed 43-byte header of a batch, as stored (not yet validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Bytes after the length field.
    pub batch_length: u32,
    /// Format version.
    pub magic: u8,
    /// CRC-32 of the bytes from the attributes to the end.
    pub crc: u32,
    /// Compression, timestamp type and cleaner bits.
    pub attributes: u16,
    /// Last offset − base offset.
    pub last_offset_delta: u32,
    /// Timestamp the record deltas are relative to.
    pub base_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Number of records.
    pub record_count: u32,
}

impl BatchHeader {
    /// Reads the header fields from the front of `bytes`; `None` if fewer than 43 bytes.
    pub fn decode_from(bytes: &[u8]) -> Option<BatchHeader> {
        let h = bytes.get(..BATCH_HEADER_LEN)?;
        Some(BatchHeader {
            base_offset: BigEndian::read_u64(&h[BASE_OFFSET_POS..]),
            batch_length: BigEndian::read_u32(&h[BATCH_LENGTH_POS..]),
            magic: h[MAGIC_POS],
            crc: BigEndian::read_u32(&h[CRC_POS..]),
            attributes: BigEndian::read_u16(&h[ATTRIBUTES_POS..]),
            last_offset_delta: BigEndian::read_u32(&h[LAST_OFFSET_DELTA_POS..]),
            base_timestamp: BigEndian::read_i64(&h[BASE_TIMESTAMP_POS..]),
            max_timestamp: BigEndian::read_i64(&h[MAX_TIMESTAMP_POS..]),
            record_count: BigEndian::read_u32(&h[RECORD_COUNT_POS..]),
        })
    }

    /// Writes the header fields into the first 43 bytes of `out`.
    pub fn encode_into(&self, out: &mut [u8]) {
        let h = &mut out[..BATCH_HEADER_LEN];
        BigEndian::write_u64(&mut h[BASE_OFFSET_POS..], self.base_offset);
        BigEndian::write_u32(&mut h[BATCH_LENGTH_POS..], self.batch_length);
        h[MAGIC_POS] = self.magic;
        BigEndian::write_u32(&mut h[CRC_POS..], self.crc);
        BigEndian::write_u16(&mut h[ATTRIBUTES_POS..], self.attributes);
        BigEndian::write_u32(&mut h[LAST_OFFSET_DELTA_POS..], self.last_offset_delta);
        BigEndian::write_i64(&mut h[BASE_TIMESTAMP_POS..], self.base_timestamp);
        BigEndian::write_i64(&mut h[MAX_TIMESTAMP_POS..], self.max_timestamp);
        BigEndian::write_u32(&mut h[RECORD_COUNT_POS..], self.record_count);
    }

    /// Bytes the whole batch takes: `12 + batch_length`.
    pub const fn size(&self) -> u64 {
        LOG_OVERHEAD as u64 + self.batch_length as u64
    }

    /// Offset of the last record (or, for an emptied cleaner batch, the last it covered).
    pub const fn last_offset(&self) -> u64 {
        self.base_offset.saturating_add(self.last_offset_delta as u64)
    }

    /// The offset the batch after this one must start at.
    pub const fn next_offset(&self) -> u64 {
        self.last_offset().saturating_add(1)
    }

    /// Written by the cleaner (bit 4): offset gaps are allowed.
    pub const fn is_cleaner(&self) -> bool {
        self.attributes & ATTR_CLEANER != 0
    }

    /// Whether all 43 header bytes were zero: where a batch header would be, this means end of data.
    pub fn is_zero(&self) -> bool {
        *self == BatchHeader::zeroed()
    }

    const fn zeroed() -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 0,
            magic: 0,
            crc: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            record_count: 0,
        }
    }

    /// The header-only checks: magic, length within `available` bytes and `MAX_BATCH_LEN`, and the
    /// base offset against `expected` (a cleaner batch may start after it).
    pub fn check(&self, available: u64, expected: Option<u64>) -> Result<(), Corruption> {
        if self.magic != BATCH_MAGIC {
            return Err(Corruption::BadMagic(self.magic));
        }
        let size = self.size();
        if size < BATCH_HEADER_LEN as u64 || size > available.min(MAX_BATCH_LEN as u64) {
            return Err(Corruption::BadLength { length: size, available });
        }
        if self.base_offset.checked_add(u64::from(self.last_offset_delta) + 1).is_none() {
            return Err(Corruption::BadOffsetDeltas("offsets past u64::MAX"));
        }
        match expected {
            Some(e) if self.base_offset < e || (self.base_offset > e && !self.is_cleaner()) => {
                Err(Corruption::UnexpectedOffset { expected: e, found: self.base_offset })
            }
            _ => Ok(()),
        }
    }
}

/// What validating a batch found out beyond its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSummary {
    pub header: BatchHeader,
    /// Smallest and largest record timestamp (`None` for an emptied cleaner batch).
    pub timestamps: Option<(i64, i64)>,
}

/// Checks every rule of docs/DESIGN.md §4 on the batch at the front of `bytes`. `expected` is the
/// offset the batch must start at (`None` for a caller-encoded batch about to be re-stamped).
pub(crate) fn validate(bytes: &[u8], expected: Option<u64>) -> Result<BatchSummary, Corruption> {
    validate_records(bytes, expected, None)
}

/// [`validate`], also collecting the decoded records into `records` (cleared first by the caller).
/// On an error its contents are unspecified: they may be records of a batch that failed its CRC.
pub(crate) fn validate_into(
    bytes: &[u8],
    expected: Option<u64>,
    records: &mut Vec<RawRecord>,
) -> Result<BatchSummary, Corruption> {
    validate_records(bytes, expected, Some(records))
}

fn validate_records(
    bytes: &[u8],
    expected: Option<u64>,
    records: Option<&mut Vec<RawRecord>>,
) -> Result<BatchSummary, Corruption> {
    let available = bytes.len() as u64;
    let header = BatchHeader::decode_from(bytes).ok_or(Corruption::ShortHeader { available })?;
    header.check(available, expected)?;
    let batch = &bytes[..header.size() as usize];
    // The CRC first: its loads are independent of each other, so they stream the batch from
    // memory with many misses in flight, and the decoder then walks cached bytes. The decoder's
    // loads depend on each other (a record's position is the previous record's length), so when it
    // went first each miss waited for the one before: measured on 100-byte records, one pass over
    // a freshly opened log went from 28M to 37M records/s, and criterion's repeated in-place read
    // from 30M to 49M. A CRC mismatch is the error reported when both are wrong. Decoding is
    // safe whatever the bytes (every read is bounds-checked), and nothing decoded is used unless
    // both pass.
    let computed = crc32fast::hash(&batch[ATTRIBUTES_POS..]);
    let records = check_records(batch, &header, records);
    if computed != header.crc {
        return Err(Corruption::CrcMismatch { stored: header.crc, computed });
    }
    if header.attributes & !ATTR_KNOWN != 0 || header.attributes & ATTR_COMPRESSION_MASK != 0 {
        return Err(Corruption::BadAttributes(header.attributes));
    }
    Ok(BatchSummary { header, timestamps: records? })
}

/// Decodes every record of a batch and checks the offset-delta rules. The CRC is not checked yet
/// (see `validate_records`): nothing is reserved ahead from the unverified record count.
fn check_records(
    batch: &[u8],
    header: &BatchHeader,
    mut out: Option<&mut Vec<RawRecord>>,
) -> Result<Option<(i64, i64)>, Corruption> {
    if !header.is_cleaner() {
        if header.record_count == 0 {
            return Err(Corruption::BadOffsetDeltas("a producer batch has no records"));
        }
        if header.last_offset_delta != header.record_count - 1 {
            return Err(Corruption::BadOffsetDeltas("last_offset_delta is not record_count - 1"));
        }
    }
    let cleaner = header.is_cleaner();
    let mut position = BATCH_HEADER_LEN;
    // A producer batch's deltas are 0, 1, 2, ...; a cleaner batch's only rise (from any start).
    let mut previous_delta = -1i64;
    let (mut min_ts, mut max_ts) = (i64::MAX, i64::MIN);
    for index in 0..header.record_count {
        let (record, end) = match decode_record(batch, position, header.base_timestamp) {
            Ok(decoded) => decoded,
            Err(_) if position >= batch.len() => return Err(Corruption::BadRecord { index, what: "missing" }),
            Err(what) => return Err(Corruption::BadRecord { index, what }),
        };
        position = end;
        let delta = record.offset_delta;
        let in_order = if cleaner { i64::from(delta) > previous_delta } else { delta == index };
        if !in_order || delta > header.last_offset_delta {
            return Err(Corruption::BadOffsetDeltas("offset deltas out of order"));
        }
        previous_delta = i64::from(delta);
        min_ts = min_ts.min(record.timestamp_ms);
        max_ts = max_ts.max(record.timestamp_ms);
        if let Some(out) = out.as_deref_mut() {
            out.push(record);
        }
    }
    if position != batch.len() {
        return Err(Corruption::BadRecord { index: header.record_count, what: "bytes after the last record" });
    }
    Ok((header.record_count > 0).then_some((min_ts, max_ts)))
}

/// A byte range inside a batch or chunk (batches are at most 64 MiB, so u32 suffices), or null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    const NULL_LEN: u32 = u32::MAX;
    pub(crate) const NULL: Span = Span { start: 0, len: Span::NULL_LEN };

    /// The same span in a buffer where the batch starts at `base`.
    #[inline]
    pub(crate) fn shifted(self, base: usize) -> Span {
        if self.len == Span::NULL_LEN { self } else { Span { start: self.start + base as u32, len: self.len } }
    }

    /// The bytes of the span in `bytes`; `None` if null (or, defensively, out of bounds).
    #[inline]
    pub(crate) fn get(self, bytes: &[u8]) -> Option<&[u8]> {
        if self.len == Span::NULL_LEN {
            return None;
        }
        bytes.get(self.start as usize..self.start as usize + self.len as usize)
    }
}

/// One decoded record: spans are relative to the start of its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawRecord {
    pub timestamp_ms: i64,
    pub offset_delta: u32,
    pub header_count: u32,
    pub key: Span,
    pub value: Span,
    /// The encoded headers (after the count): they end where the record ends.
    pub headers: Span,
}

impl RawRecord {
    /// Where the record ends in its batch (where the next one starts).
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.headers.start as usize + self.headers.len as usize
    }
}

/// Decodes the records of a batch in order. Stops after `record_count` records or the first error.
pub(crate) struct RecordIter<'a> {
    batch: &'a [u8],
    base_timestamp: i64,
    remaining: u32,
    index: u32,
    position: usize,
}

impl<'a> RecordIter<'a> {
    pub(crate) fn new(batch: &'a [u8], header: &BatchHeader) -> RecordIter<'a> {
        RecordIter {
            batch,
            base_timestamp: header.base_timestamp,
            remaining: header.record_count,
            index: 0,
            position: BATCH_HEADER_LEN,
        }
    }

    /// Where the next record starts in the batch (after the last, the batch's end): the cleaner
    /// copies a kept record's bytes verbatim from here.
    pub(crate) fn position(&self) -> usize {
        self.position
    }

    #[inline]
    fn decode_one(&mut self) -> Result<RawRecord, Corruption> {
        let index = self.index;
        self.decode_fields().map_err(|what| Corruption::BadRecord { index, what })
    }

    /// The fields of the record at `self.position`; the error says what is wrong (a small error
    /// type keeps this hot loop's results in registers).
    #[inline]
    fn decode_fields(&mut self) -> Result<RawRecord, &'static str> {
        let (record, end) = decode_record(self.batch, self.position, self.base_timestamp)?;
        self.position = end;
        Ok(record)
    }
}

/// Decodes the record at `position` of `batch` (docs/DESIGN.md §4): its fields and where it ends.
/// Every read goes through here once per record, so it works on indexes into one slice with the
/// one- and two-byte varints (nearly every length, delta and count) decoded inline.
#[inline(always)]
fn decode_record(batch: &[u8], position: usize, base_timestamp: i64) -> Result<(RawRecord, usize), &'static str> {
    let mut p = position;
    let length = read_varint(batch, &mut p)?;
    if length < 0 {
        return Err(if length == NULL_LENGTH { "null record length" } else { "negative length" });
    }
    let start = p;
    let end = start.checked_add(length as usize).filter(|&e| e <= batch.len()).ok_or("record past the batch")?;
    // The record's fields are read from a slice that ends where it ends, so each bound checked
    // below is also the bound of the slice (so the compiler can drop the second check).
    let record = &batch[..end];
    if start >= end || record[start] != RECORD_ATTRIBUTES {
        return Err("record attributes are not 0");
    }
    p = start + 1;
    let timestamp_ms = base_timestamp.checked_add(read_varint(record, &mut p)?).ok_or("timestamp overflows")?;
    let offset_delta = u32::try_from(read_varint(record, &mut p)?).map_err(|_| "offset delta out of range")?;
    let key = read_span(record, &mut p)?;
    let value = read_span(record, &mut p)?;
    let header_count = u32::try_from(read_varint(record, &mut p)?).map_err(|_| "negative header count")?;
    let headers_start = p;
    for _ in 0..header_count {
        let key = read_span(record, &mut p)?.get(record).ok_or("null header key")?;
        std::str::from_utf8(key).map_err(|_| "header key is not UTF-8")?;
        read_span(record, &mut p)?;
    }
    if p != end {
        return Err("record length disagrees with its fields");
    }
    let headers = Span { start: headers_start as u32, len: (end - headers_start) as u32 };
    Ok((RawRecord { timestamp_ms, offset_delta, header_count, key, value, headers }, end))
}

/// The zig-zag varint at `*position` of `bytes`, moving past it.
#[inline(always)]
fn read_varint(bytes: &[u8], position: &mut usize) -> Result<i64, &'static str> {
    let p = *position;
    let end = bytes.len();
    if p < end {
        let b0 = bytes[p];
        if b0 < 0x80 {
            *position = p + 1;
            return Ok(varint::unzigzag(u64::from(b0)));
        }
        if p + 1 < end && bytes[p + 1] < 0x80 {
            *position = p + 2;
            return Ok(varint::unzigzag(u64::from(b0 & 0x7f) | u64::from(bytes[p + 1]) << 7));
        }
    }
    read_varint_slow(bytes, position)
}

#[cold]
#[inline(never)]
fn read_varint_slow(bytes: &[u8], position: &mut usize) -> Result<i64, &'static str> {
    let rest = bytes.get(*position..).unwrap_or_default();
    let (value, len) = varint::decode_from(rest).ok_or("bad varint")?;
    *position += len;
    Ok(value)
}

/// The length-prefixed byte string (or null) at `*position` of `bytes`, moving past it.
#[inline(always)]
fn read_span(bytes: &[u8], position: &mut usize) -> Result<Span, &'static str> {
    let end = bytes.len();
    let len = read_varint(bytes, position)?;
    if len < 0 {
        return if len == NULL_LENGTH { Ok(Span::NULL) } else { Err("negative length") };
    }
    if len as u64 > (end - *position) as u64 {
        return Err("field past the record");
    }
    let span = Span { start: *position as u32, len: len as u32 };
    *position += len as usize;
    Ok(span)
}

impl Iterator for RecordIter<'_> {
    type Item = Result<RawRecord, Corruption>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let record = self.decode_one();
        self.remaining = if record.is_ok() { self.remaining - 1 } else { 0 };
        self.index += 1;
        Some(record)
    }
}

/// Encodes records into batches, reusing one buffer so appends allocate nothing per record.
#[derive(Debug, Default)]
pub(crate) struct BatchEncoder {
    buf: Vec<u8>,
}

impl BatchEncoder {
    /// Bytes the batch of `records` will take, given each record's timestamp delta.
    pub(crate) fn encoded_len(records: &[Record<'_>], delta: impl Fn(usize) -> i64) -> usize {
        let records: usize = records.iter().enumerate().map(|(i, r)| record_len(r, delta(i), i as i64)).sum();
        BATCH_HEADER_LEN + records
    }

    /// Encodes `records` with `timestamps[i]` for record `i`, returning the batch bytes.
    pub(crate) fn encode(
        &mut self,
        base_offset: u64,
        records: &[Record<'_>],
        timestamps: &[i64],
        attributes: u16,
    ) -> &[u8] {
        debug_assert_eq!(records.len(), timestamps.len(), "one timestamp per record");
        debug_assert!(!records.is_empty(), "batches are never empty");
        let base_timestamp = timestamps[0];
        let max_timestamp = timestamps.iter().copied().max().unwrap_or(base_timestamp);
        let buf = &mut self.buf;
        buf.clear();
        buf.resize(BATCH_HEADER_LEN, 0);
        for (i, (record, &ts)) in records.iter().zip(timestamps).enumerate() {
            encode_record(record, ts - base_timestamp, i as i64, buf);
        }
        finish_batch(buf, base_offset, records.len() as u32, base_timestamp, max_timestamp, attributes);
        buf
    }
}

/// Writes the header of a batch whose records follow the first 43 bytes of `buf` (which holds the
/// whole batch), CRC included.
pub(crate) fn finish_batch(
    buf: &mut [u8],
    base_offset: u64,
    record_count: u32,
    base_timestamp: i64,
    max_timestamp: i64,
    attributes: u16,
) {
    debug_assert!(record_count > 0, "batches are never empty");
    let header = BatchHeader {
        base_offset,
        batch_length: (buf.len() - LOG_OVERHEAD) as u32,
        magic: BATCH_MAGIC,
        crc: 0,
        attributes,
        last_offset_delta: record_count - 1,
        base_timestamp,
        max_timestamp,
        record_count,
    };
    header.encode_into(buf);
    write_crc(buf);
}

/// Computes the CRC of the batch that fills `batch` (header first, nothing after it) and stores it
/// in the header: the last step of writing or rewriting a batch.
pub(crate) fn write_crc(batch: &mut [u8]) {
    let crc = crc32fast::hash(&batch[ATTRIBUTES_POS..]);
    BigEndian::write_u32(&mut batch[CRC_POS..], crc);
}

/// Encodes records into one batch for [`Log::append_batch`](crate::Log::append_batch), as the
/// [`Producer`](crate::Producer) does: each record goes straight into the buffer (finishing writes
/// only the header and CRC in front of them, nothing is copied), records without a timestamp get
/// `now_ms`, and the batch is marked create time. Its base offset is left 0: the log assigns it
/// (outside the CRC, so nothing is re-hashed).
///
/// It encodes into a `Vec<u8>`, or into a producer pool's [`PooledBuffer`](crate::PooledBuffer)
/// without ever growing it past its capacity ([`BatchBuilder::with_buffer`]).
///
/// ```
/// # fn main() -> strata_log::Result<()> {
/// use strata_log::{BatchBuilder, Header, Log, LogConfig, Record};
/// let dir = tempfile::tempdir().unwrap();
/// let log = Log::open(dir.path(), LogConfig::default())?;
/// let now = log.config().clock.now_ms();
/// let mut batch = BatchBuilder::new(now).with_max_bytes(log.config().max_batch_bytes as usize);
/// batch.append(&Record::new(b"plain"))?;
/// let headers = [Header { key: "trace", value: Some(b"42") }];
/// batch.append(&Record::new(b"rich").with_key(b"k").with_headers(&headers).with_timestamp(now - 5))?;
/// assert_eq!(batch.record_count(), 2);
/// let info = log.append_batch(batch.finish()?)?;
/// assert_eq!((info.base_offset, info.last_offset), (0, 1));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct BatchBuilder<B: BatchBuffer = Vec<u8>> {
    buf: B,
    /// The timestamp of records without one.
    now_ms: i64,
    /// The batch never grows past this many bytes.
    max_bytes: usize,
    records: u32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    /// An empty batch in a new `Vec<u8>`; records without a timestamp get `now_ms`.
    pub fn new(now_ms: i64) -> BatchBuilder {
        BatchBuilder::with_buffer(Vec::new(), now_ms)
    }
}

impl<B: BatchBuffer> BatchBuilder<B> {
    /// An empty batch in `buffer` (emptied first, its capacity kept); records without a timestamp
    /// get `now_ms`. The batch stays within the buffer's limit (a pooled buffer's capacity) and
    /// the format's 64 MiB.
    pub fn with_buffer(mut buffer: B, now_ms: i64) -> BatchBuilder<B> {
        let max_bytes = buffer.max_len().min(MAX_BATCH_LEN);
        debug_assert!(max_bytes >= BATCH_HEADER_LEN, "a buffer too small for a batch header");
        let buf = buffer.vec_mut();
        buf.clear();
        buf.resize(BATCH_HEADER_LEN, 0);
        BatchBuilder { buf: buffer, now_ms, max_bytes, records: 0, base_timestamp: now_ms, max_timestamp: now_ms }
    }

    /// Limits the batch to `max_bytes` (the log's `max_batch_bytes`, say); a lower limit given
    /// earlier (or the buffer's) stays.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> BatchBuilder<B> {
        self.max_bytes = self.max_bytes.min(max_bytes);
        self
    }

    /// Adds `record` at the next offset. A record that would take the batch past its limit is
    /// `Error::BatchTooLarge` (with the size the batch would have had), and nothing is added: send
    /// the batch and start another.
    pub fn append(&mut self, record: &Record<'_>) -> crate::Result<()> {
        let timestamp = record.timestamp_ms.unwrap_or(self.now_ms);
        let base_timestamp = if self.records == 0 { timestamp } else { self.base_timestamp };
        // Wrapping: only a negative timestamp can overflow, and the log refuses the batch then.
        let delta = timestamp.wrapping_sub(base_timestamp);
        let offset_delta = i64::from(self.records);
        let size = self.buf.bytes().len() + record_len(record, delta, offset_delta);
        if size > self.max_bytes {
            return Err(crate::Error::BatchTooLarge { size: size as u64, max: self.max_bytes as u64 });
        }
        encode_record(record, delta, offset_delta, self.buf.vec_mut());
        debug_assert_eq!(self.buf.bytes().len(), size, "record_len agrees with encode_record");
        self.max_timestamp = if self.records == 0 { timestamp } else { self.max_timestamp.max(timestamp) };
        self.base_timestamp = base_timestamp;
        self.records += 1;
        Ok(())
    }

    /// Records added so far.
    pub fn record_count(&self) -> u32 {
        self.records
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Bytes the batch takes so far, its header included.
    pub fn encoded_len(&self) -> usize {
        self.buf.bytes().len()
    }

    /// Writes the header (and CRC) in front of the records and returns the whole batch, ready for
    /// [`Log::append_batch`](crate::Log::append_batch). `Error::EmptyBatch` if no record was added.
    /// More records may be added after it; finish again then.
    pub fn finish(&mut self) -> crate::Result<&[u8]> {
        if self.records == 0 {
            return Err(crate::Error::EmptyBatch);
        }
        let (records, base, max) = (self.records, self.base_timestamp, self.max_timestamp);
        finish_batch(self.buf.vec_mut(), 0, records, base, max, crate::format::ATTR_CREATE_TIME);
        Ok(self.buf.bytes())
    }

    /// The buffer, to reuse ([`BatchBuilder::with_buffer`] empties it) or to keep the finished
    /// batch.
    pub fn into_buffer(self) -> B {
        self.buf
    }
}

/// A buffer a [`BatchBuilder`] encodes into: `Vec<u8>`, or a [`PooledBuffer`](crate::PooledBuffer)
/// (sealed: implemented by those two only).
pub trait BatchBuffer: sealed::Buffer {}

impl BatchBuffer for Vec<u8> {}

pub(crate) mod sealed {
    /// What a [`BatchBuilder`](super::BatchBuilder) needs of its buffer.
    pub trait Buffer {
        /// The bytes, as a vector to append to.
        fn vec_mut(&mut self) -> &mut Vec<u8>;
        /// The bytes written.
        fn bytes(&self) -> &[u8];
        /// Bytes it may hold without reallocating outside its owner's accounting.
        fn max_len(&self) -> usize;
    }

    impl Buffer for Vec<u8> {
        fn vec_mut(&mut self) -> &mut Vec<u8> {
            self
        }

        fn bytes(&self) -> &[u8] {
            self
        }

        fn max_len(&self) -> usize {
            usize::MAX
        }
    }
}

impl BatchEncoder {
    /// Copies a caller-encoded batch and stamps `base_offset` on it (outside the CRC).
    pub(crate) fn restamp(&mut self, batch: &[u8], base_offset: u64) -> &[u8] {
        self.buf.clear();
        self.buf.extend_from_slice(batch);
        BigEndian::write_u64(&mut self.buf[BASE_OFFSET_POS..], base_offset);
        &self.buf
    }
}

/// Bytes a record takes, including its length prefix.
pub(crate) fn record_len(record: &Record<'_>, timestamp_delta: i64, offset_delta: i64) -> usize {
    let body = record_body_len(record, timestamp_delta, offset_delta);
    varint::encoded_len(body as i64) + body
}

fn record_body_len(record: &Record<'_>, timestamp_delta: i64, offset_delta: i64) -> usize {
    let headers: usize = record.headers.iter().map(|h| bytes_len(Some(h.key.as_bytes())) + bytes_len(h.value)).sum();
    1 + varint::encoded_len(timestamp_delta)
        + varint::encoded_len(offset_delta)
        + bytes_len(record.key)
        + bytes_len(record.value)
        + varint::encoded_len(record.headers.len() as i64)
        + headers
}

fn bytes_len(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => varint::encoded_len(NULL_LENGTH),
        Some(b) => varint::encoded_len(b.len() as i64) + b.len(),
    }
}

pub(crate) fn encode_record(record: &Record<'_>, timestamp_delta: i64, offset_delta: i64, out: &mut Vec<u8>) {
    varint::encode_into(record_body_len(record, timestamp_delta, offset_delta) as i64, out);
    out.push(RECORD_ATTRIBUTES);
    varint::encode_into(timestamp_delta, out);
    varint::encode_into(offset_delta, out);
    encode_bytes(record.key, out);
    encode_bytes(record.value, out);
    varint::encode_into(record.headers.len() as i64, out);
    for header in record.headers {
        encode_bytes(Some(header.key.as_bytes()), out);
        encode_bytes(header.value, out);
    }
}

fn encode_bytes(bytes: Option<&[u8]>, out: &mut Vec<u8>) {
    match bytes {
        None => varint::encode_into(NULL_LENGTH, out),
        Some(b) => {
            varint::encode_into(b.len() as i64, out);
            out.extend_from_slice(b);
        }
    }
}

/// Decodes the headers of a record (validated bytes: UTF-8 was checked by [`validate`]).
pub(crate) fn decode_headers(bytes: &[u8], count: u32) -> impl Iterator<Item = Header<'_>> {
    let mut position = 0;
    (0..count).map_while(move |_| {
        let key = read_span(bytes, &mut position).ok()?.get(bytes)?;
        let value = read_span(bytes, &mut position).ok()?.get(bytes);
        Some(Header { key: std::str::from_utf8(key).ok()?, value })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::ATTR_CREATE_TIME;

    fn encode(base: u64, records: &[Record<'_>], ts: &[i64]) -> Vec<u8> {
        BatchEncoder::default().encode(base, records, ts, 0).to_vec()
    }

    #[test]
    fn header_round_trip() {
        let header = BatchHeader {
            base_offset: 1 << 40,
            batch_length: 1234,
            magic: 1,
            crc: 0xdead_beef,
            attributes: ATTR_CREATE_TIME,
            last_offset_delta: 9,
            base_timestamp: -5,
            max_timestamp: i64::MAX,
            record_count: 10,
        };
        let mut bytes = [0u8; BATCH_HEADER_LEN];
        header.encode_into(&mut bytes);
        assert_eq!(BatchHeader::decode_from(&bytes), Some(header));
        assert_eq!(BatchHeader::decode_from(&bytes[..42]), None);
    }

    #[test]
    fn batch_round_trip_with_every_field() {
        let headers = [Header { key: "h1", value: Some(b"v1") }, Header { key: "h2", value: None }];
        let records = [
            Record::new(b"first").with_key(b"k").with_headers(&headers),
            Record::tombstone(b"gone"),
            Record { key: None, value: None, headers: &[], timestamp_ms: None },
        ];
        let ts = [1000, 999, 1500];
        let bytes = encode(77, &records, &ts);
        assert_eq!(bytes.len(), BatchEncoder::encoded_len(&records, |i| ts[i] - ts[0]));
        let summary = validate(&bytes, Some(77)).expect("valid");
        assert_eq!(summary.header.record_count, 3);
        assert_eq!(summary.header.max_timestamp, 1500);
        assert_eq!(summary.timestamps, Some((999, 1500)));
        let decoded: Vec<RawRecord> = RecordIter::new(&bytes, &summary.header).map(|r| r.expect("record")).collect();
        let starts = std::iter::once(BATCH_HEADER_LEN).chain(decoded.iter().map(RawRecord::end));
        let lens: Vec<usize> = decoded.iter().zip(starts).map(|(r, start)| r.end() - start).collect();
        let expected: Vec<usize> =
            records.iter().enumerate().map(|(i, r)| record_len(r, ts[i] - ts[0], i as i64)).collect();
        assert_eq!(lens, expected, "each record's encoded length, its length prefix included");
        assert_eq!(BATCH_HEADER_LEN + lens.iter().sum::<usize>(), bytes.len());
        assert_eq!(decoded[0].key.get(&bytes), Some(&b"k"[..]));
        assert_eq!(decoded[0].value.get(&bytes), Some(&b"first"[..]));
        let header_bytes = decoded[0].headers.get(&bytes).expect("headers");
        let hs: Vec<Header<'_>> = decode_headers(header_bytes, decoded[0].header_count).collect();
        assert_eq!(hs, headers);
        assert_eq!((decoded[1].key.get(&bytes), decoded[1].value.get(&bytes)), (Some(&b"gone"[..]), None));
        assert_eq!(decoded[2].timestamp_ms, 1500);
        assert_eq!(decoded.iter().map(|r| r.offset_delta).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn the_builder_encodes_as_the_appender_does() {
        let headers = [Header { key: "h", value: Some(b"v") }];
        let records = [
            Record::new(b"first"),
            Record::new(b"keyed").with_key(b"k").with_headers(&headers).with_timestamp(900),
            Record::tombstone(b"gone").with_timestamp(2000),
        ];
        let mut builder = BatchBuilder::new(1000);
        for record in &records {
            builder.append(record).expect("fits");
        }
        let built = builder.finish().expect("not empty").to_vec();
        let encoded = BatchEncoder::default().encode(0, &records, &[1000, 900, 2000], ATTR_CREATE_TIME).to_vec();
        assert_eq!(built, encoded);
        let summary = validate(&built, Some(0)).expect("valid");
        assert_eq!(summary.timestamps, Some((900, 2000)));
    }

    #[test]
    fn a_negative_timestamp_makes_an_invalid_batch_not_a_panic() {
        let mut builder = BatchBuilder::new(1_700_000_000_000);
        builder.append(&Record::new(b"now")).expect("fits");
        builder.append(&Record::new(b"bad").with_timestamp(i64::MIN)).expect("fits");
        assert!(validate(builder.finish().expect("not empty"), None).is_err());
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let bytes = encode(5, &[Record::new(b"abc").with_key(b"k"), Record::new(b"")], &[10, 11]);
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(validate(&damaged, Some(5)).is_err(), "flip of bit {bit} went unnoticed");
        }
    }

    #[test]
    fn stale_batch_with_valid_crc_is_rejected_by_offset() {
        let bytes = encode(5, &[Record::new(b"abc")], &[10]);
        let err = validate(&bytes, Some(6)).expect_err("wrong offset");
        assert_eq!(err, Corruption::UnexpectedOffset { expected: 6, found: 5 });
        assert!(validate(&bytes, None).is_ok(), "offset is only checked when one is expected");
    }

    #[test]
    fn truncated_batches_are_rejected() {
        let bytes = encode(0, &[Record::new(b"abcdef")], &[10]);
        for cut in 0..bytes.len() {
            assert!(validate(&bytes[..cut], Some(0)).is_err(), "cut at {cut} accepted");
        }
        for cut in 0..BATCH_HEADER_LEN {
            assert_eq!(validate(&bytes[..cut], Some(0)), Err(Corruption::ShortHeader { available: cut as u64 }));
        }
        assert_eq!(Corruption::ShortHeader { available: 3 }.to_string(), "batch header cut short: 3 of 43 bytes");
    }

    #[test]
    fn records_must_fill_the_batch_exactly() {
        let mut bytes = encode(0, &[Record::new(b"abc")], &[10]);
        // One extra byte inside the batch, with the length and CRC fixed up to match.
        bytes.push(0);
        let len = (bytes.len() - LOG_OVERHEAD) as u32;
        BigEndian::write_u32(&mut bytes[BATCH_LENGTH_POS..], len);
        write_crc(&mut bytes);
        assert!(matches!(validate(&bytes, Some(0)), Err(Corruption::BadRecord { .. })));
    }

    #[test]
    fn a_crc_mismatch_is_reported_before_what_the_records_say() {
        // Both are computed before either is judged (for speed); a CRC mismatch is the error.
        let mut bytes = encode(0, &[Record::new(b"abc"), Record::new(b"def")], &[10, 10]);
        let attributes_of_first_record = BATCH_HEADER_LEN + 1;
        bytes[attributes_of_first_record] = 1;
        assert!(matches!(validate(&bytes, Some(0)), Err(Corruption::CrcMismatch { .. })));
        write_crc(&mut bytes);
        assert_eq!(
            validate(&bytes, Some(0)),
            Err(Corruption::BadRecord { index: 0, what: "record attributes are not 0" })
        );
        let mut compressed = encode(0, &[Record::new(b"abc")], &[10]);
        compressed[ATTRIBUTES_POS + 1] |= 1;
        compressed[BATCH_HEADER_LEN + 1] = 1;
        write_crc(&mut compressed);
        assert!(matches!(validate(&compressed, Some(0)), Err(Corruption::BadAttributes(_))));
    }

    #[test]
    fn offset_deltas_count_up_in_a_producer_batch_and_rise_in_a_cleaner_batch() {
        let records = [Record::new(b"a"), Record::new(b"b"), Record::new(b"c")];
        let original = encode(0, &records, &[5, 5, 5]);
        let header = BatchHeader::decode_from(&original).expect("header");
        // Each record is [length][attributes][timestamp delta][offset delta]...: one byte each here.
        let starts: Vec<usize> = std::iter::once(BATCH_HEADER_LEN)
            .chain(RecordIter::new(&original, &header).map(|r| r.expect("record").end()))
            .take(3)
            .collect();
        // The batch with these deltas, the cleaner bit if asked, and this last_offset_delta (2 as
        // encoded; a cleaner batch may skip offsets, so its last delta can be larger).
        let patched = |deltas: [u8; 3], cleaner: bool, last_offset_delta: u32| {
            let mut bytes = original.clone();
            for (start, delta) in starts.iter().zip(deltas) {
                bytes[start + 3] = delta << 1; // zig-zag
            }
            if cleaner {
                bytes[ATTRIBUTES_POS + 1] |= ATTR_CLEANER as u8;
            }
            BigEndian::write_u32(&mut bytes[LAST_OFFSET_DELTA_POS..], last_offset_delta);
            write_crc(&mut bytes);
            validate(&bytes, Some(0))
        };
        let out_of_order = Err(Corruption::BadOffsetDeltas("offset deltas out of order"));
        assert!(patched([0, 1, 2], false, 2).is_ok());
        for deltas in [[1, 1, 2], [0, 2, 2], [0, 1, 1], [0, 0, 1], [0, 2, 1]] {
            assert_eq!(patched(deltas, false, 2), out_of_order, "producer batch, deltas {deltas:?}");
        }
        assert!(patched([0, 1, 2], true, 2).is_ok());
        for deltas in [[0, 0, 1], [1, 2, 2], [1, 0, 2], [2, 1, 2], [0, 2, 1]] {
            assert_eq!(patched(deltas, true, 2), out_of_order, "cleaner batch, deltas {deltas:?}");
        }
        // A cleaner batch may start above its base and skip offsets, but no delta may pass
        // last_offset_delta.
        assert!(patched([1, 3, 5], true, 5).is_ok());
        assert!(patched([0, 4, 5], true, 5).is_ok());
        assert_eq!(patched([1, 3, 6], true, 5), out_of_order);
        assert_eq!(patched([1, 3, 3], true, 5), out_of_order);
    }

    #[test]
    fn offsets_past_u64_max_are_rejected_not_wrapped() {
        let bytes = encode(u64::MAX - 1, &[Record::new(b"a"), Record::new(b"b")], &[1, 1]);
        let err = validate(&bytes, Some(u64::MAX - 1)).expect_err("the next offset would be 2^64");
        assert_eq!(err, Corruption::BadOffsetDeltas("offsets past u64::MAX"));
        let one = encode(u64::MAX - 1, &[Record::new(b"a")], &[1]);
        assert!(validate(&one, Some(u64::MAX - 1)).is_ok(), "the last offset is u64::MAX - 1, next u64::MAX");
    }

    #[test]
    fn zero_header_is_recognised() {
        assert!(BatchHeader::decode_from(&[0u8; BATCH_HEADER_LEN]).expect("43 bytes").is_zero());
    }
}
