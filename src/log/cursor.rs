//! `Cursor`: a reader that owns its share of the log (an `Arc` of the log's state, never `&Log`),
//! keeps its position between calls, and can wait at the end of the log for more: what a
//! dispatcher thread or an async task (`spawn_blocking`) tailing the log holds.
//!
//! Each call reads with a short-lived [`LogReader`] over the state and returns owned
//! [`BatchView`]s. Their records share the chunk the reader copied out of the segment (the one
//! memcpy every read makes, under the segment's read lock), so nothing is copied again, and what a
//! caller keeps holds that chunk alive, not the log's files. A `LogReader` generic over `&` or
//! `Arc` would let a caller iterate lazily, but it would copy the same chunks and give the public
//! reader a type parameter; collecting costs one `Vec` per batch and one `Arc` clone per record.
//! A call finds its starting batch again through the sparse offset index, as a Kafka fetch does.
//!
//! Truncations are tracked by epoch, as readers do: the cursor remembers the epoch up to which its
//! position is known good, and the first call after a truncation that cut at or below its position
//! returns `Error::Truncated` once.

use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::log::in_place::{BatchRef, InPlaceRead};
use crate::log::reader::{BatchView, LogReader};
use crate::log::state::LogState;

/// A position in a log that a thread owns: `Send + 'static`, it outlives any borrow of the
/// [`Log`](crate::Log) and reads on from where its last call stopped. Made by
/// [`Log::cursor`](crate::Log::cursor).
///
/// - [`Cursor::next_batch`] returns the next whole batches (at least one if any is visible, else
///   at most `max_bytes` of them) and moves past them; at the visible end it returns none, not an
///   error.
/// - [`Cursor::next_batch_wait`] first waits, without polling, until its position is visible, up
///   to a timeout; another thread stops the wait through a [`CursorInterrupt`].
/// - After a truncation that removed offsets at or below its position, the next call returns
///   `Error::Truncated` once; [`Cursor::seek`] then moves it.
/// - A cursor never holds the directory lock: once the log is closed (or dropped) a new `Log` may
///   open the directory while old cursors live, and every call of those returns `Error::Closed`.
pub struct Cursor {
    state: Arc<LogState>,
    /// The offset of the next record to return.
    position: u64,
    /// The truncation epoch up to which the position is known good: truncations after it that cut
    /// at or below the position are reported.
    epoch: u64,
    /// Set by a [`CursorInterrupt`]; cleared by the call it ends.
    interrupt: Arc<AtomicBool>,
}

/// Interrupts a [`Cursor`]'s waits from another thread (a dispatcher stopping before its log
/// closes). Cloneable, `Send + Sync`; it does not keep the log's state alive.
#[derive(Clone)]
pub struct CursorInterrupt {
    flag: Arc<AtomicBool>,
    state: Weak<LogState>,
}

// A cursor moves to the thread that reads (a dispatcher, `spawn_blocking`); its interrupt is
// shared with the thread that stops it.
const _: () = {
    const fn send_static<T: Send + 'static>() {}
    const fn shared<T: Send + Sync + Clone + 'static>() {}
    send_static::<Cursor>();
    shared::<CursorInterrupt>();
};

impl Cursor {
    /// A cursor at `offset`, which must be in `[start offset, next offset]` (as for `Log::read`).
    pub(crate) fn new(state: Arc<LogState>, offset: u64) -> Result<Cursor> {
        // Before the offsets: a truncation after this is caught up with at the first call.
        let epoch = state.durability.truncations();
        let (start, next) = (state.offsets.start(), state.offsets.next());
        if offset < start || offset > next {
            return Err(Error::OffsetOutOfRange { requested: offset, start, next });
        }
        Ok(Cursor { state, position: offset, epoch, interrupt: Arc::new(AtomicBool::new(false)) })
    }

    /// The offset of the next record the cursor returns (the earliest it can be: the cleaner may
    /// have removed it).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Moves the cursor to `offset`; the next call checks it (`Error::OffsetOutOfRange` if it is
    /// outside the log then). A truncation the cursor has not reported yet is still reported if
    /// it cut at or below `offset`: a position chosen from what the log held before it may name
    /// records it removed.
    pub fn seek(&mut self, offset: u64) {
        self.position = offset;
    }

    /// A handle another thread uses to interrupt this cursor's waits.
    pub fn interrupter(&self) -> CursorInterrupt {
        CursorInterrupt { flag: Arc::clone(&self.interrupt), state: Arc::downgrade(&self.state) }
    }

    /// Returns the next records as whole batches, at most `max_bytes` of them except that at least
    /// one batch is returned if any is visible, and moves past them. Every batch is verified
    /// before any of its records is returned. At the visible end it returns none and stays.
    ///
    /// Errors: `Error::Closed` once the log is closed (whatever else the call met);
    /// `Error::Truncated` once after a truncation that removed the position;
    /// `Error::OffsetOutOfRange` if the position is below the start (retention, a prefix deletion)
    /// or past the next offset. Damage met after some batches is returned by the next call, which
    /// meets it again: the valid batches before it come first.
    pub fn next_batch(&mut self, max_bytes: usize) -> Result<Vec<BatchView>> {
        self.check_open()?;
        let read = self.read(max_bytes);
        self.unless_closed(read)
    }

    /// [`Cursor::next_batch`] in place, as [`Log::read_batches`](crate::Log::read_batches) reads:
    /// each batch is verified where it lies and passed to `visit` with records that borrow it (no
    /// copy, no allocation), at most `max_bytes` of batches (at least one if any is visible),
    /// until `visit` breaks; the cursor moves past each batch visited. Returns how many were.
    /// Same errors as `next_batch`: damage met after some batches is returned by the next call.
    /// `visit` must be short and must not call into the log (see `Log::read_batches`).
    ///
    /// ```
    /// # fn main() -> strata_log::Result<()> {
    /// use std::ops::ControlFlow;
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// log.append(&[Record::new(b"a"), Record::new(b"b")])?;
    /// let mut cursor = log.cursor(0)?;
    /// let mut offsets = Vec::new();
    /// let batches = cursor.read_batches(1 << 20, |batch| {
    ///     offsets.extend(batch.records().map(|r| r.offset()));
    ///     ControlFlow::Continue(())
    /// })?;
    /// assert_eq!((batches, offsets, cursor.position()), (1, vec![0, 1], 2));
    /// # Ok(()) }
    /// ```
    pub fn read_batches(
        &mut self,
        max_bytes: usize,
        mut visit: impl FnMut(BatchRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize> {
        self.check_open()?;
        let read = self.read_in_place(max_bytes, &mut visit);
        let visited = matches!(read, Ok(n) if n > 0);
        if !visited && self.state.durability.is_closed() { Err(Error::Closed) } else { read }
    }

    fn read_in_place(
        &mut self,
        max_bytes: usize,
        visit: &mut dyn FnMut(BatchRef<'_>) -> ControlFlow<()>,
    ) -> Result<usize> {
        let (epoch, end) = self.bounds()?;
        let mut read = InPlaceRead::new(&self.state, self.position, end, max_bytes, epoch);
        let result = read.run(visit);
        // The read moves only past batches it verified (and offsets the cleaner removed).
        self.position = read.next_offset();
        match result {
            // Met again by the next call; a truncation is then reported through the epoch.
            Err(_) if read.visited() > 0 => Ok(read.visited()),
            Err(error @ Error::Truncated { .. }) => self.catch_up().and(Err(error)),
            Err(error) => Err(error),
            Ok(()) => Ok(read.visited()),
        }
    }

    /// [`Cursor::next_batch`] once the position is visible: waits for it first, without polling,
    /// up to `timeout`, and returns none if it did not become visible in time (as at the end: not
    /// an error). Under `FlushPolicy::Always` the waiting thread may lead the sync round that
    /// makes it durable, as an appender does.
    ///
    /// Errors: those of `next_batch` (checked before the wait as well as after), `Error::Interrupted`
    /// if a [`CursorInterrupt`] interrupted the wait, or had been used since the last call
    /// (nothing is read then), and `Error::Poisoned` if the log is poisoned while nothing is
    /// visible (nothing more will come). On a read-only log nothing becomes visible while it waits: its view of the files is
    /// the one taken at open.
    pub fn next_batch_wait(&mut self, max_bytes: usize, timeout: Duration) -> Result<Vec<BatchView>> {
        self.check_open()?;
        if self.interrupt.swap(false, Ordering::SeqCst) {
            return Err(Error::Interrupted);
        }
        let read = self.wait_then_read(max_bytes, timeout);
        self.unless_closed(read)
    }

    /// Waits, as [`Cursor::next_batch_wait`] does, until the position is visible, up to
    /// `timeout`, and returns whether it is — without reading: for a thread that waits for a log
    /// while the reading is done elsewhere (the message store's dispatcher waits with its own
    /// cursor; whichever thread takes the dispatch lock first reads). Errors as
    /// `next_batch_wait`'s.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use strata_log::{Log, LogConfig, Record};
    /// let dir = tempfile::tempdir()?;
    /// let log = Log::open(dir.path(), LogConfig::default())?;
    /// let mut cursor = log.cursor(0)?;
    /// assert!(!cursor.wait_visible(Duration::from_millis(10))?, "nothing yet");
    /// log.append(&[Record::new(b"a")])?;
    /// assert!(cursor.wait_visible(Duration::from_secs(5))?);
    /// assert_eq!(cursor.position(), 0, "nothing was read");
    /// # Ok(()) }
    /// ```
    pub fn wait_visible(&mut self, timeout: Duration) -> Result<bool> {
        self.check_open()?;
        if self.interrupt.swap(false, Ordering::SeqCst) {
            return Err(Error::Interrupted);
        }
        let waited = self.wait(timeout);
        if !matches!(waited, Ok(true)) && self.state.durability.is_closed() { Err(Error::Closed) } else { waited }
    }

    fn wait_then_read(&mut self, max_bytes: usize, timeout: Duration) -> Result<Vec<BatchView>> {
        if self.wait(timeout)? { self.read(max_bytes) } else { Ok(Vec::new()) }
    }

    /// Waits until the position is visible: `Ok(false)` at the timeout.
    fn wait(&mut self, timeout: Duration) -> Result<bool> {
        // A position already removed, or out of range, is said now rather than after a wait.
        self.bounds()?;
        let waited = self.state.wait_visible_interruptible(self.position, Some(timeout), Some(&self.interrupt));
        match waited {
            Ok(()) => Ok(true),
            Err(Error::Timeout { .. }) => Ok(false),
            Err(Error::Interrupted) => {
                self.interrupt.store(false, Ordering::SeqCst);
                Err(Error::Interrupted)
            }
            // Cut during the wait: report it through the epoch, so it is reported once.
            Err(error @ Error::Truncated { .. }) => self.catch_up().and(Err(error)),
            Err(error) => Err(error),
        }
    }

    /// One read from the position up to the visible end.
    fn read(&mut self, max_bytes: usize) -> Result<Vec<BatchView>> {
        let (epoch, end) = self.bounds()?;
        let mut batches = LogReader::new(&self.state, self.position, end, max_bytes as u64, epoch).batches();
        let mut read = Vec::new();
        let error = loop {
            match batches.next() {
                Some(Ok(batch)) => read.push(batch),
                Some(Err(error)) => break Some(error),
                None => break None,
            }
        };
        // The reader moves only past batches it verified (and offsets the cleaner removed).
        self.position = batches.next_offset();
        match error {
            // Met again by the next call; a truncation is then reported through the epoch.
            Some(_) if !read.is_empty() => Ok(read),
            Some(error @ Error::Truncated { .. }) => self.catch_up().and(Err(error)),
            Some(error) => Err(error),
            None => Ok(read),
        }
    }

    /// The epoch and visible end to read with, once the position is known to be in the log.
    fn bounds(&mut self) -> Result<(u64, u64)> {
        if let Some(bounds) = self.try_bounds()? {
            return Ok(bounds);
        }
        // A truncation or reset moves the offsets before it counts itself, holding the append lock
        // throughout: wait it out (the readers' barrier) and look again, so a position it removed
        // is `Truncated`, not out of range.
        drop(self.state.appender.lock());
        if let Some(bounds) = self.try_bounds()? {
            return Ok(bounds);
        }
        let (start, next) = (self.state.offsets.start(), self.state.offsets.next());
        Err(Error::OffsetOutOfRange { requested: self.position, start, next })
    }

    /// The epoch and visible end, or `None` if the position is outside `[start, next]`.
    fn try_bounds(&mut self) -> Result<Option<(u64, u64)>> {
        // The epoch before the visible end (as `Log::read`): a later truncation is the reader's.
        let epoch = self.catch_up()?;
        let offsets = &self.state.offsets;
        let (start, end, next) = (offsets.start(), offsets.visible(), offsets.next());
        Ok((start..=next).contains(&self.position).then_some((epoch, end)))
    }

    /// Moves the epoch to now, and fails with `Error::Truncated` if a truncation since the last
    /// one cut at or below the position (offsets there may now hold other records).
    fn catch_up(&mut self) -> Result<u64> {
        let (now, cut) = self.state.durability.truncations_since(self.epoch);
        debug_assert!(now >= self.epoch, "truncation epochs only grow");
        self.epoch = now;
        match cut {
            Some(cut) if self.position >= cut => Err(Error::Truncated { next_offset: self.state.offsets.next() }),
            _ => Ok(now),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.state.durability.is_closed() { Err(Error::Closed) } else { Ok(()) }
    }

    /// What a call returns once the log is closed: `Error::Closed` for anything but records read.
    /// A closed log retires its segments, so a read racing the close may end early, find its
    /// segment gone (a false `OffsetOutOfRange`) or fail; the batches it did verify are good.
    fn unless_closed(&self, result: Result<Vec<BatchView>>) -> Result<Vec<BatchView>> {
        let records_read = matches!(&result, Ok(batches) if !batches.is_empty());
        if !records_read && self.state.durability.is_closed() { Err(Error::Closed) } else { result }
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor").field("dir", &self.state.dir).field("position", &self.position).finish()
    }
}

impl CursorInterrupt {
    /// Makes the cursor's [`Cursor::next_batch_wait`] return `Error::Interrupted`: the wait in
    /// progress, at once (after a sync round it is leading, under `FlushPolicy::Always`), or else
    /// the next call, as Kafka's `Consumer::wakeup` does. One interrupt ends one call.
    pub fn interrupt(&self) {
        self.flag.store(true, Ordering::SeqCst);
        // No state: no cursor is left to wait.
        if let Some(state) = self.state.upgrade() {
            state.durability.notify_progress(true);
        }
    }
}

impl fmt::Debug for CursorInterrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CursorInterrupt").field("pending", &self.flag.load(Ordering::Relaxed)).finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::Log;
    use crate::log::batch::Record;

    #[test]
    fn a_read_that_met_the_close_is_closed() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
        let log = Log::open(dir.path(), config).unwrap();
        for _ in 0..200 {
            log.append(&[Record::new(&[7; 64])]).unwrap();
        }
        let mut cursor = log.cursor(0).unwrap();
        drop(log);
        // What a read that passed `check_open` just before the close meets: segments retired.
        let raced = cursor.read(1 << 20);
        // (An `Error::Unsettled` when written: every lookup found its segment retired.)
        assert!(!matches!(&raced, Ok(batches) if !batches.is_empty()), "{raced:?}");
        assert!(matches!(cursor.unless_closed(raced), Err(Error::Closed)));
    }
}
