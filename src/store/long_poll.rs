//! Long polling (RocketMQ's `PullRequestHoldService`): a `get_messages_wait` at a queue's end waits
//! until the dispatcher adds an entry to that queue, the deadline passes, or the store closes —
//! woken by a condition variable per queue, never by polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::store::queue_map::QueueMap;

/// One queue's signal: the queue's end as the dispatcher last published it.
#[derive(Default)]
struct Signal {
    end: Mutex<QueueEnd>,
    arrived: Condvar,
}

#[derive(Default)]
struct QueueEnd {
    max_offset: u64,
    closed: bool,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// The queue now ends past the offset waited for.
    Arrived,
    /// The deadline passed first.
    TimedOut,
    /// The store is closing.
    Closed,
}

/// The signals of every queue someone waited on or the dispatcher wrote to.
#[derive(Default)]
pub(crate) struct LongPolls {
    signals: Mutex<QueueMap<Arc<Signal>>>,
    /// Whether any queue has a signal (`signals` is not empty; kept outside its lock): an arrival
    /// when none has one takes no lock. Stored and read with a `SeqCst` fence on either side: a
    /// wait registers, fences, then reads the queue's end; an arrival stores the end, fences,
    /// then reads this — so either the wait sees the new end or the arrival sees the wait. Every
    /// store is made under the `signals` lock, from the map as it is then, so the last store
    /// always matches the map.
    signalled: AtomicBool,
    closed: AtomicBool,
    /// Waits that found nothing and were held, and those an arrival woke.
    pub(crate) held: AtomicU64,
    pub(crate) woken: AtomicU64,
}

impl LongPolls {
    fn signal(&self, topic: &str, queue_id: u32) -> Arc<Signal> {
        let mut signals = self.signals.lock();
        let signal = Arc::clone(signals.get_or_insert_with(topic, queue_id, Arc::default));
        self.signalled.store(!signals.is_empty(), Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            signal.end.lock().closed = true;
        }
        signal
    }

    /// The dispatcher added entries to the queue: it now ends at `max_offset`.
    pub(crate) fn arrived(&self, topic: &str, queue_id: u32, max_offset: u64) {
        // The queue's new end is stored (the caller read it back): see `signalled`.
        fence(Ordering::SeqCst);
        if !self.signalled.load(Ordering::Relaxed) {
            return; // nobody waits on any queue
        }
        let signal = {
            let signals = self.signals.lock();
            match signals.get(topic, queue_id) {
                Some(signal) => Arc::clone(signal),
                None => return, // nobody ever waited on it: no one to wake
            }
        };
        let mut end = signal.end.lock();
        end.max_offset = end.max_offset.max(max_offset);
        drop(end);
        signal.arrived.notify_all();
        // The waiter it woke may have released the signal while this clone still held it (and so
        // kept it): whichever of the two lets go last removes it.
        self.release(topic, queue_id, signal);
    }

    /// Waits until the queue ends past `offset` (`current_end()` is asked once the wait is
    /// registered, so an arrival between the caller's read and the wait is not missed), the
    /// `timeout` passes, or the store closes.
    pub(crate) fn wait(
        &self,
        topic: &str,
        queue_id: u32,
        offset: u64,
        timeout: Duration,
        current_end: impl Fn() -> u64,
    ) -> Woken {
        let signal = self.signal(topic, queue_id);
        // Registered before the queue's end is read: see `signalled`.
        fence(Ordering::SeqCst);
        let woken = self.wait_on(&signal, offset, timeout, current_end);
        self.release(topic, queue_id, signal);
        woken
    }

    /// Drops a waiter's signal, and the map's too if no one else holds it: the map holds the
    /// queues someone is waiting on, not every name ever polled.
    fn release(&self, topic: &str, queue_id: u32, signal: Arc<Signal>) {
        drop(signal);
        // Under the map lock: a waiter takes its clone under it too, so a count of 1 is final.
        let mut signals = self.signals.lock();
        signals.remove_if(topic, queue_id, |signal| Arc::strong_count(signal) == 1);
        self.signalled.store(!signals.is_empty(), Ordering::SeqCst);
    }

    /// How many queues have a signal (waited on now).
    #[cfg(test)]
    fn signal_count(&self) -> usize {
        self.signals.lock().len()
    }

    /// The wait itself, on `signal`.
    fn wait_on(&self, signal: &Signal, offset: u64, timeout: Duration, current_end: impl Fn() -> u64) -> Woken {
        // A timeout too long to add to now (`Duration::MAX`) is no limit, not a panic.
        let deadline = Instant::now().checked_add(timeout);
        // Asked before the signal's lock (it reads the queues' map, a lock taken before this
        // one): the signal is registered already, so an arrival from here on is in `end`.
        let current = current_end();
        let mut end = signal.end.lock();
        end.max_offset = end.max_offset.max(current);
        let mut counted = false;
        loop {
            if end.closed {
                return Woken::Closed;
            }
            if end.max_offset > offset {
                if counted {
                    self.woken.fetch_add(1, Ordering::Relaxed);
                }
                return Woken::Arrived;
            }
            if !counted {
                self.held.fetch_add(1, Ordering::Relaxed);
                counted = true;
            }
            match deadline {
                None => signal.arrived.wait(&mut end),
                Some(deadline) => {
                    if signal.arrived.wait_until(&mut end, deadline).timed_out() {
                        return if end.max_offset > offset { Woken::Arrived } else { Woken::TimedOut };
                    }
                }
            }
        }
    }

    /// The store is closing: every wait, and every later one, ends with `Woken::Closed`.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let signals: Vec<Arc<Signal>> = self.signals.lock().values().cloned().collect();
        for signal in signals {
            signal.end.lock().closed = true;
            signal.arrived.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_woken_by_an_arrival_on_its_queue_only() {
        let polls = Arc::new(LongPolls::default());
        let waiter = {
            let polls = Arc::clone(&polls);
            std::thread::spawn(move || polls.wait("t", 1, 5, Duration::from_secs(30), || 5))
        };
        while polls.held.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        polls.arrived("t", 2, 100); // another queue
        polls.arrived("u", 1, 100); // another topic
        polls.arrived("t", 1, 6);
        assert_eq!(waiter.join().expect("waiter"), Woken::Arrived);
        assert_eq!(polls.woken.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_wait_times_out_and_an_arrival_already_there_returns_at_once() {
        let polls = LongPolls::default();
        let started = Instant::now();
        assert_eq!(polls.wait("t", 0, 3, Duration::from_millis(30), || 3), Woken::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert_eq!(polls.wait("t", 0, 3, Duration::from_secs(30), || 4), Woken::Arrived, "already past");
    }

    #[test]
    fn a_queue_nobody_waits_on_keeps_no_signal() {
        let polls = Arc::new(LongPolls::default());
        for i in 0..100 {
            assert_eq!(polls.wait(&format!("topic-{i}"), 0, 0, Duration::ZERO, || 0), Woken::TimedOut);
        }
        assert_eq!(polls.signal_count(), 0, "every name polled once would stay forever otherwise");
        let waiter = {
            let polls = Arc::clone(&polls);
            std::thread::spawn(move || polls.wait("t", 1, 0, Duration::from_secs(30), || 0))
        };
        while polls.signal_count() == 0 {
            std::thread::yield_now();
        }
        polls.arrived("t", 1, 1);
        assert_eq!(waiter.join().expect("waiter"), Woken::Arrived);
        assert_eq!(polls.signal_count(), 0);
    }

    #[test]
    fn close_ends_every_wait_now_and_later() {
        let polls = Arc::new(LongPolls::default());
        let waiter = {
            let polls = Arc::clone(&polls);
            std::thread::spawn(move || polls.wait("t", 0, 0, Duration::from_secs(30), || 0))
        };
        while polls.held.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        polls.close();
        assert_eq!(waiter.join().expect("waiter"), Woken::Closed);
        assert_eq!(polls.wait("other", 0, 0, Duration::from_secs(30), || 0), Woken::Closed);
    }
}
