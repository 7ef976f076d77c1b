//! The message store's phases of `strata bench`: puts of 100-byte messages against
//! `Log::append` of 100-byte records (one per call, same flush policy, same threads) measured in
//! the same run; how far dispatch falls behind sustained puts; consuming one queue; finding
//! messages by key; and opening a store that did not close cleanly.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{BenchOptions, BenchResult, result};
use crate::tools::text::count;
use strata_log::internals::format::{
    CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, STORE_ABORT_FILE, STORE_CHECKPOINT_FILE, STORE_COMMIT_LOG_DIR,
};
use strata_log::internals::io_error;
use strata_log::{FlushPolicy, Log, LogConfig, Message, MessageStore, Record, Result, StoreConfig};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);
/// Records one phase's result (after a `sync`), as `phases::run_all` does for its own.
type Phase<'a> = &'a mut dyn FnMut(Result<BenchResult>) -> Result<()>;

const SEGMENT_BYTES: u64 = 256 << 20;
const BODY_BYTES: usize = 100;
const TOPIC: &str = "bench";
/// Queues the put phases spread their messages over (thread `t`'s `i`th put goes to `(t + i) % 8`).
const QUEUES: u32 = 8;
/// Messages per `get_messages` call: RocketMQ's default pull batch, and a larger one.
const GET_BATCHES: [usize; 2] = [32, 1024];
/// Messages `query_by_key` may return (each key is unique, so one is found).
const QUERY_MAX: usize = 32;

/// One run of every store phase, in order.
pub(super) fn run_all(dir: &Path, options: &BenchOptions, phase: Phase<'_>, progress: Progress<'_>) -> Result<()> {
    let mut policies = vec![FlushPolicy::Always];
    if options.flush_policy != FlushPolicy::Always {
        policies.push(options.flush_policy);
    }
    let mut thread_counts = vec![1];
    if options.threads > 1 {
        thread_counts.push(options.threads);
    }
    for policy in policies {
        for &threads in &thread_counts {
            // Side by side, so the disk's drifting speed hits both alike.
            phase(append(dir, options, policy, threads, progress))?;
            phase(put(dir, options, policy, threads, progress))?;
        }
    }
    phase(dispatch_lag(dir, options, progress))?;
    let root = dir.join("store_filled");
    let store = fill(&root, options, progress)?;
    consume(&store, &root, options.store_messages, GET_BATCHES[1])?; // warm the mappings: every pass alike
    for batch in GET_BATCHES {
        phase(get(&store, &root, options.store_messages, batch, progress))?;
    }
    phase(query_by_key(&store, options, progress))?;
    store.close()?;
    phase(recovery(&root, options, Checkpoint::Kept, progress))?;
    phase(recovery(&root, options, Checkpoint::Lost, progress))?;
    Ok(())
}

/// `always`, `never`, `interval10ms`: a policy in a phase name.
fn policy_name(policy: FlushPolicy) -> String {
    match policy {
        FlushPolicy::Always => "always".to_owned(),
        FlushPolicy::Never => "never".to_owned(),
        FlushPolicy::EveryInterval { ms, .. } => format!("interval{ms}ms"),
    }
}

fn store_config(policy: FlushPolicy) -> StoreConfig {
    let defaults = StoreConfig::default();
    StoreConfig { log: LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: policy, ..defaults.log }, ..defaults }
}

fn open_store(root: &Path, policy: FlushPolicy) -> Result<MessageStore> {
    MessageStore::open(root, store_config(policy))
}

/// One 100-byte message per queue of `TOPIC`.
fn messages() -> Vec<Message> {
    (0..QUEUES).map(|queue| Message::new(TOPIC, queue, vec![0x5au8; BODY_BYTES])).collect()
}

/// Calls of a throughput phase: as many as a durable phase makes under `Always`, as many as
/// there are records otherwise; each phase also stops after `store_seconds`.
fn call_cap(options: &BenchOptions, policy: FlushPolicy) -> u64 {
    if policy == FlushPolicy::Always { options.durable_ops } else { options.records }
}

/// Calls `op(thread, call)` from `threads` threads until `cap` calls in all or `seconds` have
/// passed; returns every call's latency and the wall time.
pub(super) fn drive(
    dir: &Path,
    threads: usize,
    cap: u64,
    seconds: f64,
    op: impl Fn(usize, u64) -> Result<()> + Sync,
) -> Result<(Vec<Duration>, Duration)> {
    let calls = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let joined = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|thread| {
                let (calls, op) = (&calls, &op);
                s.spawn(move || -> Result<Vec<Duration>> {
                    let mut latencies = Vec::new();
                    let mut call = 0;
                    while calls.fetch_add(1, Ordering::Relaxed) < cap && Instant::now() < deadline {
                        let t = Instant::now();
                        op(thread, call)?;
                        latencies.push(t.elapsed());
                        call += 1;
                    }
                    Ok(latencies)
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join()).collect::<Vec<_>>()
    });
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    for worker in joined {
        let worker = worker.map_err(|_| io_error("join bench thread", dir)(std::io::Error::other("panicked")))?;
        latencies.extend(worker?);
    }
    Ok((latencies, elapsed))
}

/// The baseline of a put phase: `Log::append` of one 100-byte record per call.
fn append(
    dir: &Path,
    options: &BenchOptions,
    policy: FlushPolicy,
    threads: usize,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = format!("store_append_{threads}t_{}", policy_name(policy));
    let config = LogConfig { segment_bytes: SEGMENT_BYTES, flush_policy: policy, ..store_config(policy).log };
    let log = Log::open(dir.join(&name), config)?;
    let value = [0x5au8; BODY_BYTES];
    let cap = call_cap(options, policy);
    let (latencies, elapsed) =
        drive(dir, threads, cap, options.store_seconds, |_, _| log.append(&[Record::new(&value)]).map(drop))?;
    progress(&name, 1, 1);
    let appends_per_sync = log.metrics().appends_per_sync;
    log.close()?;
    let ops = latencies.len() as u64;
    let mut r = result(&name, ops, ops * BODY_BYTES as u64, elapsed, latencies);
    r.appends_per_fsync = (policy == FlushPolicy::Always).then_some(appends_per_sync);
    Ok(r)
}

/// `MessageStore::put` of one 100-byte message per call, over `QUEUES` queues.
fn put(
    dir: &Path,
    options: &BenchOptions,
    policy: FlushPolicy,
    threads: usize,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = format!("store_put_{threads}t_{}", policy_name(policy));
    let root = dir.join(&name);
    let store = open_store(&root, policy)?;
    let messages = messages();
    let cap = call_cap(options, policy);
    let (latencies, elapsed) = drive(dir, threads, cap, options.store_seconds, |thread, call| {
        let message = &messages[(thread as u64 + call) as usize % messages.len()];
        store.put(message).map(drop)
    })?;
    progress(&name, 1, 1);
    let metrics = store.metrics();
    store.close()?;
    let ops = latencies.len() as u64;
    let mut r = result(&name, ops, ops * BODY_BYTES as u64, elapsed, latencies);
    r.appends_per_fsync = (policy == FlushPolicy::Always).then_some(metrics.log.appends_per_sync);
    r.max_dispatch_lag_ms = Some(metrics.max_dispatch_lag_ms);
    Ok(r)
}

/// `put_nowait` from `threads` threads at the options' flush policy, as fast as they go, while
/// the store's dispatch lag is sampled every millisecond; then how long dispatch takes to catch up.
fn dispatch_lag(dir: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<BenchResult> {
    let threads = options.threads.max(1);
    let name = format!("store_dispatch_lag_{threads}t");
    let root = dir.join(&name);
    let store = open_store(&root, options.flush_policy)?;
    let messages = messages();
    let cap = call_cap(options, options.flush_policy);
    let done = AtomicBool::new(false);
    let (driven, max_lag_offsets) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut most = 0;
            while !done.load(Ordering::Relaxed) {
                most = store.metrics().dispatch_lag_offsets.max(most);
                std::thread::sleep(Duration::from_millis(1));
            }
            most
        });
        let driven = drive(dir, threads, cap, options.store_seconds, |thread, call| {
            let message = &messages[(thread as u64 + call) as usize % messages.len()];
            // The handle is dropped: the phase is about dispatch keeping up, not about waiting.
            store.put_nowait(message).map(drop)
        });
        done.store(true, Ordering::Relaxed);
        (driven, sampler.join().unwrap_or(0))
    });
    let (latencies, elapsed) = driven?;
    // A put waits for every message before it to be dispatched.
    let catching_up = Instant::now();
    store.put(&messages[0])?;
    let caught_up = catching_up.elapsed();
    progress(&name, 1, 1);
    let metrics = store.metrics();
    store.close()?;
    let ops = latencies.len() as u64;
    let mut r = result(&name, ops, ops * BODY_BYTES as u64, elapsed, latencies);
    r.max_dispatch_lag_ms = Some(metrics.max_dispatch_lag_ms);
    r.max_dispatch_lag_offsets = Some(max_lag_offsets);
    let dispatched_per_sec = ops as f64 / (elapsed + caught_up).as_secs_f64().max(f64::MIN_POSITIVE);
    r.note = Some(format!(
        "put_nowait, handles dropped; dispatch caught up {:.0} ms after the last put ({dispatched_per_sec:.0} messages/s dispatched)",
        caught_up.as_secs_f64() * 1e3
    ));
    Ok(r)
}

/// The key of the `i`th message of the filled store.
fn key(i: u64) -> String {
    format!("key-{i:010}")
}

/// A store of `store_messages` 100-byte messages in queue 0 of `TOPIC`, each with a key of its
/// own, put one at a time.
fn fill(root: &Path, options: &BenchOptions, progress: Progress<'_>) -> Result<MessageStore> {
    let store = open_store(root, options.flush_policy)?;
    let body = vec![0xc3u8; BODY_BYTES];
    let mut last = None;
    for i in 0..options.store_messages {
        let message = Message::new(TOPIC, 0, body.clone()).with_keys([key(i)]);
        last = Some(store.put_nowait(&message)?);
        if i % 4096 == 0 {
            progress("store (filling)", i, options.store_messages);
        }
    }
    if let Some(last) = last {
        last.wait()?;
    }
    Ok(store)
}

/// Reads queue 0 from its start to `messages`, `batch` per call: (messages, body bytes, every
/// call's latency).
fn consume(store: &MessageStore, root: &Path, messages: u64, batch: usize) -> Result<(u64, u64, Vec<Duration>)> {
    let (mut next, mut count, mut bytes) = (0, 0u64, 0u64);
    let mut latencies = Vec::with_capacity(messages.div_ceil(batch as u64) as usize);
    while next < messages {
        let t = Instant::now();
        let got = store.get_messages(TOPIC, 0, next, batch, None)?;
        latencies.push(t.elapsed());
        if got.messages.is_empty() {
            let reason = format!("queue 0 gave nothing at {next} of {messages} ({:?})", got.status);
            return Err(io_error("get_messages", root)(std::io::Error::other(reason)));
        }
        count += got.messages.len() as u64;
        bytes += got.messages.iter().map(|m| m.body().len() as u64).sum::<u64>();
        next = got.next_queue_offset;
    }
    Ok((count, bytes, latencies))
}

/// `get_messages` over every message of the filled store's queue, `batch` per call.
fn get(store: &MessageStore, root: &Path, messages: u64, batch: usize, progress: Progress<'_>) -> Result<BenchResult> {
    let name = format!("store_get_x{batch}");
    let started = Instant::now();
    let (count, bytes, latencies) = consume(store, root, messages, batch)?;
    let elapsed = started.elapsed();
    progress(&name, 1, 1);
    Ok(result(&name, count, bytes, elapsed, latencies))
}

/// `query_by_key` of keys drawn at random from the filled store's, for `store_seconds` or one
/// query per message; a query that does not find exactly its message is counted in the note.
fn query_by_key(store: &MessageStore, options: &BenchOptions, progress: Progress<'_>) -> Result<BenchResult> {
    let name = "store_query_by_key";
    let deadline = Instant::now() + Duration::from_secs_f64(options.store_seconds);
    let mut state = 0x9e37_79b9_7f4a_7c15u64; // xorshift64: the same keys every run
    let (mut latencies, mut misses) = (Vec::new(), 0u64);
    let started = Instant::now();
    while (latencies.len() as u64) < options.store_messages && Instant::now() < deadline {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let wanted = key(state % options.store_messages);
        let t = Instant::now();
        let found = store.query_by_key(TOPIC, &wanted, 0, i64::MAX, QUERY_MAX)?;
        latencies.push(t.elapsed());
        if found.len() != 1 || found[0].keys() != [wanted] {
            misses += 1;
        }
    }
    let elapsed = started.elapsed();
    progress(name, 1, 1);
    let queries = latencies.len() as u64;
    let mut r = result(name, queries, 0, elapsed, latencies);
    if misses > 0 {
        r.note = Some(format!("{} did not find exactly their message", count(misses, "query", "queries")));
    }
    Ok(r)
}

/// Which store checkpoint an unclean open finds.
#[derive(Debug, Clone, Copy)]
enum Checkpoint {
    /// The last one written: as after a kill right after a checkpoint.
    Kept,
    /// None: the queues are checked and the index rebuilt from the log's start.
    Lost,
}

/// Leaves the cleanly closed store in `root` as an unclean shutdown would, as `recovery_scan`
/// does for a log: the commit log's clean-shutdown marker and recovery point are removed (every
/// batch is validated from the first segment), `abort` is back, and the store checkpoint goes too
/// if `checkpoint` says so.
fn make_unclean(root: &Path, checkpoint: Checkpoint) -> Result<()> {
    let log_dir = root.join(STORE_COMMIT_LOG_DIR);
    let mut gone = vec![log_dir.join(CLEAN_SHUTDOWN_FILE), log_dir.join(CHECKPOINT_FILE)];
    if matches!(checkpoint, Checkpoint::Lost) {
        gone.push(root.join(STORE_CHECKPOINT_FILE));
    }
    for path in gone {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error("unlink", path)(e)),
            _ => {}
        }
    }
    let abort = root.join(STORE_ABORT_FILE);
    std::fs::write(&abort, b"").map_err(io_error("create", abort))
}

/// The time `MessageStore::open` takes on the filled store after an unclean shutdown.
fn recovery(
    root: &Path,
    options: &BenchOptions,
    checkpoint: Checkpoint,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = match checkpoint {
        Checkpoint::Kept => "store_recovery_from_checkpoint",
        Checkpoint::Lost => "store_recovery_from_start",
    };
    make_unclean(root, checkpoint)?;
    let started = Instant::now();
    let store = open_store(root, options.flush_policy)?;
    let elapsed = started.elapsed();
    let end = store.max_queue_offset(TOPIC, 0)?;
    store.close()?;
    progress(name, 1, 1);
    if end != options.store_messages {
        let reason = format!("queue 0 ends at {end} after recovery, not {}", options.store_messages);
        return Err(io_error("recover", root)(std::io::Error::other(reason)));
    }
    let messages = options.store_messages;
    Ok(result(name, messages, messages * BODY_BYTES as u64, elapsed, vec![elapsed]))
}
