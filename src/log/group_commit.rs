//! Sync rounds (group commit, docs/DESIGN.md §8) and waiting for durability or visibility. A round
//! seals every segment rolled away from, fdatasyncs every segment written since the durable offset
//! and the directory if it changed, then raises the durable offset over everything stored when the
//! round began. Rounds never overlap ([`Durability::try_take_rounds`]) and never hold the append
//! lock: appenders keep storing while one fsyncs, and what they store goes into the next round.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::config::FlushPolicy;
use crate::error::{Error, Result};
use crate::log::metrics::Counters;
use crate::log::state::LogState;

#[cfg(doc)]
use crate::log::durability::Durability;

impl LogState {
    /// Waits until `offset` is durable. If no sync round is running, the caller runs one itself
    /// (leader-follower group commit, as PostgreSQL's backends flush WAL): it covers everything
    /// stored so far, so appenders that arrive during it wait for it, or for the next round one of
    /// them leads. No thread handoff when the log is quiet; one fsync per round when it is busy.
    pub(crate) fn wait_durable(&self, offset: u64, timeout: Option<Duration>, epoch: u64) -> Result<()> {
        self.wait_durable_interruptible(offset, timeout, epoch, None)
    }

    /// [`LogState::wait_durable`], ended by `Error::Interrupted` once `interrupt` is set (see
    /// [`Durability::wait_until_interruptible`]).
    fn wait_durable_interruptible(
        &self,
        offset: u64,
        timeout: Option<Duration>,
        epoch: u64,
        interrupt: Option<&AtomicBool>,
    ) -> Result<()> {
        let started = Instant::now();
        let left = || timeout.map(|t| t.saturating_sub(started.elapsed()));
        let durability = &self.durability;
        loop {
            // The durable offset read before the cuts: a reset past the end notes its cut, then
            // raises the offsets, so an offset raised by it is seen with its cut.
            let durable = self.offsets.durable();
            self.check_truncated(epoch, offset)?;
            if durable > offset {
                return Ok(());
            }
            if left().is_some_and(|l| l.is_zero()) {
                return Err(Error::Timeout { waited: started.elapsed() });
            }
            let seen = durability.truncations();
            if offset >= self.offsets.next() {
                // Not stored yet: no round can make it durable, so wait for appends (never spin).
                durability.wait_until_interruptible(left(), interrupt, || {
                    self.offsets.next() > offset || durability.truncations() != seen
                })?;
                continue;
            }
            if let Some(round) = self.lead_round() {
                // This thread finished the round and holds no lock: it runs the callbacks the
                // round decided (`callbacks.rs`).
                self.run_callbacks();
                round?;
                continue;
            }
            // A follower: wait for the running round to end, then check again (or lead the next).
            durability.wait_until_interruptible(left(), interrupt, || {
                self.offsets.durable() > offset || !durability.round_running() || durability.truncations() != seen
            })?;
        }
    }

    /// Waits until `offset` is visible to readers.
    /// A truncation that removes `offset` before it becomes visible fails the wait with
    /// `Error::Truncated` (a tailing reader must learn its position now holds other records).
    pub(crate) fn wait_visible(&self, offset: u64, timeout: Option<Duration>) -> Result<()> {
        self.wait_visible_interruptible(offset, timeout, None)
    }

    /// [`LogState::wait_visible`], ended by `Error::Interrupted` once `interrupt` is set (a
    /// cursor's tailing wait; see [`Durability::wait_until_interruptible`]). A sync round the
    /// waiter leads under `Always` runs to its end first.
    pub(crate) fn wait_visible_interruptible(
        &self,
        offset: u64,
        timeout: Option<Duration>,
        interrupt: Option<&AtomicBool>,
    ) -> Result<()> {
        if self.offsets.visible() > offset {
            return Ok(());
        }
        let durability = &self.durability;
        if self.config.flush_policy == FlushPolicy::Always && self.offsets.next() > offset {
            return self.wait_durable_interruptible(offset, timeout, durability.truncations(), interrupt);
        }
        let started = Instant::now();
        let epoch = durability.truncations();
        loop {
            let seen = durability.truncations();
            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
            durability.wait_until_interruptible(left, interrupt, || {
                self.offsets.visible() > offset || durability.truncations() != seen
            })?;
            // Read before the cuts, as in `wait_durable_interruptible`.
            let visible = self.offsets.visible();
            self.check_truncated(epoch, offset)?;
            if visible > offset {
                return Ok(());
            }
        }
    }

    /// `Error::Truncated` if a truncation since epoch `since` removed `offset`.
    pub(crate) fn check_truncated(&self, since: u64, offset: u64) -> Result<()> {
        match self.durability.lowest_cut_since(since) {
            Some(cut) if offset >= cut => Err(Error::Truncated { next_offset: self.offsets.next() }),
            _ => Ok(()),
        }
    }

    /// Runs a sync round unless one is already running (`None` then).
    pub(crate) fn lead_round(&self) -> Option<Result<bool>> {
        let rounds = self.durability.try_take_rounds()?;
        // A panic in a round is a bug; it must not leave the rounds taken (every appender would
        // wait for a round that never ends) nor reach an appender that merely led the round.
        let round = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.sync_round()))
            .unwrap_or_else(|payload| Err(self.durability.poison(Error::panicked("a sync round", payload.as_ref()))));
        drop(rounds);
        Some(round)
    }

    /// Runs a sync round, waiting for a running one to end first (the syncer, close).
    pub(crate) fn run_round(&self) -> Result<bool> {
        loop {
            if let Some(round) = self.lead_round() {
                return round;
            }
            self.durability.wait_until(None, || !self.durability.round_running())?;
        }
    }

    /// One sync round. Returns whether a roll was sealed. Callers go through
    /// [`LogState::lead_round`], so rounds never overlap.
    fn sync_round(&self) -> Result<bool> {
        #[cfg(feature = "failpoints")]
        fail::fail_point!("sync_round", |_| Ok(false));
        if self.config.flush_policy == FlushPolicy::Always {
            // Appenders already on their way in share this fsync (`arrivals.rs`).
            self.arrivals.gather(crate::log::arrivals::MAX_GATHER);
        }
        let target = self.offsets.next();
        let sealed = self.seal_rolled()?;
        crate::failpoint::crash_point!("after_seal");
        let started = Instant::now();
        let mut synced = 0;
        self.segments.try_for_each_from(self.durable_floor(), |segment| {
            segment.flush().map_err(|e| self.durability.poison(e))?;
            synced += 1;
            Ok::<(), Error>(())
        })?;
        self.durability.sync_dir_if_dirty()?;
        self.counters.fsync_latency.record(started.elapsed());
        Counters::add(&self.counters.fsyncs, synced);
        Counters::add(&self.counters.sync_rounds, 1);
        self.advance_durable(target)?;
        Ok(sealed)
    }

    /// Moves the durable offset (and under `Always` the visible end) to `to` — unless a failure
    /// poisoned the log meanwhile (another thread's fsync may have failed over data this caller's
    /// sync did not cover).
    fn advance_durable(&self, to: u64) -> Result<()> {
        if self.durability.is_poisoned() {
            return Err(Error::Poisoned);
        }
        self.offsets.raise_durable(to, self.config.flush_policy == FlushPolicy::Always);
        self.durability.notify_progress(false);
        Ok(())
    }

    /// Seals every segment rolled away from so far, oldest first. Returns whether there was any.
    pub(crate) fn seal_rolled(&self) -> Result<bool> {
        let _sealing = self.segments.lock_sealing();
        let mut any = false;
        loop {
            let Some(segment) = self.segments.oldest_rolled() else { return Ok(any) };
            segment.seal().map_err(|e| self.durability.poison(e))?;
            Counters::add(&self.counters.fsyncs, 3);
            // By identity, never by position: while it was being sealed, a prefix deletion or a
            // reset may have taken this segment (or others) out of the list.
            self.segments.forget_sealed(&segment);
            any = true;
        }
    }

    /// Base offset of the segment holding the durable offset: nothing below it needs a flush.
    fn durable_floor(&self) -> u64 {
        self.segments.floor(self.offsets.durable()).map_or(0, |s| s.base_offset())
    }
}
