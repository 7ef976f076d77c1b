//! The syncer thread (docs/DESIGN.md §8): runs the flush policy, seals rolled segments, and writes
//! the checkpoint after rolls and every `checkpoint_interval_ms`. Under `Always`, an appender
//! waiting for durability leads a round itself when none is running (`LogState::wait_durable`); the
//! syncer covers what nobody waits for. No round holds the append lock: it only reads the next
//! offset, so appenders keep storing while it fsyncs, and everything they store meanwhile goes into
//! the next round (group commit).

use std::time::{Duration, Instant};

use crate::config::FlushPolicy;
use crate::error::Error;
use crate::log::durability::SyncState;
use crate::log::state::LogState;

/// What a wake-up calls for.
struct Work {
    sync: bool,
    checkpoint: bool,
}

/// The thread's body; returns at shutdown.
pub(crate) fn run(shared: &LogState) {
    loop {
        let Some(work) = next_work(shared) else { return };
        let mut checkpoint = work.checkpoint;
        if work.sync {
            let round = shared.run_round();
            shared.run_callbacks();
            match round {
                Ok(rolled) => checkpoint |= rolled,
                Err(error) => {
                    // The log is poisoned (and its waiters woken): nothing more to do but wait for
                    // shutdown.
                    tracing::error!(%error, "sync round failed");
                    wait_for_shutdown(shared);
                    return;
                }
            }
        }
        // A checkpoint that cannot be written (a full disk) is retried at the next roll or the
        // periodic checkpoint; `write_checkpoint` logged and counted it.
        if checkpoint && let Err(Error::Poisoned) = shared.write_checkpoint() {
            shared.run_callbacks();
            wait_for_shutdown(shared);
            return;
        }
    }
}

/// Waits until there is something to do; `None` at shutdown. (The periodic checkpoint is an event
/// on the log's event thread; the syncer writes one after each roll it seals.)
fn next_work(shared: &LogState) -> Option<Work> {
    let mut state = shared.durability.sync.lock();
    loop {
        if state.shutdown {
            return None;
        }
        let now = Instant::now();
        if sync_due(shared, &state, now) {
            // A roll asks for a checkpoint after its round even if an appender already sealed the
            // segment (back-pressure seals inline) and the round finds nothing to seal.
            let rolled = std::mem::take(&mut state.roll_pending);
            state.sync_requested = false;
            state.last_sync = now;
            return Some(Work { sync: true, checkpoint: rolled });
        }
        match shared.config.flush_policy {
            FlushPolicy::EveryInterval { ms, .. } => {
                // Records waiting: due an interval after the last round (later than now, or this
                // round would be due). None: look again an interval from now, when any appended
                // meanwhile are due — the last round's deadline is past, and waiting for it would
                // spin a core while the log is idle.
                let interval = Duration::from_millis(ms);
                let waiting = shared.offsets.next() > shared.offsets.durable();
                let until = if waiting { state.last_sync + interval } else { now + interval };
                shared.durability.syncer_wake.wait_until(&mut state, until);
            }
            _ => shared.durability.syncer_wake.wait(&mut state),
        }
    }
}

/// Whether the flush policy calls for a sync round now.
fn sync_due(shared: &LogState, state: &SyncState, now: Instant) -> bool {
    if state.roll_pending {
        return true;
    }
    let waiting = shared.offsets.next().saturating_sub(shared.offsets.durable());
    match shared.config.flush_policy {
        // Appenders waiting for durability lead their own rounds; the syncer covers the rest
        // (`append_nowait`, which only asks).
        FlushPolicy::Always => state.sync_requested && waiting > 0,
        FlushPolicy::EveryInterval { ms, messages } => {
            waiting > 0 && (waiting >= messages || now.duration_since(state.last_sync) >= Duration::from_millis(ms))
        }
        // An explicit request under `Never` comes from `wait_durable`.
        FlushPolicy::Never => state.sync_requested && waiting > 0,
    }
}

fn wait_for_shutdown(shared: &LogState) {
    let mut state = shared.durability.sync.lock();
    while !state.shutdown {
        shared.durability.syncer_wake.wait(&mut state);
    }
}

/// Stops the syncer (it finishes its current round first).
pub(crate) fn stop(shared: &LogState) {
    let mut state = shared.durability.sync.lock();
    state.shutdown = true;
    shared.durability.syncer_wake.notify_all();
}
