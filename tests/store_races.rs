//! Every public `MessageStore` call raced against every other from many threads, checking
//! invariants as it goes: each acknowledged put is readable at its offsets at once (unless
//! deleted meanwhile), each queue is dense and ordered, key queries find what was put, a user
//! dispatcher sees every message once in log order, nothing panics and nothing hangs (a
//! watchdog aborts). `STRATA_RACE_SECS` sets how long it runs (default 1).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_log::{
    Dispatch, DispatchRequest, FlushPolicy, GetResult, GetStatus, LogConfig, Message, MessageStore, PutResult, Result,
    StoreConfig,
};

const TOPICS: [&str; 3] = ["t0", "t1", "t2"];
const QUEUES: u32 = 3;

#[derive(Debug, Clone)]
struct Ack {
    topic: &'static str,
    queue_id: u32,
    put: PutResult,
    body: String,
}

fn seconds() -> f64 {
    std::env::var("STRATA_RACE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

fn config(flush_policy: FlushPolicy) -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 64 << 10, flush_policy, ..StoreConfig::default().log },
        queue_entries_per_file: 64,
        index_slots: 64,
        index_entries: 512,
        flush_interval_ms: 5,
        offsets_flush_ms: 5,
        max_entries_examined: 100,
        ..StoreConfig::default()
    }
}

/// A user dispatcher checking that it sees each message once, in log order, each queue numbered
/// densely from the first message it saw of it.
struct Checker {
    last_log: Option<u64>,
    next: HashMap<(String, u32), u64>,
    violations: Arc<AtomicU64>,
}

impl Dispatch for Checker {
    fn dispatch(&mut self, request: &DispatchRequest<'_>) -> Result<()> {
        let mut bad = self.last_log.is_some_and(|last| request.log_offset <= last);
        self.last_log = Some(request.log_offset);
        let key = (request.topic.to_owned(), request.queue_id);
        if let Some(&next) = self.next.get(&key) {
            bad |= request.queue_offset != next;
        }
        self.next.insert(key, request.queue_offset + 1);
        if bad {
            eprintln!("dispatcher saw {request:?} out of order");
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Checks one result of a get from `offset`; returns where to read next.
fn check_get(store: &MessageStore, topic: &str, queue_id: u32, offset: u64, tag: Option<&str>, got: &GetResult) -> u64 {
    let context = || format!("{topic}/{queue_id} from {offset} tag {tag:?}: {got:?}");
    assert_ne!(got.status, GetStatus::OffsetOverflow, "{}", context());
    assert_eq!(got.status == GetStatus::Found, !got.messages.is_empty(), "{}", context());
    assert!(got.min_queue_offset <= got.max_queue_offset, "{}", context());
    match got.status {
        GetStatus::OffsetTooSmall => assert_eq!(got.next_queue_offset, got.min_queue_offset, "{}", context()),
        GetStatus::NoNewMessage => assert_eq!(got.next_queue_offset, offset, "{}", context()),
        _ => assert!(got.next_queue_offset > offset || got.messages.is_empty(), "{}", context()),
    }
    let mut previous: Option<(u64, u64)> = None;
    for m in &got.messages {
        assert_eq!((m.topic(), m.queue_id()), (topic, queue_id), "{}", context());
        assert!(m.queue_offset() >= offset && m.queue_offset() < got.next_queue_offset, "{}", context());
        if let Some(tag) = tag {
            assert_eq!(m.tag(), Some(tag), "{}", context());
        }
        if let Some((q, l)) = previous {
            assert!(m.queue_offset() > q && m.log_offset() > l, "{}", context());
            if tag.is_none() && m.queue_offset() != q + 1 {
                // A hole only where retention removed messages after the previous one was read.
                assert!(store.commit_log_start_offset() > l, "a hole in the queue: {}", context());
            }
        }
        previous = Some((m.queue_offset(), m.log_offset()));
    }
    got.next_queue_offset
}

/// Whether the acknowledged put is readable at its offsets (or was deleted).
fn check_readable(store: &MessageStore, ack: &Ack) {
    let got = store.get_messages(ack.topic, ack.queue_id, ack.put.queue_offset, 1, None).unwrap();
    let found = got.messages.first().filter(|m| m.queue_offset() == ack.put.queue_offset);
    match found {
        Some(m) => {
            assert_eq!(m.body(), ack.body.as_bytes(), "{ack:?}: {got:?}");
            assert_eq!(m.log_offset(), ack.put.log_offset, "{ack:?}: {got:?}");
        }
        None => assert!(
            store.commit_log_start_offset() > ack.put.log_offset,
            "acknowledged put not readable: {ack:?}: {got:?}"
        ),
    }
}

fn message(topic: &'static str, queue_id: u32, body: &str, seq: u64) -> Message {
    let tag = if seq.is_multiple_of(2) { "red" } else { "blue" };
    Message::new(topic, queue_id, body.to_owned()).with_tag(tag).with_keys([body.to_owned(), format!("k{}", seq % 7)])
}

fn putter(store: &MessageStore, id: u64, stop: &AtomicBool, acks: &Mutex<Vec<Ack>>) {
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let topic = TOPICS[(seq % 3) as usize];
        let queue_id = ((seq / 3 + id) % u64::from(QUEUES)) as u32;
        let body = |i: u64| format!("p{id}-{seq}-{i}");
        let mut mine = Vec::new();
        match seq % 4 {
            0 | 3 => {
                let put = store.put(&message(topic, queue_id, &body(0), seq)).unwrap();
                mine.push(Ack { topic, queue_id, put, body: body(0) });
            }
            1 => {
                let n = 1 + seq % 5;
                let messages: Vec<Message> = (0..n).map(|i| message(topic, queue_id, &body(i), seq)).collect();
                let puts = store.put_batch(&messages).unwrap();
                assert_eq!(puts.len() as u64, n);
                for (i, put) in puts.into_iter().enumerate() {
                    mine.push(Ack { topic, queue_id, put, body: body(i as u64) });
                }
                for pair in mine.windows(2) {
                    assert_eq!(pair[1].put.queue_offset, pair[0].put.queue_offset + 1);
                    assert_eq!(pair[1].put.log_offset, pair[0].put.log_offset + 1);
                }
            }
            _ => {
                let handles: Vec<_> =
                    (0..3).map(|i| (i, store.put_nowait(&message(topic, queue_id, &body(i), seq)).unwrap())).collect();
                for (i, handle) in handles {
                    let put = handle.wait().unwrap();
                    mine.push(Ack { topic, queue_id, put, body: body(i) });
                }
            }
        }
        for ack in &mine {
            check_readable(store, ack);
        }
        acks.lock().extend(mine);
    }
}

fn getter(store: &MessageStore, id: u64, stop: &AtomicBool) {
    let mut at: HashMap<(usize, u32), u64> = HashMap::new();
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let (t, queue_id) = ((round % 3) as usize, ((round / 3) % u64::from(QUEUES)) as u32);
        let topic = TOPICS[t];
        let offset = *at.get(&(t, queue_id)).unwrap_or(&0);
        let tag = (round % 5 == id % 5).then_some("red");
        let max = [1, 7, 64, usize::MAX][(round % 4) as usize];
        let got = if round.is_multiple_of(3) {
            store.get_messages_wait(topic, queue_id, offset, max, tag, Duration::from_millis(3)).unwrap()
        } else {
            store.get_messages(topic, queue_id, offset, max, tag).unwrap()
        };
        let next = check_get(store, topic, queue_id, offset, tag, &got);
        at.insert((t, queue_id), next);
    }
}

fn querier(store: &MessageStore, stop: &AtomicBool, acks: &Mutex<Vec<Ack>>) {
    let mut round = 0usize;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let ack = {
            let acks = acks.lock();
            if acks.is_empty() { None } else { Some(acks[acks.len() - 1 - round % acks.len().min(50)].clone()) }
        };
        let Some(ack) = ack else {
            std::thread::yield_now();
            continue;
        };
        let start = store.commit_log_start_offset();
        let found = store.query_by_key(ack.topic, &ack.body, i64::MIN, i64::MAX, 3).unwrap();
        for pair in found.windows(2) {
            assert!(pair[0].log_offset() < pair[1].log_offset(), "{found:?}");
        }
        for m in &found {
            assert_eq!(m.topic(), ack.topic);
            assert!(m.keys().contains(&ack.body));
        }
        if start <= ack.put.log_offset {
            let here = found.iter().any(|m| m.log_offset() == ack.put.log_offset);
            assert!(
                here || store.commit_log_start_offset() > ack.put.log_offset,
                "{ack:?} not found by key: {found:?}"
            );
        }
        let shared = store.query_by_key(ack.topic, &format!("k{}", round % 7), 0, i64::MAX, usize::MAX).unwrap();
        for pair in shared.windows(2) {
            assert!(pair[0].log_offset() < pair[1].log_offset(), "duplicates or disorder: {shared:?}");
        }
        let _ = store.queue_offset_for_timestamp(ack.topic, ack.queue_id, i64::MAX).unwrap();
        let _ = store.queue_offset_for_timestamp(ack.topic, ack.queue_id, i64::MIN).unwrap();
        let q = store.queue_offset_for_timestamp(ack.topic, ack.queue_id, 0).unwrap();
        let (min, max) = (
            store.min_queue_offset(ack.topic, ack.queue_id).unwrap(),
            store.max_queue_offset(ack.topic, ack.queue_id).unwrap(),
        );
        assert!(q <= max, "{q} past {max}");
        let _ = min;
    }
}

fn misc(store: &MessageStore, stop: &AtomicBool, violations: &Arc<AtomicU64>) {
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let topic = TOPICS[(round % 3) as usize];
        let queue_id = (round % u64::from(QUEUES)) as u32;
        store.commit_offset("g", topic, queue_id, round).unwrap();
        assert_eq!(store.committed_offset("g", topic, queue_id), Some(round));
        if round.is_multiple_of(10) {
            store.flush_offsets().unwrap();
        }
        let metrics = store.metrics();
        if round.is_multiple_of(50) {
            // Delete about the older half of what is there.
            let (start, next) = (metrics.log.start_offset, metrics.log.next_offset);
            let new_start = store.delete_messages_before(start + (next - start) / 2).unwrap();
            assert!(new_start >= start);
        }
        if round % 200 == 1 {
            let checker = Checker { last_log: None, next: HashMap::new(), violations: Arc::clone(violations) };
            store.register_dispatcher(Box::new(checker));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Reads every queue whole: dense from its first entry, and every acknowledged put still in the
/// log is at its queue offset.
fn check_all(store: &MessageStore, acks: &[Ack]) {
    let start = store.commit_log_start_offset();
    let mut by_queue: BTreeMap<(&str, u32), BTreeMap<u64, &Ack>> = BTreeMap::new();
    for ack in acks {
        let previous = by_queue.entry((ack.topic, ack.queue_id)).or_default().insert(ack.put.queue_offset, ack);
        assert!(previous.is_none(), "queue offset acknowledged twice: {ack:?} and {previous:?}");
    }
    for ((topic, queue_id), queue_acks) in &by_queue {
        let (min, max) =
            (store.min_queue_offset(topic, *queue_id).unwrap(), store.max_queue_offset(topic, *queue_id).unwrap());
        let mut offset = min;
        let mut read = BTreeMap::new();
        while offset < max {
            let got = store.get_messages(topic, *queue_id, offset, usize::MAX, None).unwrap();
            let next = check_get(store, topic, *queue_id, offset, None, &got);
            assert!(next > offset, "no progress at {offset}: {got:?}");
            for m in got.messages {
                read.insert(m.queue_offset(), m);
            }
            offset = next;
        }
        for (q, ack) in queue_acks {
            if ack.put.log_offset < start {
                continue;
            }
            let m = read.get(q).unwrap_or_else(|| panic!("{ack:?} missing from its queue [{min}, {max})"));
            assert_eq!((m.body(), m.log_offset()), (ack.body.as_bytes(), ack.put.log_offset));
        }
        let kept = queue_acks.values().filter(|a| a.put.log_offset >= start).count();
        assert!(read.len() >= kept);
        assert_eq!(read.len() as u64, max - min, "{topic}/{queue_id} is not dense in [{min}, {max})");
    }
}

fn race(flush_policy: FlushPolicy) {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config(flush_policy)).unwrap();
    let (stop, done) = (AtomicBool::new(false), Arc::new(AtomicBool::new(false)));
    let acks = Mutex::new(Vec::new());
    let violations = Arc::new(AtomicU64::new(0));
    let secs = seconds();
    {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(secs + 60.0));
            if !done.load(Ordering::SeqCst) {
                eprintln!("store_races: hung for a minute past its time; aborting");
                std::process::abort();
            }
        });
    }
    let started = Instant::now();
    std::thread::scope(|scope| {
        for id in 0..3 {
            let (store, stop, acks) = (&store, &stop, &acks);
            scope.spawn(move || putter(store, id, stop, acks));
        }
        for id in 0..2 {
            let (store, stop) = (&store, &stop);
            scope.spawn(move || getter(store, id, stop));
        }
        scope.spawn(|| querier(&store, &stop, &acks));
        scope.spawn(|| misc(&store, &stop, &violations));
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::SeqCst);
    });
    let acks = acks.into_inner();
    let metrics = store.metrics();
    eprintln!(
        "{flush_policy:?}: {} puts acknowledged in {:?}; log [{}, {}), {} index files, {} long polls held",
        acks.len(),
        started.elapsed(),
        metrics.log.start_offset,
        metrics.log.next_offset,
        metrics.index_files,
        metrics.long_polls_held
    );
    check_all(&store, &acks);
    assert_eq!(metrics.entries_refused, 0);
    assert_eq!(violations.load(Ordering::Relaxed), 0, "a user dispatcher saw messages out of order");
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), config(flush_policy)).unwrap();
    check_all(&store, &acks);
    store.close().unwrap();
    done.store(true, Ordering::SeqCst);
}

#[test]
fn every_call_races_every_other_flushing_always() {
    race(FlushPolicy::Always);
}

#[test]
fn every_call_races_every_other_flushing_every_interval() {
    race(FlushPolicy::EveryInterval { ms: 5, messages: 1_000 });
}
