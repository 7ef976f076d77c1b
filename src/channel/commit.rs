//! A transaction's puts and takes, and the three things that end or change them on the shared
//! state: take, commit, rollback.
//!
//! A commit waits (on the `room` condition variable, up to `keep_alive_ms`) until its puts fit,
//! then, still under the channel lock, appends one batch to the log (its put events, then a take
//! record listing the offsets it took) with `append_nowait`, and applies it: its puts become
//! held (pending until the log shows them to readers), its takes stop being held. Appending under
//! the channel lock makes the log's order the order in which commits took their room, so a replay
//! of any prefix of the log holds at most what the channel held then: never over capacity. The
//! durability wait happens after the lock is released (group commit: concurrent commits share an
//! fsync), and then the commit publishes its batch, and any earlier one now visible, to takers.

use std::time::{Duration, Instant};

use parking_lot::RwLockReadGuard;

use crate::config::FlushPolicy;
use crate::error::{Error, Result};
use crate::log::{AppendInfo, FOREVER, Log};

use super::event::Event;
use super::metrics::Counters;
use super::state::{ChannelState, Pending, Queue};
use super::take_record;

/// A transaction's puts and takes.
#[derive(Default)]
pub(crate) struct Lists {
    pub(crate) puts: Vec<Event>,
    pub(crate) put_bytes: u64,
    /// Bytes of the put records, at their places in the batch.
    pub(crate) put_records_len: usize,
    /// (log offset, event), in the order taken.
    pub(crate) takes: Vec<(u64, Event)>,
    pub(crate) take_bytes: u64,
}

impl Lists {
    pub(crate) fn is_empty(&self) -> bool {
        self.puts.is_empty() && self.takes.is_empty()
    }

    /// The most bytes the batch of these lists takes with `extra_puts` more put record bytes (at
    /// the next place) and `extra_takes` more takes.
    pub(crate) fn batch_len(&self, extra_put_len: usize, extra_takes: usize) -> u64 {
        let puts = self.puts.len() + usize::from(extra_put_len > 0);
        let takes = self.takes.len() + extra_takes;
        let take_len = if takes > 0 { take_record::max_record_len(takes, puts) } else { 0 };
        (crate::format::BATCH_HEADER_LEN + self.put_records_len + extra_put_len + take_len) as u64
    }

    fn clear(&mut self) {
        *self = Lists::default();
    }
}

impl ChannelState {
    /// Takes the event at the head of the channel, waiting for one up to `keep_alive_ms`.
    pub(crate) fn take(&self) -> Result<Option<(u64, Event)>> {
        let deadline = Instant::now() + Duration::from_millis(self.config.keep_alive_ms);
        let mut queue = self.queue.lock();
        loop {
            self.check_open()?;
            if let Some(taken) = queue.ready.pop_front() {
                queue.taken += 1;
                return Ok(Some(taken));
            }
            if self.not_empty.wait_until(&mut queue, deadline).timed_out() {
                // One last look: the wake-up and the deadline may have come together.
                let taken = if self.is_closed() { None } else { queue.ready.pop_front() };
                queue.taken += u64::from(taken.is_some());
                return Ok(taken);
            }
        }
    }

    /// Returns the takes of `lists` to the head of the channel in the order they were taken, and
    /// drops its puts. Never fails: nothing of it is in the log.
    pub(crate) fn rollback(&self, lists: &mut Lists) {
        if lists.is_empty() {
            return;
        }
        if !lists.takes.is_empty() {
            let mut queue = self.queue.lock();
            queue.taken -= lists.takes.len() as u64;
            for taken in lists.takes.drain(..).rev() {
                debug_assert!(queue.live.contains(&taken.0), "an event taken is held until its take commits");
                queue.ready.push_front(taken);
            }
            self.not_empty.notify_all();
        }
        Counters::add(&self.counters.rollbacks, 1);
        lists.clear();
    }

    /// Commits `lists` (see the module documentation). Errors before the batch is stored
    /// (`Error::ChannelFull`, `Error::Closed`, the log refusing the append) leave `lists` as it
    /// was; once it is stored, `lists` is emptied whatever follows: a failed durability wait
    /// poisons the log, and the next open decides the commit's fate.
    pub(crate) fn commit(&self, lists: &mut Lists) -> Result<()> {
        if lists.is_empty() {
            Counters::add(&self.counters.commits, 1);
            return Ok(());
        }
        // The log's slot stays read-locked from the append through the durability wait, so the
        // close waits for this commit instead of taking the log from under it (which returned
        // `Error::Closed` for a batch the close then made durable).
        if !lists.puts.is_empty() {
            self.check_disk_reserve(lists)?;
        }
        let (info, slot) = self.store(lists)?;
        // Tests pause a commit here, its batch stored, to race the close with it.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("channel_commit_stored");
        let counts = (lists.puts.len() as u64, lists.takes.len() as u64, lists.put_bytes, lists.take_bytes);
        lists.clear();
        if self.config.log.flush_policy == FlushPolicy::Always {
            // Holding the log slot only: publishing takes the channel lock after it.
            let visible = {
                let log = slot.as_ref().ok_or(Error::Closed)?;
                log.wait_batch_durable(&info, FOREVER)?;
                log.visible_end()
            };
            drop(slot);
            self.publish(&mut self.queue.lock(), visible);
        }
        let counters = &self.counters;
        Counters::add(&counters.commits, 1);
        Counters::add(&counters.put_successes, counts.0);
        Counters::add(&counters.take_successes, counts.1);
        Counters::add(&counters.bytes_put, counts.2);
        Counters::add(&counters.bytes_taken, counts.3);
        Ok(())
    }

    /// Waits for room, appends the batch and applies it, under the channel lock. Returns the
    /// log's slot still read-locked (the channel lock released), for the durability wait.
    fn store(&self, lists: &mut Lists) -> Result<(AppendInfo, RwLockReadGuard<'_, Option<Log>>)> {
        let ranges = take_record::ranges(lists.takes.iter().map(|(offset, _)| *offset));
        let take_value = take_record::encode(&ranges);
        let headers: Vec<_> = lists.puts.iter().map(Event::record_headers).collect();
        let mut records: Vec<_> = lists.puts.iter().zip(&headers).map(|(event, h)| event.record(h)).collect();
        if !lists.takes.is_empty() {
            records.push(take_record::record(&take_value));
        }
        let mut queue = self.queue.lock();
        self.wait_for_room(&mut queue, lists)?;
        let slot = self.log.read();
        let log = slot.as_ref().ok_or(Error::Closed)?;
        let (info, visible) = (log.append_nowait(&records)?, log.visible_end());
        debug_assert_eq!(info.last_offset - info.base_offset + 1, records.len() as u64, "one offset per record");
        apply(&mut queue, lists, info.base_offset);
        let grows = lists.puts.len() > lists.takes.len();
        debug_assert!(
            !grows || queue.held() <= self.config.capacity,
            "a commit that adds events stays within capacity"
        );
        let grows = lists.put_bytes > lists.take_bytes;
        debug_assert!(!grows || queue.bytes <= self.byte_limit, "a commit that adds bytes stays within the limit");
        if !lists.takes.is_empty() {
            self.room.notify_all();
        }
        self.publish(&mut queue, visible);
        drop(queue);
        Ok((info, slot))
    }

    /// `Error::DiskFull` unless the commit's puts leave free space for one more segment and its
    /// indexes: the reserve that take commits (which only append small take records) need to
    /// keep working on a full disk, so takes can still commit and the deletion below W can free
    /// space. Without it a full disk wedged the channel: no take could commit, so nothing was
    /// ever deleted.
    fn check_disk_reserve(&self, lists: &Lists) -> Result<()> {
        let log = &self.config.log;
        let reserve = log.segment_bytes.saturating_add(log.index_bytes.saturating_mul(2));
        let needed = reserve.saturating_add(lists.batch_len(0, 0));
        let dir = self.dir.join(crate::format::CHANNEL_LOG_DIR);
        let available = crate::storage::available_space(&dir)?;
        if available < needed {
            let advice = "take events (the channel keeps a segment's worth of space for takes) or free space";
            let (needed, available) = (Some(needed), Some(available));
            return Err(Error::DiskFull { op: "commit puts to a channel", path: dir, needed, available, advice });
        }
        Ok(())
    }

    /// Waits until the commit of `lists` fits: the events and bytes held after it within the
    /// capacity and the byte limit — or, for a commit that adds no events (bytes), whatever the
    /// channel holds (after a reopen with a lower capacity, takes must still commit).
    fn wait_for_room(&self, queue: &mut parking_lot::MutexGuard<'_, Queue>, lists: &Lists) -> Result<()> {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(self.config.keep_alive_ms);
        let (puts, takes) = (lists.puts.len() as u64, lists.takes.len() as u64);
        loop {
            self.check_open()?;
            let events = queue.held() + puts - takes;
            let bytes = queue.bytes + lists.put_bytes - lists.take_bytes;
            let events_fit = events <= self.config.capacity || puts <= takes;
            let bytes_fit = bytes <= self.byte_limit || lists.put_bytes <= lists.take_bytes;
            if events_fit && bytes_fit {
                return Ok(());
            }
            if Instant::now() >= deadline {
                Counters::add(&self.counters.channel_full, 1);
                let (capacity, byte_limit) = (self.config.capacity, self.byte_limit);
                return Err(Error::ChannelFull { events, bytes, capacity, byte_limit, waited: started.elapsed() });
            }
            self.room.wait_until(queue, deadline);
        }
    }
}

/// Applies a stored batch whose first offset is `base`: its puts are held and pending, its takes
/// are not held any more.
fn apply(queue: &mut Queue, lists: &Lists, base: u64) {
    let events: Vec<(u64, Event)> = lists.puts.iter().enumerate().map(|(i, e)| (base + i as u64, e.clone())).collect();
    for (offset, _) in &lists.takes {
        let held = queue.live.remove(offset);
        debug_assert!(held, "an event taken is held until its take commits");
    }
    queue.taken -= lists.takes.len() as u64;
    queue.live.extend(events.iter().map(|(offset, _)| *offset));
    queue.bytes = queue.bytes + lists.put_bytes - lists.take_bytes;
    let last_offset = base + lists.puts.len() as u64 + u64::from(!lists.takes.is_empty()) - 1;
    if !events.is_empty() {
        queue.pending.push_back(Pending { last_offset, events });
    }
}
