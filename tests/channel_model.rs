//! Model test of the channel: random transactions (puts, takes, commits, rollbacks, drops,
//! commits refused for capacity or bytes, puts and takes refused for the transaction's
//! capacity), with clean reopens, reopens after a drop, and unclean ones (a copy of the live
//! files opened as another channel), all checked against a `VecDeque` of event bodies: the order
//! takes return, `size()`, `remaining_capacity()` and the metrics' bytes. The log's segments are
//! small and the background deletion runs every 5 ms, so replays start from deleted prefixes.
//!
//! Seeded: `STRATA_SEED` replays a run; `STRATA_CHANNEL_MODEL_STEPS` (default 300) sets its
//! length.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use rand::RngExt;
use rand::rngs::StdRng;
use strata_log::{Channel, ChannelConfig, Error, Event, FlushPolicy, LogConfig, Transaction};

const CAPACITY: u64 = 12;
const TRANSACTION_CAPACITY: u64 = 5;
/// byte_capacity 400 with 20% for headers: bodies may hold 320 bytes.
const BYTE_LIMIT: u64 = 320;

fn config(policy: FlushPolicy) -> ChannelConfig {
    ChannelConfig {
        capacity: CAPACITY,
        transaction_capacity: TRANSACTION_CAPACITY,
        byte_capacity: 400,
        keep_alive_ms: 0,
        delete_interval_ms: 5,
        log: LogConfig { segment_bytes: 1024, flush_policy: policy, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    }
}

/// The model: the bodies takers get, in order, and what open transactions took.
#[derive(Default)]
struct Model {
    ready: VecDeque<Vec<u8>>,
    /// Bodies taken by the transaction under way.
    taken: Vec<Vec<u8>>,
}

impl Model {
    fn held(&self) -> u64 {
        (self.ready.len() + self.taken.len()) as u64
    }

    fn bytes(&self) -> u64 {
        self.ready.iter().chain(&self.taken).map(|b| b.len() as u64).sum()
    }
}

fn check(channel: &Channel, model: &Model, seed: u64, step: usize) {
    let context = format!("seed {seed} step {step}");
    assert_eq!(channel.size(), model.ready.len() as u64, "{context}: size");
    assert_eq!(channel.remaining_capacity(), CAPACITY.saturating_sub(model.held()), "{context}: remaining");
    let metrics = channel.metrics().unwrap();
    assert_eq!(metrics.bytes, model.bytes(), "{context}: bytes held");
    assert_eq!(metrics.taken, model.taken.len() as u64, "{context}: taken");
}

#[test]
fn random_transactions_and_reopens_match_a_vecdeque() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let steps: usize = std::env::var("STRATA_CHANNEL_MODEL_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    println!("seed {seed} (STRATA_SEED replays), {steps} steps");
    let mut rng: StdRng = rand::SeedableRng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let policy = if rng.random_bool(0.5) { FlushPolicy::Always } else { FlushPolicy::Never };
    let mut dir: PathBuf = root.path().join("c0");
    let mut channel = Channel::open(&dir, config(policy)).unwrap();
    let mut model = Model::default();
    let mut next_body = 0u64;
    let (mut committed, mut full, mut reopened) = (0, 0, 0);
    for step in 0..steps {
        let mut tx = channel.transaction();
        let mut puts = Vec::new();
        // Phases that fill the channel and phases that drain it.
        let put_share = [0.2, 0.5, 0.8][(step / 20) % 3];
        for _ in 0..rng.random_range(0..=TRANSACTION_CAPACITY + 1) {
            match rng.random_bool(put_share) {
                true => {
                    let size = rng.random_range(0..60);
                    let body: Vec<u8> = format!("{next_body:06}").bytes().cycle().take(size.max(6)).collect();
                    next_body += 1;
                    let put = tx.put(Event::new(body.clone()).with_header("n", next_body.to_string()));
                    if puts.len() as u64 == TRANSACTION_CAPACITY {
                        assert!(matches!(put, Err(Error::TransactionCapacity { what: "put", .. })), "seed {seed}");
                    } else {
                        put.unwrap();
                        puts.push(body);
                    }
                }
                false => {
                    let took = tx.take();
                    if model.taken.len() as u64 == TRANSACTION_CAPACITY {
                        assert!(matches!(took, Err(Error::TransactionCapacity { what: "take", .. })), "seed {seed}");
                        continue;
                    }
                    let got = took.unwrap().map(|e| e.body().to_vec());
                    let expected = model.ready.pop_front();
                    assert_eq!(got, expected, "seed {seed} step {step}: take");
                    model.taken.extend(expected);
                }
            }
        }
        assert_eq!((tx.puts(), tx.takes()), (puts.len(), model.taken.len()));
        check(&channel, &model, seed, step);
        match rng.random_range(0..10) {
            0..=6 => {
                let after = model.held() + puts.len() as u64 - model.taken.len() as u64;
                let bytes = model.bytes() + puts.iter().map(|p| p.len() as u64).sum::<u64>()
                    - model.taken.iter().map(|t| t.len() as u64).sum::<u64>();
                let grows = puts.len() > model.taken.len();
                let grows_bytes = puts.iter().map(Vec::len).sum::<usize>() > model.taken.iter().map(Vec::len).sum();
                let fits = (after <= CAPACITY || !grows) && (bytes <= BYTE_LIMIT || !grows_bytes);
                let result = tx.commit();
                if fits {
                    result.unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                    model.ready.extend(puts);
                    model.taken.clear();
                    committed += 1;
                    // A transaction holds its channel: a reopen below must not find it open.
                    drop(tx);
                } else {
                    assert!(matches!(result, Err(Error::ChannelFull { .. })), "seed {seed} step {step}: {result:?}");
                    full += 1;
                    assert_eq!(tx.takes(), model.taken.len(), "a refused commit leaves the transaction open");
                    // Then rolled back, or dropped.
                    end_uncommitted(tx, &mut model, rng.random_bool(0.5));
                }
            }
            7 | 8 => end_uncommitted(tx, &mut model, true),
            _ => end_uncommitted(tx, &mut model, false),
        }
        check(&channel, &model, seed, step);
        if rng.random_ratio(1, 25) {
            reopened += 1;
            (channel, dir) = reopen(channel, &dir, root.path(), step, policy, rng.random_range(0..3));
            check(&channel, &model, seed, step);
        }
    }
    println!("{committed} commits, {full} refused as full, {reopened} reopens");
    assert!(committed > steps / 3, "seed {seed}: most transactions commit");
    // Everything left is there, in order, after a last reopen.
    let (channel, _) = reopen(channel, &dir, root.path(), steps, policy, 0);
    let metrics = channel.metrics().unwrap();
    assert_eq!(metrics.events_recovered, model.ready.len() as u64, "seed {seed}");
    // The close deleted the records below W: the replay started there.
    assert_eq!(metrics.log.start_offset, metrics.low_watermark, "seed {seed}");
    assert!(metrics.low_watermark > 0, "seed {seed}: events were taken");
    let mut tx = channel.transaction();
    for expected in model.ready {
        assert_eq!(tx.take().unwrap().map(|e| e.body().to_vec()), Some(expected), "seed {seed}: the end");
        if tx.takes() as u64 == TRANSACTION_CAPACITY {
            tx.commit().unwrap();
        }
    }
    assert!(tx.take().unwrap().is_none());
    tx.commit().unwrap();
    channel.close().unwrap();
}

/// Ends the transaction without committing: `rollback`, or a drop. Either returns its takes to
/// the head in their order.
fn end_uncommitted(mut tx: Transaction, model: &mut Model, explicit: bool) {
    if explicit {
        tx.rollback().unwrap();
        assert_eq!((tx.puts(), tx.takes()), (0, 0), "a rollback empties the transaction");
    } else {
        drop(tx);
    }
    for body in model.taken.drain(..).rev() {
        model.ready.push_front(body);
    }
}

/// Reopens: 0 closes and opens, 1 drops and opens, 2 opens a copy of the live files (an unclean
/// shutdown) as the channel from now on.
fn reopen(channel: Channel, dir: &Path, root: &Path, step: usize, policy: FlushPolicy, how: u32) -> (Channel, PathBuf) {
    let dir = match how {
        0 => {
            channel.close().unwrap();
            dir.to_path_buf()
        }
        1 => {
            drop(channel);
            dir.to_path_buf()
        }
        _ => {
            // Not `c{step}`: the channel starts in `c0`, and a copy at step 0 onto itself would
            // truncate every file it copies.
            let copy = root.join(format!("crash{step}"));
            common::copy_dir(&dir.join("log"), &copy.join("log"));
            drop(channel);
            copy
        }
    };
    (Channel::open(&dir, config(policy)).unwrap(), dir)
}
