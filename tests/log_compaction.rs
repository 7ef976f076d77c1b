//! Compaction (docs/DESIGN.md §10) against a model: random keyed appends, tombstones and keyless
//! records, compaction passes, clean and unclean reopens. After each step the log must agree with
//! a `HashMap` of latest values, keep every record's offset and bytes, and, below the cleaned
//! offset, hold at most one record per key. Seeded (printed; replay with `STRATA_SEED`); more cases
//! with `STRATA_COMPACTION_CASES`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{copy_dir, file_names};
use rand::RngExt;
use strata_log::{CleanupPolicy, Error, Log, LogConfig, ManualClock, Record};

/// What was appended at an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Appended {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: i64,
}

fn config(clock: &ManualClock) -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Delete,
        delete_retention_ms: 10_000,
        clock: clock.clock(),
        flush_policy: strata_log::FlushPolicy::Never,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// Reads the whole log: offset → record.
fn contents(log: &Log) -> BTreeMap<u64, Appended> {
    let mut out = BTreeMap::new();
    let mut next = log.start_offset();
    while next < log.next_offset() {
        let reader = log.read(next, 1 << 16).unwrap();
        let mut any = false;
        for record in reader {
            let record = record.unwrap();
            assert!(record.offset() >= next, "offsets increase");
            next = record.offset() + 1;
            any = true;
            out.insert(
                record.offset(),
                Appended {
                    key: record.key().map(<[u8]>::to_vec),
                    value: record.value().map(<[u8]>::to_vec),
                    timestamp: record.timestamp_ms(),
                },
            );
        }
        if !any {
            break;
        }
    }
    out
}

/// The checks every state of the log must pass.
fn check(log: &Log, appended: &[Appended], cleaned_up_to: u64, horizon: i64) {
    let found = contents(log);
    // Every record is the one appended at its offset.
    for (offset, record) in &found {
        assert_eq!(record, &appended[*offset as usize], "offset {offset}");
    }
    // Keyless records and each key's latest record are all there (a tombstone may be gone once
    // it is older than the horizon).
    let mut latest: HashMap<&[u8], u64> = HashMap::new();
    for (offset, record) in appended.iter().enumerate() {
        match &record.key {
            Some(key) => {
                latest.insert(key, offset as u64);
            }
            None => assert!(found.contains_key(&(offset as u64)), "keyless record {offset} lost"),
        }
    }
    for (key, offset) in &latest {
        let record = &appended[*offset as usize];
        let expired_tombstone = record.value.is_none() && record.timestamp < horizon;
        if !expired_tombstone {
            assert!(found.contains_key(offset), "latest record of {key:?} (offset {offset}) lost");
        }
    }
    // The model of latest values agrees with the log's.
    let mut model: HashMap<&[u8], &[u8]> = HashMap::new();
    for record in appended {
        if let Some(key) = &record.key {
            match &record.value {
                Some(value) => model.insert(key, value),
                None => model.remove(&key[..]),
            };
        }
    }
    let mut from_log: HashMap<&[u8], &[u8]> = HashMap::new();
    for record in found.values() {
        if let Some(key) = &record.key {
            match &record.value {
                Some(value) => from_log.insert(key, value),
                None => from_log.remove(&key[..]),
            };
        }
    }
    assert_eq!(from_log, model, "latest values");
    // Below the cleaned offset, one record per key at most.
    let mut seen = HashMap::new();
    for (offset, record) in found.range(..cleaned_up_to) {
        if let Some(key) = &record.key {
            assert!(seen.insert(key.clone(), *offset).is_none(), "key {key:?} twice below {cleaned_up_to}");
        }
    }
}

fn run_case(rng: &mut impl rand::Rng, case: u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let mut log = Log::open(dir.path(), config(&clock)).unwrap();
    let mut appended: Vec<Appended> = Vec::new();
    let mut cleaned_up_to = 0;
    let keys = rng.random_range(1..30u32);
    for step in 0..rng.random_range(5..25) {
        match rng.random_range(0..10) {
            0..=5 => {
                for _ in 0..rng.random_range(1..60) {
                    let batch = rng.random_range(1..4);
                    let owned: Vec<Appended> = (0..batch)
                        .map(|_| {
                            let key = (rng.random_range(0..10) > 0).then(|| format!("k{}", rng.random_range(0..keys)));
                            let value = (key.is_none() || rng.random_range(0..8) > 0)
                                .then(|| format!("v{}-{}", appended.len(), "x".repeat(rng.random_range(0..40))));
                            Appended {
                                key: key.map(String::into_bytes),
                                value: value.map(String::into_bytes),
                                timestamp: clock.clock().now_ms(),
                            }
                        })
                        .collect();
                    let records: Vec<Record<'_>> = owned
                        .iter()
                        .map(|a| Record { key: a.key.as_deref(), value: a.value.as_deref(), ..Record::default() })
                        .collect();
                    log.append(&records).unwrap();
                    appended.extend(owned);
                }
            }
            6 | 7 => {
                if let Some(report) = log.compact().unwrap() {
                    cleaned_up_to = report.cleaned_up_to;
                }
            }
            8 => {
                clock.advance(rng.random_range(0..20_000));
            }
            _ => {
                // Reopen, clean or after a crash (a copy of the live directory).
                if rng.random_range(0..2) == 0 {
                    drop(log);
                    log = Log::open(dir.path(), config(&clock)).unwrap();
                } else {
                    let crashed = tempfile::tempdir().unwrap();
                    copy_dir(dir.path(), crashed.path());
                    drop(log);
                    std::fs::remove_dir_all(dir.path()).unwrap();
                    copy_dir(crashed.path(), dir.path());
                    log = Log::open(dir.path(), config(&clock)).unwrap();
                }
            }
        }
        let horizon = clock.clock().now_ms() - 10_000;
        check(&log, &appended, cleaned_up_to, horizon);
        let _ = (case, step);
    }
}

#[test]
fn compaction_agrees_with_a_model_of_latest_values() {
    let mut rng = common::rng("compaction_agrees_with_a_model_of_latest_values");
    let cases = std::env::var("STRATA_COMPACTION_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(12);
    for case in 0..cases {
        run_case(&mut rng, case);
    }
}

/// Builds a log where most records are superseded: `keys` keys, `rounds` values each.
fn superseded_log(dir: &std::path::Path, config: LogConfig, keys: u32, rounds: u32) -> Log {
    let log = Log::open(dir, config).unwrap();
    for round in 0..rounds {
        for key in 0..keys {
            let value = format!("{round}-{}", "v".repeat(50));
            log.append(&[Record::new(value.as_bytes()).with_key(format!("key-{key}").as_bytes())]).unwrap();
        }
    }
    log
}

#[test]
fn reads_skip_the_gaps_and_lookups_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = superseded_log(dir.path(), config(&clock), 5, 40);
    let before = log.metrics();
    let report = log.compact().unwrap().unwrap();
    assert!(report.records_removed > 0 && report.bytes_after < report.bytes_before);
    let after = log.metrics();
    assert!(after.bytes_on_disk < before.bytes_on_disk);
    assert_eq!(after.compaction_passes, 1);
    assert!(after.compaction_ratio < 1.0);
    assert_eq!(after.records_compacted_away, report.records_removed);
    // Offset 0 was superseded: a read there starts at the next record still present.
    let first = log.read(0, 1 << 20).unwrap().next().unwrap().unwrap();
    assert!(first.offset() > 0);
    // Reads from every offset return the first record at or after it.
    let all: Vec<u64> = contents(&log).keys().copied().collect();
    for offset in 0..log.next_offset() {
        let expected = all.iter().copied().find(|o| *o >= offset).unwrap();
        let got = log.read(offset, 1).unwrap().next().unwrap().unwrap().offset();
        assert_eq!(got, expected, "read from {offset}");
    }
    // Time lookups: every record has the same timestamp, so the first record present answers.
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some(all[0]));
    assert!(!file_names(dir.path()).iter().any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")));
}

#[test]
fn a_second_pass_with_nothing_new_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = superseded_log(dir.path(), config(&clock), 5, 40);
    log.compact().unwrap().unwrap();
    assert!(log.compact().unwrap().is_none(), "no sealed segment is dirty");
}

#[test]
fn a_small_key_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { cleaner_dedupe_bytes: 64 << 10, segment_bytes: 64 << 10, ..config(&clock) };
    // 2000 distinct keys (about 100 KiB of map) twice: one pass cannot map them all.
    let log = Log::open(dir.path(), config).unwrap();
    for round in 0..2 {
        for key in 0..2000 {
            log.append(&[Record::new(format!("{round}").as_bytes()).with_key(format!("key-{key:05}").as_bytes())])
                .unwrap();
        }
    }
    let first = log.compact().unwrap().unwrap();
    assert!(first.cleaned_up_to < 4000 - 100, "the map bounded the pass: {first:?}");
    let mut passes = 1;
    while let Some(report) = log.compact().unwrap() {
        passes += 1;
        assert!(passes < 50);
        let _ = report;
    }
    assert!(passes > 1);
    let found = contents(&log);
    let zeros = found.values().filter(|r| r.value.as_deref() == Some(b"0")).count();
    // Keys whose second record is still in the active segment may keep their first; the rest not.
    assert!(zeros < 2000, "{zeros}");
    assert_eq!(found.values().filter(|r| r.value.as_deref() == Some(b"1")).count(), 2000);
}

#[test]
fn the_cleaner_thread_compacts_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let config = LogConfig { cleanup_policy: CleanupPolicy::Compact, cleaner_backoff_ms: 5, ..config(&clock) };
    let log = superseded_log(dir.path(), config, 5, 40);
    let started = std::time::Instant::now();
    while log.metrics().compaction_passes == 0 {
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "no pass ran");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    log.close().unwrap();
}

#[test]
fn truncation_and_retention_after_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let log = Log::open(dir.path(), config(&clock)).unwrap();
    // Records with unique keys between superseded ones: the compacted log has gaps between them.
    for round in 0..40 {
        for key in 0..5 {
            log.append(&[Record::new(b"superseded").with_key(format!("key-{key}").as_bytes())]).unwrap();
        }
        log.append(&[Record::new(b"kept").with_key(format!("unique-{round}").as_bytes())]).unwrap();
    }
    log.compact().unwrap().unwrap();
    let present: Vec<u64> = contents(&log).keys().copied().collect();
    // Truncating into a gap ends the log where the kept records end.
    let gap = (present[0]..log.next_offset()).find(|o| !present.contains(o)).unwrap();
    let next = log.truncate_to(gap).unwrap();
    assert!(next <= gap && next > present[0], "{next}");
    assert!(contents(&log).keys().all(|o| *o < next));
    assert_eq!(log.append(&[Record::new(b"after").with_key(b"key-0")]).unwrap().base_offset, next);
    // The batch after the last kept one follows it exactly, so recovery keeps it.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    let reopened = Log::open(crashed.path(), config(&clock)).unwrap();
    assert_eq!(contents(&reopened), contents(&log));
    drop(reopened);
    let start = log.delete_records_before(next).unwrap();
    assert_eq!(start, next);
    assert!(matches!(log.read(0, 1), Err(Error::OffsetOutOfRange { .. })));
}
