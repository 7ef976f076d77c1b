//! `Producer` (Kafka's `RecordAccumulator` and sender): callers send single records; they are
//! encoded straight into pooled buffers (one batch per buffer, up to `batch_bytes`, or whatever
//! `linger_ms` collected), and a sender thread appends whole batches to the log and completes each
//! record's [`SendHandle`] with its offset. When the pool is exhausted, `send` blocks (back-pressure)
//! up to `max_block_ms`.

mod buffer_pool;

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use buffer_pool::{BufferPool, BufferPoolMetrics, PooledBuffer};

use crate::clock::Clock;
use crate::config::FlushPolicy;
use crate::error::{Error, Result};
use crate::format::BATCH_HEADER_LEN;
use crate::log::batch::{self, BatchBuilder, Record};
use crate::log::{AppendInfo, Log};

/// How a [`Producer`] batches.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Size of each pooled batch buffer; a batch is sent once the next record would not fit.
    /// Default 64 KiB. A record larger than this gets a buffer of its own.
    pub batch_bytes: usize,
    /// How long a batch waits for more records before it is sent anyway. Default 5 ms.
    pub linger_ms: u64,
    /// Total memory of the buffer pool. Default 32 MiB.
    pub buffer_memory: usize,
    /// How long `send` blocks for a buffer when the pool is exhausted. Default 60 s.
    pub max_block_ms: u64,
}

impl Default for ProducerConfig {
    fn default() -> ProducerConfig {
        ProducerConfig { batch_bytes: 64 << 10, linger_ms: 5, buffer_memory: 32 << 20, max_block_ms: 60_000 }
    }
}

/// Sends records to a [`Log`] in batches. `Send + Sync`: many threads may send at once.
///
/// ```
/// use std::sync::Arc;
/// use strata_log::{FlushPolicy, Log, LogConfig, Producer, ProducerConfig, Record};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir().unwrap();
/// let log = Arc::new(Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() })?);
/// let producer = Producer::new(Arc::clone(&log), ProducerConfig::default())?;
/// let handles: Vec<_> = (0..1000).map(|i| producer.send(Record::new(format!("event {i}").as_bytes()))).collect::<Result<_, _>>()?;
/// producer.close()?; // sends what is buffered, waits for every append
/// assert_eq!(handles[999].wait()?, 999);
/// # Ok(())
/// # }
/// ```
pub struct Producer {
    state: Arc<ProducerState>,
    sender: Option<JoinHandle<()>>,
}

/// What a `Producer` shares with its sender thread (Kafka's `RecordAccumulator`), one owner per
/// part:
///
/// | part | owns |
/// |---|---|
/// | `queue` (the producer lock) | the open batch, the batches ready to send, the counts `flush` waits on |
/// | `sender_wake`, `drained` | the sender waiting for a batch, `flush` waiting for the batches in flight |
/// | [`BufferPool`] | the batches' memory (its own lock) |
/// | `Completion` (one per batch, shared by its `SendHandle`s) | the batch's outcome |
///
/// Lock order (a thread holding lock *n* takes only locks numbered above *n*): 1 the producer
/// lock → 2 leaves: a batch's completion lock and the pool's lock (a batch dropped under the
/// producer lock fails its handles and gives its buffer back). The sender calls the log holding
/// none of them, and a `send` waits for pool memory outside the producer lock.
struct ProducerState {
    log: Arc<Log>,
    config: ProducerConfig,
    pool: BufferPool,
    clock: Clock,
    queue: Mutex<Queue>,
    /// Wakes the sender: a batch is ready, lingering may be over, or closing.
    sender_wake: Condvar,
    /// Wakes `flush`: every batch created so far was completed.
    drained: Condvar,
}

/// What the producer lock guards.
#[derive(Default)]
struct Queue {
    open: Option<OpenBatch>,
    ready: VecDeque<OpenBatch>,
    /// Batches created and not yet completed (open, ready or being appended).
    in_flight: u64,
    flushing: u64,
    closed: bool,
}

/// A batch being filled, encoded straight into its pooled buffer.
struct OpenBatch {
    /// Never grows past the buffer's capacity, or the log's `max_batch_bytes`.
    batch: BatchBuilder<PooledBuffer>,
    created: Instant,
    completion: Arc<Completion>,
}

/// The outcome of one batch, shared by the handles of its records.
#[derive(Default)]
struct Completion {
    result: Mutex<Option<std::result::Result<u64, Arc<Error>>>>,
    done: Condvar,
}

/// The future offset of one sent record.
#[derive(Clone)]
pub struct SendHandle {
    completion: Arc<Completion>,
    index: u32,
}

impl SendHandle {
    /// Waits until the record's batch was appended; its offset, or why it was not appended.
    pub fn wait(&self) -> Result<u64> {
        let mut result = self.completion.result.lock();
        loop {
            if let Some(outcome) = &*result {
                return self.outcome(outcome);
            }
            self.completion.done.wait(&mut result);
        }
    }

    /// The result if the batch was already appended (or failed).
    pub fn try_wait(&self) -> Option<Result<u64>> {
        self.completion.result.lock().as_ref().map(|outcome| self.outcome(outcome))
    }

    fn outcome(&self, outcome: &std::result::Result<u64, Arc<Error>>) -> Result<u64> {
        match outcome {
            Ok(base) => Ok(base + u64::from(self.index)),
            Err(e) => Err(Error::SendFailed(Arc::clone(e))),
        }
    }
}

impl std::fmt::Debug for SendHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendHandle").field("index", &self.index).field("done", &self.try_wait().is_some()).finish()
    }
}

impl Producer {
    /// A producer appending to `log` with its own buffer pool and sender thread.
    pub fn new(log: Arc<Log>, config: ProducerConfig) -> Result<Producer> {
        if config.batch_bytes <= BATCH_HEADER_LEN || config.batch_bytes > config.buffer_memory {
            let reason = format!("batch_bytes {} must be in ({BATCH_HEADER_LEN}, buffer_memory]", config.batch_bytes);
            return Err(Error::InvalidConfig { field: "producer.batch_bytes", reason });
        }
        // No batch may outgrow what the log accepts.
        let batch_bytes = config.batch_bytes.min(log.config().max_batch_bytes as usize);
        let config = ProducerConfig { batch_bytes, ..config };
        let state = Arc::new(ProducerState {
            pool: BufferPool::new(config.buffer_memory, config.batch_bytes),
            clock: log.config().clock.clone(),
            log,
            config,
            queue: Mutex::default(),
            sender_wake: Condvar::new(),
            drained: Condvar::new(),
        });
        let sender_state = Arc::clone(&state);
        let sender = std::thread::Builder::new()
            .name("strata-producer".to_owned())
            .spawn(move || {
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sender_state.run_sender()));
                if let Err(payload) = ran {
                    sender_state.stop_after_panic(&Error::panicked("the producer's sender", payload.as_ref()));
                }
            })
            .map_err(Error::io("spawn producer thread", state.log.dir()))?;
        Ok(Producer { state, sender: Some(sender) })
    }

    /// Adds `record` to the current batch and returns a handle to its future offset. Records
    /// without a timestamp are stamped now (create time). Blocks up to `max_block_ms` while the
    /// buffer pool is exhausted (`Error::BufferExhausted` after that). A record that cannot fit in
    /// a batch the log accepts is refused at once (`Error::BatchTooLarge`).
    pub fn send(&self, record: Record<'_>) -> Result<SendHandle> {
        let timestamp = record.timestamp_ms.unwrap_or_else(|| self.state.clock.now_ms());
        let needed = BATCH_HEADER_LEN + batch::record_len(&record, 0, 0);
        let max = self.state.log.config().max_batch_bytes;
        if needed as u64 > max {
            return Err(Error::BatchTooLarge { size: needed as u64, max });
        }
        loop {
            let mut queue = self.state.queue.lock();
            if queue.closed {
                return Err(Error::Closed);
            }
            if let Some(open) = queue.open.as_mut() {
                if let Some(handle) = open.try_add(&record, timestamp) {
                    return Ok(handle);
                }
                // Full: hand it to the sender and start another.
                if let Some(full) = queue.open.take() {
                    queue.ready.push_back(full);
                    self.state.sender_wake.notify_one();
                }
            }
            drop(queue);
            // Allocate outside the lock: the sender must be able to take batches and free buffers.
            let max_block = Duration::from_millis(self.state.config.max_block_ms);
            let buf = self.state.pool.allocate(needed.max(self.state.config.batch_bytes), max_block)?;
            let mut queue = self.state.queue.lock();
            if queue.open.is_none() && !queue.closed {
                queue.open = Some(OpenBatch::new(buf, timestamp, max as usize));
                queue.in_flight += 1;
                self.state.sender_wake.notify_one();
            }
        }
    }

    /// Sends everything buffered now and waits until every record sent before the call was
    /// appended (or failed).
    pub fn flush(&self) -> Result<()> {
        let mut queue = self.state.queue.lock();
        queue.flushing += 1;
        self.state.sender_wake.notify_one();
        while queue.in_flight > 0 {
            self.state.drained.wait(&mut queue);
        }
        queue.flushing -= 1;
        Ok(())
    }

    /// The buffer pool's metrics.
    pub fn pool_metrics(&self) -> BufferPoolMetrics {
        self.state.pool.metrics()
    }

    /// Flushes, then stops the sender thread. Sends after it fail with `Error::Closed`.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(sender) = self.sender.take() else { return Ok(()) };
        self.flush()?;
        {
            let mut queue = self.state.queue.lock();
            queue.closed = true;
            self.state.sender_wake.notify_all();
        }
        sender.join().map_err(|_| Error::Io {
            op: "join producer thread",
            path: self.state.log.dir().to_path_buf(),
            source: std::io::Error::other("the producer thread panicked"),
        })
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Err(error) = self.shutdown() {
            tracing::error!(%error, "closing the producer on drop failed");
        }
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("config", &self.state.config).field("pool", &self.state.pool).finish()
    }
}

impl OpenBatch {
    fn new(buf: PooledBuffer, timestamp: i64, max_batch_bytes: usize) -> OpenBatch {
        OpenBatch {
            batch: BatchBuilder::with_buffer(buf, timestamp).with_max_bytes(max_batch_bytes),
            created: Instant::now(),
            completion: Arc::default(),
        }
    }

    /// Encodes `record`, stamped `timestamp`, into the buffer if it fits.
    fn try_add(&mut self, record: &Record<'_>, timestamp: i64) -> Option<SendHandle> {
        let index = self.batch.record_count();
        self.batch.append(&Record { timestamp_ms: Some(timestamp), ..*record }).ok()?;
        Some(SendHandle { completion: Arc::clone(&self.completion), index })
    }
}

impl ProducerState {
    /// The sender thread: takes ready (or lingered) batches, appends them without waiting, then
    /// waits once for the durability of the last one (so its fsync covers them all), and completes
    /// every handle.
    fn run_sender(&self) {
        loop {
            let Some(mut batches) = self.take_batches() else { return };
            #[cfg(feature = "failpoints")]
            fail::fail_point!("producer_sender");
            let mut appended = Vec::with_capacity(batches.len());
            for open in &mut batches {
                // An empty batch (left behind by a record that did not fit in it) is no append:
                // `EmptyBatch` completes its no handles.
                let result = open.batch.finish().and_then(|bytes| self.log.append_batch_nowait(bytes));
                appended.push(result);
            }
            // The last batch's offset with the first batch's epoch: a truncation that removed any
            // of them since it was stored is reported.
            let first = appended.iter().find_map(|r| r.as_ref().ok());
            let last = appended.iter().rev().find_map(|r| r.as_ref().ok());
            let durable = match (first, last, self.log.config().flush_policy) {
                (Some(first), Some(last), FlushPolicy::Always) => {
                    self.log.wait_batch_durable_until(&AppendInfo { truncation_epoch: first.truncation_epoch, ..*last })
                }
                _ => Ok(()),
            };
            // A truncation removed some of them: each batch learns its own fate (the ones below
            // the cut were made durable by the truncation and stay in the log).
            let truncated = matches!(durable, Err(Error::Truncated { .. }));
            let durable = durable.map_err(Arc::new);
            let count = batches.len() as u64;
            for (batch, result) in batches.into_iter().zip(appended) {
                let outcome = match (result, &durable) {
                    (Ok(info), Ok(())) => Ok(info.base_offset),
                    (Ok(info), Err(_)) if truncated => {
                        self.log.wait_batch_durable_until(&info).map(|()| info.base_offset).map_err(Arc::new)
                    }
                    (Ok(_), Err(e)) => Err(Arc::clone(e)),
                    (Err(e), _) => Err(Arc::new(e)),
                };
                batch.complete(outcome);
            }
            let mut queue = self.queue.lock();
            queue.in_flight -= count;
            if queue.in_flight == 0 {
                self.drained.notify_all();
            }
        }
    }

    /// After a panic in the sender (a bug): closes the producer and fails every batch not sent
    /// (their handles get `Error::Closed`; the batches it was sending failed as they unwound), so
    /// no `wait`, `flush` or `close` hangs.
    fn stop_after_panic(&self, error: &Error) {
        tracing::error!(%error, "producer stopped: records not yet appended fail");
        let unsent: Vec<OpenBatch> = {
            let mut queue = self.queue.lock();
            queue.closed = true;
            queue.in_flight = 0;
            queue.open.take().into_iter().chain(queue.ready.drain(..)).collect()
        };
        drop(unsent);
        self.drained.notify_all();
        self.sender_wake.notify_all();
    }

    /// Waits for batches to send: ready ones, or the open one once it lingered long enough (or a
    /// flush or close wants it). `None` once closed and drained.
    fn take_batches(&self) -> Option<Vec<OpenBatch>> {
        let linger = Duration::from_millis(self.config.linger_ms);
        let mut queue = self.queue.lock();
        loop {
            let lingered = queue.open.as_ref().is_some_and(|o| {
                !o.batch.is_empty() && (o.created.elapsed() >= linger || queue.flushing > 0 || queue.closed)
            });
            if lingered && let Some(open) = queue.open.take() {
                queue.ready.push_back(open);
            }
            let draining = queue.flushing > 0 || queue.closed;
            if let Some(empty) = queue.open.take_if(|o| o.batch.is_empty() && draining) {
                // Allocated for a record that went elsewhere: nothing to send.
                drop(empty);
                queue.in_flight -= 1;
                self.drained.notify_all();
            }
            if !queue.ready.is_empty() {
                return Some(queue.ready.drain(..).collect());
            }
            if queue.closed && queue.open.is_none() {
                return None;
            }
            match queue.open.as_ref() {
                Some(open) => {
                    let left = linger.saturating_sub(open.created.elapsed());
                    self.sender_wake.wait_for(&mut queue, left.max(Duration::from_micros(50)));
                }
                None => self.sender_wake.wait(&mut queue),
            }
        }
    }
}

impl OpenBatch {
    /// Completes every handle of the batch and returns its buffer to the pool.
    fn complete(self, outcome: std::result::Result<u64, Arc<Error>>) {
        *self.completion.result.lock() = Some(outcome);
        self.completion.done.notify_all();
    }
}

impl Drop for OpenBatch {
    fn drop(&mut self) {
        // Never leave a handle waiting forever: a batch dropped unsent fails its records.
        let mut result = self.completion.result.lock();
        if result.is_none() {
            *result = Some(Err(Arc::new(Error::Closed)));
            self.completion.done.notify_all();
        }
    }
}
