//! A log of many tiny sealed segments read at random from 4 threads under a map budget of a few
//! dozen maps: the log's files never hold more maps (counted in /proc/self/maps) than the budget's
//! cap plus the active segment's three, every read returns the right record, and reclaim both in
//! the background and in the readers happened.
//!
//! Segments: 1,000 by default, `STRATA_BUDGET_SEGMENTS` for more (10,000, the scale the map
//! budget was made for, takes longer); reads run `STRATA_BUDGET_SECS` seconds (default 1).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::maps_under;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{FlushPolicy, Log, LogConfig, MapBudget, MapBudgetConfig, Record};

const MAX_MAPS: u64 = 40;
/// The active segment's `.log`, `.index` and `.timeindex` are mapped outside the budget.
const ACTIVE_MAPS: usize = 3;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(budget: Option<MapBudget>) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_bytes: 1024,
        index_interval_bytes: 512,
        flush_policy: FlushPolicy::Never,
        map_budget: budget,
        ..LogConfig::default()
    }
}

#[test]
fn many_sealed_segments_stay_within_the_map_budget_under_random_reads() {
    let segments = env("STRATA_BUDGET_SEGMENTS", 1_000);
    let seconds = env("STRATA_BUDGET_SECS", 1);
    let seed = env("STRATA_SEED", rand::random::<u64>());
    println!("seed {seed} (STRATA_SEED replays), {segments} segments, {seconds} s");
    let dir = tempfile::tempdir().unwrap();
    // 4 KiB segments of 100-byte records: about 30 records each.
    let records = {
        let log = Log::open(dir.path(), config(None)).unwrap();
        let mut next = 0u64;
        while (log.segment_count() as u64) < segments {
            let values: Vec<String> = (next..next + 10).map(|o| format!("{o:0>100}")).collect();
            let batch: Vec<Record> = values.iter().map(|v| Record::new(v.as_bytes())).collect();
            next = log.append(&batch).unwrap().last_offset + 1;
        }
        log.close().unwrap();
        next
    };

    let budget = MapBudget::new(MapBudgetConfig {
        max_maps: MAX_MAPS,
        max_mapped_bytes: 1 << 30,
        max_open_files: 16,
        ..MapBudgetConfig::default()
    })
    .unwrap();
    let log = Log::open(dir.path(), config(Some(budget.clone()))).unwrap();
    let stop = AtomicBool::new(false);
    let (reads, most_maps) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (log, stop, reads) = (&log, &stop, &reads);
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ thread);
                while !stop.load(Ordering::Relaxed) {
                    let offset = rng.random_range(0..records);
                    let record = log.read(offset, 1).unwrap().next().unwrap().unwrap();
                    assert_eq!(record.offset(), offset);
                    assert_eq!(record.value().unwrap(), format!("{offset:0>100}").as_bytes(), "seed {seed}");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < deadline {
            let maps = maps_under(dir.path());
            most_maps.fetch_max(maps as u64, Ordering::Relaxed);
            assert!(maps <= MAX_MAPS as usize + ACTIVE_MAPS, "seed {seed}: {maps} maps of the log's files");
            std::thread::sleep(Duration::from_millis(2));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let metrics = budget.metrics();
    println!(
        "{} reads, at most {} maps seen; {metrics:?}",
        reads.load(Ordering::Relaxed),
        most_maps.load(Ordering::Relaxed)
    );
    assert!(metrics.maps <= MAX_MAPS);
    assert!(metrics.reclaimed_background + metrics.reclaimed_direct > 0, "reclaim ran: {metrics:?}");
    assert!(metrics.background_wakeups > 0, "background reclaim ran: {metrics:?}");
    assert_eq!(metrics.open_files, ACTIVE_MAPS as u64, "the active segment's three files hold descriptors");
    log.close().unwrap();
    let metrics = budget.metrics();
    assert_eq!(
        (metrics.maps, metrics.mapped_bytes, metrics.open_files),
        (0, 0, 0),
        "everything given back: {metrics:?}"
    );
}

#[test]
fn the_open_file_budget_refuses_a_log_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let budget = MapBudget::new(MapBudgetConfig { max_open_files: 4, ..MapBudgetConfig::default() }).unwrap();
    let first = Log::open(dir.path().join("a"), config(Some(budget.clone()))).unwrap();
    let second = Log::open(dir.path().join("b"), config(Some(budget.clone())));
    assert!(matches!(second, Err(strata_log::Error::OpenFileBudget { max_open_files: 4, .. })), "{second:?}");
    drop(first);
    assert_eq!(budget.metrics().open_files, 0);
    Log::open(dir.path().join("b"), config(Some(budget))).unwrap();
}

/// A roll refused by the open-file budget at the new segment's third file (`.timeindex`) left that
/// file behind, so once descriptors were free again every later roll failed on its name
/// (`create_new`: already exists) instead of working.
#[test]
fn a_roll_refused_by_the_open_file_budget_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    // Two logs hold 3 descriptors each; a roll of one needs 3 more but only 2 are left.
    let budget = MapBudget::new(MapBudgetConfig { max_open_files: 8, ..MapBudgetConfig::default() }).unwrap();
    let config = || LogConfig { preallocate: false, ..config(Some(budget.clone())) };
    let log = Log::open(dir.path().join("a"), config()).unwrap();
    let other = Log::open(dir.path().join("b"), config()).unwrap();
    let value = [7u8; 100];
    let refused = loop {
        match log.append(&[Record::new(&value)]) {
            Ok(_) => assert_eq!(log.segment_count(), 1, "the roll must be refused"),
            Err(error) => break error,
        }
    };
    assert!(matches!(refused, strata_log::Error::OpenFileBudget { max_open_files: 8, .. }), "{refused:?}");
    assert_eq!(budget.metrics().open_files, 6, "the refused roll gave its descriptors back");
    other.close().unwrap();
    log.append(&[Record::new(&value)]).expect("descriptors are free again: the roll works");
    assert_eq!(log.segment_count(), 2);
    log.close().unwrap();
    assert_eq!(budget.metrics().open_files, 0);
}

/// A segment removed shortly before the log closed (its delayed unlink still queued, so dropped
/// by the close) was never retired: the skip map's deferred reclamation kept it, and its map stayed
/// made and counted by the budget after the log was closed.
#[test]
fn segments_removed_just_before_close_give_their_maps_back() {
    let dir = tempfile::tempdir().unwrap();
    let budget = MapBudget::new(MapBudgetConfig::default()).unwrap();
    // The default delay (60 s) keeps the removed segments' unlinks queued until the close.
    let log = Log::open(dir.path(), config(Some(budget.clone()))).unwrap();
    let value = [7u8; 100];
    while log.segment_count() < 4 {
        log.append(&[Record::new(&value)]).unwrap();
    }
    log.flush().unwrap();
    for offset in log.start_offset()..log.next_offset() {
        log.read(offset, 1).unwrap().next().unwrap().unwrap();
    }
    assert!(budget.metrics().maps > 0, "sealed segments were read: {:?}", budget.metrics());
    log.delete_records_before(log.next_offset() - 1).unwrap();
    log.close().unwrap();
    let metrics = budget.metrics();
    assert_eq!((metrics.maps, metrics.mapped_bytes, metrics.open_files), (0, 0, 0), "{metrics:?}");
    assert_eq!(maps_under(dir.path()), 0);
}

#[test]
fn a_truncation_or_reset_the_open_file_budget_cannot_take_is_refused_before_anything_changes() {
    let dir = tempfile::tempdir().unwrap();
    // Room for two active segments: a roll (sealed by a flush before the next) fits.
    let budget = MapBudget::new(MapBudgetConfig { max_open_files: 6, ..MapBudgetConfig::default() }).unwrap();
    let config = || LogConfig { preallocate: false, ..config(Some(budget.clone())) };
    let log = Log::open(dir.path().join("a"), config()).unwrap();
    while log.segment_count() < 3 {
        log.append(&[Record::new(&[7u8; 100])]).unwrap();
        log.flush().unwrap();
    }
    let next = log.next_offset();
    // Another log takes the rest of the budget.
    let other = Log::open(dir.path().join("b"), config()).unwrap();
    // Into a sealed segment: the active one is removed (its files stay open until their delayed
    // unlink) and the cut one reopened as active — three more descriptors than are left.
    let refused = log.truncate_to(5);
    assert!(matches!(refused, Err(strata_log::Error::OpenFileBudget { .. })), "{refused:?}");
    let refused = log.reset_at(1_000);
    assert!(matches!(refused, Err(strata_log::Error::OpenFileBudget { .. })), "{refused:?}");
    assert_eq!(log.next_offset(), next, "nothing changed");
    let info = log.append(&[Record::new(b"still appendable")]).unwrap();
    assert_eq!(info.base_offset, next, "and not poisoned");
    drop(other);
    assert_eq!(log.truncate_to(5).unwrap(), 5, "with room again it goes through");
    log.close().unwrap();
    assert_eq!(budget.metrics().open_files, 0);
}
