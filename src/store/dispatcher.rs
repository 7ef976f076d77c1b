//! The dispatcher (RocketMQ's `ReputMessageService`, docs/DESIGN.md §11): one thread follows the
//! commit log's visible end with an owned cursor, waiting without polling, and hands each message
//! to the store's output — a counting output around a broadcasting one holding the consume-queue
//! builder, the index builder and the user's dispatchers. Dispatch is idempotent (a queue skips
//! what it holds, the index what it indexed), so after a crash it restarts from the store
//! checkpoint.
//!
//! Whoever holds the dispatch lock dispatches: the dispatcher thread, woken by the log when
//! something becomes visible, or a `put` waiting for its own message (no hand-off between threads
//! on the put path). A failing dispatch (a full disk at a new queue file) is retried by the thread
//! from the message that failed, after a pause that grows to a second; meanwhile puts waiting for
//! their messages are told (`Error::DispatchFailed`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::log::{AppendInfo, BatchView, Cursor, CursorInterrupt};
use crate::store::checkpoint::QueueSummary;
use crate::store::consume_queue::{Appended, ConsumeQueue};
use crate::store::dispatch::{Dispatch, DispatchRequest};
use crate::store::hash::tag_hash;
use crate::store::index::{IndexFiles, key_hash};
use crate::store::long_poll::LongPolls;
use crate::store::message::{Message, StoredMessage, validate_topic};
use crate::store::metrics::Counters;
use crate::store::queue_map::QueueMap;
use crate::store::queues::Queues;
use crate::store::state::{DispatchState, StoreState};

/// Bytes of batches the dispatcher reads at once.
const READ_BYTES: usize = 1 << 20;
/// How long the dispatcher waits at the log's end before it looks at its stop flag again (a stop
/// interrupts the wait anyway).
const IDLE_WAIT: Duration = Duration::from_secs(1);
/// The first and the longest pause before a failed dispatch is retried.
const FIRST_RETRY: Duration = Duration::from_millis(10);
const LONGEST_RETRY: Duration = Duration::from_secs(1);

/// Builds the consume queues: one entry per message in its topic's queue, then wakes the long
/// polls waiting on that queue.
pub(crate) struct QueueBuilder {
    queues: Arc<Queues>,
    long_polls: Arc<LongPolls>,
    counters: Arc<Counters>,
    /// The queues it appended to, found without the store's queue-map lock; forgotten when a
    /// queue is removed (`removals` moved: a damaged queue, at open).
    known: QueueMap<Arc<ConsumeQueue>>,
    removals: u64,
}

impl QueueBuilder {
    pub(crate) fn new(queues: Arc<Queues>, long_polls: Arc<LongPolls>, counters: Arc<Counters>) -> QueueBuilder {
        let removals = queues.removals();
        QueueBuilder { queues, long_polls, counters, known: QueueMap::default(), removals }
    }

    /// The queue, opened (empty) if it is new.
    fn queue(&mut self, topic: &str, queue_id: u32) -> Result<Arc<ConsumeQueue>> {
        let removals = self.queues.removals();
        if removals != self.removals {
            self.known = QueueMap::default();
            self.removals = removals;
        }
        let queues = &self.queues;
        let queue = self.known.get_or_try_insert(topic, queue_id, || queues.get_or_open(topic, queue_id))?;
        Ok(Arc::clone(queue))
    }
}

impl Dispatch for QueueBuilder {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        let queue = self.queue(request.topic, request.queue_id)?;
        let tag_hash = tag_hash(request.tag);
        let append = || queue.append(request.queue_offset, request.log_offset, request.size, tag_hash);
        let mut appended = append()?;
        if let Appended::Gap { expected, found } = appended
            && found > expected
        {
            // Retention (the log's own, by time or size) removed messages of this queue before
            // dispatch reached them: keep the numbering, with placeholders a read skips.
            let filled = queue.fill_gap(found, request.log_start.min(request.log_offset))?;
            if filled > 0 {
                tracing::warn!(
                    topic = request.topic,
                    queue_id = request.queue_id,
                    from = expected,
                    to = found,
                    "messages removed by retention before they were dispatched: their queue offsets are skipped"
                );
                appended = append()?;
            }
        }
        if let Appended::Gap { expected, found } = appended {
            // The queue and the record disagree on the numbering: damage (a queue file removed
            // by hand). Holding every later message back for it would be worse: it stays in the
            // commit log and the index, and `strata verify` reports the queue.
            Counters::add(&self.counters.entries_refused, 1);
            tracing::error!(
                topic = request.topic,
                queue_id = request.queue_id,
                log_offset = request.log_offset,
                expected,
                found,
                "consume queue refused a message whose queue offset does not continue it"
            );
        }
        self.long_polls.arrived(request.topic, request.queue_id, queue.max_offset());
        crate::failpoint::crash_point!("store_after_queue_entry");
        Ok(())
    }

    // No `flush`: the checkpoint flushes the queues itself ([`flush_queues`]) after releasing
    // the dispatch lock, so puts do not wait for those fsyncs.
}

/// Makes every entry appended to any queue so far durable; the first failure is returned, every
/// queue is flushed. Returns what each queue holds durably now, for the checkpoint's summary.
pub(crate) fn flush_queues(queues: &Queues) -> Result<Vec<QueueSummary>> {
    let mut first = Ok(());
    let mut summaries = Vec::new();
    for (topic, queue_id, queue) in queues.all() {
        let flushed = ConsumeQueue::flush(&queue).map(|flushed| {
            let min = queue.min_offset();
            // Best effort: a summary without it is checked less at the next open, never wrongly.
            let first = if min < flushed.queue_offset { queue.first_log_offset() } else { None };
            (flushed, min, first)
        });
        match flushed {
            Ok((flushed, min_queue_offset, first_log_offset)) => summaries.push(QueueSummary {
                topic,
                queue_id,
                min_queue_offset,
                first_log_offset,
                next_queue_offset: flushed.queue_offset,
                last_log_offset: flushed.last_log_offset,
            }),
            Err(error) => {
                if first.is_ok() {
                    first = Err(error);
                }
            }
        }
    }
    first.map(|()| summaries)
}

/// Builds the index: one entry per key of each message.
pub(crate) struct IndexBuilder {
    pub(crate) index: Arc<IndexFiles>,
}

impl Dispatch for IndexBuilder {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        for key in request.keys {
            self.index.put(key_hash(request.topic, key), request.log_offset, request.timestamp_ms)?;
        }
        Ok(())
    }

    // No `flush`: the checkpoint flushes the index itself after releasing the dispatch lock.
}

/// The dispatcher thread: dispatches what no put dispatches itself (`Progress::want`: a
/// `put_nowait`'s message, a retry after a failure). It sleeps until asked, then waits with a
/// cursor of its own until the log shows the message (durable, under `Always`), and dispatches
/// under the dispatch lock (unless a put did meanwhile). A put that dispatches its own message
/// wakes no thread.
pub(crate) struct Dispatcher {
    thread: JoinHandle<()>,
    interrupt: CursorInterrupt,
}

impl Dispatcher {
    /// Starts the thread.
    pub(crate) fn spawn(inner: Arc<StoreState>) -> Result<Dispatcher> {
        let waiter = inner.log.cursor(inner.progress.dispatched())?;
        let interrupt = waiter.interrupter();
        let thread = std::thread::Builder::new()
            .name("strata-dispatch".into())
            .spawn(move || inner.run_dispatcher(waiter))
            .map_err(Error::io("spawn the dispatcher thread", "strata-dispatch"))?;
        Ok(Dispatcher { thread, interrupt })
    }

    /// Stops the thread; `Error::Panicked` if it panicked.
    pub(crate) fn stop(self, inner: &StoreState) -> Result<()> {
        inner.progress.halt();
        self.interrupt.interrupt();
        self.thread.join().map_err(|payload| Error::panicked("the dispatcher thread", payload.as_ref()))
    }
}

impl StoreState {
    /// Dispatches the messages of `batches` from `self.progress` on, advancing it batch by batch.
    /// On a failure the cursor is moved back to the message that failed and the error returned.
    fn dispatch_batches(
        &self,
        clock: &Clock,
        log_start: u64,
        batches: &[BatchView],
        state: &mut DispatchState,
    ) -> Result<()> {
        let mut next = self.progress.dispatched();
        for batch in batches {
            for record in batch.records() {
                if record.offset() < next {
                    continue; // dispatched already (the cursor restarted inside this batch)
                }
                let result = match StoredMessage::decode(record.clone()) {
                    Ok(message) if validate_topic(message.topic()).is_ok() => {
                        // A dispatcher that panics (a user's) fails this dispatch, which is retried:
                        // unwinding here would leave the cursor past messages never dispatched.
                        let mut request = DispatchRequest::of(&message, log_start);
                        request.replayed = self.dispatch.is_replay(record.offset());
                        let dispatched = catch_unwind(AssertUnwindSafe(|| state.output.dispatch(&request)))
                            .unwrap_or_else(|payload| Err(Error::panicked("a dispatcher", payload.as_ref())));
                        if dispatched.is_ok() {
                            self.counters.dispatch_lag(clock.now_ms() - message.timestamp_ms());
                        }
                        dispatched
                    }
                    Ok(message) => {
                        Counters::add(&self.counters.not_messages, 1);
                        tracing::error!(
                            log_offset = record.offset(),
                            topic = message.topic(),
                            "a message with an invalid topic name skipped"
                        );
                        Ok(())
                    }
                    Err(error) => {
                        Counters::add(&self.counters.not_messages, 1);
                        tracing::error!(%error, "a record that is not a message skipped");
                        Ok(())
                    }
                };
                if let Err(error) = result {
                    self.progress.advance(next);
                    state.cursor.seek(next);
                    return Err(error);
                }
                next = record.offset() + 1;
            }
            next = next.max(batch.last_offset() + 1);
            self.progress.advance(next);
        }
        Ok(())
    }

    /// Dispatches everything visible now, under the dispatch lock (`state`).
    pub(crate) fn dispatch_visible(&self, state: &mut DispatchState) -> Result<()> {
        self.dispatch_until(state, None).map(|_| ())
    }

    /// [`StoreState::dispatch_visible`], stopping after the first read once `deadline` passed:
    /// `true` if it reached the end of what is visible.
    pub(crate) fn dispatch_until(&self, state: &mut DispatchState, deadline: Option<Instant>) -> Result<bool> {
        let clock = self.log.config().clock.clone();
        // The cursor never runs ahead of what is dispatched (a dispatch that failed or panicked
        // after its batches were read).
        state.cursor.seek(self.progress.dispatched());
        loop {
            let batches = match state.cursor.next_batch(READ_BYTES) {
                Ok(batches) => batches,
                Err(Error::OffsetOutOfRange { start, .. }) if state.cursor.position() < start => {
                    // Retention removed messages before dispatch reached them.
                    let from = state.cursor.position();
                    tracing::warn!(from, to = start, "messages removed by retention before they were dispatched");
                    state.cursor.seek(start);
                    self.progress.advance(start);
                    continue;
                }
                Err(error) => return Err(error),
            };
            if batches.is_empty() {
                return Ok(true);
            }
            // Read after the batches: retention may have moved the start since the call began (the
            // branch above), and a stale start would make the queue builder refuse a message whose
            // queue offset follows a gap retention left, then fill that gap over it.
            let log_start = self.log.start_offset();
            self.dispatch_batches(&clock, log_start, &batches, state)?;
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Ok(false);
            }
        }
    }

    /// Dispatches a put's own batch (`messages`, numbered from `first_queue_offset`, stored as
    /// `info` with record sizes `sizes`) from what the put holds, through the same outputs as a
    /// dispatch read from the log — if it is next to dispatch, visible, and still in the log;
    /// otherwise (others' messages before it, a race with retention) as any other message, read
    /// from the log ([`StoreState::dispatch_through`]). A put reads its own write without reading
    /// its batch back or decoding its fields.
    pub(crate) fn dispatch_put(
        &self,
        info: &AppendInfo,
        first_queue_offset: u64,
        messages: &[Message],
        sizes: &[u32],
    ) -> Result<()> {
        debug_assert_eq!(messages.len(), sizes.len(), "a size for every message");
        let progress = &self.progress;
        if progress.dispatched() > info.last_offset {
            return Ok(());
        }
        {
            let mut state = self.dispatch.lock();
            let log_start = self.log.start_offset();
            let direct = progress.dispatched() == info.base_offset
                && self.log.visible_end() > info.last_offset
                && log_start <= info.base_offset
                && info.last_offset - info.base_offset + 1 == messages.len() as u64;
            if direct {
                let clock = self.log.config().clock.clone();
                let held = messages.iter().zip(sizes).zip(info.base_offset..).zip(first_queue_offset..);
                for (((message, &size), log_offset), queue_offset) in held {
                    let request = DispatchRequest {
                        log_offset,
                        size,
                        topic: message.topic(),
                        queue_id: message.queue_id(),
                        queue_offset,
                        tag: message.tag(),
                        keys: message.keys(),
                        timestamp_ms: info.append_time_ms,
                        log_start,
                        replayed: false,
                    };
                    let dispatched = catch_unwind(AssertUnwindSafe(|| state.output.dispatch(&request)))
                        .unwrap_or_else(|payload| Err(Error::panicked("a dispatcher", payload.as_ref())));
                    if let Err(error) = dispatched {
                        // As a dispatch read from the log fails: the dispatcher thread retries
                        // from this message, read from the log.
                        progress.advance(log_offset);
                        state.cursor.seek(log_offset);
                        return Err(self.put_dispatch_failed(log_offset, &error));
                    }
                    self.counters.dispatch_lag(clock.now_ms() - info.append_time_ms);
                }
                progress.advance(info.last_offset + 1);
                state.cursor.seek(info.last_offset + 1);
                return Ok(());
            }
        }
        self.dispatch_through(info.last_offset)
    }

    /// A put's dispatch failed at `log_offset`: counted, told to the waiters (the dispatcher thread
    /// retries), and the put's error.
    fn put_dispatch_failed(&self, log_offset: u64, error: &Error) -> Error {
        Counters::add(&self.counters.dispatch_failures, 1);
        self.progress.fail(error.to_string());
        Error::DispatchFailed { log_offset, reason: error.to_string() }
    }

    /// Dispatches everything visible, on the caller's thread (`open`, before it returns, and `close`).
    pub(crate) fn catch_up(&self) -> Result<()> {
        self.dispatch_visible(&mut self.dispatch.lock())
    }

    /// Returns once the message at `log_offset` (stored, and durable if the flush policy makes puts
    /// wait for that) is dispatched: if no other thread has dispatched it, this one does, under the
    /// dispatch lock — a put reads its own write without handing off to the dispatcher thread and
    /// back. A failure is the dispatcher thread's to retry: the caller gets
    /// `Error::DispatchFailed`.
    pub(crate) fn dispatch_through(&self, log_offset: u64) -> Result<()> {
        let progress = &self.progress;
        if progress.dispatched() > log_offset {
            return Ok(());
        }
        {
            let mut state = self.dispatch.lock();
            if progress.dispatched() > log_offset {
                return Ok(());
            }
            if let Err(error) = self.dispatch_visible(&mut state) {
                return Err(self.put_dispatch_failed(log_offset, &error));
            }
        }
        if progress.dispatched() > log_offset {
            return Ok(());
        }
        // Not visible yet (not durable yet under `Always`: a put_batch's wait ended early?): the
        // dispatcher thread dispatches it when it is.
        progress.want(log_offset);
        progress.wait_past(log_offset, None).map(|_| ())
    }

    fn run_dispatcher(&self, mut waiter: Cursor) {
        let mut retry = FIRST_RETRY;
        while self.progress.wait_for_work() {
            waiter.seek(self.progress.dispatched());
            let result = match waiter.wait_visible(IDLE_WAIT) {
                Ok(false) | Err(Error::Interrupted) => continue,
                Err(Error::Closed) => break,
                // Visible, or removed by retention (dispatch moves past it).
                Ok(true) | Err(Error::OffsetOutOfRange { .. }) => self.dispatch_visible(&mut self.dispatch.lock()),
                Err(error) => Err(error),
            };
            match result {
                Ok(()) => retry = FIRST_RETRY,
                Err(error) => {
                    Counters::add(&self.counters.dispatch_failures, 1);
                    tracing::error!(%error, at = self.progress.dispatched(), retry_in = ?retry, "dispatch failed; retrying");
                    self.progress.fail(error.to_string());
                    self.progress.pause(retry);
                    retry = (retry * 2).min(LONGEST_RETRY);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ReadPath;
    use std::sync::atomic::Ordering;

    fn request(queue_offset: u64, log_offset: u64, log_start: u64) -> DispatchRequest<'static> {
        DispatchRequest {
            log_offset,
            size: 10,
            topic: "t",
            queue_id: 0,
            queue_offset,
            tag: None,
            keys: &[],
            timestamp_ms: 0,
            log_start,
            replayed: false,
        }
    }

    /// Queue offsets 1..4 were removed by retention (the log now starts at 500) before dispatch
    /// reached them: the gap gets placeholders just below the request's log start, and the
    /// message after it is stored at its own queue offset.
    #[test]
    fn a_gap_retention_left_is_filled_below_the_requests_log_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (queues, _) = Queues::open(dir.path(), 64, ReadPath::Mmap, None).expect("queues");
        let (queues, counters) = (Arc::new(queues), Arc::new(Counters::default()));
        let mut builder = QueueBuilder::new(Arc::clone(&queues), Arc::new(LongPolls::default()), Arc::clone(&counters));
        builder.dispatch(&request(0, 100, 50)).expect("first");
        builder.dispatch(&request(4, 600, 500)).expect("after the gap");
        let queue = queues.get("t", 0).expect("queue");
        let held: Vec<u64> = (0..5).map(|q| queue.get(q).expect("get").expect("entry").log_offset).collect();
        assert_eq!(held, [100, 497, 498, 499, 600], "placeholders below the start, then the message");
        assert_eq!(counters.entries_refused.load(Ordering::Relaxed), 0);
        // A start from before retention ran (as a start read before the call's retention skip
        // was): the placeholders would not fit above the last entry, and the message is refused.
        builder.dispatch(&request(9, 900, 50)).expect("refused, not an error");
        assert_eq!((queue.max_offset(), counters.entries_refused.load(Ordering::Relaxed)), (5, 1));
    }

    /// The builder keeps the queues it appended to; a queue removed (damaged, at open) is
    /// forgotten, and the next message goes into the queue opened in its place.
    #[test]
    fn a_removed_queue_is_not_appended_to_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (queues, _) = Queues::open(dir.path(), 64, ReadPath::Mmap, None).expect("queues");
        let queues = Arc::new(queues);
        let counters = Arc::new(Counters::default());
        let mut builder = QueueBuilder::new(Arc::clone(&queues), Arc::new(LongPolls::default()), counters);
        builder.dispatch(&request(0, 100, 0)).expect("first");
        let removed = queues.get("t", 0).expect("queue");
        queues.remove_damaged("t", 0).expect("remove");
        builder.dispatch(&request(0, 200, 0)).expect("into a new queue");
        let queue = queues.get("t", 0).expect("queue");
        assert!(!Arc::ptr_eq(&queue, &removed), "a new queue");
        assert_eq!(queue.get(0).expect("get").expect("entry").log_offset, 200);
        assert_eq!(removed.max_offset(), 1, "the removed queue got nothing more");
    }
}
