//! Crash test 2: random damage to a multi-segment log — bit flips, zeroed ranges, garbage appended,
//! a batch made valid-but-wrong by rewriting its base offset (the CRC does not cover it). No corrupt
//! record is ever returned; every record before the damage is kept; damage to acknowledged data
//! (below the recovery point, or anywhere in a sealed segment) is `Error::Corrupt` (at open if it is
//! in a segment recovery scans, at read otherwise), never a silent truncation; damage to the active
//! segment above the recovery point is a torn tail cut exactly at the damaged batch.
//!
//! Iterations: 150 by default, `STRATA_DAMAGE_ITERATIONS` for more. Seeded: `STRATA_SEED` replays.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use byteorder::{BigEndian, ByteOrder};
use common::{copy_dir, value_of};
use rand::{Rng, RngExt};
use strata_log::internals::Checkpoint;
use strata_log::internals::inspect::{self, BatchInfo, Dump};
use strata_log::{Error, Log, LogConfig, ManualClock, Record};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_bytes: 1024,
        index_interval_bytes: 200,
        clock: ManualClock::new(1_700_000_000_000).clock(),
        ..LogConfig::default()
    }
}

/// One batch of the pristine log: its segment file and place.
#[derive(Debug, Clone)]
struct Placed {
    file: PathBuf,
    batch: BatchInfo,
}

/// A closed multi-segment log; returns every batch in log order.
fn build(dir: &Path) -> Vec<Placed> {
    let log = Log::open(dir, config()).unwrap();
    let mut offset = 0;
    for i in 0..120u64 {
        let values: Vec<Vec<u8>> = (offset..offset + i % 3 + 1).map(value_of).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        offset = log.append(&records).unwrap().last_offset + 1;
    }
    log.close().unwrap();
    let mut placed = Vec::new();
    for name in common::file_names(dir).into_iter().filter(|n| n.ends_with(".log")) {
        let file = dir.join(&name);
        let Dump::Log { batches, .. } = inspect::dump_file(&file, false).unwrap() else { unreachable!() };
        placed.extend(batches.into_iter().map(|batch| Placed { file: file.clone(), batch }));
    }
    placed
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    FlipBits,
    ZeroRange,
    AppendGarbage,
    WrongBaseOffset,
}

/// Damages the copy in `dir`; returns the first batch whose bytes changed, or `None` if only bytes
/// past the data changed (or nothing did).
fn damage(dir: &Path, batches: &[Placed], kind: Damage, rng: &mut impl Rng) -> Option<usize> {
    let target = rng.random_range(0..batches.len());
    let path = dir.join(batches[target].file.file_name().unwrap());
    let original = std::fs::read(&path).unwrap();
    let mut bytes = original.clone();
    let b = &batches[target].batch;
    match kind {
        Damage::FlipBits => {
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(b.position..b.position + b.size) as usize;
                bytes[at] ^= 1 << rng.random_range(0..8);
            }
        }
        Damage::ZeroRange => {
            let start = rng.random_range(b.position..b.position + b.size) as usize;
            let end = (start + rng.random_range(1..200)).min(bytes.len());
            bytes[start..end].fill(0);
        }
        Damage::AppendGarbage => {
            let last = batches.last().unwrap();
            let path = dir.join(last.file.file_name().unwrap());
            let mut tail = std::fs::read(&path).unwrap();
            tail.extend((0..rng.random_range(1..300)).map(|_| rng.random::<u8>()));
            std::fs::write(&path, tail).unwrap();
            return None;
        }
        Damage::WrongBaseOffset => {
            let at = b.position as usize;
            let wrong = b.base_offset + rng.random_range(1..1000);
            BigEndian::write_u64(&mut bytes[at..], wrong);
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    // The first batch (in log order) whose bytes differ from the original.
    let changed = original.iter().zip(&bytes).position(|(a, b)| a != b)? as u64;
    batches.iter().position(|p| p.file == batches[target].file && p.batch.position + p.batch.size > changed)
}

#[test]
fn random_damage_never_returns_a_corrupt_record() {
    let pristine = tempfile::tempdir().unwrap();
    let batches = build(pristine.path());
    let end = batches.last().unwrap().batch.last_offset + 1;
    let iterations = std::env::var("STRATA_DAMAGE_ITERATIONS").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    let mut rng = common::rng("random_damage_never_returns_a_corrupt_record");
    let kinds = [Damage::FlipBits, Damage::ZeroRange, Damage::AppendGarbage, Damage::WrongBaseOffset];
    let mut seen = [0usize; 4];
    for iteration in 0..iterations {
        let work = tempfile::tempdir().unwrap();
        copy_dir(pristine.path(), work.path());
        std::fs::remove_file(work.path().join(".clean-shutdown")).unwrap();
        // The recovery point at a random batch boundary: damage below it was acknowledged.
        let recovery_point = batches[rng.random_range(0..batches.len())].batch.base_offset;
        let checkpoint = Checkpoint { log_start_offset: 0, recovery_point };
        std::fs::write(work.path().join("checkpoint"), checkpoint.encode_file(1)).unwrap();
        let kind = kinds[iteration % kinds.len()];
        seen[iteration % kinds.len()] += 1;
        let damaged = damage(work.path(), &batches, kind, &mut rng);
        let context =
            format!("iteration {iteration}: {kind:?}, damaged batch {damaged:?}, recovery point {recovery_point}");
        check(work.path(), &batches, damaged, recovery_point, end, &context);
    }
    assert!(seen.iter().all(|&n| n > 0));
}

fn check(dir: &Path, batches: &[Placed], damaged: Option<usize>, recovery_point: u64, end: u64, context: &str) {
    let Some(damaged) = damaged else {
        // Only garbage past the end: everything is there, the garbage is cut.
        let log = Log::open(dir, config()).unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(log.next_offset(), end, "{context}");
        assert_eq!(read_until_error(&log).0, end, "{context}");
        return;
    };
    let first_damaged = batches[damaged].batch.base_offset;
    let scanned_from = batches.iter().rev().find(|p| p.batch.base_offset <= recovery_point && p.batch.position == 0);
    let scanned = scanned_from.is_none_or(|s| s.file <= batches[damaged].file);
    // The segment before the first scanned one is scanned too when its data does not end where
    // the next begins (damage that cuts its tail short).
    let mut files: Vec<&PathBuf> = batches.iter().map(|p| &p.file).collect();
    files.dedup();
    let index_of = |file: &PathBuf| files.iter().position(|f| *f == file);
    let maybe_scanned = scanned_from
        .is_some_and(|s| index_of(&s.file).zip(index_of(&batches[damaged].file)).is_some_and(|(a, b)| a == b + 1));
    // Damage is acknowledged data if it is below the recovery point, or anywhere in a sealed
    // (trimmed) segment: only the active segment can have a torn tail.
    let in_active = batches[damaged].file == batches.last().unwrap().file;
    let acknowledged = first_damaged < recovery_point || !in_active;
    match Log::open(dir, config()) {
        Ok(log) => {
            let (good, error) = read_until_error(&log);
            assert!(good >= first_damaged, "{context}: only {good} records before the damage were kept");
            if acknowledged {
                assert!(!scanned, "{context}: damage to acknowledged data in a scanned segment was accepted");
                assert!(matches!(error, Some(Error::Corrupt { .. })), "{context}: reading past old damage: {error:?}");
                assert_eq!(good, first_damaged, "{context}");
            } else {
                assert_eq!(log.next_offset(), first_damaged, "{context}: a torn tail is cut at the damaged batch");
                assert!(error.is_none(), "{context}: {error:?}");
                common::check_lookups(&log);
            }
        }
        Err(Error::Corrupt { .. }) => {
            assert!(acknowledged, "{context}: a torn tail of the active segment must be cut, not refused");
            assert!(scanned || maybe_scanned, "{context}");
        }
        Err(e) => panic!("{context}: {e}"),
    }
}

/// Reads from the start until the end or the first error; every record returned must be exactly
/// what was written at its offset. Returns how many records came back and the error, if any.
fn read_until_error(log: &Log) -> (u64, Option<Error>) {
    let mut next = 0;
    while next < log.visible_end() {
        let mut reader = log.read(next, 1 << 12).unwrap();
        for record in reader.by_ref() {
            match record {
                Ok(r) => {
                    assert_eq!(r.offset(), next, "dense");
                    assert_eq!(r.value().unwrap(), value_of(next), "the record at {next} is what was written");
                    next += 1;
                }
                Err(e) => return (next, Some(e)),
            }
        }
    }
    (next, None)
}
