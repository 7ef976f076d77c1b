//! The state a `Log` shares with its background threads (the syncer and the preallocator), and the
//! durability machinery on it: sync rounds (group commit), sealing rolled segments, the directory
//! fsync, the checkpoint, poisoning, and waiting for durability or visibility (DESIGN.md §2, §8).

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::config::{FlushPolicy, LogConfig};
use crate::error::{Corruption, Error, Result};
use crate::events::EventHandle;
use crate::log::append::Appender;
use crate::log::checkpoint::Checkpoint;
use crate::log::cleaner::CleanerState;
use crate::log::load::{LiveTail, RecoveryReport};
use crate::log::metrics::{Counters, LogMetrics};
use crate::log::prealloc::Preallocator;
use crate::log::segment::{Located, LogSegment};
use crate::log::segments::Segments;
use crate::log::walk::BatchPos;
use crate::storage;

/// How often a read looks for the segment holding an offset again when the segments changed under
/// it (deleted by retention, replaced by a truncation or compaction) before giving up.
pub(crate) const LOCATE_ATTEMPTS: usize = 16;

/// Everything a `Log` and its threads share.
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: LogConfig,
    /// The segments, and the structure lock that guards replacing or removing them.
    pub segments: Segments,
    pub appender: Mutex<Appender>,
    /// The offset the next record gets (published after its batch is stored).
    pub next_offset: AtomicU64,
    /// Readers see offsets below this: the durable offset under `Always`, else the next offset.
    pub visible_end: AtomicU64,
    /// Every offset below this is fsynced, data and directory entries.
    pub durable_offset: AtomicU64,
    pub start_offset: AtomicU64,
    /// Segments rolled away from but not yet sealed, oldest first.
    pub rolled: Mutex<Vec<Arc<LogSegment>>>,
    /// Held while sealing rolled segments, so when one `seal_rolled` returns, every segment rolled
    /// before it was sealed (by it or by the call it waited for).
    seal_lock: Mutex<()>,
    /// The checkpoint as last written, and a reset in progress it records; its lock serialises
    /// checkpoint writes.
    checkpoint: Mutex<(Checkpoint, Option<u64>)>,
    /// A segment was created or renamed into place since the directory was last fsynced.
    /// `dir_sync` serialises the fsync, so nobody sees "clean" while another thread's is running.
    pub dir_dirty: AtomicBool,
    dir_sync: Mutex<()>,
    poisoned: AtomicBool,
    closed: AtomicBool,
    pub report: RecoveryReport,
    read_only: bool,
    /// A read-only log: where its last segment's valid data ended at open.
    live_tail: Mutex<Option<LiveTail>>,
    corruption_seen: AtomicBool,
    /// Holds the directory's exclusive lock until the log is dropped (`None` when read-only).
    _lock: Option<File>,
    /// What the syncer should do; `progress` (with this mutex) wakes threads waiting for
    /// durability or visibility.
    pub sync: Mutex<SyncState>,
    pub syncer_wake: Condvar,
    progress: Condvar,
    /// Threads waiting on `progress`, so appends only lock `sync` to notify when someone waits.
    waiters: AtomicUsize,
    /// A sync round is running (by the syncer, a flush, or an appender leading one).
    syncing: AtomicBool,
    pub counters: Counters,
    pub prealloc: Arc<Preallocator>,
    /// The log's background event thread (none for a read-only log).
    pub events: Option<EventHandle>,
    /// Truncations so far (an epoch), and the offset each cut at, in order: a waiter or reader that
    /// saw an earlier epoch and is at or past a later cut gets `Error::Truncated`.
    truncations: AtomicU64,
    cuts: Mutex<Vec<u64>>,
    pub cleaner: CleanerState,
}

/// What a checkpoint write does to the reset-in-progress mark it carries.
enum ResetMark {
    /// Writes the mark as it stands (a periodic checkpoint during a reset must not clear it).
    Keep,
    /// A reset to this offset begins.
    Set(u64),
    /// The reset is complete.
    Clear,
}

/// Keeps sync rounds from running while it lives ([`Shared::hold_rounds`]).
pub(crate) struct RoundsHeld<'a> {
    shared: &'a Shared,
}

impl Drop for RoundsHeld<'_> {
    fn drop(&mut self) {
        self.shared.syncing.store(false, Ordering::SeqCst);
        self.shared.notify_progress(true);
    }
}

/// Requests to the syncer thread.
#[derive(Debug)]
pub(crate) struct SyncState {
    pub shutdown: bool,
    /// An appender waits for durability (`Always`) or too many records wait (`EveryInterval`).
    pub sync_requested: bool,
    /// A segment was rolled away from: it must be sealed and the checkpoint written.
    pub roll_pending: bool,
    pub last_sync: Instant,
}

/// What a freshly loaded directory hands to [`Shared::new`].
pub(crate) struct Initial {
    pub segments: Vec<LogSegment>,
    pub next_offset: u64,
    pub log_start_offset: u64,
    pub report: RecoveryReport,
    pub live_tail: Option<LiveTail>,
    /// The checkpoint on disk is older than the loaded state (the open could not write it).
    pub checkpoint_stale: bool,
}

impl Shared {
    pub(crate) fn new(
        dir: PathBuf,
        config: LogConfig,
        initial: Initial,
        lock: Option<File>,
        events: Option<EventHandle>,
    ) -> Result<Shared> {
        let segments: Vec<Arc<LogSegment>> = initial.segments.into_iter().map(Arc::new).collect();
        let active = segments.last().cloned();
        let active = active.ok_or_else(|| Error::io("load", &dir)(std::io::ErrorKind::NotFound.into()))?;
        let segments = Segments::new(segments);
        let next = initial.next_offset;
        // What the file holds, as far as the next write must know: a stale one is rewritten then.
        let recovery_point = if initial.checkpoint_stale { 0 } else { next };
        let checkpoint = Checkpoint { log_start_offset: initial.log_start_offset, recovery_point };
        let now = Instant::now();
        Ok(Shared {
            prealloc: Arc::new(Preallocator::new(&dir, &config, events.clone())),
            events,
            truncations: AtomicU64::new(0),
            cuts: Mutex::new(Vec::new()),
            cleaner: CleanerState::default(),
            dir,
            segments,
            appender: Mutex::new(Appender::new(active)),
            next_offset: AtomicU64::new(next),
            visible_end: AtomicU64::new(next),
            durable_offset: AtomicU64::new(next),
            start_offset: AtomicU64::new(initial.log_start_offset),
            rolled: Mutex::new(Vec::new()),
            seal_lock: Mutex::new(()),
            checkpoint: Mutex::new((checkpoint, None)),
            dir_dirty: AtomicBool::new(false),
            dir_sync: Mutex::new(()),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            corruption_seen: AtomicBool::new(!initial.report.corrupt_copies.is_empty()),
            report: initial.report,
            live_tail: Mutex::new(initial.live_tail),
            read_only: lock.is_none(),
            _lock: lock,
            sync: Mutex::new(SyncState { shutdown: false, sync_requested: false, roll_pending: false, last_sync: now }),
            syncer_wake: Condvar::new(),
            progress: Condvar::new(),
            waiters: AtomicUsize::new(0),
            syncing: AtomicBool::new(false),
            counters: Counters::default(),
            config,
        })
    }

    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// What a read that failed with `error` reports: `None` (the end of the data) if it is the
    /// end of a read-only log of a live writer — damage at the end of the last segment's valid
    /// data that the checkpoint, read again now, does not claim durable (a batch being written, or
    /// a tail a truncation is cutting) — else the error. Corruption is remembered
    /// (`metrics().corruption_seen`) and logged the first time.
    pub(crate) fn judge_read_error(&self, error: Error) -> Option<Error> {
        if self.live_tail.lock().as_ref().is_some_and(|tail| tail.is_end(&self.dir, &error)) {
            return None;
        }
        if let Error::Corrupt { .. } = &error
            && !self.corruption_seen.swap(true, Ordering::AcqRel)
        {
            tracing::warn!(dir = %self.dir.display(), %error, "damage found by a read: run `strata verify` on the log");
        }
        Some(error)
    }

    /// A read-only log sees the files as they were at open; a live writer then seals (trims),
    /// compacts (swaps files), deletes and cuts segments under it. Before a read reports an error,
    /// the view is taken again from the files as they are now (the segments, their lengths, the
    /// offsets) and the read retried: damage shows again, a writer's change does not.
    pub(crate) fn refresh_read_only(&self) -> Result<()> {
        debug_assert!(self.read_only, "only a read-only log re-reads its files");
        let loaded = crate::log::load::load_read_only(&self.dir, &self.config)?;
        let fresh: Vec<Arc<LogSegment>> = loaded.segments.into_iter().map(Arc::new).collect();
        let structure = self.segments.lock();
        let old = self.segments.all();
        self.segments.edit(&structure, |map| {
            old.iter().for_each(|segment| map.remove(segment));
            fresh.into_iter().for_each(|segment| map.insert(segment));
        });
        drop(structure);
        for segment in &old {
            segment.retire();
        }
        self.start_offset.store(loaded.log_start_offset, Ordering::SeqCst);
        self.next_offset.store(loaded.next_offset, Ordering::SeqCst);
        self.durable_offset.store(loaded.next_offset, Ordering::SeqCst);
        self.visible_end.store(loaded.next_offset, Ordering::SeqCst);
        *self.live_tail.lock() = loaded.live_tail;
        Ok(())
    }

    /// Whether this log is known damaged: a `.corrupt` copy was in its directory at open, or a
    /// read in this process returned `Error::Corrupt`.
    pub(crate) fn corruption_seen(&self) -> bool {
        self.corruption_seen.load(Ordering::Acquire)
    }

    pub(crate) fn start_offset(&self) -> u64 {
        self.start_offset.load(Ordering::Acquire)
    }

    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Acquire)
    }

    pub(crate) fn durable_offset(&self) -> u64 {
        self.durable_offset.load(Ordering::SeqCst)
    }

    pub(crate) fn visible_end(&self) -> u64 {
        self.visible_end.load(Ordering::SeqCst)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnly)
        } else if self.is_poisoned() {
            Err(Error::Poisoned)
        } else if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Marks the log unusable for writes after a failure that may have left partial state, and
    /// wakes every waiter so it returns `Error::Poisoned` instead of hanging.
    pub(crate) fn poison(&self, error: Error) -> Error {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %self.dir.display(), %error, "log poisoned: reopen it to recover");
        }
        self.notify_progress(true);
        error
    }

    /// Marks the log closed and wakes every waiter. Returns whether it was already closed.
    pub(crate) fn mark_closed(&self) -> bool {
        let was = self.closed.swap(true, Ordering::AcqRel);
        self.notify_progress(true);
        was
    }

    /// Publishes a stored batch ending at `next` to readers, unless they only see durable data.
    pub(crate) fn publish_stored(&self, next: u64) {
        if self.config.flush_policy != FlushPolicy::Always {
            self.visible_end.fetch_max(next, Ordering::SeqCst);
            self.notify_progress(false);
        }
    }

    /// Moves the durable offset (and under `Always` the visible end) to `to` — unless a failure
    /// poisoned the log meanwhile (another thread's fsync may have failed over data this caller's
    /// sync did not cover).
    fn advance_durable(&self, to: u64) -> Result<()> {
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        self.durable_offset.fetch_max(to, Ordering::SeqCst);
        if self.config.flush_policy == FlushPolicy::Always {
            self.visible_end.fetch_max(to, Ordering::SeqCst);
        }
        self.notify_progress(false);
        Ok(())
    }

    /// Wakes the threads waiting on `progress` (always, or only if there are any).
    fn notify_progress(&self, always: bool) {
        if always || self.waiters.load(Ordering::SeqCst) > 0 {
            let _sync = self.sync.lock();
            self.progress.notify_all();
        }
    }

    /// Asks the syncer for a round now.
    pub(crate) fn request_sync(&self) {
        let mut state = self.sync.lock();
        state.sync_requested = true;
        self.syncer_wake.notify_one();
    }

    /// Tells the syncer a segment was rolled away from.
    pub(crate) fn request_seal(&self) {
        let mut state = self.sync.lock();
        state.roll_pending = true;
        self.syncer_wake.notify_one();
    }

    /// Blocks until `done()` holds, the deadline passes (`Error::Timeout`), or the log is poisoned
    /// or closed — never by polling.
    fn wait_until(&self, timeout: Option<Duration>, done: impl Fn() -> bool) -> Result<()> {
        let started = Instant::now();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut sync = self.sync.lock();
        let result = loop {
            if done() {
                break Ok(());
            }
            if self.is_poisoned() {
                break Err(Error::Poisoned);
            }
            if self.closed.load(Ordering::Acquire) {
                break Err(Error::Closed);
            }
            match timeout {
                None => self.progress.wait(&mut sync),
                Some(timeout) => {
                    let Some(left) = timeout.checked_sub(started.elapsed()) else {
                        break Err(Error::Timeout { waited: started.elapsed() });
                    };
                    self.progress.wait_for(&mut sync, left);
                }
            }
        };
        drop(sync);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Waits until `offset` is durable. If no sync round is running, the caller runs one itself
    /// (leader-follower group commit, as PostgreSQL's backends flush WAL): it covers everything
    /// stored so far, so appenders that arrive during it wait for it, or for the next round one of
    /// them leads. No thread handoff when the log is quiet; one fsync per round when it is busy.
    pub(crate) fn wait_durable(&self, offset: u64, timeout: Option<Duration>, epoch: u64) -> Result<()> {
        let started = Instant::now();
        let left = || timeout.map(|t| t.saturating_sub(started.elapsed()));
        loop {
            self.check_truncated(epoch, offset)?;
            if self.durable_offset() > offset {
                return Ok(());
            }
            if left().is_some_and(|l| l.is_zero()) {
                return Err(Error::Timeout { waited: started.elapsed() });
            }
            let seen = self.truncations();
            if offset >= self.next_offset() {
                // Not stored yet: no round can make it durable, so wait for appends (never spin).
                self.wait_until(left(), || self.next_offset() > offset || self.truncations() != seen)?;
                continue;
            }
            if let Some(round) = self.lead_round() {
                round?;
                continue;
            }
            // A follower: wait for the running round to end, then check again (or lead the next).
            self.wait_until(left(), || {
                self.durable_offset() > offset || !self.syncing.load(Ordering::SeqCst) || self.truncations() != seen
            })?;
        }
    }

    /// Runs a sync round unless one is already running (`None` then).
    pub(crate) fn lead_round(&self) -> Option<Result<bool>> {
        if self.syncing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return None;
        }
        // A panic in a round is a bug; it must not leave `syncing` set (every appender would wait
        // for a round that never ends) nor reach an appender that merely led the round.
        let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sync_round()))
            .unwrap_or_else(|payload| Err(self.poison(Error::panicked("a sync round", payload.as_ref()))));
        self.syncing.store(false, Ordering::SeqCst);
        self.notify_progress(true);
        Some(round)
    }

    /// Waits for a running sync round to end and keeps others from starting until the guard drops
    /// (a truncation must not race a round that read the old next offset).
    pub(crate) fn hold_rounds(&self) -> Result<RoundsHeld<'_>> {
        loop {
            if self.syncing.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return Ok(RoundsHeld { shared: self });
            }
            self.wait_until(None, || !self.syncing.load(Ordering::SeqCst))?;
        }
    }

    /// Records a truncation to `cut` and wakes every waiter (those past the cut get
    /// `Error::Truncated`).
    pub(crate) fn note_truncation(&self, cut: u64) {
        let mut cuts = self.cuts.lock();
        cuts.push(cut);
        self.truncations.store(cuts.len() as u64, Ordering::SeqCst);
        drop(cuts);
        Counters::add(&self.counters.truncations, 1);
        self.notify_progress(true);
    }

    /// Truncations so far (an epoch for readers and waiters).
    pub(crate) fn truncations(&self) -> u64 {
        self.truncations.load(Ordering::SeqCst)
    }

    /// The lowest offset a truncation cut at since epoch `since`, if there was one.
    pub(crate) fn lowest_cut_since(&self, since: u64) -> Option<u64> {
        if self.truncations() == since {
            return None;
        }
        self.cuts.lock().iter().skip(since as usize).copied().min()
    }

    /// `Error::Truncated` if a truncation since epoch `since` removed `offset`.
    pub(crate) fn check_truncated(&self, since: u64, offset: u64) -> Result<()> {
        match self.lowest_cut_since(since) {
            Some(cut) if offset >= cut => Err(Error::Truncated { next_offset: self.next_offset() }),
            _ => Ok(()),
        }
    }

    /// Runs a sync round, waiting for a running one to end first (the syncer, close).
    pub(crate) fn run_round(&self) -> Result<bool> {
        loop {
            if let Some(round) = self.lead_round() {
                return round;
            }
            self.wait_until(None, || !self.syncing.load(Ordering::SeqCst))?;
        }
    }

    /// Waits until `offset` is visible to readers.
    /// A truncation that removes `offset` before it becomes visible fails the wait with
    /// `Error::Truncated` (a tailing reader must learn its position now holds other records).
    pub(crate) fn wait_visible(&self, offset: u64, timeout: Option<Duration>) -> Result<()> {
        if self.visible_end() > offset {
            return Ok(());
        }
        if self.config.flush_policy == FlushPolicy::Always && self.next_offset() > offset {
            return self.wait_durable(offset, timeout, self.truncations());
        }
        let started = Instant::now();
        let epoch = self.truncations();
        loop {
            let seen = self.truncations();
            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
            self.wait_until(left, || self.visible_end() > offset || self.truncations() != seen)?;
            self.check_truncated(epoch, offset)?;
            if self.visible_end() > offset {
                return Ok(());
            }
        }
    }

    /// One sync round (group commit): seals every segment rolled away from, fdatasyncs every segment
    /// written since the durable offset and the directory if it changed, then moves the durable
    /// offset over everything stored when the round began. Returns whether a roll was sealed.
    /// Callers go through [`Shared::lead_round`], so rounds never overlap.
    fn sync_round(&self) -> Result<bool> {
        #[cfg(feature = "failpoints")]
        fail::fail_point!("sync_round", |_| Ok(false));
        let target = self.next_offset();
        let sealed = self.seal_rolled()?;
        crate::failpoint::crash_point!("after_seal");
        let started = Instant::now();
        let mut synced = 0;
        self.segments.try_for_each_from(self.durable_floor(), |segment| {
            segment.flush().map_err(|e| self.poison(e))?;
            synced += 1;
            Ok::<(), Error>(())
        })?;
        self.sync_dir_if_dirty()?;
        self.counters.fsync_latency.record(started.elapsed());
        Counters::add(&self.counters.fsyncs, synced);
        Counters::add(&self.counters.sync_rounds, 1);
        self.advance_durable(target)?;
        Ok(sealed)
    }

    /// Seals every segment rolled away from so far, oldest first. Returns whether there was any.
    pub(crate) fn seal_rolled(&self) -> Result<bool> {
        let _sealing = self.seal_lock.lock();
        let mut any = false;
        loop {
            let next = self.rolled.lock().first().cloned();
            let Some(segment) = next else { return Ok(any) };
            segment.seal().map_err(|e| self.poison(e))?;
            Counters::add(&self.counters.fsyncs, 3);
            // By identity, never by position: while it was being sealed, a prefix deletion or a reset
            // may have taken this segment (or others) out of the list.
            let mut rolled = self.rolled.lock();
            rolled.retain(|r| !Arc::ptr_eq(r, &segment));
            debug_assert!(rolled.iter().all(|r| !r.is_sealed()), "only unsealed segments wait to be sealed");
            drop(rolled);
            any = true;
        }
    }

    /// Base offset of the segment holding the durable offset: nothing below it needs a flush.
    fn durable_floor(&self) -> u64 {
        let durable = self.durable_offset();
        self.segments.floor(durable).map_or(0, |s| s.base_offset())
    }

    fn sync_dir_if_dirty(&self) -> Result<()> {
        let _serialised = self.dir_sync.lock();
        if self.dir_dirty.swap(false, Ordering::AcqRel)
            && let Err(e) = storage::sync_dir(&self.dir)
        {
            self.dir_dirty.store(true, Ordering::Release);
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// Writes the checkpoint with the durable offset as recovery point (never moving it back).
    pub(crate) fn write_checkpoint(&self) -> Result<()> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: current.log_start_offset,
            recovery_point: current.recovery_point.max(durable),
        };
        self.store_checkpoint(next, ResetMark::Keep, || {})
    }

    /// Writes the checkpoint with the recovery point at most `cap`, then runs `then` (a truncation
    /// moving the durable offset down to the cut) under the checkpoint lock: a truncation lowers
    /// the recovery point before it changes any file, so no crash can claim the removed records
    /// durable, and no concurrent checkpoint can raise it again from the old durable offset.
    pub(crate) fn write_checkpoint_capped<T>(&self, cap: u64, then: impl FnOnce() -> T) -> Result<T> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: current.log_start_offset,
            recovery_point: current.recovery_point.max(durable).min(cap),
        };
        self.store_checkpoint(next, ResetMark::Keep, then)
    }

    /// Writes the checkpoint with a new log start offset, then publishes the start to readers,
    /// under the checkpoint lock: from here no crash brings the records below the start back.
    pub(crate) fn write_checkpoint_new_start(&self, start: u64) -> Result<()> {
        let next = |current: &Checkpoint, durable: u64| Checkpoint {
            log_start_offset: start,
            recovery_point: current.recovery_point.max(durable),
        };
        self.store_checkpoint(next, ResetMark::Keep, || {})
    }

    /// The first step of `reset_at(offset)`: the checkpoint says start = recovery point = `offset`
    /// and that a reset to it is in progress (an open after a crash completes it), then `then`
    /// moves the offsets, under the checkpoint lock.
    pub(crate) fn write_checkpoint_reset<T>(&self, offset: u64, then: impl FnOnce() -> T) -> Result<T> {
        let next = |_: &Checkpoint, _: u64| Checkpoint { log_start_offset: offset, recovery_point: offset };
        self.store_checkpoint(next, ResetMark::Set(offset), then)
    }

    /// The last step of a reset: the checkpoint no longer says a reset is in progress.
    pub(crate) fn write_checkpoint_reset_done(&self) -> Result<()> {
        self.store_checkpoint(|current, _| *current, ResetMark::Clear, || {})
    }

    /// Writes the checkpoint `next(current, durable offset)` and, once it is durable, publishes its
    /// log start offset and runs `then`, all under the checkpoint lock (so no concurrent write can
    /// store an older start after a newer one, or a recovery point computed from offsets `then`
    /// moves). A failed write is an ordinary error (DESIGN.md §8): nothing is poisoned, nothing
    /// moves, the file keeps the older checkpoint and the next write retries.
    fn store_checkpoint<T>(
        &self,
        next: impl FnOnce(&Checkpoint, u64) -> Checkpoint,
        reset: ResetMark,
        then: impl FnOnce() -> T,
    ) -> Result<T> {
        let mut state = self.checkpoint.lock();
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let (checkpoint, pending) = &mut *state;
        let next = next(checkpoint, self.durable_offset());
        let next_pending = match reset {
            ResetMark::Keep => *pending,
            ResetMark::Set(offset) => Some(offset),
            ResetMark::Clear => None,
        };
        if next != *checkpoint || next_pending != *pending {
            if let Err(error) = next.write_with(&self.dir, next_pending) {
                Counters::add(&self.counters.checkpoint_failures, 1);
                // Bytes written but a failed fsync: the file's state on disk is unknown, and the
                // next write, choosing its slot from what it reads back, could overwrite the last
                // good one. That is a failed fsync like any other.
                if let Error::Io { op: "fdatasync" | "fsync directory", .. } = error {
                    return Err(self.poison(error));
                }
                tracing::warn!(dir = %self.dir.display(), %error, "writing the checkpoint failed; the recovery point stays lower until a write succeeds");
                return Err(error);
            }
            Counters::add(&self.counters.checkpoints, 1);
            self.start_offset.store(next.log_start_offset, Ordering::SeqCst);
            *checkpoint = next;
            *pending = next_pending;
        }
        let done = then();
        debug_assert!(
            checkpoint.recovery_point <= self.durable_offset().max(checkpoint.log_start_offset),
            "the recovery point covers only durable data"
        );
        Ok(done)
    }

    /// The segment and batch where a read of `offset` starts, below `upper`. The segment holding
    /// `offset` must have a batch at or after it: if its data ends first, records below `upper` are
    /// missing and that is `Error::Corrupt`, never a silent skip to the next segment.
    /// `epoch` is the caller's truncation count: data ending early because a truncation cut it is
    /// `Error::Truncated`, not damage.
    pub(crate) fn locate(&self, offset: u64, upper: u64, epoch: u64) -> Result<Option<(Arc<LogSegment>, BatchPos)>> {
        // A segment deleted under us by retention is retried once the map no longer holds it.
        for _ in 0..LOCATE_ATTEMPTS {
            let version = self.segments.settled_version();
            let start = self.start_offset();
            let segment = self.segments.floor(offset).filter(|_| offset >= start);
            let located = segment.as_ref().map(|s| s.locate(offset));
            // Anything but a found batch may be an artefact of an edit of the segments (a swap
            // replacing the segment that holds `offset`): look again once it is done.
            if !matches!(located, Some(Ok(Located::At(_)))) && self.segments.changed_since(version) {
                continue;
            }
            let (Some(segment), Some(located)) = (segment, located) else {
                return Err(Error::OffsetOutOfRange { requested: offset, start, next: upper });
            };
            self.check_continuity(&segment)?;
            match located? {
                Located::At(at) => return Ok(Some((segment, at))),
                // Deleted by retention, or being replaced by a truncation (which holds the append
                // lock until the map holds the new segment): wait for it, then look again.
                Located::Retired => drop(self.appender.lock()),
                Located::End(end) if end.expected >= upper => return Ok(None),
                Located::End(end) => {
                    // A truncation may be under way (it holds the append lock until it is noted).
                    drop(self.appender.lock());
                    if self.truncations() != epoch {
                        return Err(Error::Truncated { next_offset: self.next_offset() });
                    }
                    let reason = Corruption::DataEndsEarly { end: end.expected, upper };
                    return Err(segment.corrupt(end.position, reason));
                }
            }
        }
        Err(Error::Unsettled { attempts: LOCATE_ATTEMPTS })
    }

    /// At a segment's first read: it must begin where the segment before it ends. One that begins
    /// inside it is a foreign file (DESIGN.md §4: copied in from elsewhere) and reading it would
    /// return another log's records: `Error::Corrupt` naming it (`strata recover --force` sets it
    /// aside). A clean open does not check this (it would cost a read of every segment); the
    /// unclean open's scan, `verify` and `recover` do.
    ///
    /// An overlap of deleted records only (the segment before ends at or below the log start) is
    /// no part of the log. One reaching the start is refused whichever file is foreign (the
    /// earlier one, a stray copied in below the log, or this one, copied in inside a segment):
    /// both hold records there, and returning either could return another log's records.
    /// Operations that trust a segment's end (prefix deletion, truncation) check it too.
    pub(crate) fn check_continuity(&self, segment: &Arc<LogSegment>) -> Result<()> {
        if segment.continuity_checked() {
            return Ok(());
        }
        let base = segment.base_offset();
        // One consistent view of the map: a segment a compaction swap merged into a new one
        // overlaps that new one, and is no longer the log's segment, not foreign.
        let overlaps = self.segments.stable(|| -> Result<Option<bool>> {
            if !self.segments.holds(segment) {
                return Ok(None);
            }
            let previous = base.checked_sub(1).and_then(|before| self.segments.floor(before));
            let Some(previous) = previous.filter(|p| !p.is_retired()) else { return Ok(Some(false)) };
            previous.ensure_indexes_checked()?;
            let end = previous.data_end()?;
            Ok(Some(end.is_some_and(|end| end > base && end > self.start_offset())))
        })?;
        match overlaps {
            Some(true) => {
                let why = "its base offset falls inside the previous segment's offsets";
                Err(Error::corrupt(segment.log_path(), 0, Corruption::ForeignFile(why)))
            }
            Some(false) => {
                segment.mark_continuity_checked();
                Ok(())
            }
            // Replaced or removed meanwhile: whoever reads it sees it retired and looks again.
            None => Ok(()),
        }
    }

    /// Bytes of batches in all segments.
    pub(crate) fn bytes_on_disk(&self) -> u64 {
        let mut bytes = 0;
        self.segments.for_each(|s| bytes += s.size());
        bytes
    }

    /// Segments other than the last (the active one) that are not sealed yet.
    fn unsealed_segments(&self) -> u64 {
        let mut unsealed = 0u64;
        self.segments.for_each(|s| unsealed += u64::from(!s.is_sealed()));
        unsealed.saturating_sub(1)
    }

    /// A snapshot of the counters and offsets.
    pub(crate) fn metrics(&self) -> LogMetrics {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (appends, rounds) = (load(&c.appends), load(&c.sync_rounds));
        LogMetrics {
            segments: self.segments.len() as u64,
            bytes_on_disk: self.bytes_on_disk(),
            start_offset: self.start_offset(),
            next_offset: self.next_offset(),
            durable_offset: self.durable_offset(),
            visible_end: self.visible_end(),
            appends,
            records: load(&c.records),
            bytes_appended: load(&c.bytes),
            sync_rounds: rounds,
            fsyncs: load(&c.fsyncs),
            appends_per_sync: if rounds == 0 { 0.0 } else { appends as f64 / rounds as f64 },
            fsync_latency: c.fsync_latency.snapshot(),
            rolls: load(&c.rolls),
            preallocated_rolls: load(&c.preallocated_rolls),
            unsealed_segments: self.unsealed_segments(),
            inline_seals: load(&c.inline_seals),
            checkpoints: load(&c.checkpoints),
            checkpoint_failures: load(&c.checkpoint_failures),
            retention_deletions: load(&c.segments_deleted),
            compaction_passes: load(&c.compaction_passes),
            compaction_bytes_before: load(&c.compaction_bytes_before),
            compaction_bytes_after: load(&c.compaction_bytes_after),
            compaction_ratio: match load(&c.compaction_bytes_before) {
                0 => 1.0,
                before => load(&c.compaction_bytes_after) as f64 / before as f64,
            },
            records_compacted_away: load(&c.compaction_records_removed),
            corruption_seen: self.corruption_seen(),
            compaction_failures: load(&c.compaction_failures),
            truncations: load(&c.truncations),
            recovery: self.report.clone(),
        }
    }
}
