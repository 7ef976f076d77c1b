//! A message-store process for the store's kill and crash-point tests: the test binary runs itself
//! again (`current_exe()`) with only its `store_child` test, which opens the store in
//! `STRATA_STORE_CHILD_DIR` and, by `STRATA_STORE_CHILD_OP`:
//! - `put` (default): puts messages from [`THREADS`] threads forever, printing `ack <topic> <queue>
//!   <queue offset> <log offset> <body>` once each `put` returned; thread 0 also commits group
//!   `g`'s offset and flushes the offsets every 10 puts;
//! - `close`: puts 40 messages (acknowledged as above) and closes;
//! - `open`: opens (recovering) and closes.
//!
//! `FAILPOINTS` configures a crash point. Every test file that starts children has this test:
//!
//! ```ignore
//! #[test]
//! #[ignore = "the child process of the tests in this file"]
//! fn store_child() {
//!     common::store_child::main();
//! }
//! ```

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata_log::{Error, LogConfig, Message, MessageStore, StoreConfig};

const CHILD_DIR: &str = "STRATA_STORE_CHILD_DIR";
const CHILD_OP: &str = "STRATA_STORE_CHILD_OP";
const CHILD_ROUND: &str = "STRATA_STORE_CHILD_ROUND";
/// Putting threads of a `put` child.
pub const THREADS: u64 = 4;
const TOPICS: [&str; 3] = ["orders", "payments", "audit"];

/// The store's configuration in these tests: small files, so queues and the index roll often,
/// and a checkpoint every 20 ms.
pub fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 32 << 10, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 256,
        flush_interval_ms: 20,
        ..StoreConfig::default()
    }
}

/// The message thread `thread` puts `seq`-th in round `round`.
pub fn message(round: u64, thread: u64, seq: u64) -> Message {
    let id = thread * 1_000_003 + seq;
    let body = format!("r{round}-t{thread}-s{seq}");
    Message::new(TOPICS[(id % 3) as usize], (id % 4) as u32, body.clone()).with_keys([body])
}

/// An acknowledged put, as the child printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub topic: String,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub log_offset: u64,
    pub body: String,
}

impl Ack {
    /// Parses an `ack` line; the first may follow the test harness's `test store_child ... ` on
    /// the same line.
    fn parse(line: &str) -> Option<Ack> {
        let mut parts = line[line.find("ack ")?..].strip_prefix("ack ")?.split(' ');
        Some(Ack {
            topic: parts.next()?.to_owned(),
            queue_id: parts.next()?.parse().ok()?,
            queue_offset: parts.next()?.parse().ok()?,
            log_offset: parts.next()?.parse().ok()?,
            body: parts.next()?.to_owned(),
        })
    }
}

/// The child's body (see the module documentation).
pub fn main() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        // Run alone: put and read back a message in a store of its own.
        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(dir.path(), config()).unwrap();
        let message = message(0, 0, 0);
        let put = store.put(&message).unwrap();
        let got = store.get_messages(message.topic(), message.queue_id(), put.queue_offset, 1, None).unwrap();
        assert_eq!(got.messages[0].body(), message.body());
        return;
    };
    let _scenario = fail::FailScenario::setup();
    let round: u64 = std::env::var(CHILD_ROUND).ok().and_then(|r| r.parse().ok()).unwrap_or(0);
    let op = std::env::var(CHILD_OP).unwrap_or_else(|_| "put".to_owned());
    let store = open_unlocked(Path::new(&dir));
    let out = std::sync::Mutex::new(std::io::stdout());
    let put = |thread: u64, seq: u64| {
        let message = message(round, thread, seq);
        let put = store.put(&message).unwrap();
        let body = String::from_utf8(message.body().to_vec()).unwrap();
        let (topic, queue) = (message.topic(), message.queue_id());
        let mut out = out.lock().unwrap();
        writeln!(out, "ack {topic} {queue} {} {} {body}", put.queue_offset, put.log_offset).unwrap();
        out.flush().unwrap();
        if thread == 0 && seq % 10 == 9 {
            store.commit_offset("g", topic, queue, put.queue_offset + 1).unwrap();
            store.flush_offsets().unwrap();
        }
    };
    match op.as_str() {
        "put" => std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let put = &put;
                scope.spawn(move || {
                    // Until killed, crashed at a crash point, or its parent goes (a write to the
                    // closed pipe fails).
                    let mut seq = 0;
                    loop {
                        put(thread, seq);
                        seq += 1;
                    }
                });
            }
        }),
        "close" => {
            (0..40).for_each(|seq| put(0, seq));
            store.close().unwrap();
        }
        "open" => store.close().unwrap(),
        other => panic!("unknown child op {other}"),
    }
}

/// Opens the store, retrying while a lock lingers: a sibling child's fork may hold a copy of a
/// closed descriptor for a moment.
pub fn open_unlocked(dir: &Path) -> MessageStore {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match MessageStore::open(dir, config()) {
            Err(Error::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other.unwrap(),
        }
    }
}

/// A running child and its acknowledgements.
pub struct StoreChild {
    child: Child,
    acks: Receiver<Ack>,
    reader: Option<JoinHandle<()>>,
}

impl StoreChild {
    /// Starts a child doing `op` on `dir` in round `round`, with `failpoints` (`""` for none).
    pub fn spawn(dir: &Path, op: &str, round: u64, failpoints: &str) -> StoreChild {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "store_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir)
            .env(CHILD_OP, op)
            .env(CHILD_ROUND, round.to_string())
            .env("FAILPOINTS", failpoints)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, acks) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(ack) = Ack::parse(&line)
                    && send.send(ack).is_err()
                {
                    break;
                }
            }
        });
        StoreChild { child, acks, reader: Some(reader) }
    }

    /// Collects acknowledgements until `count` or the child's end (or 20 s).
    pub fn read_acks(&mut self, count: usize, into: &mut Vec<Ack>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut read = 0;
        while read < count && Instant::now() < deadline {
            match self.acks.recv_timeout(Duration::from_millis(100)) {
                Ok(ack) => {
                    into.push(ack);
                    read += 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Kills the child (if it still runs, or if it has not ended after a minute), waits for it,
    /// and returns its exit code and the acknowledgements it printed that were not read yet.
    pub fn finish(mut self, kill: bool, into: &mut Vec<Ack>) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !kill && Instant::now() < deadline && self.child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        into.extend(self.acks.try_iter());
        status.code()
    }
}

/// Every acknowledged message at its place and findable by key; every queue dense, in order,
/// without duplicates; every committed offset within its queue.
pub fn check(store: &MessageStore, acked: &[Ack]) {
    for ack in acked {
        let got = store.get_messages(&ack.topic, ack.queue_id, ack.queue_offset, 1, None).unwrap();
        let message = got.messages.first().unwrap_or_else(|| panic!("acknowledged {ack:?} is missing: {got:?}"));
        assert_eq!(message.body(), ack.body.as_bytes(), "{ack:?}");
        assert_eq!((message.log_offset(), message.queue_offset()), (ack.log_offset, ack.queue_offset));
        let found = store.query_by_key(&ack.topic, &ack.body, 0, i64::MAX, 10).unwrap();
        assert_eq!(found.len(), 1, "key of {ack:?}");
    }
    for strata_log::QueueInfo { topic, queue_id, min_offset: min, max_offset: max, .. } in store.queues() {
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
    for strata_log::CommittedOffset { group, topic, queue_id, next_offset: offset, .. } in store.committed_offsets() {
        let max = store.max_queue_offset(&topic, queue_id).unwrap();
        assert!(offset <= max, "{group} {topic}/{queue_id}: committed {offset} past the end {max}");
    }
}
