//! The store's background work, on its `EventManager`: every `flush_interval_ms` the queues and the
//! index are flushed and the store checkpoint written, and queue and index files the commit log's
//! start has passed are deleted; every `offsets_flush_ms` the consumer offsets are written. A
//! failure is logged and counted, and the work runs again at its next turn.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::EventHandle;
use crate::store::checkpoint::{self, Checkpoint, QueueSummary};
use crate::store::dispatch::Dispatch;
use crate::store::dispatcher;
use crate::store::metrics::Counters;
use crate::store::queue_map::QueueMap;
use crate::store::state::StoreState;

/// Schedules the periodic work; it ends when the store is gone or its event thread stops.
pub(crate) fn schedule(inner: &Arc<StoreState>, events: &EventHandle) {
    let flush = Duration::from_millis(inner.config.flush_interval_ms);
    every(Arc::downgrade(inner), events.clone(), flush, "store checkpoint", |inner| {
        // The sweep first: the checkpoint then records the queues as retention left them.
        let swept = inner.sweep();
        inner.write_checkpoint().and(swept)
    });
    let offsets = Duration::from_millis(inner.config.offsets_flush_ms);
    every(Arc::downgrade(inner), events.clone(), offsets, "consumer offsets", |inner| {
        inner.offsets.flush().inspect_err(|_| Counters::add(&inner.counters.background_failures, 1))
    });
}

/// Runs `work` every `period`, for as long as the store lives.
fn every(
    inner: Weak<StoreState>,
    events: EventHandle,
    period: Duration,
    name: &'static str,
    work: fn(&StoreState) -> Result<()>,
) {
    let again = events.clone();
    let scheduled = events.put_after(period, name, move || {
        let Some(strong) = inner.upgrade() else { return Ok(()) };
        let result = work(&strong);
        drop(strong);
        every(inner, again, period, name, work);
        // Counted where it failed; logged here, as the event thread would log an `Error`.
        if let Err(error) = result {
            tracing::warn!(%error, name, "store background work failed; it runs again at its next turn");
        }
        Ok(())
    });
    if scheduled.is_err() {
        tracing::debug!(name, "the store's event thread stopped; periodic work ends");
    }
}

impl StoreState {
    /// Flushes every dispatcher and writes the store checkpoint: the offset below which every
    /// message's queue and index entries are durable. The user's dispatchers are flushed under the
    /// dispatch lock (their `flush` needs it), so what they were given below that offset is what they
    /// flushed. The queues and the index are flushed after it is released: each flush makes durable
    /// every entry appended before it began, which covers every message below the offset, and puts
    /// (which dispatch under that lock) do not wait for those fsyncs — with many queues, one per queue.
    pub(crate) fn write_checkpoint(&self) -> Result<()> {
        let dispatched = {
            let mut state = self.dispatch.lock();
            let dispatched = self.progress.dispatched();
            state.output.flush().map(|()| dispatched)
        };
        let queues = dispatcher::flush_queues(&self.queues);
        let index = self.index.flush_for_checkpoint();
        let flushed = match (dispatched, queues, index) {
            (Ok(dispatched), Ok(queues), Ok((index_files, behind))) => {
                if behind.is_some() {
                    Counters::add(&self.counters.background_failures, 1);
                }
                Ok((behind.map_or(dispatched, |below| dispatched.min(below)), queues, index_files))
            }
            (Err(error), ..) | (_, Err(error), _) | (.., Err(error)) => Err(error),
        };
        let (dispatched, queues, index_files) =
            flushed.inspect_err(|_| Counters::add(&self.counters.background_failures, 1))?;
        // One that claims too much is replaced whatever it says.
        if !self.maintenance.checkpoint_is_new(dispatched) && !self.checkpoint_overclaims.load(Ordering::Acquire) {
            return Ok(());
        }
        let queues = with_floors(queues, self.puts.floors());
        if self.clamp_unflushed.load(Ordering::Acquire) {
            // This checkpoint no longer says the queues were cut: the offsets clamped for it must
            // be on disk before it, or a crash between the two brings the old ones back.
            self.offsets.flush().inspect_err(|_| Counters::add(&self.counters.background_failures, 1))?;
            self.clamp_unflushed.store(false, Ordering::Release);
        }
        crate::failpoint::crash_point!("store_before_checkpoint");
        checkpoint::write(
            &self.root,
            &Checkpoint { dispatched_up_to: dispatched, queues, index_files, summarised: true },
        )
        .inspect_err(|_| Counters::add(&self.counters.background_failures, 1))?;
        self.checkpoint_overclaims.store(false, Ordering::Release);
        self.maintenance.checkpointed(dispatched);
        Counters::add(&self.counters.checkpoints, 1);
        Ok(())
    }

    /// Before a put: if the checkpoint on disk claims messages the derived files lost (an open
    /// could not lower it), writes one first — a message put meanwhile could be skipped by an
    /// open after a crash that trusted the claim; and if consumer offsets clamped at open are not
    /// on disk yet, writes them first — a put past the cut erases what tells the next open to
    /// clamp. Their error (a full disk) refuses the put.
    pub(crate) fn check_checkpoint(&self) -> Result<()> {
        if self.checkpoint_overclaims.load(Ordering::Acquire) {
            self.write_checkpoint()?;
        }
        if self.clamp_unflushed.load(Ordering::Acquire) {
            // The checkpoint on disk still records the cut, but a put past it erases what tells
            // the next open so (the log grows over the lost tail): the clamped offsets go first.
            self.offsets.flush().inspect_err(|_| Counters::add(&self.counters.background_failures, 1))?;
            self.clamp_unflushed.store(false, Ordering::Release);
        }
        Ok(())
    }

    /// [`StoreState::write_checkpoint`], with a full disk only logged (`when` says at which
    /// step): the next background turn writes it.
    pub(crate) fn checkpoint_unless_full(&self, when: &'static str) -> Result<()> {
        match self.write_checkpoint() {
            Err(error @ Error::DiskFull { .. }) => {
                tracing::warn!(%error, when, "the store checkpoint could not be written; it is retried");
                Ok(())
            }
            written => written,
        }
    }

    /// Retention (docs/DESIGN.md §11): once the commit log's start moved, deletes the queue files whose
    /// entries all point below it and the index files that end below it.
    pub(crate) fn sweep(&self) -> Result<()> {
        let start = self.log.start_offset();
        if !self.maintenance.sweep_is_due(start) {
            return Ok(());
        }
        let mut first = Ok(());
        for (_, _, queue) in self.queues.all() {
            if let Err(error) = queue.delete_files_below(start)
                && first.is_ok()
            {
                first = Err(error);
            }
        }
        let index = self.index.delete_files_below(start);
        // The queues' first entries moved (and files may be gone): the next checkpoint records
        // them even if dispatch did not move.
        self.maintenance.summaries_changed();
        let swept = first.and(index.map(|_| ()));
        match swept {
            Ok(()) => {
                self.maintenance.swept(start);
                Ok(())
            }
            Err(error) => {
                Counters::add(&self.counters.background_failures, 1);
                Err(error)
            }
        }
    }
}

/// The queues' summaries for the checkpoint: what each queue holds durably, or its floor where
/// that is higher (a queue whose records retention removed and whose files were lost keeps its
/// numbering from checkpoint to checkpoint), sorted by topic and queue id.
fn with_floors(held: Vec<QueueSummary>, floors: &QueueMap<QueueSummary>) -> Vec<QueueSummary> {
    let mut merged = QueueMap::default();
    for floor in floors.values() {
        merged.insert(&floor.topic, floor.queue_id, floor.clone());
    }
    for summary in held {
        let floor = merged.get(&summary.topic, summary.queue_id).map_or(0, |floor| floor.next_queue_offset);
        if summary.next_queue_offset >= floor {
            merged.insert(&summary.topic.clone(), summary.queue_id, summary);
        }
    }
    merged.sorted().into_iter().map(|(_, _, summary)| summary.clone()).collect()
}
