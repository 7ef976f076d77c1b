//! `BufferPool` (Kafka's producer `BufferPool`): a bounded amount of memory handed out as buffers.
//! Buffers of the pooled size are kept and reused without reallocation; other sizes are allocated
//! one-off and counted against the same limit. A caller that cannot be served waits, in arrival
//! order (FIFO), up to a deadline, and gets a clear error if it passes.

use std::collections::VecDeque;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// A bounded pool of byte buffers. Cheap to clone (clones share the pool).
#[derive(Clone)]
pub struct BufferPool {
    pool: Arc<Pool>,
}

struct Pool {
    total_bytes: usize,
    poolable_bytes: usize,
    state: Mutex<State>,
}

struct State {
    /// Pooled buffers ready for reuse (each of capacity `poolable_bytes`, empty).
    free: Vec<Vec<u8>>,
    /// Memory not held by any buffer, free or lent.
    unallocated_bytes: usize,
    /// Waiting allocations, first come first served; each wakes on its own condition.
    waiters: VecDeque<Arc<Waiter>>,
    /// Metrics.
    total_wait: Duration,
    waits: u64,
    timeouts: u64,
}

struct Waiter {
    ready: Condvar,
}

/// A snapshot of the pool's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferPoolMetrics {
    /// The configured limit.
    pub total_bytes: usize,
    /// Bytes not lent out (free pooled buffers included).
    pub available_bytes: usize,
    /// Pooled buffers ready for reuse.
    pub free_buffers: usize,
    /// Threads waiting for memory now.
    pub waiting_threads: usize,
    /// Allocations that had to wait, and how long they waited in all.
    pub waits: u64,
    /// Total time spent waiting.
    pub total_wait: Duration,
    /// Allocations that gave up at their deadline.
    pub timeouts: u64,
}

impl BufferPool {
    /// A pool of `total_bytes`, reusing buffers of exactly `poolable_bytes`.
    pub fn new(total_bytes: usize, poolable_bytes: usize) -> BufferPool {
        let state = State {
            free: Vec::new(),
            unallocated_bytes: total_bytes,
            waiters: VecDeque::new(),
            total_wait: Duration::ZERO,
            waits: 0,
            timeouts: 0,
        };
        BufferPool { pool: Arc::new(Pool { total_bytes, poolable_bytes, state: Mutex::new(state) }) }
    }

    /// The size of the buffers the pool keeps for reuse.
    pub fn poolable_bytes(&self) -> usize {
        self.pool.poolable_bytes
    }

    /// A buffer with capacity for at least `size` bytes (exactly the pooled size when
    /// `size <= poolable_bytes`), waiting up to `max_wait` behind earlier callers for memory.
    /// `Error::BufferExhausted` if the wait times out; `Error::InvalidConfig` if `size` exceeds the
    /// pool's total.
    pub fn allocate(&self, size: usize, max_wait: Duration) -> Result<PooledBuffer> {
        let pool = &self.pool;
        let size = size.max(1).max(if size <= pool.poolable_bytes { pool.poolable_bytes } else { 0 });
        if size > pool.total_bytes {
            let reason = format!("a buffer of {size} bytes exceeds the pool's {} bytes", pool.total_bytes);
            return Err(Error::InvalidConfig { field: "buffer_pool.total_bytes", reason });
        }
        let mut state = pool.state.lock();
        if state.waiters.is_empty()
            && let Some(buffer) = self.take(&mut state, size)
        {
            return Ok(buffer);
        }
        let waiter = Arc::new(Waiter { ready: Condvar::new() });
        state.waiters.push_back(Arc::clone(&waiter));
        let started = Instant::now();
        let deadline = started + max_wait;
        let result = loop {
            let first = state.waiters.front().is_some_and(|w| Arc::ptr_eq(w, &waiter));
            if first && let Some(buffer) = self.take(&mut state, size) {
                break Ok(buffer);
            }
            if waiter.ready.wait_until(&mut state, deadline).timed_out() {
                let first = state.waiters.front().is_some_and(|w| Arc::ptr_eq(w, &waiter));
                match self.take(&mut state, size).filter(|_| first) {
                    Some(buffer) => break Ok(buffer),
                    None => {
                        state.timeouts += 1;
                        break Err(Error::BufferExhausted { requested: size, waited: started.elapsed() });
                    }
                }
            }
        };
        state.waiters.retain(|w| !Arc::ptr_eq(w, &waiter));
        state.waits += 1;
        state.total_wait += started.elapsed();
        // Whoever is first now may be servable with what is left.
        if let Some(next) = state.waiters.front() {
            next.ready.notify_one();
        }
        result
    }

    /// Serves `size` bytes now if the pool can: a free pooled buffer, or unallocated memory (freeing
    /// pooled buffers back into it if needed).
    fn take(&self, state: &mut State, size: usize) -> Option<PooledBuffer> {
        let poolable = self.pool.poolable_bytes;
        if size == poolable
            && let Some(buf) = state.free.pop()
        {
            return Some(self.lend(buf));
        }
        let pooled_free = state.free.len() * poolable;
        if state.unallocated_bytes + pooled_free < size {
            return None;
        }
        while state.unallocated_bytes < size {
            // Release pooled buffers until the one-off allocation fits.
            state.free.pop();
            state.unallocated_bytes += poolable;
        }
        state.unallocated_bytes -= size;
        Some(self.lend(Vec::with_capacity(size)))
    }

    fn lend(&self, buf: Vec<u8>) -> PooledBuffer {
        PooledBuffer { buf, pool: Some(self.clone()) }
    }

    /// Takes a buffer back: a pooled-size buffer is kept for reuse, any other is dropped and its
    /// memory returned to the limit. Wakes the first waiter.
    fn release(&self, mut buf: Vec<u8>, capacity: usize) {
        let mut state = self.pool.state.lock();
        if capacity == self.pool.poolable_bytes && buf.capacity() == capacity {
            buf.clear();
            state.free.push(buf);
        } else {
            state.unallocated_bytes += capacity;
        }
        if let Some(first) = state.waiters.front() {
            first.ready.notify_one();
        }
    }

    /// A snapshot of the pool's metrics.
    pub fn metrics(&self) -> BufferPoolMetrics {
        let state = self.pool.state.lock();
        BufferPoolMetrics {
            total_bytes: self.pool.total_bytes,
            available_bytes: state.unallocated_bytes + state.free.len() * self.pool.poolable_bytes,
            free_buffers: state.free.len(),
            waiting_threads: state.waiters.len(),
            waits: state.waits,
            total_wait: state.total_wait,
            timeouts: state.timeouts,
        }
    }
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool").field("metrics", &self.metrics()).finish()
    }
}

/// A buffer lent by a [`BufferPool`]; returned to it when dropped. Its length may grow up to its
/// capacity; growing past it would allocate outside the pool's limit and is prevented by `push`.
pub struct PooledBuffer {
    buf: Vec<u8>,
    pool: Option<BufferPool>,
}

impl PooledBuffer {
    /// Bytes this buffer may hold (the memory it counts against the pool).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Appends `bytes` if they fit in the capacity; `false` (and nothing appended) otherwise.
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        if self.buf.len() + bytes.len() > self.buf.capacity() {
            return false;
        }
        self.buf.extend_from_slice(bytes);
        true
    }

    /// Empties the buffer, keeping its capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
    }
}

/// A [`BatchBuilder`](crate::BatchBuilder) encodes into a pooled buffer up to its capacity, never
/// past it (growing it would allocate outside the pool's limit, which a debug assertion catches on
/// return).
impl crate::log::batch::sealed::Buffer for PooledBuffer {
    fn vec_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    fn bytes(&self) -> &[u8] {
        &self.buf
    }

    fn max_len(&self) -> usize {
        self.buf.capacity()
    }
}

impl crate::log::batch::BatchBuffer for PooledBuffer {}

impl Deref for PooledBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for PooledBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl fmt::Debug for PooledBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBuffer").field("len", &self.buf.len()).field("capacity", &self.buf.capacity()).finish()
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let buf = std::mem::take(&mut self.buf);
            let capacity = buf.capacity();
            pool.release(buf, capacity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn pooled_buffers_are_reused_without_reallocation() {
        let pool = BufferPool::new(4096, 1024);
        let first = pool.allocate(1024, MS).expect("allocate");
        let ptr = first.buf.as_ptr();
        drop(first);
        let again = pool.allocate(100, MS).expect("allocate");
        assert_eq!(again.buf.as_ptr(), ptr, "the same memory comes back");
        assert_eq!(again.capacity(), 1024, "small requests get a pooled buffer");
        assert_eq!(pool.metrics().free_buffers, 0);
    }

    #[test]
    fn the_limit_is_never_exceeded_and_a_timeout_is_an_error() {
        let pool = BufferPool::new(3000, 1000);
        let a = pool.allocate(1000, MS).expect("a");
        let b = pool.allocate(2000, MS).expect("b: one-off, counted");
        assert_eq!(pool.metrics().available_bytes, 0);
        let err = pool.allocate(1, 10 * MS).expect_err("no memory left");
        assert!(matches!(err, Error::BufferExhausted { .. }));
        assert_eq!(pool.metrics().timeouts, 1);
        drop(b);
        assert_eq!(pool.metrics().available_bytes, 2000);
        let c = pool.allocate(2000, MS).expect("c");
        drop((a, c));
        assert_eq!(pool.metrics().available_bytes, 3000);
        assert!(matches!(pool.allocate(3001, MS), Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let pool = BufferPool::new(1000, 1000);
        let held = pool.allocate(1000, MS).expect("held");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..4 {
            let (waiter, order) = (pool.clone(), Arc::clone(&order));
            threads.push(std::thread::spawn(move || {
                let buf = waiter.allocate(1000, Duration::from_secs(10)).expect("served");
                order.lock().push(i);
                std::thread::sleep(2 * MS);
                drop(buf);
            }));
            // Make arrival order deterministic.
            while pool.metrics().waiting_threads < i + 1 {
                std::thread::yield_now();
            }
        }
        drop(held);
        for t in threads {
            t.join().expect("join");
        }
        assert_eq!(*order.lock(), [0, 1, 2, 3]);
        assert!(pool.metrics().waits >= 4);
    }

    #[test]
    fn one_off_allocations_free_pooled_buffers_to_fit() {
        let pool = BufferPool::new(2048, 1024);
        drop((pool.allocate(1024, MS).expect("a"), pool.allocate(1024, MS).expect("b")));
        assert_eq!(pool.metrics().free_buffers, 2);
        let big = pool.allocate(2048, MS).expect("frees both pooled buffers");
        assert_eq!(pool.metrics().free_buffers, 0);
        assert_eq!(big.capacity(), 2048);
    }

    #[test]
    fn push_never_grows_past_the_capacity() {
        let pool = BufferPool::new(64, 16);
        let mut buf = pool.allocate(16, MS).expect("buf");
        assert!(buf.push(&[1; 10]));
        assert!(!buf.push(&[2; 7]), "would exceed the capacity");
        assert_eq!(&buf[..], &[1; 10][..]);
    }
}
