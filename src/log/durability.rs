//! The state behind durability (docs/DESIGN.md §8): whether the log is poisoned or closed, the gate
//! that keeps sync rounds from overlapping, the threads waiting for progress, the syncer's
//! requests, the directory's pending fsync, and the truncation epochs that tell waiters and readers
//! their offsets were cut. The rounds themselves, which also touch the segments and the offsets,
//! are in `group_commit.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::storage;

/// See the module documentation.
pub(crate) struct Durability {
    dir: PathBuf,
    poisoned: AtomicBool,
    closed: AtomicBool,
    /// What the syncer should do. With `progress` it also wakes threads waiting for durability or
    /// visibility (lock order: a leaf, see `log/mod.rs`).
    pub(super) sync: Mutex<SyncState>,
    pub(super) syncer_wake: Condvar,
    progress: Condvar,
    /// Threads waiting on `progress`, so appends only lock `sync` to notify when someone waits.
    waiters: AtomicUsize,
    /// A sync round is running (by the syncer, a flush, or an appender leading one), or a
    /// truncation holds the rounds.
    round_running: AtomicBool,
    /// A segment was created or renamed into place since the directory was last fsynced.
    /// `dir_sync` serialises the fsync, so nobody sees "clean" while another thread's is running.
    dir_dirty: AtomicBool,
    dir_sync: Mutex<()>,
    /// Truncations so far (an epoch), and the offset each cut at, in order: a waiter or reader
    /// that saw an earlier epoch and is at or past a later cut gets `Error::Truncated`.
    truncations: AtomicU64,
    cuts: Mutex<Vec<u64>>,
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

/// The sync rounds are this holder's until it drops: it runs one, or keeps them from running
/// ([`Durability::hold_rounds`]).
pub(crate) struct Rounds<'a> {
    durability: &'a Durability,
}

impl Drop for Rounds<'_> {
    fn drop(&mut self) {
        self.durability.round_running.store(false, Ordering::SeqCst);
        self.durability.notify_progress(true);
    }
}

impl Durability {
    pub(crate) fn new(dir: PathBuf) -> Durability {
        Durability {
            dir,
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            sync: Mutex::new(SyncState {
                shutdown: false,
                sync_requested: false,
                roll_pending: false,
                last_sync: Instant::now(),
            }),
            syncer_wake: Condvar::new(),
            progress: Condvar::new(),
            waiters: AtomicUsize::new(0),
            round_running: AtomicBool::new(false),
            dir_dirty: AtomicBool::new(false),
            dir_sync: Mutex::new(()),
            truncations: AtomicU64::new(0),
            cuts: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
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

    /// Wakes the threads waiting for progress (always, or only if there are any).
    pub(crate) fn notify_progress(&self, always: bool) {
        if always || self.waiters.load(Ordering::SeqCst) > 0 {
            let _sync = self.sync.lock();
            self.progress.notify_all();
        }
    }

    /// Blocks until `done()` holds, the deadline passes (`Error::Timeout`), or the log is poisoned
    /// or closed — never by polling. Whoever changes what `done` reads calls
    /// [`Durability::notify_progress`].
    pub(crate) fn wait_until(&self, timeout: Option<Duration>, done: impl Fn() -> bool) -> Result<()> {
        self.wait_until_interruptible(timeout, None, done)
    }

    /// [`Durability::wait_until`] that also ends with `Error::Interrupted` once `interrupt` is set
    /// (a cursor's tailing wait, stopped by another thread). Whoever sets it then calls
    /// `notify_progress(true)`: the flag is checked under `sync`, which the notification takes, so
    /// a waiter either sees the flag or is already waiting when the notification comes. The flag
    /// is only read here; its owner clears it.
    pub(crate) fn wait_until_interruptible(
        &self,
        timeout: Option<Duration>,
        interrupt: Option<&AtomicBool>,
        done: impl Fn() -> bool,
    ) -> Result<()> {
        let started = Instant::now();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut sync = self.sync.lock();
        let result = loop {
            if done() {
                break Ok(());
            }
            if interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst)) {
                break Err(Error::Interrupted);
            }
            if self.is_poisoned() {
                break Err(Error::Poisoned);
            }
            if self.is_closed() {
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

    /// The rounds, unless a round is running or they are held (`None` then).
    pub(crate) fn try_take_rounds(&self) -> Option<Rounds<'_>> {
        // Built only on success: a guard made and dropped on failure would open the gate.
        let taken = self.round_running.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok();
        taken.then(|| Rounds { durability: self })
    }

    /// Whether a round is running (or the rounds are held).
    pub(crate) fn round_running(&self) -> bool {
        self.round_running.load(Ordering::SeqCst)
    }

    /// Waits for a running round to end and keeps others from starting until the guard drops (a
    /// truncation must not race a round that read the old next offset).
    pub(crate) fn hold_rounds(&self) -> Result<Rounds<'_>> {
        loop {
            if let Some(rounds) = self.try_take_rounds() {
                return Ok(rounds);
            }
            self.wait_until(None, || !self.round_running())?;
        }
    }

    /// A segment was created or renamed into place: the next round fsyncs the directory.
    pub(crate) fn mark_dir_dirty(&self) {
        self.dir_dirty.store(true, Ordering::Release);
    }

    /// Fsyncs the directory if a segment was created or renamed since the last time; a failure
    /// poisons the log.
    pub(crate) fn sync_dir_if_dirty(&self) -> Result<()> {
        let _serialised = self.dir_sync.lock();
        if self.dir_dirty.swap(false, Ordering::AcqRel)
            && let Err(e) = storage::sync_dir(&self.dir)
        {
            self.dir_dirty.store(true, Ordering::Release);
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// Records a truncation to `cut` and wakes every waiter (those past the cut get
    /// `Error::Truncated`).
    pub(crate) fn note_truncation(&self, cut: u64) {
        let mut cuts = self.cuts.lock();
        cuts.push(cut);
        self.truncations.store(cuts.len() as u64, Ordering::SeqCst);
        drop(cuts);
        self.notify_progress(true);
    }

    /// Truncations so far (an epoch for readers and waiters).
    pub(crate) fn truncations(&self) -> u64 {
        self.truncations.load(Ordering::SeqCst)
    }

    /// The truncation epoch now and the lowest offset a truncation cut at since epoch `since`,
    /// read together (one lock), so a cursor that moves its epoch to the one returned has judged
    /// exactly the cuts up to it.
    pub(crate) fn truncations_since(&self, since: u64) -> (u64, Option<u64>) {
        let cuts = self.cuts.lock();
        (cuts.len() as u64, cuts.iter().skip(since as usize).copied().min())
    }

    /// The lowest offset a truncation cut at since epoch `since`, if there was one.
    pub(crate) fn lowest_cut_since(&self, since: u64) -> Option<u64> {
        if self.truncations() == since {
            return None;
        }
        self.cuts.lock().iter().skip(since as usize).copied().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rounds_are_one_holders_at_a_time() {
        let durability = Durability::new(PathBuf::from("unused"));
        let held = durability.try_take_rounds().expect("free");
        assert!(durability.try_take_rounds().is_none(), "taken");
        assert!(durability.round_running(), "a failed attempt leaves the holder's rounds taken");
        drop(held);
        assert!(!durability.round_running());
        assert!(durability.try_take_rounds().is_some());
    }
}
