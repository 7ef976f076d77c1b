//! `EventManager` (Kafka's `ControllerEventManager`): one background thread, one queue, for short
//! work (checkpoints, retention checks, delayed deletions, preallocation). Events run in order,
//! one at a time; `clear_and_put` drops what is queued so an urgent event (shutdown) runs next;
//! delayed events wait for their time. An event that panics or fails is logged and counted, and
//! the thread goes on. Long work (compaction) and latency-critical work (syncing) have their own
//! threads.

use std::collections::{BinaryHeap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::histogram::{Histogram, LatencySummary};

/// A unit of background work. Returning an error logs and counts it.
pub type Event = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

/// A handle to an event thread; clones share it. Dropping the last `EventManager` (not a handle)
/// shuts the thread down.
#[derive(Clone)]
pub struct EventHandle {
    inner: Arc<Inner>,
}

/// Owns the event thread: shut it down with [`EventManager::shutdown`] (or by dropping it).
pub struct EventManager {
    handle: EventHandle,
    thread: Option<JoinHandle<()>>,
}

struct Inner {
    name: String,
    state: Mutex<State>,
    wake: Condvar,
    queue_time: Histogram,
    processing_time: Histogram,
    processed: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    idle_us: AtomicU64,
    started: Instant,
}

struct Queued {
    name: &'static str,
    event: Event,
    enqueued: Instant,
}

struct Delayed {
    due: Instant,
    seq: u64,
    queued: Queued,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Delayed) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Delayed) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    /// Reversed: the heap's top is the earliest due (then the earliest scheduled).
    fn cmp(&self, other: &Delayed) -> std::cmp::Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<Queued>,
    delayed: BinaryHeap<Delayed>,
    seq: u64,
    shutdown: bool,
}

/// A snapshot of an event thread's metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EventMetrics {
    /// Events waiting to run now.
    pub queue_len: usize,
    /// Events scheduled for later.
    pub delayed: usize,
    /// Events run (including failed and panicked ones).
    pub processed: u64,
    /// Events that returned an error.
    pub failed: u64,
    /// Events that panicked.
    pub panicked: u64,
    /// Time from queueing to running.
    pub queue_time: LatencySummary,
    /// Time running.
    pub processing_time: LatencySummary,
    /// Share of the thread's life spent waiting for work (0–1).
    pub idle_ratio: f64,
}

impl EventManager {
    /// Starts the thread, named `name`.
    pub fn start(name: &str) -> Result<EventManager> {
        let inner = Arc::new(Inner {
            name: name.to_owned(),
            state: Mutex::default(),
            wake: Condvar::new(),
            queue_time: Histogram::default(),
            processing_time: Histogram::default(),
            processed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            panicked: AtomicU64::new(0),
            idle_us: AtomicU64::new(0),
            started: Instant::now(),
        });
        let runner = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || runner.run())
            .map_err(|source| Error::Io { op: "spawn event thread", path: name.into(), source })?;
        Ok(EventManager { handle: EventHandle { inner }, thread: Some(thread) })
    }

    /// A cloneable handle for putting events.
    pub fn handle(&self) -> EventHandle {
        self.handle.clone()
    }

    /// See [`EventHandle::put`].
    pub fn put(&self, name: &'static str, event: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        self.handle.put(name, event)
    }

    /// See [`EventHandle::metrics`].
    pub fn metrics(&self) -> EventMetrics {
        self.handle.metrics()
    }

    /// Stops the thread: queued and delayed events are dropped, the running one finishes. Waits up
    /// to `timeout` for it; `Error::Timeout` if the running event takes longer (the thread then
    /// exits on its own when that event ends).
    pub fn shutdown(mut self, timeout: Duration) -> Result<()> {
        self.stop(timeout)
    }

    fn stop(&mut self, timeout: Duration) -> Result<()> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        let dropped = {
            let mut state = self.handle.inner.state.lock();
            state.shutdown = true;
            self.handle.inner.wake.notify_all();
            (std::mem::take(&mut state.queue), std::mem::take(&mut state.delayed))
        };
        // Outside the queue's lock: dropping an event may take other locks (a removed segment's
        // unlink retires it).
        drop(dropped);
        // Stopped from one of its own events (the last owner dropped there): it cannot wait for
        // itself; it ends when that event returns.
        if thread.thread().id() == std::thread::current().id() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return Err(Error::Timeout { waited: timeout });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if thread.join().is_err() {
            tracing::error!(thread = %self.handle.inner.name, "event thread died");
        }
        Ok(())
    }
}

impl Drop for EventManager {
    fn drop(&mut self) {
        if let Err(error) = self.stop(Duration::from_secs(30)) {
            tracing::error!(thread = %self.handle.inner.name, %error, "event thread did not stop");
        }
    }
}

impl EventHandle {
    /// Queues `event` to run after everything queued before it. `Error::Closed` after shutdown.
    pub fn put(&self, name: &'static str, event: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        let mut state = self.inner.state.lock();
        if state.shutdown {
            return Err(Error::Closed);
        }
        state.queue.push_back(Queued { name, event: Box::new(event), enqueued: Instant::now() });
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Drops every queued (not delayed) event and queues `event` to run next: preemption, e.g. for
    /// shutdown work.
    pub fn clear_and_put(&self, name: &'static str, event: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        let mut state = self.inner.state.lock();
        if state.shutdown {
            return Err(Error::Closed);
        }
        let dropped = state.queue.len();
        state.queue.clear();
        if dropped > 0 {
            tracing::debug!(thread = %self.inner.name, dropped, "queued events preempted");
        }
        state.queue.push_back(Queued { name, event: Box::new(event), enqueued: Instant::now() });
        self.inner.wake.notify_one();
        Ok(())
    }

    /// Queues `event` to run once `delay` has passed.
    pub fn put_after(
        &self,
        delay: Duration,
        name: &'static str,
        event: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let mut state = self.inner.state.lock();
        if state.shutdown {
            return Err(Error::Closed);
        }
        state.seq += 1;
        let seq = state.seq;
        let now = Instant::now();
        let queued = Queued { name, event: Box::new(event), enqueued: now + delay };
        state.delayed.push(Delayed { due: now + delay, seq, queued });
        self.inner.wake.notify_one();
        Ok(())
    }

    /// A snapshot of the thread's metrics.
    pub fn metrics(&self) -> EventMetrics {
        let inner = &self.inner;
        let (queue_len, delayed) = {
            let state = inner.state.lock();
            (state.queue.len(), state.delayed.len())
        };
        let alive_us = inner.started.elapsed().as_micros().max(1) as f64;
        EventMetrics {
            queue_len,
            delayed,
            processed: inner.processed.load(Ordering::Relaxed),
            failed: inner.failed.load(Ordering::Relaxed),
            panicked: inner.panicked.load(Ordering::Relaxed),
            queue_time: inner.queue_time.snapshot(),
            processing_time: inner.processing_time.snapshot(),
            idle_ratio: (inner.idle_us.load(Ordering::Relaxed) as f64 / alive_us).min(1.0),
        }
    }
}

impl Inner {
    fn run(&self) {
        while let Some(queued) = self.next() {
            self.queue_time.record(queued.enqueued.elapsed());
            let started = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(queued.event));
            self.processing_time.record(started.elapsed());
            self.processed.fetch_add(1, Ordering::Relaxed);
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(thread = %self.name, event = queued.name, %error, "background event failed");
                }
                Err(payload) => {
                    self.panicked.fetch_add(1, Ordering::Relaxed);
                    let error = Error::panicked(queued.name, payload.as_ref());
                    tracing::error!(thread = %self.name, event = queued.name, %error, "background event panicked");
                }
            }
        }
    }

    /// The next event to run: a queued one, or a delayed one that is due. `None` at shutdown.
    fn next(&self) -> Option<Queued> {
        let mut state = self.state.lock();
        loop {
            if state.shutdown {
                return None;
            }
            let now = Instant::now();
            if state.delayed.peek().is_some_and(|d| d.due <= now) {
                let due = state.delayed.pop().map(|d| d.queued);
                if let Some(queued) = due {
                    state.queue.push_back(queued);
                }
                continue;
            }
            if let Some(queued) = state.queue.pop_front() {
                return Some(queued);
            }
            let idle = Instant::now();
            match state.delayed.peek().map(|d| d.due) {
                Some(due) => {
                    self.wake.wait_until(&mut state, due);
                }
                None => self.wake.wait(&mut state),
            }
            self.idle_us.fetch_add(idle.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder() -> (Arc<Mutex<Vec<u32>>>, impl Fn(u32) -> Event) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = Arc::clone(&log);
        (log, move |n| {
            let log = Arc::clone(&log2);
            Box::new(move || {
                log.lock().push(n);
                Ok(())
            })
        })
    }

    fn drain(manager: &EventManager) {
        let (tx, rx) = std::sync::mpsc::channel();
        manager.put("drain", move || tx.send(()).map_err(|_| Error::Closed)).expect("put");
        rx.recv_timeout(Duration::from_secs(10)).expect("drained");
    }

    #[test]
    fn events_run_in_order() {
        let manager = EventManager::start("test-events").expect("start");
        let (log, event) = recorder();
        for n in 0..100 {
            manager.put("n", event(n)).expect("put");
        }
        drain(&manager);
        assert_eq!(*log.lock(), (0..100).collect::<Vec<_>>());
        // The drain event's own count may land just after it signalled.
        let metrics = manager.metrics();
        assert!(metrics.processed >= 100 && metrics.queue_time.count >= 100, "{metrics:?}");
        manager.shutdown(Duration::from_secs(5)).expect("shutdown");
    }

    #[test]
    fn clear_and_put_preempts_queued_events() {
        let manager = EventManager::start("test-preempt").expect("start");
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let (running_tx, running_rx) = std::sync::mpsc::channel::<()>();
        manager
            .put("blocker", move || {
                running_tx.send(()).map_err(|_| Error::Closed)?;
                gate_rx.recv().map_err(|_| Error::Closed)
            })
            .expect("put");
        running_rx.recv_timeout(Duration::from_secs(10)).expect("the blocker runs");
        let (log, event) = recorder();
        for n in 0..10 {
            manager.put("n", event(n)).expect("put");
        }
        manager.handle().clear_and_put("urgent", event(99)).expect("clear and put");
        gate_tx.send(()).expect("release");
        drain(&manager);
        assert_eq!(*log.lock(), [99], "the queued events were dropped, the urgent one ran");
    }

    #[test]
    fn a_panicking_or_failing_event_is_counted_and_the_thread_survives() {
        let manager = EventManager::start("test-panics").expect("start");
        manager.put("boom", || panic!("deliberate")).expect("put");
        manager.put("fails", || Err(Error::Closed)).expect("put");
        let (log, event) = recorder();
        manager.put("after", event(1)).expect("put");
        drain(&manager);
        assert_eq!(*log.lock(), [1]);
        let metrics = manager.metrics();
        assert_eq!((metrics.panicked, metrics.failed), (1, 1));
    }

    #[test]
    fn delayed_events_wait_for_their_time_in_order() {
        let manager = EventManager::start("test-delayed").expect("start");
        let (log, event) = recorder();
        let handle = manager.handle();
        handle.put_after(Duration::from_millis(60), "late", event(2)).expect("put");
        handle.put_after(Duration::from_millis(20), "early", event(1)).expect("put");
        manager.put("now", event(0)).expect("put");
        std::thread::sleep(Duration::from_millis(120));
        drain(&manager);
        assert_eq!(*log.lock(), [0, 1, 2]);
        assert!(manager.metrics().idle_ratio > 0.0);
    }

    #[test]
    fn shutdown_is_bounded_and_later_puts_fail() {
        let manager = EventManager::start("test-shutdown").expect("start");
        let handle = manager.handle();
        manager
            .put("slow", || {
                std::thread::sleep(Duration::from_millis(300));
                Ok(())
            })
            .expect("put");
        std::thread::sleep(Duration::from_millis(20));
        let result = manager.shutdown(Duration::from_millis(10));
        assert!(matches!(result, Err(Error::Timeout { .. })), "the running event outlasts the bound");
        assert!(matches!(handle.put("late", || Ok(())), Err(Error::Closed)));
    }
}
