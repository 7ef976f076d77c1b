//! Kill test of the channel: a child process (this test binary run again, `channel_child`) runs
//! random transactions from 3 threads under `FlushPolicy::Always` — puts, takes, then a commit,
//! a rollback or a drop — printing each transaction's puts and takes before it ends it and its
//! outcome after. The parent SIGKILLs it at a random moment, reopens the channel, takes
//! everything it holds (and rolls that back), and checks, against what the child printed:
//! - every event whose put committed is there unless its take committed, and none whose take
//!   committed is;
//! - no event of a rolled-back (or dropped, or refused) transaction is there: uncommitted puts are
//!   never delivered; events an uncommitted transaction took are there again;
//! - a transaction the kill interrupted in its commit applied all or nothing: its puts all there
//!   and its takes gone, or the other way round;
//! - no event twice, and in put order: the events of earlier rounds first, in their order, then
//!   each thread's in the order it put them.
//!
//! The next child goes on with the same channel. Segments are small and deletion runs every
//! 5 ms, so replays start from deleted prefixes. Rounds: 5 by default, `STRATA_CHANNEL_KILL_LOOPS`
//! for more. Seeded: `STRATA_SEED` replays the parent's choices.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{Channel, ChannelConfig, Error, Event, LogConfig};

const CHILD_DIR: &str = "STRATA_CHANNEL_CHILD_DIR";
const CHILD_ROUND: &str = "STRATA_CHANNEL_CHILD_ROUND";
const THREADS: u64 = 3;
const CAPACITY: u64 = 200;

fn config(transaction_capacity: u64, keep_alive_ms: u64) -> ChannelConfig {
    ChannelConfig {
        capacity: CAPACITY,
        transaction_capacity,
        keep_alive_ms,
        delete_interval_ms: 5,
        log: LogConfig { segment_bytes: 8 << 10, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    }
}

/// Opens the channel, retrying while a lock lingers (a sibling's fork may hold a copy briefly).
fn open(dir: &Path, config: ChannelConfig) -> Channel {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Channel::open(dir, config.clone()) {
            Err(Error::Locked { .. }) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            other => return other.unwrap(),
        }
    }
}

#[test]
#[ignore = "the child process of the tests in this file"]
fn channel_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        // Run alone: one transaction each way in a channel of its own.
        let dir = tempfile::tempdir().unwrap();
        let channel = open(dir.path(), config(8, 20));
        let mut tx = channel.transaction();
        tx.put(Event::new("alone")).unwrap();
        tx.commit().unwrap();
        assert_eq!(tx.take().unwrap().unwrap().body(), b"alone");
        tx.commit().unwrap();
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let channel = open(Path::new(&dir), config(8, 20));
    let out = std::sync::Mutex::new(std::io::stdout());
    let say = |line: String| {
        let mut out = out.lock().unwrap();
        writeln!(out, "{line}").unwrap();
        out.flush().unwrap();
    };
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let (channel, say) = (&channel, &say);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(rand::random());
                let mut seq = 0;
                // Until killed, or its parent goes (a write to the closed pipe fails).
                for n in 0.. {
                    let id = format!("r{round}t{thread}x{n}");
                    let mut tx = channel.transaction();
                    let mut puts = Vec::new();
                    for _ in 0..rng.random_range(0..=4) {
                        let body = format!("r{round}t{thread}s{seq}");
                        seq += 1;
                        tx.put(Event::new(body.clone())).unwrap();
                        puts.push(body);
                    }
                    let mut takes = Vec::new();
                    for _ in 0..rng.random_range(0..=4) {
                        match tx.take().unwrap() {
                            Some(event) => takes.push(String::from_utf8(event.body().to_vec()).unwrap()),
                            None => break,
                        }
                    }
                    let list = |l: &[String]| if l.is_empty() { "-".to_owned() } else { l.join(",") };
                    say(format!("try {id} {} {}", list(&puts), list(&takes)));
                    match rng.random_range(0..10) {
                        0 => {
                            tx.rollback().unwrap();
                            say(format!("rolled {id}"));
                        }
                        1 => {
                            drop(tx);
                            say(format!("rolled {id}"));
                        }
                        _ => match tx.commit() {
                            Ok(()) => say(format!("committed {id}")),
                            Err(Error::ChannelFull { .. }) => {
                                drop(tx);
                                say(format!("rolled {id}"));
                            }
                            Err(other) => panic!("{other}"),
                        },
                    }
                }
            });
        }
    });
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Committed,
    RolledBack,
    /// Its commit may have been under way at the kill.
    #[default]
    Unknown,
}

#[derive(Debug, Default)]
struct Tx {
    puts: Vec<String>,
    takes: Vec<String>,
    outcome: Outcome,
}

/// Parses the child's lines (the first may follow the harness's `test channel_child ... `).
fn parse(lines: &[String]) -> BTreeMap<String, Tx> {
    let mut txs: BTreeMap<String, Tx> = BTreeMap::new();
    let list = |s: &str| if s == "-" { Vec::new() } else { s.split(',').map(str::to_owned).collect() };
    for line in lines {
        let words: Vec<&str> = ["try ", "committed ", "rolled "]
            .iter()
            .find_map(|prefix| line.find(prefix).map(|at| line[at..].split(' ').collect()))
            .unwrap_or_default();
        match words.as_slice() {
            ["try", id, puts, takes] => {
                txs.insert(id.to_string(), Tx { puts: list(puts), takes: list(takes), outcome: Outcome::Unknown });
            }
            ["committed", id] => txs.get_mut(*id).unwrap().outcome = Outcome::Committed,
            ["rolled", id] => txs.get_mut(*id).unwrap().outcome = Outcome::RolledBack,
            _ => {}
        }
    }
    txs
}

/// Every event the channel holds, in the order takers get them; left in the channel. A full
/// channel holds `CAPACITY` events, as many as one transaction may take: the loop stops there
/// (a take past it is refused, full channel or not), and the recovered count checks nothing
/// is left over.
fn held(dir: &Path) -> Vec<String> {
    let channel = open(dir, config(CAPACITY, 0));
    let mut tx = channel.transaction();
    let mut bodies = Vec::new();
    while bodies.len() < CAPACITY as usize {
        let Some(event) = tx.take().unwrap() else { break };
        bodies.push(String::from_utf8(event.body().to_vec()).unwrap());
    }
    assert_eq!(channel.metrics().unwrap().events_recovered, bodies.len() as u64);
    tx.rollback().unwrap();
    channel.close().unwrap();
    bodies
}

/// Checks the channel after a kill (see the module documentation); returns what it holds.
fn check(previous: &[String], txs: &BTreeMap<String, Tx>, observed: &[String], seed: u64) -> Vec<String> {
    let context = format!("seed {seed}");
    let seen: HashSet<&String> = observed.iter().collect();
    assert_eq!(seen.len(), observed.len(), "{context}: an event twice: {observed:?}");
    let with = |outcome: Outcome| txs.values().filter(move |tx| tx.outcome == outcome);
    let taken_committed: HashSet<&String> = with(Outcome::Committed).flat_map(|tx| &tx.takes).collect();
    let taken_unknown: HashSet<&String> = with(Outcome::Unknown).flat_map(|tx| &tx.takes).collect();
    let existing: Vec<&String> = previous.iter().chain(with(Outcome::Committed).flat_map(|tx| &tx.puts)).collect();
    for body in &existing {
        if taken_committed.contains(body) {
            assert!(!seen.contains(body), "{context}: {body} was taken by a committed transaction");
        } else if !taken_unknown.contains(body) {
            assert!(seen.contains(body), "{context}: {body} was committed and not taken, and is missing");
        }
    }
    for tx in with(Outcome::RolledBack) {
        for body in &tx.puts {
            assert!(!seen.contains(body), "{context}: {body} of a rolled-back transaction was delivered");
        }
    }
    // Takers see a put only once it is durable (`FlushPolicy::Always`): any transaction's take of
    // it shows its commit applied.
    let taken_any: HashSet<&String> = txs.values().flat_map(|tx| &tx.takes).collect();
    for tx in with(Outcome::Unknown) {
        let applied = tx.puts.iter().any(|b| seen.contains(b) || taken_any.contains(b));
        let visible: Vec<&String> =
            tx.puts.iter().filter(|b| !taken_committed.contains(b) && !taken_unknown.contains(b)).collect();
        if applied {
            assert!(visible.iter().all(|b| seen.contains(b)), "{context}: part of {tx:?} is there");
        }
        if applied || (tx.puts.is_empty() && tx.takes.iter().any(|b| !seen.contains(b))) {
            assert!(tx.takes.iter().all(|b| !seen.contains(b)), "{context}: {tx:?} applied, its takes are back");
        } else {
            assert!(tx.takes.iter().all(|b| seen.contains(b)), "{context}: {tx:?} not applied, its takes are lost");
        }
    }
    let known: HashSet<&String> =
        existing.iter().copied().chain(with(Outcome::Unknown).flat_map(|tx| &tx.puts)).collect();
    for body in observed {
        assert!(known.contains(body), "{context}: {body} was never committed");
    }
    // Put order: earlier rounds first, in their order; then each thread's events by sequence.
    let old: Vec<&String> = observed.iter().filter(|b| previous.contains(b)).collect();
    let first_new = observed.iter().position(|b| !previous.contains(b)).unwrap_or(observed.len());
    assert!(observed[first_new..].iter().all(|b| !previous.contains(b)), "{context}: old events after new ones");
    let kept: Vec<&String> = previous.iter().filter(|b| seen.contains(b)).collect();
    assert_eq!(old, kept, "{context}: earlier rounds' events out of order");
    let mut last: HashMap<&str, u64> = HashMap::new();
    for body in &observed[first_new..] {
        let (thread, seq) = body.split_once('s').unwrap();
        let seq: u64 = seq.parse().unwrap();
        let before = last.insert(thread, seq);
        assert!(before < Some(seq), "{context}: {thread}'s events out of order: {observed:?}");
    }
    observed.to_vec()
}

#[test]
fn committed_events_survive_kills_and_uncommitted_ones_never_appear() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let loops: u64 = std::env::var("STRATA_CHANNEL_KILL_LOOPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    println!("seed {seed} (STRATA_SEED replays the parent's choices), {loops} kills");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut present = Vec::new();
    for round in 0..loops {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "channel_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, receive) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        let wanted = rng.random_range(10..300);
        let deadline = Instant::now() + Duration::from_secs(30);
        while lines.iter().filter(|l: &&String| l.contains("committed ")).count() < wanted && Instant::now() < deadline
        {
            match receive.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => lines.push(line),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!("seed {seed}: the child ended: {lines:?}"),
            }
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..5_000)));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        lines.extend(receive.try_iter());
        let txs = parse(&lines);
        let committed = txs.values().filter(|tx| tx.outcome == Outcome::Committed).count();
        assert!(committed >= wanted, "seed {seed}: the child committed {committed} of {wanted}");
        let observed = held(dir.path());
        let unknown = txs.values().filter(|tx| tx.outcome == Outcome::Unknown).count();
        println!(
            "round {round}: {} transactions, {committed} committed, {unknown} cut by the kill, {} held",
            txs.len(),
            observed.len()
        );
        present = check(&present, &txs, &observed, seed);
    }
}
