//! Capacity and byte capacity under concurrency: 8 putting and 8 taking threads (some commits
//! roll back, some wait for room and fail with `ChannelFull` and are retried) while a checker
//! thread samples the channel continuously: the events held (takeable plus taken by open
//! transactions) never exceed `capacity`, their body bytes never exceed the byte limit. At the
//! end every event put was taken by exactly one committed take.
//!
//! Seeded: `STRATA_SEED` replays the choices of each thread (not the interleaving);
//! `STRATA_CHANNEL_STRESS_EVENTS` (default 150) sets the events each putter puts.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{Channel, ChannelConfig, Error, Event, FlushPolicy, LogConfig};

const THREADS: u64 = 8;
const CAPACITY: u64 = 40;

#[test]
fn capacity_and_byte_capacity_hold_with_8_putters_and_8_takers() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let per_putter: u64 =
        std::env::var("STRATA_CHANNEL_STRESS_EVENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    // Under `Always` puts are held (they count) before takers can see them.
    let policy = if seed.is_multiple_of(2) { FlushPolicy::Always } else { FlushPolicy::Never };
    println!("seed {seed} (STRATA_SEED replays), {per_putter} events per putter, {policy:?}");
    let dir = tempfile::tempdir().unwrap();
    let config = ChannelConfig {
        capacity: CAPACITY,
        transaction_capacity: 8,
        byte_capacity: 2_000,
        keep_alive_ms: 20,
        delete_interval_ms: 10,
        log: LogConfig { segment_bytes: 16 << 10, flush_policy: policy, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    };
    let byte_limit = config.byte_limit();
    assert_eq!(byte_limit, 1_600);
    let channel = Channel::open(dir.path(), config).unwrap();
    let total = per_putter * THREADS;
    let taken_total = AtomicU64::new(0);
    let taken: Mutex<HashMap<String, u32>> = Mutex::new(HashMap::new());
    let done = AtomicBool::new(false);
    let (samples, full_samples, refused) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let m = channel.metrics().unwrap();
                assert!(m.held <= CAPACITY, "seed {seed}: {} events held", m.held);
                assert!(m.size + m.taken <= m.held, "seed {seed}: {m:?}");
                assert!(m.bytes <= byte_limit, "seed {seed}: {} bytes held", m.bytes);
                assert_eq!(m.remaining_capacity, CAPACITY - m.held);
                samples.fetch_add(1, Ordering::Relaxed);
                full_samples
                    .fetch_add(u64::from(m.remaining_capacity == 0 || m.bytes + 100 > byte_limit), Ordering::Relaxed);
                std::thread::yield_now();
            }
        });
        for thread in 0..THREADS {
            let (channel, refused) = (&channel, &refused);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ (thread + 1));
                let mut seq = 0;
                while seq < per_putter {
                    let mut tx = channel.transaction();
                    let n = rng.random_range(1..=8).min(per_putter - seq);
                    for i in 0..n {
                        let id = format!("p{thread}-{}-", seq + i);
                        let body: Vec<u8> =
                            id.bytes().chain(std::iter::repeat(b'.')).take(rng.random_range(10..100)).collect();
                        tx.put(Event::new(body).with_header("id", id)).unwrap();
                    }
                    if rng.random_ratio(1, 10) {
                        tx.rollback().unwrap();
                        continue;
                    }
                    loop {
                        match tx.commit() {
                            Ok(()) => break,
                            Err(Error::ChannelFull { events, bytes, .. }) => {
                                assert!(events > CAPACITY || bytes > byte_limit, "seed {seed}: refused with room");
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(other) => panic!("seed {seed}: {other}"),
                        }
                    }
                    seq += n;
                }
            });
        }
        for thread in 0..THREADS {
            let (channel, taken, taken_total) = (&channel, &taken, &taken_total);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ (thread + 100));
                while taken_total.load(Ordering::SeqCst) < total {
                    // Slower than the putters, so the channel fills and commits wait for room.
                    std::thread::sleep(Duration::from_micros(rng.random_range(0..2_000)));
                    let mut tx = channel.transaction();
                    let mut ids = Vec::new();
                    for _ in 0..rng.random_range(1..=8) {
                        match tx.take().unwrap() {
                            Some(event) => ids.push(String::from_utf8(event.header("id").unwrap().to_vec()).unwrap()),
                            None => break,
                        }
                    }
                    if rng.random_ratio(1, 5) {
                        drop(tx);
                        continue;
                    }
                    tx.commit().unwrap();
                    let mut taken = taken.lock().unwrap();
                    for id in ids {
                        *taken.entry(id).or_default() += 1;
                        taken_total.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        while taken_total.load(Ordering::SeqCst) < total {
            std::thread::sleep(Duration::from_millis(5));
        }
        done.store(true, Ordering::SeqCst);
    });
    let taken = taken.into_inner().unwrap();
    assert_eq!(taken.len() as u64, total, "seed {seed}: every event taken");
    assert!(taken.values().all(|&n| n == 1), "seed {seed}: each by one committed take");
    let m = channel.metrics().unwrap();
    assert_eq!((m.put_successes, m.take_successes, m.size, m.bytes), (total, total, 0, 0), "seed {seed}");
    assert_eq!(m.channel_full, refused.load(Ordering::Relaxed));
    println!(
        "{} samples, {} at or near full, {} commits refused as full, {} rollbacks",
        samples.load(Ordering::Relaxed),
        full_samples.load(Ordering::Relaxed),
        m.channel_full,
        m.rollbacks
    );
    assert!(samples.load(Ordering::Relaxed) > 10, "the checker ran");
    channel.close().unwrap();
}
