//! The message store's workload against its peer (RocketMQ's store), strata alone: the numbers to
//! compare before and after a change to the store, and the program to profile
//! (`perf record -g target/release/examples/store_workload`). The peer harness in
//! `peers/rocketmq/` runs the same workload for both stores.
//!
//! ```text
//! cargo run --release --example store_workload -- [PHASE] [MESSAGES] [QUERIES]
//! ```
//! `PHASE` is `all` (default), `put`, `consume` or `query` (the last two fill the store first,
//! untimed); `MESSAGES` defaults to 200,000, `QUERIES` to 1,000 (more, to profile the queries).
//!
//! Workload: `MESSAGES` messages of 100-byte bodies, one topic, round-robin over 4 queues, one key
//! (`key-<i>`) and one tag each, one producer putting each message and waiting for the answer
//! (the commit log fsyncs every 500 ms: `FlushPolicy::EveryInterval`). Consume: every message back
//! through the queues, `get_messages(.., 32, None)` following `next_queue_offset`, queue by queue.
//! Query: `QUERIES` keys (a fixed pseudo-random sequence) by `query_by_key`.

use std::error::Error;
use std::time::{Duration, Instant};

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

const TOPIC: &str = "bench";
const QUEUES: u32 = 4;
const BODY_BYTES: usize = 100;

fn config() -> StoreConfig {
    let flush_policy = FlushPolicy::EveryInterval { ms: 500, messages: u64::MAX };
    StoreConfig { log: LogConfig { flush_policy, ..StoreConfig::default().log }, ..StoreConfig::default() }
}

fn message(i: u64) -> Message {
    Message::new(TOPIC, (i % u64::from(QUEUES)) as u32, vec![b'x'; BODY_BYTES])
        .with_tag("tag")
        .with_keys([format!("key-{i}")])
}

fn put(store: &MessageStore, messages: u64) -> Result<Duration, Box<dyn Error>> {
    let started = Instant::now();
    for i in 0..messages {
        store.put(&message(i))?;
    }
    Ok(started.elapsed())
}

fn consume(store: &MessageStore, messages: u64) -> Result<Duration, Box<dyn Error>> {
    let started = Instant::now();
    let mut got = 0u64;
    for queue in 0..QUEUES {
        let mut next = 0;
        loop {
            let result = store.get_messages(TOPIC, queue, next, 32, None)?;
            if result.messages.is_empty() {
                break;
            }
            for message in &result.messages {
                if message.body().len() != BODY_BYTES {
                    return Err(
                        format!("message {} has a {}-byte body", message.log_offset(), message.body().len()).into()
                    );
                }
            }
            got += result.messages.len() as u64;
            next = result.next_queue_offset;
        }
    }
    let elapsed = started.elapsed();
    if got != messages {
        return Err(format!("consumed {got} messages of {messages}").into());
    }
    Ok(elapsed)
}

fn query(store: &MessageStore, messages: u64, queries: u64) -> Result<(Duration, Duration), Box<dyn Error>> {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut latencies = Vec::with_capacity(queries as usize);
    let started = Instant::now();
    for _ in 0..queries {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = x % messages;
        let one = Instant::now();
        let found = store.query_by_key(TOPIC, &format!("key-{i}"), 0, i64::MAX, 32)?;
        latencies.push(one.elapsed());
        if found.len() != 1 || found[0].log_offset() != i {
            return Err(format!("key-{i}: found {} messages", found.len()).into());
        }
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Ok((elapsed, latencies[latencies.len() * 99 / 100]))
}

fn rate(count: u64, elapsed: Duration) -> String {
    format!("{:.0}k/s", count as f64 / elapsed.as_secs_f64() / 1e3)
}

/// The process's minor page faults so far (Linux: `/proc/self/stat`, field 10; zero elsewhere):
/// a read of a page that is in the page cache but not yet in the reader's map.
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (in parentheses, which may hold spaces): state is field 3.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after_name.split_whitespace().nth(7).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// This thread's time on a CPU so far (Linux: `/proc/thread-self/schedstat`; zero elsewhere): a
/// figure a busy machine disturbs less than the wall clock.
fn thread_cpu() -> Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let phase = args.next().unwrap_or_else(|| "all".to_owned());
    let messages: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(200_000);
    let queries: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1_000);
    let dir = tempfile::tempdir()?;
    let store = MessageStore::open(dir.path(), config())?;
    let cpu = thread_cpu();
    let took = put(&store, messages)?;
    let cpu = thread_cpu() - cpu;
    if matches!(phase.as_str(), "all" | "put") {
        let per_cpu = rate(messages, cpu);
        println!(
            "put, async:  {messages} messages in {took:.2?}: {} ({per_cpu} per CPU second of the producer)",
            rate(messages, took)
        );
    }
    if matches!(phase.as_str(), "all" | "consume") {
        let (cpu, faults) = (thread_cpu(), minor_faults());
        let took = consume(&store, messages)?;
        let (cpu, faults) = (thread_cpu() - cpu, minor_faults() - faults);
        println!(
            "consume:     {messages} messages in {took:.2?}: {} ({} per CPU second), {faults} page faults",
            rate(messages, took),
            rate(messages, cpu)
        );
    }
    if matches!(phase.as_str(), "all" | "query") {
        let faults = minor_faults();
        let (took, p99) = query(&store, messages, queries)?;
        let faults = minor_faults() - faults;
        println!(
            "key query:   {queries} queries in {took:.2?}: {}, p99 {p99:.1?}, {faults} page faults",
            rate(queries, took)
        );
    }
    let log_bytes = store.metrics().log.bytes_appended;
    println!("commit log:  {:.0} bytes per message", log_bytes as f64 / messages as f64);
    store.close()?;
    Ok(())
}
