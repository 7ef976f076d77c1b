//! Durability callbacks (`Log::on_durable`): a caller that appended with `append_nowait` hands
//! over a function to call once its batch is durable, or with the error that stopped it, instead
//! of blocking a thread in a wait (openraft's storage gets such a callback for each append).
//!
//! Pending callbacks wait here in offset order. They are run, always by a thread that holds no
//! lock of the log, by: the thread that finished a sync round (the syncer, a `flush`, an
//! appender waiting for durability under `Always`), a truncation or reset, a call that failed
//! (it may have poisoned the log), a background thread that poisoned it, the close, and a
//! registration (which runs what is decided already). One thread runs callbacks at a time (the
//! run lock, never waited for longer than a millisecond, and only by a registration, so a
//! callback that calls the log cannot deadlock on it), each outside the queue's lock, so a
//! callback may register another. A run takes only the callbacks registered before it started; a
//! registration that finds the run lock taken waits briefly for its holder to hand it over, and
//! any thread that does not get it leaves the work to the holder, who looks again after letting
//! go of it: nothing is left waiting, and no thread is kept running callbacks others keep
//! registering.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use crate::error::{Error, Result};

/// What a callback gets: `Ok` once its batch is durable, else the error that stopped it.
pub(crate) type Callback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// A pending callback: for the batch ending at `last_offset`, stored in truncation epoch `epoch`.
struct Pending {
    epoch: u64,
    callback: Callback,
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Callbacks {
    /// By (last offset, registration number): offset order, then registration order.
    pending: Mutex<BTreeMap<(u64, u64), Pending>>,
    /// How many are pending, read without the lock (the append path checks it after each append).
    count: AtomicUsize,
    registered: AtomicU64,
    /// The log closed: nothing pending can become durable any more.
    closed: AtomicBool,
    /// Held while callbacks run. Never waited for longer than [`HANDOVER`], so it sits outside
    /// the lock order: callbacks under it may take any lock of the log.
    running: Mutex<()>,
    /// A registrant found the run lock taken and left its work to the holder.
    missed: AtomicBool,
}

/// How long a thread waits for another to hand over the run of callbacks.
const HANDOVER: Duration = Duration::from_millis(1);

thread_local! {
    /// Whether this thread is running callbacks (one that registers another must not wait for
    /// the run lock it holds).
    static RUNNING_HERE: Cell<bool> = const { Cell::new(false) };
}

impl Callbacks {
    /// Queues `callback` for the batch ending at `last_offset`, stored in truncation epoch `epoch`.
    pub(crate) fn register(&self, last_offset: u64, epoch: u64, callback: Callback) {
        let number = self.registered.fetch_add(1, Ordering::SeqCst);
        self.pending.lock().insert((last_offset, number), Pending { epoch, callback });
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether any callback waits (no lock taken).
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::SeqCst) > 0
    }

    /// The log finished closing: what is still pending ends with `Error::Closed` at the next run.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Whether [`Callbacks::close`] ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Runs, in offset order, every callback whose fate is decided: `fate(epoch, last_offset)` is
    /// the outcome, or `None` while it must wait. Stops at the first that must wait. Returns how
    /// many ran.
    ///
    /// A run takes only what was registered before it started, so a thread that keeps registering
    /// callbacks whose fate is decided (of a truncated batch, say) cannot keep another in here for
    /// ever: a `registrant` that finds the run lock taken waits up to [`HANDOVER`] for it (the
    /// holder lets go fairly, so it gets it) and runs its own. Anyone else (the syncer, a round's
    /// leader, a truncation), or a registrant whose wait ends first or whose own thread holds the
    /// lock (a callback registering another), marks the work missed and the holder takes another
    /// turn after letting go.
    pub(crate) fn run(&self, registrant: bool, fate: impl Fn(u64, u64) -> Option<Result<()>>) -> usize {
        let mut ran = 0;
        let Some(mut running) = self.take_run_lock(registrant) else { return ran };
        // A callback of another log may run this one's: the flag is put back as it was.
        let outer = RUNNING_HERE.with(Cell::get);
        loop {
            let limit = self.registered.load(Ordering::SeqCst);
            RUNNING_HERE.with(|here| here.set(true));
            loop {
                let next = {
                    let mut pending = self.pending.lock();
                    let Some(entry) = pending.first_entry() else { break };
                    let (last_offset, number) = *entry.key();
                    if number >= limit {
                        // Its registrant runs it (it waits for this lock, or marks it missed).
                        break;
                    }
                    let decided = fate(entry.get().epoch, last_offset);
                    decided.map(|outcome| {
                        self.count.fetch_sub(1, Ordering::SeqCst);
                        (entry.remove().callback, outcome)
                    })
                };
                let Some((callback, outcome)) = next else { break };
                // A panicking callback is the caller's bug: logged, and the others still run.
                if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(outcome))) {
                    let error = Error::panicked("a durability callback", payload.as_ref());
                    tracing::error!(%error, "a durability callback panicked");
                }
                ran += 1;
            }
            RUNNING_HERE.with(|here| here.set(outer));
            MutexGuard::unlock_fair(running);
            // Work a registrant left to us, if nobody has taken the lock since.
            if !(self.missed.swap(false, Ordering::SeqCst) && self.head_decided(&fate)) {
                return ran;
            }
            let Some(again) = self.running.try_lock() else {
                self.missed.store(true, Ordering::SeqCst);
                return ran;
            };
            running = again;
        }
    }

    /// The run lock: at once, or (a `registrant` on a thread running no callbacks) after waiting
    /// up to [`HANDOVER`] for its holder to let go; `None` (the work marked missed, for the
    /// holder) otherwise.
    fn take_run_lock(&self, registrant: bool) -> Option<MutexGuard<'_, ()>> {
        if let Some(running) = self.running.try_lock() {
            return Some(running);
        }
        if registrant
            && !RUNNING_HERE.with(Cell::get)
            && let Some(running) = self.running.try_lock_for(HANDOVER)
        {
            return Some(running);
        }
        self.missed.store(true, Ordering::SeqCst);
        // The holder may have let go between the wait and the mark: look once more.
        self.running.try_lock().inspect(|_| {
            self.missed.store(false, Ordering::SeqCst);
        })
    }

    /// Whether the first pending callback's fate is decided.
    fn head_decided(&self, fate: &impl Fn(u64, u64) -> Option<Result<()>>) -> bool {
        let pending = self.pending.lock();
        pending.first_key_value().is_some_and(|((last_offset, _), entry)| fate(entry.epoch, *last_offset).is_some())
    }
}
