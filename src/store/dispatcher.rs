//! The dispatcher (RocketMQ's `ReputMessageService`, DESIGN.md §11): one thread follows the commit
//! log's visible end with an owned cursor, waiting without polling, and hands each message to the
//! store's output — a counting output around a broadcasting one holding the consume-queue builder,
//! the index builder and the user's dispatchers. Dispatch is idempotent (a queue skips what it
//! holds, the index what it indexed), so after a crash it restarts from the store checkpoint.
//!
//! A failing dispatch (a full disk at a new queue file) is retried from the message that failed,
//! after a pause that grows to a second; meanwhile puts waiting for their messages are told
//! (`StoreError::DispatchFailed`).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::Clock;
use crate::error::{Corruption, Error, Result};
use crate::log::{BatchView, Cursor, CursorInterrupt};
use crate::store::consume_queue::ConsumeQueue;
use crate::store::dispatch::{Dispatch, DispatchRequest};
use crate::store::error::{StoreError, StoreResult};
use crate::store::hash::tag_hash;
use crate::store::index_file::{IndexFiles, key_hash};
use crate::store::long_poll::LongPolls;
use crate::store::message::{StoredMessage, validate_topic};
use crate::store::metrics::Counters;
use crate::store::queues::Queues;
use crate::store::state::StoreInner;

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
    pub(crate) queues: Arc<Queues>,
    pub(crate) long_polls: Arc<LongPolls>,
    pub(crate) counters: Arc<Counters>,
}

impl Dispatch for QueueBuilder {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> StoreResult<()> {
        let queue = self.queues.get_or_open(request.topic, request.queue_id)?;
        let entry = queue.append(request.queue_offset, request.log_offset, request.size, tag_hash(request.tag));
        match entry {
            Ok(_) => {}
            // The queue and the record disagree on the numbering: damage (a queue file removed
            // by hand). Holding every later message back for it would be worse: it stays in the
            // commit log and the index, and `strata verify` reports the queue.
            Err(Error::Corrupt { reason: Corruption::QueueOffsetMismatch { expected, found }, .. }) => {
                Counters::bump(&self.counters.entries_refused);
                tracing::error!(
                    topic = request.topic,
                    queue_id = request.queue_id,
                    log_offset = request.log_offset,
                    expected,
                    found,
                    "consume queue refused a message whose queue offset does not continue it"
                );
            }
            Err(error) => return Err(error.into()),
        }
        self.long_polls.arrived(request.topic, request.queue_id, queue.max_offset());
        crate::failpoint::crash_point!("store_after_queue_entry");
        Ok(())
    }

    fn flush(&mut self) -> StoreResult<()> {
        let mut first = Ok(());
        for (_, _, queue) in self.queues.all() {
            let flushed = ConsumeQueue::flush(&queue);
            if first.is_ok() {
                first = flushed.map(|_| ());
            }
        }
        Ok(first?)
    }
}

/// Builds the index: one entry per key of each message.
pub(crate) struct IndexBuilder {
    pub(crate) index: Arc<IndexFiles>,
}

impl Dispatch for IndexBuilder {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> StoreResult<()> {
        for key in request.keys {
            self.index.put(key_hash(request.topic, key), request.log_offset, request.timestamp_ms)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> StoreResult<()> {
        Ok(self.index.flush()?)
    }
}

/// Dispatches the messages of `batches` from `inner.progress` on, advancing it batch by batch.
/// On a failure the cursor is moved back to the message that failed and the error returned.
fn dispatch_batches(inner: &StoreInner, clock: &Clock, batches: &[BatchView], cursor: &mut Cursor) -> StoreResult<()> {
    let mut output = inner.output.lock();
    let mut next = inner.progress.dispatched();
    for batch in batches {
        for record in batch.records() {
            if record.offset() < next {
                continue; // dispatched already (the cursor restarted inside this batch)
            }
            let result = match StoredMessage::decode(record.clone()) {
                Ok(message) if validate_topic(message.topic()).is_ok() => {
                    let dispatched = output.dispatch(&DispatchRequest::of(&message));
                    if dispatched.is_ok() {
                        inner.counters.dispatch_lag(clock.now_ms() - message.timestamp_ms());
                    }
                    dispatched
                }
                Ok(message) => {
                    Counters::bump(&inner.counters.not_messages);
                    tracing::error!(
                        log_offset = record.offset(),
                        topic = message.topic(),
                        "a message with an invalid topic name skipped"
                    );
                    Ok(())
                }
                Err(error) => {
                    Counters::bump(&inner.counters.not_messages);
                    tracing::error!(%error, "a record that is not a message skipped");
                    Ok(())
                }
            };
            if let Err(error) = result {
                inner.progress.advance(next);
                cursor.seek(next);
                return Err(error);
            }
            next = record.offset() + 1;
        }
        next = next.max(batch.last_offset() + 1);
        inner.progress.advance(next);
    }
    Ok(())
}

/// Dispatches everything visible, on the caller's thread (`open`, before it returns, and `close`).
pub(crate) fn catch_up(inner: &StoreInner, cursor: &mut Cursor) -> StoreResult<()> {
    let clock = inner.log.config().clock.clone();
    loop {
        let batches = match cursor.next_batch(READ_BYTES) {
            Ok(batches) => batches,
            Err(Error::OffsetOutOfRange { start, .. }) if cursor.position() < start => {
                skip_removed(inner, cursor, start);
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if batches.is_empty() {
            return Ok(());
        }
        dispatch_batches(inner, &clock, &batches, cursor)?;
    }
}

/// Retention removed messages before dispatch reached them: dispatch goes on from the log's start.
fn skip_removed(inner: &StoreInner, cursor: &mut Cursor, start: u64) {
    tracing::warn!(from = cursor.position(), to = start, "messages removed by retention before they were dispatched");
    cursor.seek(start);
    inner.progress.advance(start);
}

/// The dispatcher thread; stopping it returns its cursor, so `close` can dispatch the rest.
pub(crate) struct Dispatcher {
    thread: JoinHandle<Cursor>,
    interrupt: CursorInterrupt,
}

impl Dispatcher {
    /// Starts the thread at `cursor`'s position.
    pub(crate) fn spawn(inner: Arc<StoreInner>, cursor: Cursor) -> Result<Dispatcher> {
        let interrupt = cursor.interrupter();
        let thread = std::thread::Builder::new()
            .name("strata-dispatch".into())
            .spawn(move || run(&inner, cursor))
            .map_err(Error::io("spawn the dispatcher thread", "strata-dispatch"))?;
        Ok(Dispatcher { thread, interrupt })
    }

    /// Stops the thread and returns its cursor; `Error::Panicked` if it panicked.
    pub(crate) fn stop(self, inner: &StoreInner) -> Result<Cursor> {
        inner.progress.halt();
        self.interrupt.interrupt();
        self.thread.join().map_err(|payload| Error::panicked("the dispatcher thread", payload.as_ref()))
    }
}

fn run(inner: &StoreInner, mut cursor: Cursor) -> Cursor {
    let clock = inner.log.config().clock.clone();
    let mut retry = FIRST_RETRY;
    while !inner.progress.is_halting() {
        let result = match cursor.next_batch_wait(READ_BYTES, IDLE_WAIT) {
            Ok(batches) => dispatch_batches(inner, &clock, &batches, &mut cursor),
            Err(Error::Interrupted) => continue,
            Err(Error::Closed) => break,
            Err(Error::OffsetOutOfRange { start, .. }) if cursor.position() < start => {
                skip_removed(inner, &mut cursor, start);
                continue;
            }
            Err(error) => Err(StoreError::Log(error)),
        };
        match result {
            Ok(()) => retry = FIRST_RETRY,
            Err(error) => {
                Counters::bump(&inner.counters.dispatch_failures);
                tracing::error!(%error, at = cursor.position(), retry_in = ?retry, "dispatch failed; retrying");
                inner.progress.fail(error.to_string());
                inner.progress.pause(retry);
                retry = (retry * 2).min(LONGEST_RETRY);
            }
        }
    }
    cursor
}
