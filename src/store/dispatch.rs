//! What the dispatcher hands on for each message of the commit log (docs/DESIGN.md §11): a
//! `DispatchRequest` to every registered `Dispatch`, through outputs in the manner of Flink's
//! `Output` — a broadcasting output calls each dispatcher in turn (the store's own consume-queue
//! and index builders are dispatchers too), a counting output counts what passes through it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::store::message::StoredMessage;

/// A message as the dispatcher sees it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DispatchRequest<'a> {
    /// Its offset in the commit log.
    pub log_offset: u64,
    /// Its record's encoded size.
    pub size: u32,
    /// Its topic.
    pub topic: &'a str,
    /// Its queue.
    pub queue_id: u32,
    /// Its offset in the queue.
    pub queue_offset: u64,
    /// Its tag, if any.
    pub tag: Option<&'a str>,
    /// Its keys.
    pub keys: &'a [String],
    /// When the store appended it.
    pub timestamp_ms: i64,
    /// The commit log's start, read once dispatch had read the message (so at or above the start
    /// when the message was read): messages below it that dispatch never reached were removed by
    /// retention (their queue offsets are skipped).
    pub log_start: u64,
    /// The message was in the log when the store opened, so an earlier run may have dispatched
    /// it already (dispatch restarts from the store checkpoint, or from the log's start when a
    /// derived file is rebuilt): a dispatcher that keeps state must treat it as possibly seen.
    /// `false` for every message stored since the open.
    pub replayed: bool,
}

impl<'a> DispatchRequest<'a> {
    /// The request for a stored message, read from a commit log that starts at `log_start`.
    pub fn of(message: &'a StoredMessage, log_start: u64) -> DispatchRequest<'a> {
        DispatchRequest {
            log_offset: message.log_offset(),
            size: u32::try_from(message.encoded_len()).unwrap_or(u32::MAX),
            topic: message.topic(),
            queue_id: message.queue_id(),
            queue_offset: message.queue_offset(),
            tag: message.tag(),
            keys: message.keys(),
            timestamp_ms: message.timestamp_ms(),
            log_start,
            replayed: false,
        }
    }
}

/// Receives every dispatched message, in commit-log order, one call at a time under the store's
/// dispatch lock — on the dispatcher thread, or on a thread whose `put` dispatches its own
/// message. Must not block for long: dispatch (and so `put`'s read-your-writes) waits for it. After a restart a
/// message may be dispatched again (dispatch resumes from the store checkpoint, or from the log's
/// start when a derived file is rebuilt): a dispatcher must tolerate seeing an offset twice, and
/// is told which messages it may have seen ([`DispatchRequest::replayed`]).
pub trait Dispatch: Send {
    /// Handles one message.
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()>;

    /// Makes what was dispatched so far durable, if it keeps anything (the store calls it before
    /// it moves its checkpoint).
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Calls every dispatcher in turn, in registration order. All are called even if one fails; the
/// first error is returned (the message is dispatched again: dispatchers are idempotent).
#[derive(Default)]
pub(crate) struct BroadcastingOutput {
    outputs: Vec<Box<dyn Dispatch>>,
}

impl BroadcastingOutput {
    /// Adds a dispatcher after the others.
    pub(crate) fn push(&mut self, output: Box<dyn Dispatch>) {
        self.outputs.push(output);
    }
}

impl Dispatch for BroadcastingOutput {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        first_error(self.outputs.iter_mut().map(|output| output.dispatch(request)))
    }

    fn flush(&mut self) -> Result<()> {
        first_error(self.outputs.iter_mut().map(|output| output.flush()))
    }
}

/// Runs every result (the iterator is consumed whole) and keeps the first error.
fn first_error(results: impl Iterator<Item = Result<()>>) -> Result<()> {
    // Not `try_fold`: it would stop at the first error, and the later outputs would miss it.
    let mut first = Ok(());
    for result in results {
        if first.is_ok() {
            first = result;
        }
    }
    first
}

/// Counts the messages that pass through it to its inner output (the store's metrics read the
/// count).
pub(crate) struct CountingOutput<D> {
    inner: D,
    count: Arc<AtomicU64>,
}

impl<D: Dispatch> CountingOutput<D> {
    /// Counts into `count`.
    pub(crate) fn new(inner: D, count: Arc<AtomicU64>) -> CountingOutput<D> {
        CountingOutput { inner, count }
    }

    /// The output it counts for.
    pub(crate) fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }
}

impl<D: Dispatch> Dispatch for CountingOutput<D> {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        self.inner.dispatch(request)?;
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use parking_lot::Mutex;

    /// Records the log offsets it sees; fails on the ones in `fail_at`.
    struct Recording {
        seen: Arc<Mutex<Vec<u64>>>,
        fail_at: Vec<u64>,
    }

    impl Dispatch for Recording {
        fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
            self.seen.lock().push(request.log_offset);
            if self.fail_at.contains(&request.log_offset) {
                return Err(Error::Closed);
            }
            Ok(())
        }
    }

    fn request(log_offset: u64) -> DispatchRequest<'static> {
        DispatchRequest {
            log_offset,
            size: 10,
            topic: "t",
            queue_id: 0,
            queue_offset: log_offset,
            tag: None,
            keys: &[],
            timestamp_ms: 0,
            log_start: 0,
            replayed: false,
        }
    }

    #[test]
    fn every_output_sees_every_message_even_after_another_fails() {
        let (a, b) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let mut broadcast = BroadcastingOutput::default();
        broadcast.push(Box::new(Recording { seen: Arc::clone(&a), fail_at: vec![1] }));
        broadcast.push(Box::new(Recording { seen: Arc::clone(&b), fail_at: vec![] }));
        let count = Arc::new(AtomicU64::new(0));
        let mut counting = CountingOutput::new(broadcast, Arc::clone(&count));
        counting.dispatch(&request(0)).expect("both succeed");
        assert!(counting.dispatch(&request(1)).is_err(), "the first output's error is returned");
        counting.dispatch(&request(2)).expect("both succeed");
        assert_eq!(*a.lock(), [0, 1, 2]);
        assert_eq!(*b.lock(), [0, 1, 2], "the second output saw the message the first refused");
        assert_eq!(count.load(Ordering::Relaxed), 2, "only messages every output took are counted");
        counting.flush().expect("flush");
    }
}
