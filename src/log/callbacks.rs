//! Durability callbacks (`Log::on_durable`): a caller that appended with `append_nowait` hands
//! over a function to call once its batch is durable, or with the error that stopped it, instead
//! of blocking a thread in a wait (openraft's storage gets such a callback for each append).
//!
//! Pending callbacks wait here in offset order. They are run, always by a thread that holds no
//! lock of the log, by: the thread that finished a sync round (the syncer, a `flush`, an
//! appender waiting for durability under `Always`), a truncation or reset, a call that failed
//! (it may have poisoned the log), a background thread that poisoned it, the close, and a
//! registration (which runs what is decided already). One thread runs callbacks at a time (the
//! run lock, only ever *tried*, so a callback that calls the log cannot deadlock on it), each
//! outside the queue's lock, so a callback may register another; a thread that finds the run
//! lock taken leaves the work to its holder, who looks again after letting go of it, so nothing
//! is left waiting.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

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
    /// Held while callbacks run. Only ever taken with `try_lock`, so it sits outside the lock
    /// order: callbacks under it may take any lock of the log.
    running: Mutex<()>,
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
    pub(crate) fn run(&self, fate: impl Fn(u64, u64) -> Option<Result<()>>) -> usize {
        let mut ran = 0;
        loop {
            let Some(_running) = self.running.try_lock() else { return ran };
            loop {
                let next = {
                    let mut pending = self.pending.lock();
                    let Some(entry) = pending.first_entry() else { break };
                    let (last_offset, _) = *entry.key();
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
            drop(_running);
            // Work that arrived while the run lock was held, and that its registrant left to us.
            if !self.head_decided(&fate) {
                return ran;
            }
        }
    }

    /// Whether the first pending callback's fate is decided.
    fn head_decided(&self, fate: &impl Fn(u64, u64) -> Option<Result<()>>) -> bool {
        let pending = self.pending.lock();
        pending.first_key_value().is_some_and(|((last_offset, _), entry)| fate(entry.epoch, *last_offset).is_some())
    }
}
