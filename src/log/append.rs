//! The append path: stamping timestamps and offsets, encoding into one reused buffer, rolling, and
//! storing a batch in the active segment, all under the append lock. Durability is the syncer's
//! job (`group_commit.rs`, `syncer.rs`); nothing here fsyncs.

use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::ATTR_CREATE_TIME;
use crate::log::appender::{Appender, MAX_UNSEALED_SEGMENTS};
use crate::log::batch::{self, BatchEncoder, BatchHeader, Record};
use crate::log::metrics::Counters;
use crate::log::segment::LogSegment;
use crate::log::state::LogState;
use crate::storage;

/// What an append stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// Largest record timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// The log's clock when the batch was appended (the timestamp of append-time records).
    pub append_time_ms: i64,
    /// Truncations the log had made when the batch was stored: [`Log::wait_batch_durable`] and
    /// [`Log::on_durable`] use it to report a truncation that removed the batch before the wait or
    /// the registration began. Not public: it means nothing outside the log that made it.
    ///
    /// [`Log::wait_batch_durable`]: crate::Log::wait_batch_durable
    /// [`Log::on_durable`]: crate::Log::on_durable
    pub(crate) truncation_epoch: u64,
}

/// What storing a batch did besides storing it.
pub(crate) struct Stored {
    pub info: AppendInfo,
    /// The active segment was rolled: the syncer must seal the old one.
    pub rolled: bool,
}

impl LogState {
    /// Encodes `records` as one batch at the next offset and stores it.
    pub(crate) fn append_records(&self, records: &[Record<'_>]) -> Result<Stored> {
        if records.is_empty() {
            return Err(Error::EmptyBatch);
        }
        let _arriving = self.arrivals.arrive();
        self.bound_unsealed()?;
        let mut app = self.appender.lock();
        self.check_writable()?;
        let now = app.now_ms(&self.config.clock);
        let Appender { active, encoder, timestamps, .. } = &mut *app;
        let create_time = self.fill_timestamps(records, now, timestamps)?;
        let size = BatchEncoder::encoded_len(records, |i| timestamps[i] - timestamps[0]) as u64;
        if size > self.config.max_batch_bytes {
            return Err(Error::BatchTooLarge { size, max: self.config.max_batch_bytes });
        }
        let base = self.offsets.next();
        let attributes = if create_time { ATTR_CREATE_TIME } else { 0 };
        let bytes = encoder.encode(base, records, timestamps, attributes);
        let stored = self.store(active, bytes, now)?;
        self.maybe_preallocate(&mut app);
        self.zero_ahead.after_append(&app.active);
        Ok(stored)
    }

    /// Checks a caller-encoded batch (docs/DESIGN.md §4) and stores it at the next offset.
    pub(crate) fn append_encoded(&self, batch: &[u8]) -> Result<Stored> {
        let size = batch.len() as u64;
        if size > self.config.max_batch_bytes {
            return Err(Error::BatchTooLarge { size, max: self.config.max_batch_bytes });
        }
        let invalid = |reason| Error::InvalidBatch { reason };
        let summary = batch::validate(batch, None).map_err(invalid)?;
        let header = summary.header;
        if header.size() != size {
            return Err(invalid(Corruption::BadLength { length: header.size(), available: size }));
        }
        if header.is_cleaner() {
            return Err(invalid(Corruption::CleanerBatch));
        }
        let (min_ts, max_ts) = summary.timestamps.ok_or(invalid(Corruption::BadOffsetDeltas("no records")))?;
        if max_ts != header.max_timestamp {
            return Err(invalid(Corruption::BadMaxTimestamp { stored: header.max_timestamp, computed: max_ts }));
        }
        self.bound_unsealed()?;
        let mut app = self.appender.lock();
        self.check_writable()?;
        let now = app.now_ms(&self.config.clock);
        self.check_timestamp(min_ts, now)?;
        self.check_timestamp(max_ts, now)?;
        let base = self.offsets.next();
        let Appender { active, encoder, .. } = &mut *app;
        let bytes = encoder.restamp(batch, base);
        let stored = self.store(active, bytes, now)?;
        self.maybe_preallocate(&mut app);
        self.zero_ahead.after_append(&app.active);
        Ok(stored)
    }

    /// Back-pressure on a fast appender: segments rolled away from but not sealed yet keep their
    /// descriptors and writable maps, so past `MAX_UNSEALED_SEGMENTS` the appender seals them
    /// itself (outside the append lock, waiting for a seal already running) before storing more.
    /// With `n` appending threads the backlog stays below `MAX_UNSEALED_SEGMENTS + n`.
    fn bound_unsealed(&self) -> Result<()> {
        if self.segments.rolled_count() < MAX_UNSEALED_SEGMENTS {
            return Ok(());
        }
        Counters::add(&self.counters.inline_seals, 1);
        self.seal_rolled()?;
        Ok(())
    }

    /// Once the active segment is half full, asks for its successor to be preallocated (not
    /// earlier: a small log should not hold two segments' worth of disk).
    fn maybe_preallocate(&self, app: &mut Appender) {
        let base = app.active.base_offset();
        if app.prealloc_requested_for != Some(base) && app.active.size() * 2 >= self.config.segment_bytes {
            app.prealloc_requested_for = Some(base);
            self.prealloc.request(base);
        }
    }

    /// Timestamps of each record into `out`; whether any was the caller's (create time).
    fn fill_timestamps(&self, records: &[Record<'_>], now: i64, out: &mut Vec<i64>) -> Result<bool> {
        out.clear();
        let mut create_time = false;
        for record in records {
            let ts = match record.timestamp_ms {
                None => now,
                Some(ts) => {
                    self.check_timestamp(ts, now)?;
                    create_time = true;
                    ts
                }
            };
            out.push(ts);
        }
        Ok(create_time)
    }

    fn check_timestamp(&self, timestamp_ms: i64, now_ms: i64) -> Result<()> {
        let max_skew_ms = self.config.max_timestamp_skew_ms;
        if timestamp_ms < 0 || timestamp_ms.abs_diff(now_ms) > max_skew_ms {
            return Err(Error::InvalidTimestamp { timestamp_ms, now_ms, max_skew_ms });
        }
        Ok(())
    }

    /// Stores an encoded batch stamped with the next offset, rolling first if needed, and publishes
    /// it. Anything failing before the first byte is stored leaves the log usable; after that the
    /// log is poisoned.
    fn store(&self, active: &mut Arc<LogSegment>, bytes: &[u8], now_ms: i64) -> Result<Stored> {
        let short = || Error::InvalidBatch { reason: Corruption::ShortHeader { available: bytes.len() as u64 } };
        let header = BatchHeader::decode_from(bytes).ok_or_else(short)?;
        let size = header.size();
        let base = header.base_offset;
        let next = base.checked_add(u64::from(header.last_offset_delta) + 1);
        let next = next.ok_or(Error::InvalidBatch { reason: Corruption::BadOffsetDeltas("offsets overflow u64") })?;
        let rolled = active.should_roll(size, header.last_offset(), now_ms, &self.config);
        if rolled {
            self.roll(active, base, size)?;
        }
        active.reserve(size, self.config.segment_bytes)?;
        // From here a failure may leave part of the batch stored: the log is poisoned.
        active.append(bytes, &header).map_err(|e| self.durability.poison(e))?;
        self.offsets.store_next(next);
        self.publish_stored(next);
        Counters::add(&self.counters.appends, 1);
        Counters::add(&self.counters.records, u64::from(header.record_count));
        Counters::add(&self.counters.bytes, size);
        let info = AppendInfo {
            base_offset: base,
            last_offset: next - 1,
            max_timestamp_ms: header.max_timestamp,
            append_time_ms: now_ms,
            // Read under the append lock, which every truncation holds while it bumps the count.
            truncation_epoch: self.durability.truncations(),
        };
        Ok(Stored { info, rolled })
    }

    /// Makes a new active segment at `base` able to hold `size` bytes: the preallocated one if it is
    /// ready, else created now. The old one goes to the syncer to be sealed.
    fn roll(&self, active: &mut Arc<LogSegment>, base: u64, size: u64) -> Result<()> {
        self.check_free_space(size)?;
        let (segment, preallocated) = match self.prealloc.take(base, size)? {
            Some(segment) => (segment, true),
            None => (LogSegment::create(&self.dir, base, &self.config, size)?, false),
        };
        let segment = Arc::new(segment);
        self.durability.mark_dir_dirty();
        let old = std::mem::replace(active, Arc::clone(&segment));
        self.segments.roll(segment, old);
        Counters::add(&self.counters.rolls, 1);
        Counters::add(&self.counters.preallocated_rolls, u64::from(preallocated));
        crash_point!("after_roll");
        Ok(())
    }

    /// `Error::DiskFull` if a new segment would leave less than `min_free_bytes` free.
    fn check_free_space(&self, size: u64) -> Result<()> {
        if self.config.min_free_bytes == 0 {
            return Ok(());
        }
        let available = storage::available_space(&self.dir)?;
        let needed = self.config.segment_bytes.max(size) + self.config.min_free_bytes;
        if available < needed {
            let advice = "free space, or lower segment_bytes (strata: --segment-bytes) or min_free_bytes";
            let (path, needed, available) = (self.dir.clone(), Some(needed), Some(available));
            return Err(Error::DiskFull { op: "roll to a new segment", path, needed, available, advice });
        }
        Ok(())
    }
}
