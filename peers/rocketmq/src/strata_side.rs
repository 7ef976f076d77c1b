//! strata's side of a round: `MessageStore` with the workload, then `Log::append` of records of
//! the size the store wrote per message.

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use strata_log::{FlushPolicy, GetStatus, Log, LogConfig, Message, MessageStore, Record, StoreConfig};

use crate::measure::{RoundResult, per_second, quantile_us};
use crate::workload::{
    BATCH, QUEUES, TAG, TOPIC, Workload, body_of, expected_index, index_in, key_of, query_indexes, queue_of, share,
};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The async put's flush policy, as RocketMQ's `ASYNC_FLUSH`: a background fsync every 500 ms,
/// never sooner for a number of waiting records.
const ASYNC: FlushPolicy = FlushPolicy::EveryInterval { ms: 500, messages: u64::MAX };

/// Runs every phase on fresh stores under `dir`.
pub fn run_round(dir: &Path, work: &Workload) -> Result<RoundResult> {
    let mut result = RoundResult::default();

    let store = MessageStore::open(dir.join("async"), config(ASYNC))?;
    let messages = build(0..work.messages);
    let (rate, _) = put(&store, &messages)?;
    result.put_async = rate;
    drop(messages);
    let metrics = store.metrics();
    result.bytes_per_message = metrics.log.bytes_on_disk as f64 / work.messages as f64;
    result.consume = consume(&store, work.messages)?;
    (result.query_rate, result.query_p99_us) = query(&store, work)?;
    close(store, &dir.join("async"))?;

    let store = MessageStore::open(dir.join("sync-1"), config(FlushPolicy::Always))?;
    (result.put_sync, _) = put(&store, &build(0..work.sync_messages))?;
    result.sync_fsync_mean_us = Some(store.metrics().log.fsync_latency.mean_us as f64);
    close(store, &dir.join("sync-1"))?;

    let store = MessageStore::open(dir.join("sync-many"), config(FlushPolicy::Always))?;
    result.put_sync_many = Some(put_many(&store, work)?);
    result.sync_many_puts_per_fsync = Some(store.metrics().log.appends_per_sync);
    close(store, &dir.join("sync-many"))?;

    result.log_append = Some(log_append(&dir.join("log"), result.bytes_per_message, work.messages)?);
    Ok(result)
}

/// Closes `store` and removes its directory `root`: a round's stores never take the disk
/// together.
fn close(store: MessageStore, root: &Path) -> Result<()> {
    store.close()?;
    std::fs::remove_dir_all(root)?;
    Ok(())
}

/// The store's defaults with `flush_policy` for the commit log.
fn config(flush_policy: FlushPolicy) -> StoreConfig {
    let defaults = StoreConfig::default();
    StoreConfig { log: LogConfig { flush_policy, ..defaults.log }, ..defaults }
}

/// Message `i` of the workload.
fn message(i: u64) -> Message {
    Message::new(TOPIC, queue_of(i), body_of(i)).with_tag(TAG).with_keys([key_of(i)])
}

fn build(range: impl Iterator<Item = u64>) -> Vec<Message> {
    range.map(message).collect()
}

/// Puts `messages` one at a time, each waited for; returns messages per second.
fn put(store: &MessageStore, messages: &[Message]) -> Result<(f64, Duration)> {
    let start = Instant::now();
    for message in messages {
        store.put(message)?;
    }
    let elapsed = start.elapsed();
    Ok((per_second(messages.len() as u64, elapsed), elapsed))
}

/// `work.producers` threads put `work.sync_messages` between them, each waiting for each put.
fn put_many(store: &MessageStore, work: &Workload) -> Result<f64> {
    let shares: Vec<Vec<Message>> =
        (0..work.producers).map(|p| build(share(p, work.producers, work.sync_messages))).collect();
    let start = Instant::now();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let threads: Vec<_> = shares
            .iter()
            .map(|messages| scope.spawn(move || messages.iter().try_for_each(|m| store.put(m).map(drop))))
            .collect();
        threads.into_iter().map(|t| t.join()).collect()
    });
    let elapsed = start.elapsed();
    for outcome in outcomes {
        outcome.map_err(|_| "strata: a producer thread panicked")??;
    }
    Ok(per_second(work.sync_messages, elapsed))
}

/// Reads every message back, queue by queue, `BATCH` at a time, checking each is the message the
/// queue should hold at that offset; returns messages per second.
fn consume(store: &MessageStore, messages: u64) -> Result<f64> {
    let start = Instant::now();
    let mut count = 0u64;
    for queue in 0..QUEUES {
        let mut offset = 0;
        loop {
            let got = store.get_messages(TOPIC, queue, offset, BATCH, None)?;
            if got.status != GetStatus::Found {
                if offset == got.max_queue_offset {
                    break;
                }
                return Err(format!("strata: queue {queue} at {offset}: {:?}", got.status).into());
            }
            for (i, m) in got.messages.iter().enumerate() {
                let want = expected_index(queue, offset + i as u64);
                if index_in(m.body()) != Some(want) {
                    return Err(
                        format!("strata: queue {queue} offset {} is not message {want}", offset + i as u64).into()
                    );
                }
            }
            count += got.messages.len() as u64;
            offset = got.next_queue_offset;
        }
    }
    let elapsed = start.elapsed();
    if count != messages {
        return Err(format!("strata: consumed {count} messages, put {messages}").into());
    }
    Ok(per_second(count, elapsed))
}

/// Queries the seeded keys one by one, checking each finds its message; returns queries per
/// second and the p99 latency in µs.
fn query(store: &MessageStore, work: &Workload) -> Result<(f64, f64)> {
    let keys: Vec<(u64, String)> =
        query_indexes(work.seed, work.queries, work.messages).into_iter().map(|i| (i, key_of(i))).collect();
    let mut latencies = Vec::with_capacity(keys.len());
    let start = Instant::now();
    for (i, key) in &keys {
        let one = Instant::now();
        let found = store.query_by_key(TOPIC, key, 0, i64::MAX, BATCH)?;
        latencies.push(one.elapsed());
        if !found.iter().any(|m| index_in(m.body()) == Some(*i)) {
            return Err(format!("strata: key {key} did not find its message ({} found)", found.len()).into());
        }
    }
    let elapsed = start.elapsed();
    Ok((per_second(keys.len() as u64, elapsed), quantile_us(&mut latencies, 0.99)))
}

/// Appends `messages` records to a plain `Log` (the async put's flush policy), one per call,
/// each `bytes_per_message` bytes in the log as the store's messages were; returns records per
/// second.
fn log_append(dir: &Path, bytes_per_message: f64, messages: u64) -> Result<f64> {
    let log = Log::open(dir, config(ASYNC).log)?;
    let target = bytes_per_message.round() as u64;
    let value_len = calibrate(&log, target)?;
    let value = vec![b'x'; value_len];
    let before = log.metrics().bytes_appended;
    let start = Instant::now();
    for _ in 0..messages {
        log.append(&[Record::new(&value)])?;
    }
    let elapsed = start.elapsed();
    let per_record = (log.metrics().bytes_appended - before) as f64 / messages as f64;
    log.close()?;
    std::fs::remove_dir_all(dir)?;
    if per_record.round() as u64 != target {
        return Err(format!("Log::append wrote {per_record:.1} bytes a record, the store {target}").into());
    }
    Ok(per_second(messages, elapsed))
}

/// The value length whose one-record batch takes `target` bytes in `log` (found by appending
/// a few untimed records: the record's varint lengths depend on the value's).
fn calibrate(log: &Log, target: u64) -> Result<usize> {
    let mut value_len = target.saturating_sub(64).max(1) as usize;
    for _ in 0..4 {
        let before = log.metrics().bytes_appended;
        log.append(&[Record::new(&vec![b'x'; value_len])])?;
        let written = log.metrics().bytes_appended - before;
        if written == target {
            return Ok(value_len);
        }
        let overhead = written - value_len as u64;
        value_len = target.checked_sub(overhead).ok_or("a record's overhead is over the store's size")? as usize;
    }
    Err(format!("no value length makes a {target}-byte record").into())
}
