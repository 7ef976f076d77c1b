//! Every public store operation raced against every other (put, put_batch, put_nowait,
//! query_by_key, get_messages, retention, a read-only view, checkpoints every few ms), with tiny
//! index files (7 entries) and messages of up to 6 keys, so the index rolls constantly and a
//! message's keys straddle files; every other round one key a message, so the index's puts wait
//! to go in together. A put's keys must be found by the put's own thread at once
//! (read-your-writes); after a SIGKILL or a close, every acknowledged message still in the log
//! must be found by each of its keys and in its queue. `STRATA_STRESS_ROUNDS` (default 6) sets
//! the kill rounds; the threads' random choices are seeded by round and thread, the kill times
//! by the clock.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strata_log::{Error, LogConfig, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 16 << 10, file_delete_delay_ms: 0, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 4,
        index_entries: 8,
        flush_interval_ms: 3,
        ..StoreConfig::default()
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const TOPICS: [&str; 2] = ["a", "b"];

/// A message: `keys` keys, named after its body.
fn message(body: &str, queue: u32, keys: u64) -> Message {
    let topic = TOPICS[(queue % 2) as usize];
    // Quiet rounds: one key each, so the index's puts wait to go in together.
    let keys = if std::env::var_os("STRATA_STRESS_ONE_KEY").is_some() { 1 } else { keys };
    Message::new(topic, queue, body.to_owned()).with_keys((0..keys).map(|k| format!("{body}.{k}")))
}

#[derive(Clone, Debug)]
struct Ack {
    topic: String,
    queue: u32,
    queue_offset: u64,
    log_offset: u64,
    body: String,
    keys: u64,
}

fn open(dir: &Path) -> MessageStore {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match MessageStore::open(dir, config()) {
            Err(Error::Locked { .. }) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            other => return other.unwrap(),
        }
    }
}

/// Runs every operation from threads until `stop`; returns the acks and the misses.
fn run(store: &MessageStore, dir: &Path, round: u64, stop: &AtomicBool, out: &Mutex<Box<dyn Write + Send>>) {
    let acked: Mutex<Vec<Ack>> = Mutex::new(Vec::new());
    // Records an acknowledged put (printed for the parent, kept for the queries) and returns it.
    let ack = |message: &Message, queue_offset: u64, log_offset: u64| -> Ack {
        let a = Ack {
            topic: message.topic().to_owned(),
            queue: message.queue_id(),
            queue_offset,
            log_offset,
            body: String::from_utf8(message.body().to_vec()).unwrap(),
            keys: message.keys().len() as u64,
        };
        let mut out = out.lock().unwrap();
        writeln!(out, "ack {} {} {} {} {} {}", a.topic, a.queue, a.queue_offset, a.log_offset, a.body, a.keys).unwrap();
        out.flush().unwrap();
        drop(out);
        acked.lock().unwrap().push(a.clone());
        a
    };
    let miss = |what: String| {
        let mut out = out.lock().unwrap();
        writeln!(out, "MISS {what}").unwrap();
        out.flush().unwrap();
    };
    // Found by each key, unless retention removed it.
    let quiet = std::env::var_os("STRATA_STRESS_ONE_KEY").is_some();
    let check_keys = |a: &Ack, when: &str| {
        if quiet {
            return;
        }
        for k in 0..a.keys {
            let key = format!("{}.{k}", a.body);
            match store.query_by_key(&a.topic, &key, 0, i64::MAX, 4) {
                Ok(found) if found.len() == 1 && found[0].log_offset() == a.log_offset => {}
                Ok(found) if found.is_empty() && a.log_offset < store.commit_log_start_offset() => {}
                Ok(found) => miss(format!(
                    "{when}: key {key} of {a:?}: found {:?}",
                    found.iter().map(|m| m.log_offset()).collect::<Vec<_>>()
                )),
                Err(error) => miss(format!("{when}: key {key} of {a:?}: {error}")),
            }
        }
    };
    std::thread::scope(|scope| {
        // put, with up to 6 keys (a file holds 7 entries)
        for t in 0..2u64 {
            let (ack, check_keys) = (&ack, &check_keys);
            scope.spawn(move || {
                let mut rng = Rng(0x9e37_79b9 ^ (round << 8) ^ t ^ 1);
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = format!("r{round}p{t}s{seq}");
                    let m = message(&body, rng.below(4) as u32, rng.below(7));
                    if let Ok(put) = store.put(&m) {
                        check_keys(&ack(&m, put.queue_offset, put.log_offset), "read-your-write");
                    }
                    seq += 1;
                }
            });
        }
        // put_batch
        {
            let (ack, check_keys) = (&ack, &check_keys);
            scope.spawn(move || {
                let mut rng = Rng(0x1234_5678 ^ (round << 8));
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let queue = rng.below(4) as u32;
                    let n = 1 + rng.below(5);
                    let ms: Vec<Message> =
                        (0..n).map(|i| message(&format!("r{round}b{seq}i{i}"), queue, rng.below(4))).collect();
                    if let Ok(puts) = store.put_batch(&ms) {
                        let acks: Vec<Ack> =
                            ms.iter().zip(&puts).map(|(m, put)| ack(m, put.queue_offset, put.log_offset)).collect();
                        for a in &acks {
                            check_keys(a, "read-your-batch");
                        }
                    }
                    seq += 1;
                }
            });
        }
        // put_nowait, waited in groups
        {
            let (ack, check_keys) = (&ack, &check_keys);
            scope.spawn(move || {
                let mut rng = Rng(0xdead_beef ^ (round << 8));
                let mut seq = 0;
                while !stop.load(Ordering::Relaxed) {
                    let ms: Vec<Message> = (0..8)
                        .map(|i| message(&format!("r{round}n{seq}i{i}"), rng.below(4) as u32, rng.below(3)))
                        .collect();
                    let handles: Vec<_> = ms.iter().map(|m| store.put_nowait(m)).collect();
                    for (m, h) in ms.iter().zip(handles) {
                        if let Ok(put) = h.and_then(|h| h.wait()) {
                            check_keys(&ack(m, put.queue_offset, put.log_offset), "read-your-nowait");
                        }
                    }
                    seq += 1;
                }
            });
        }
        // queries of earlier acks, get_messages
        {
            let (acked, check_keys) = (&acked, &check_keys);
            scope.spawn(move || {
                let mut rng = Rng(0x5555 ^ (round << 8));
                while !stop.load(Ordering::Relaxed) && std::env::var_os("STRATA_STRESS_ONE_KEY").is_none() {
                    let a = {
                        let acked = acked.lock().unwrap();
                        if acked.is_empty() {
                            None
                        } else {
                            Some(acked[rng.below(acked.len() as u64) as usize].clone())
                        }
                    };
                    let Some(a) = a else {
                        std::thread::yield_now();
                        continue;
                    };
                    check_keys(&a, "later");
                    let _ = store.get_messages(&a.topic, a.queue, a.queue_offset, 4, None);
                }
            });
        }
        // retention, now and then; a read-only view
        scope.spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(40));
                let next = store.metrics().dispatched_up_to;
                if next > 300 {
                    let _ = store.delete_messages_before(next - 300);
                }
                n += 1;
                if n.is_multiple_of(5)
                    && let Ok(view) = MessageStore::open_read_only(dir, config())
                {
                    let _ = view.query_by_key("a", "r0p0s1.0", 0, i64::MAX, 4);
                    let _ = view.close();
                }
            }
        });
    });
}

#[test]
#[ignore = "the child process of this file"]
fn stress_child() {
    let Some(dir) = std::env::var_os("STRATA_STRESS_CHILD_DIR") else { return };
    let round: u64 = std::env::var("STRATA_STRESS_CHILD_ROUND").unwrap().parse().unwrap();
    let store = open(Path::new(&dir));
    let stop = AtomicBool::new(false);
    let out: Mutex<Box<dyn Write + Send>> = Mutex::new(Box::new(std::io::stdout()));
    run(&store, Path::new(&dir), round, &stop, &out);
}

fn parse(line: &str) -> Option<Ack> {
    let mut p = line[line.find("ack ")?..].strip_prefix("ack ")?.split(' ');
    Some(Ack {
        topic: p.next()?.into(),
        queue: p.next()?.parse().ok()?,
        queue_offset: p.next()?.parse().ok()?,
        log_offset: p.next()?.parse().ok()?,
        body: p.next()?.into(),
        keys: p.next()?.parse().ok()?,
    })
}

/// Every acknowledged message still in the log: in its queue at its offset, found by every key.
fn check_reopened(store: &MessageStore, acked: &[Ack], when: &str) -> Vec<String> {
    let start = store.commit_log_start_offset();
    let mut bad = Vec::new();
    let mut seen = HashSet::new();
    for a in acked {
        assert!(seen.insert(a.body.clone()), "{when}: acked twice {a:?}");
        if a.log_offset < start {
            continue;
        }
        let got = store.get_messages(&a.topic, a.queue, a.queue_offset, 1, None).unwrap();
        match got.messages.first() {
            Some(m) if m.body() == a.body.as_bytes() && m.log_offset() == a.log_offset => {}
            other => bad.push(format!("{when}: {a:?} in its queue: {:?}", other.map(|m| m.log_offset()))),
        }
        for k in 0..a.keys {
            let found = store.query_by_key(&a.topic, &format!("{}.{k}", a.body), 0, i64::MAX, 4).unwrap();
            if found.len() != 1 || found[0].log_offset() != a.log_offset {
                bad.push(format!(
                    "{when}: key {k} of {a:?}: {:?}",
                    found.iter().map(|m| m.log_offset()).collect::<Vec<_>>()
                ));
            }
        }
    }
    bad
}

#[test]
fn every_operation_against_every_other_then_kill() {
    let rounds: u64 = std::env::var("STRATA_STRESS_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    let mut misses = Vec::new();
    for round in 0..rounds {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "stress_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env("STRATA_STRESS_CHILD_DIR", dir.path())
            .env("STRATA_STRESS_CHILD_ROUND", round.to_string())
            .env(if round % 2 == 1 { "STRATA_STRESS_ONE_KEY" } else { "STRATA_STRESS_KEYS" }, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300 + 137 * round % 700));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        let lines = lines.lock().unwrap();
        for line in lines.iter() {
            if let Some(a) = parse(line) {
                acked.push(a);
            } else if line.contains("MISS") {
                misses.push(line.clone());
            }
        }
        let n = acked.len();
        let store = open(dir.path());
        let bad = check_reopened(&store, &acked, &format!("round {round} after kill"));
        eprintln!("round {round}: {n} acked so far, {} bad after reopen, {} misses live", bad.len(), misses.len());
        misses.extend(bad);
        if round % 2 == 0 {
            store.close().unwrap();
        } else {
            drop(store);
        }
    }
    assert!(misses.is_empty(), "{} misses, first: {:#?}", misses.len(), &misses[..misses.len().min(10)]);
}

/// In one process: every operation for a while, then close and reopen.
#[test]
fn every_operation_against_every_other_then_close() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let stop = AtomicBool::new(false);
    let buffer: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out: Mutex<Box<dyn Write + Send>> = Mutex::new(Box::new(Shared(Arc::clone(&buffer))));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            stop.store(true, Ordering::Relaxed);
        });
        run(&store, dir.path(), 0, &stop, &out);
    });
    store.close().unwrap();
    let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
    let acked: Vec<Ack> = text.lines().filter_map(parse).collect();
    let mut misses: Vec<String> = text.lines().filter(|l| l.contains("MISS")).map(str::to_owned).collect();
    let store = open(dir.path());
    misses.extend(check_reopened(&store, &acked, "after close"));
    eprintln!("{} acked, {} misses", acked.len(), misses.len());
    store.close().unwrap();
    assert!(misses.is_empty(), "{} misses, first: {:#?}", misses.len(), &misses[..misses.len().min(10)]);
}
