//! Reads the messages at given commit-log offsets, in ascending order, with one cursor per call of
//! the store: each batch is read (and verified) once, and the batches read for one message serve
//! the next ones they hold.

use crate::error::Error;
use crate::error::Result;
use crate::log::{BatchView, Cursor, Log, RecordView};

/// The most bytes one read fetches ahead for the messages still wanted.
const MAX_READ_AHEAD: usize = 1 << 20;

/// See the module documentation.
pub(crate) struct MessageReader<'a> {
    log: &'a Log,
    cursor: Option<Cursor>,
    batches: Vec<BatchView>,
}

impl<'a> MessageReader<'a> {
    pub(crate) fn new(log: &'a Log) -> MessageReader<'a> {
        MessageReader { log, cursor: None, batches: Vec::new() }
    }

    /// The log's next offset.
    pub(crate) fn log_next(&self) -> u64 {
        self.log.next_offset()
    }

    /// The record at `log_offset`, or `None` if the log no longer holds it (retention). Reads
    /// ahead about `ahead()` bytes when it has to read (the sizes of the messages wanted next).
    pub(crate) fn read(&mut self, log_offset: u64, ahead: impl FnOnce() -> usize) -> Result<Option<RecordView>> {
        if let Some(record) = self.cached(log_offset) {
            return Ok(Some(record));
        }
        if log_offset < self.log.start_offset() {
            return Ok(None);
        }
        let cursor = match &mut self.cursor {
            Some(cursor) => {
                cursor.seek(log_offset);
                cursor
            }
            None => match self.log.cursor(log_offset) {
                Ok(cursor) => self.cursor.insert(cursor),
                Err(Error::OffsetOutOfRange { .. }) => return Ok(None),
                Err(error) => return Err(error),
            },
        };
        self.batches = match cursor.next_batch(ahead().clamp(1, MAX_READ_AHEAD)) {
            Ok(batches) => batches,
            // Removed meanwhile (retention), or not visible (never: dispatch follows the visible end).
            Err(Error::OffsetOutOfRange { .. }) => return Ok(None),
            Err(error) => return Err(error),
        };
        Ok(self.cached(log_offset))
    }

    /// The record at `log_offset` if a batch read already holds it.
    fn cached(&self, log_offset: u64) -> Option<RecordView> {
        // Batches come in offset order.
        let batch = self.batches.get(self.batches.partition_point(|b| b.last_offset() < log_offset))?;
        let records = batch.records();
        let at = records.binary_search_by_key(&log_offset, RecordView::offset).ok()?;
        Some(records[at].clone())
    }
}
