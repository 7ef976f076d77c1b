//! `Log::records`: every record of an offset range, read batch by batch, for callers who want all
//! of them and should not need to know that one [`Log::read`] stops after `max_bytes`.

use std::ops::{Bound, RangeBounds};

use crate::error::{Error, Result};
use crate::log::{Log, LogReader, RecordView};

/// Bytes of batches copied per underlying [`Log::read`].
const CHUNK_BYTES: usize = 1 << 20;

/// Iterator over the records of an offset range: see [`Log::records`].
pub struct Records<'a> {
    log: &'a Log,
    reader: Option<LogReader<'a>>,
    /// Where the next underlying read starts.
    next: u64,
    /// Offsets at or past this are not returned.
    end: u64,
    /// Whether the current reader has returned a record (a reader that returns none ends the walk:
    /// nothing is left below the end).
    progressed: bool,
    done: bool,
}

impl Log {
    /// Every visible record with an offset in `range`, in order, each batch verified before its
    /// records are returned. Unlike [`Log::read`], which returns at most `max_bytes` of batches per
    /// call, this keeps reading until the end of the range or, for an open range (`..`, `10..`),
    /// the visible end when it was called. Offsets that compaction removed are skipped.
    ///
    /// The range's start must be in `[start_offset, next_offset]` (else
    /// `Error::OffsetOutOfRange`; from the visible end on there is nothing to return, as with
    /// [`Log::read`]); its end is clamped to the visible end.
    ///
    /// ```
    /// use strata_log::{Log, LogConfig, Record};
    /// # fn main() -> strata_log::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// for i in 0..1000u32 {
    ///     log.append(&[Record::new(&i.to_be_bytes())])?;
    /// }
    /// let mut count = 0;
    /// for record in log.records(..)? {
    ///     let record = record?;
    ///     assert_eq!(record.offset(), count);
    ///     count += 1;
    /// }
    /// assert_eq!(count, 1000);
    /// assert_eq!(log.records(10..20)?.count(), 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn records(&self, range: impl RangeBounds<u64>) -> Result<Records<'_>> {
        let (start, visible, next) = (self.start_offset(), self.visible_end(), self.next_offset());
        let from = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => start,
        };
        if from < start || from > next {
            return Err(Error::OffsetOutOfRange { requested: from, start, next });
        }
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => u64::MAX,
        }
        .min(visible);
        Ok(Records { log: self, reader: None, next: from, end, progressed: false, done: from >= end })
    }
}

impl Records<'_> {
    /// The offset a following read would start at: after the last record returned.
    pub fn next_offset(&self) -> u64 {
        self.reader.as_ref().map_or(self.next, LogReader::next_offset)
    }
}

impl Iterator for Records<'_> {
    type Item = Result<RecordView>;

    fn next(&mut self) -> Option<Result<RecordView>> {
        while !self.done {
            let Some(reader) = self.reader.as_mut() else {
                match self.log.read(self.next, CHUNK_BYTES) {
                    Ok(reader) => {
                        self.reader = Some(reader);
                        self.progressed = false;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
                continue;
            };
            match reader.next() {
                Some(Ok(record)) if record.offset() < self.end => {
                    self.progressed = true;
                    // The last offset wanted: stop without reading on into what follows it (which
                    // may be damaged, and is not asked for).
                    if record.offset().saturating_add(1) >= self.end {
                        self.next = self.end;
                        self.reader = None;
                        self.done = true;
                    }
                    return Some(Ok(record));
                }
                Some(Ok(_)) => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {
                    self.next = reader.next_offset();
                    self.done = !self.progressed || self.next >= self.end;
                    self.reader = None;
                }
            }
        }
        None
    }
}
