//! Kill test of the message store: a child process (this test binary run again, `store_child`)
//! puts messages from several threads under `FlushPolicy::Always` and prints each one once `put`
//! returned; the parent SIGKILLs it at a random moment, reopens the store and checks that every
//! acknowledged message is in its queue exactly once, at the queue offset it was acknowledged
//! with, in order, and findable by key; that every queue is dense (no gaps, no duplicates); then
//! the next child goes on on the same store.
//!
//! Rounds: 6 by default, `STRATA_STORE_KILL_LOOPS` for more. Seeded: `STRATA_SEED` replays.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{Error, LogConfig, Message, MessageStore, StoreConfig, StoreError};

const CHILD_DIR: &str = "STRATA_STORE_CHILD_DIR";
const CHILD_ROUND: &str = "STRATA_STORE_CHILD_ROUND";
const THREADS: u64 = 4;
const TOPICS: [&str; 3] = ["orders", "payments", "audit"];

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 32 << 10, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 256,
        flush_interval_ms: 20,
        ..StoreConfig::default()
    }
}

/// The message the child's thread `thread` puts `seq`-th in round `round`.
fn message(round: u64, thread: u64, seq: u64) -> Message {
    let id = thread * 1_000_003 + seq;
    let body = format!("r{round}-t{thread}-s{seq}");
    Message::new(TOPICS[(id % 3) as usize], (id % 4) as u32, body.clone()).with_keys([body])
}

/// An acknowledged put, as the child printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ack {
    topic: String,
    queue_id: u32,
    queue_offset: u64,
    log_offset: u64,
    body: String,
}

impl Ack {
    fn parse(line: &str) -> Option<Ack> {
        let mut parts = line.strip_prefix("ack ")?.split(' ');
        Some(Ack {
            topic: parts.next()?.to_owned(),
            queue_id: parts.next()?.parse().ok()?,
            queue_offset: parts.next()?.parse().ok()?,
            log_offset: parts.next()?.parse().ok()?,
            body: parts.next()?.to_owned(),
        })
    }
}

#[test]
#[ignore = "the child process of the kill test"]
fn store_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        // Run alone: put and check a few messages in a store of its own.
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(dir.path(), config()).unwrap();
        let put = store.put(&message(0, 0, 0)).unwrap();
        assert_eq!(
            store.get_messages(message(0, 0, 0).topic(), 0, put.queue_offset, 1, None).unwrap().messages.len(),
            1
        );
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let store = open_unlocked(Path::new(&dir));
    let out = parking_lot::Mutex::new(std::io::stdout());
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (store, out) = (&store, &out);
            scope.spawn(move || {
                for seq in 0.. {
                    let message = message(round, thread, seq);
                    let put = store.put(&message).unwrap();
                    let body = String::from_utf8(message.body().to_vec()).unwrap();
                    let line = format!(
                        "ack {} {} {} {} {body}",
                        message.topic(),
                        message.queue_id(),
                        put.queue_offset,
                        put.log_offset
                    );
                    let mut out = out.lock();
                    writeln!(out, "{line}").unwrap();
                    out.flush().unwrap();
                }
            });
        }
    });
}

/// Opens the store, retrying while the last child's lock lingers (a killed child's descriptors
/// close with it, but a sibling fork may hold a copy for a moment).
fn open_unlocked(dir: &Path) -> MessageStore {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match MessageStore::open(dir, config()) {
            Err(StoreError::Log(Error::Locked { .. })) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other.unwrap(),
        }
    }
}

/// Runs one child until it is killed; returns what it acknowledged.
fn run_child(dir: &Path, round: u64, rng: &mut StdRng) -> Vec<Ack> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "store_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_ROUND, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = Ack::parse(&line)
                && lines.send(ack).is_err()
            {
                break;
            }
        }
    });
    let mut acks = Vec::new();
    let wanted = rng.random_range(1..400);
    let deadline = Instant::now() + Duration::from_secs(20);
    while acks.len() < wanted && Instant::now() < deadline {
        match received.recv_timeout(Duration::from_millis(100)) {
            Ok(ack) => acks.push(ack),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the child ended before it was killed"),
        }
    }
    assert!(!acks.is_empty(), "the child acknowledged nothing in 20 s");
    std::thread::sleep(Duration::from_micros(rng.random_range(0..5_000)));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    acks.extend(received.try_iter());
    acks
}

/// Every acknowledged message at its place, every queue dense and in order, keys findable.
fn check(store: &MessageStore, acked: &[Ack]) {
    for ack in acked {
        let got = store.get_messages(&ack.topic, ack.queue_id, ack.queue_offset, 1, None).unwrap();
        let message = got.messages.first().unwrap_or_else(|| panic!("acknowledged {ack:?} is missing: {got:?}"));
        assert_eq!(message.body(), ack.body.as_bytes(), "{ack:?}");
        assert_eq!((message.log_offset(), message.queue_offset()), (ack.log_offset, ack.queue_offset));
        let found = store.query_by_key(&ack.topic, &ack.body, 0, i64::MAX, 10).unwrap();
        assert_eq!(found.len(), 1, "key of {ack:?}");
    }
    for (topic, queue_id, min, max) in store.queues() {
        let got = store.get_messages(&topic, queue_id, min, usize::MAX, None).unwrap();
        assert_eq!(got.messages.len() as u64, max - min, "{topic}/{queue_id} is dense");
        let mut seen = HashSet::new();
        let mut last_log_offset = None;
        for (i, message) in got.messages.iter().enumerate() {
            assert_eq!(message.queue_offset(), min + i as u64);
            assert!(seen.insert(message.body().to_vec()), "{topic}/{queue_id}: a message twice");
            assert!(last_log_offset < Some(message.log_offset()), "log offsets increase along the queue");
            last_log_offset = Some(message.log_offset());
        }
    }
}

#[test]
fn acknowledged_messages_survive_kills_once_and_in_order() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let loops: u64 = std::env::var("STRATA_STORE_KILL_LOOPS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    println!("seed {seed} (STRATA_SEED replays), {loops} kills");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    let mut per_queue: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for round in 0..loops {
        let acks = run_child(dir.path(), round, &mut rng);
        for ack in &acks {
            let end = per_queue.entry((ack.topic.clone(), ack.queue_id)).or_default();
            *end = (*end).max(ack.queue_offset + 1);
        }
        acked.extend(acks);
        let store = open_unlocked(dir.path());
        check(&store, &acked);
        for ((topic, queue_id), end) in &per_queue {
            assert!(store.max_queue_offset(topic, *queue_id).unwrap() >= *end, "seed {seed}: {topic}/{queue_id}");
        }
        if rng.random_bool(0.5) {
            store.close().unwrap();
        } else {
            drop(store);
        }
    }
}
