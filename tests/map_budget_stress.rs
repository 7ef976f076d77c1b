//! Adversarial: several logs sharing one small map budget, with readers racing reclaim, appends
//! and rolls (sealing), `truncate_to`, `delete_records_before`, compaction (one log under
//! `CleanupPolicy::Compact`, `compact()` on the others) and index rebuilds (a log closed, some
//! sealed `.index` files damaged, reopened: the first read of those segments rebuilds them).
//!
//! Checked: every record read is the one appended at its offset (a value names its offset); the
//! only errors are the legitimate ones of a read racing a removal; /proc/self/maps never shows
//! more maps of the logs' files than the cap plus the unbudgeted maps of active and not yet sealed
//! segments; between phases, with every thread stopped and every log flushed, the maps in
//! /proc/self/maps are exactly the budget's count plus the active segments' three each (a drift
//! detector); after every log is closed the budget holds 0 maps, 0 bytes, 0 descriptors.
//!
//! Length: `STRATA_BUDGET_STRESS_SECS` (default 3; ≥ 60 for the opt-in long run, in a release
//! build). Seed: printed, `STRATA_SEED` replays each thread's choices.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::maps_under;
use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{CleanupPolicy, Error, FlushPolicy, Log, LogConfig, MapBudget, MapBudgetConfig, Record};

const LOGS: usize = 3;
const MAX_MAPS: u64 = 12;
/// The active segment's `.log`, `.index` and `.timeindex` are mapped outside the budget.
const ACTIVE_MAPS: usize = 3;
const KEYS: u64 = 7;
/// Rolled segments a log keeps unsealed at most with one appender (`MAX_UNSEALED_SEGMENTS`).
const UNSEALED: usize = 4;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn value_of(offset: u64) -> String {
    format!("offset={offset:012};filler={}", "x".repeat((offset % 40) as usize))
}

fn config(budget: &MapBudget, i: usize) -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_bytes: 256,
        index_interval_bytes: 128,
        flush_policy: FlushPolicy::Never,
        file_delete_delay_ms: 0,
        truncate_wait_ms: 50,
        cleanup_policy: if i == 0 { CleanupPolicy::Compact } else { CleanupPolicy::Delete },
        cleaner_backoff_ms: 20,
        min_cleanable_dirty_percent: 1,
        map_budget: Some(budget.clone()),
        ..LogConfig::default()
    }
}

struct Shared {
    root: PathBuf,
    budget: MapBudget,
    /// Each log, taken out (exclusively) only to reopen it.
    logs: Vec<RwLock<Option<Log>>>,
    /// Held by the log's appender and by what moves its next offset back (truncation), so the
    /// appender knows the offset it appends at.
    content: Vec<Mutex<()>>,
    stop: AtomicBool,
    failures: Mutex<Vec<String>>,
    reads: AtomicU64,
    records: AtomicU64,
    raced: AtomicU64,
    refused: AtomicU64,
    truncations: AtomicU64,
    prefix_removals: AtomicU64,
    compactions: AtomicU64,
    reopens: AtomicU64,
    most_maps: AtomicU64,
}

impl Shared {
    fn fail(&self, what: String) {
        eprintln!("FAILURE: {what}");
        self.failures.lock().push(what);
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn writer(shared: &Shared, i: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !shared.stop.load(Ordering::Relaxed) {
        let slot = shared.logs[i].read();
        let Some(log) = slot.as_ref() else { continue };
        let _content = shared.content[i].lock();
        let offset = log.next_offset();
        let value = value_of(offset);
        let key = format!("key-{}", offset % KEYS);
        let mut record = Record::new(value.as_bytes());
        if rng.random_bool(0.7) {
            record = record.with_key(key.as_bytes());
        }
        match log.append(&[record]) {
            Ok(info) if info.base_offset == offset => {}
            Ok(info) => shared.fail(format!("log {i}: appended at {} expecting {offset}", info.base_offset)),
            Err(error) => shared.fail(format!("log {i}: append at {offset}: {error:?}")),
        }
        drop(_content);
        drop(slot);
        if rng.random_ratio(1, 8) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn reader(shared: &Shared, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !shared.stop.load(Ordering::Relaxed) {
        let i = rng.random_range(0..LOGS);
        let slot = shared.logs[i].read();
        let Some(log) = slot.as_ref() else { continue };
        let (start, next) = (log.start_offset(), log.next_offset());
        if next <= start {
            continue;
        }
        let from = rng.random_range(start..next);
        let max_bytes = if rng.random_bool(0.5) { 1 } else { 600 };
        let mut last = None;
        let result = log.read(from, max_bytes).and_then(|records| {
            for record in records {
                let record = record?;
                let offset = record.offset();
                if offset < from || last.is_some_and(|l| offset <= l) {
                    shared.fail(format!("log {i}: read from {from}: offset {offset} after {last:?}"));
                }
                last = Some(offset);
                let expected = value_of(offset);
                if record.value() != Some(expected.as_bytes()) {
                    let got = record.value().map(String::from_utf8_lossy);
                    shared.fail(format!("log {i}: offset {offset}: {got:?}, expected {expected:?}"));
                }
                shared.records.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        match result {
            Ok(()) => {}
            Err(Error::OffsetOutOfRange { .. } | Error::Truncated { .. }) => {
                shared.raced.fetch_add(1, Ordering::Relaxed);
            }
            Err(Error::MapBudget { .. }) => {
                shared.refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => shared.fail(format!("log {i}: read from {from} ({start}..{next}): {error:?}")),
        }
        shared.reads.fetch_add(1, Ordering::Relaxed);
    }
}

/// Damages the `.index` of some sealed segments of a closed log (a length that is not a whole
/// number of entries), so their first read rebuilds it.
fn damage_indexes(dir: &Path, rng: &mut StdRng) {
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "index"))
        .collect();
    indexes.sort();
    indexes.pop(); // the active segment's
    for path in indexes {
        if rng.random_ratio(1, 3) {
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.push(1);
            std::fs::write(&path, bytes).unwrap();
        }
    }
}

fn mutator(shared: &Shared, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !shared.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(rng.random_range(2..20)));
        let i = rng.random_range(0..LOGS);
        match rng.random_range(0..20) {
            0 => {
                // Reopen with damaged indexes.
                let mut slot = shared.logs[i].write();
                let log = slot.take().unwrap();
                if let Err(error) = log.close() {
                    shared.fail(format!("log {i}: close: {error:?}"));
                }
                let dir = shared.root.join(format!("log-{i}"));
                damage_indexes(&dir, &mut rng);
                match Log::open(&dir, config(&shared.budget, i)) {
                    Ok(log) => *slot = Some(log),
                    Err(error) => {
                        shared.fail(format!("log {i}: reopen: {error:?}"));
                        return;
                    }
                }
                shared.reopens.fetch_add(1, Ordering::Relaxed);
            }
            1..=6 => {
                let slot = shared.logs[i].read();
                let Some(log) = slot.as_ref() else { continue };
                let _content = shared.content[i].lock();
                let (start, next) = (log.start_offset(), log.next_offset());
                let to = next.saturating_sub(rng.random_range(0..80)).max(start);
                match log.truncate_to(to) {
                    Ok(_) => {
                        shared.truncations.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::Busy { .. }) => {}
                    Err(error) => shared.fail(format!("log {i}: truncate_to {to} ({start}..{next}): {error:?}")),
                }
            }
            7..=12 => {
                let slot = shared.logs[i].read();
                let Some(log) = slot.as_ref() else { continue };
                let (start, next) = (log.start_offset(), log.next_offset());
                // Keep a few hundred records.
                if next > start + 400 {
                    let before = rng.random_range(start..next - 300);
                    match log.delete_records_before(before) {
                        Ok(_) => {
                            shared.prefix_removals.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => shared.fail(format!("log {i}: delete_records_before {before}: {error:?}")),
                    }
                }
            }
            _ => {
                let slot = shared.logs[i].read();
                let Some(log) = slot.as_ref() else { continue };
                match log.compact() {
                    Ok(_) => {
                        shared.compactions.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(Error::Busy { .. } | Error::Cancelled(_)) => {}
                    Err(error) => shared.fail(format!("log {i}: compact: {error:?}")),
                }
            }
        }
    }
}

/// Every thread stopped: flushes every log (rolled segments get sealed), lets delayed deletions
/// run, then compares the maps that exist with what the budget counts.
fn check_quiet(shared: &Shared, phase: u64) {
    for slot in &shared.logs {
        slot.read().as_ref().unwrap().flush().unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let counted = shared.budget.metrics().maps as usize + ACTIVE_MAPS * LOGS;
        let seen = maps_under(&shared.root);
        if seen == counted {
            return;
        }
        if Instant::now() > deadline {
            shared.fail(format!(
                "phase {phase}: {seen} maps of the logs' files, the budget counts {counted} (with the active segments'); {:?}",
                shared.budget.metrics()
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn readers_race_reclaim_truncation_prefix_removal_compaction_and_index_rebuilds() {
    let seconds = env("STRATA_BUDGET_STRESS_SECS", 3);
    let seed = env("STRATA_SEED", rand::random::<u64>());
    println!("seed {seed} (STRATA_SEED replays), {seconds} s");
    let root = tempfile::tempdir().unwrap();
    let budget = MapBudget::new(MapBudgetConfig {
        max_maps: MAX_MAPS,
        max_mapped_bytes: 8 << 10,
        max_open_files: 64,
        ..MapBudgetConfig::default()
    })
    .unwrap();
    let logs = (0..LOGS)
        .map(|i| RwLock::new(Some(Log::open(root.path().join(format!("log-{i}")), config(&budget, i)).unwrap())))
        .collect();
    let shared = Shared {
        root: root.path().to_path_buf(),
        budget: budget.clone(),
        logs,
        content: (0..LOGS).map(|_| Mutex::new(())).collect(),
        stop: AtomicBool::new(false),
        failures: Mutex::new(Vec::new()),
        reads: AtomicU64::new(0),
        records: AtomicU64::new(0),
        raced: AtomicU64::new(0),
        refused: AtomicU64::new(0),
        truncations: AtomicU64::new(0),
        prefix_removals: AtomicU64::new(0),
        compactions: AtomicU64::new(0),
        reopens: AtomicU64::new(0),
        most_maps: AtomicU64::new(0),
    };
    let phase_len = Duration::from_millis(1500).min(Duration::from_secs(seconds));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut phase = 0u64;
    while Instant::now() < deadline && shared.failures.lock().is_empty() {
        phase += 1;
        shared.stop.store(false, Ordering::Relaxed);
        std::thread::scope(|scope| {
            let shared = &shared;
            let seed = seed ^ phase.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for i in 0..LOGS {
                scope.spawn(move || writer(shared, i, seed ^ (i as u64 + 1)));
            }
            for r in 0..3 {
                scope.spawn(move || reader(shared, seed ^ (100 + r)));
            }
            scope.spawn(move || mutator(shared, seed ^ 200));
            let phase_end = Instant::now() + phase_len;
            while Instant::now() < phase_end && !shared.stop.load(Ordering::Relaxed) {
                let maps = maps_under(&shared.root);
                shared.most_maps.fetch_max(maps as u64, Ordering::Relaxed);
                // Unbudgeted: each log's active segment, the rolled segments not sealed yet (at
                // most `UNSEALED` a log with one appender), and a truncation's or reset's new
                // active segment while the removed one waits for its delayed deletion.
                let bound = MAX_MAPS as usize + ACTIVE_MAPS * LOGS * (1 + UNSEALED + 2);
                if maps > bound {
                    shared.fail(format!("{maps} maps of the logs' files, more than {bound}"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            shared.stop.store(true, Ordering::Relaxed);
        });
        if shared.failures.lock().is_empty() {
            check_quiet(&shared, phase);
        }
    }
    let metrics = budget.metrics();
    println!(
        "{phase} phases: {} reads ({} records, {} raced a removal, {} refused), {} truncations, {} prefix removals, \
         {} compactions, {} reopens; at most {} maps seen; {metrics:?}",
        shared.reads.load(Ordering::Relaxed),
        shared.records.load(Ordering::Relaxed),
        shared.raced.load(Ordering::Relaxed),
        shared.refused.load(Ordering::Relaxed),
        shared.truncations.load(Ordering::Relaxed),
        shared.prefix_removals.load(Ordering::Relaxed),
        shared.compactions.load(Ordering::Relaxed),
        shared.reopens.load(Ordering::Relaxed),
        shared.most_maps.load(Ordering::Relaxed),
    );
    let failures = shared.failures.lock().clone();
    assert!(failures.is_empty(), "seed {seed}: {} failures, first: {:?}", failures.len(), failures.first());
    assert!(metrics.maps <= MAX_MAPS, "{metrics:?}");
    for slot in shared.logs {
        slot.into_inner().unwrap().close().unwrap();
    }
    let metrics = budget.metrics();
    if metrics.maps != 0 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let dir = root.path().to_string_lossy();
        for line in maps.lines().filter(|line| line.contains(&*dir)) {
            eprintln!("still mapped: {line}");
        }
    }
    assert_eq!(
        (metrics.maps, metrics.mapped_bytes, metrics.open_files),
        (0, 0, 0),
        "seed {seed}: everything given back once every log is closed: {metrics:?}"
    );
    assert_eq!(maps_under(root.path()), 0);
}
