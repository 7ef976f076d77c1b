//! Suffix removal (`truncate_to`) and reset (`reset_at`), docs/DESIGN.md §9: what is left, what the
//! next append gets, and that both survive a clean and an unclean reopen.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Owned, copy_dir, file_names, read_all, small_config, value_of};
use rand::RngExt;
use strata_log::{Error, Log, LogConfig, Record};

fn append_values(log: &Log, from: u64, to: u64) {
    for offset in from..to {
        assert_eq!(log.append(&[Record::new(&value_of(offset))]).unwrap().base_offset, offset);
    }
}

fn assert_values(log: &Log, expected: impl Fn(u64) -> Vec<u8>) {
    let records = read_all(log, log.start_offset(), 1 << 16);
    assert_eq!(records.len() as u64, log.next_offset() - log.start_offset());
    for (i, (offset, record)) in records.iter().enumerate() {
        assert_eq!(*offset, log.start_offset() + i as u64);
        assert_eq!(record.value.as_deref(), Some(&expected(*offset)[..]), "offset {offset}");
    }
}

fn replaced(offset: u64) -> Vec<u8> {
    format!("replaced-{offset}").into_bytes()
}

/// Offsets below `cut` hold the original values, the rest the replacements.
fn original_then_replaced(cut: u64) -> impl Fn(u64) -> Vec<u8> {
    move |offset| if offset < cut { value_of(offset) } else { replaced(offset) }
}

#[test]
fn truncate_inside_the_active_segment_then_append() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    append_values(&log, 0, 50);
    assert_eq!(log.truncate_to(30).unwrap(), 30);
    assert_eq!((log.next_offset(), log.durable_offset(), log.visible_end()), (30, 30, 30));
    assert_eq!(log.read(30, 1 << 20).unwrap().count(), 0, "the new end");
    assert!(matches!(log.read(31, 1 << 20), Err(Error::OffsetOutOfRange { .. })));
    for offset in 30..40 {
        log.append(&[Record::new(&replaced(offset))]).unwrap();
    }
    assert_values(&log, original_then_replaced(30));
    assert_eq!(log.metrics().truncations, 1);
    log.close().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_values(&log, original_then_replaced(30));
}

#[test]
fn truncate_across_segments_removes_the_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { file_delete_delay_ms: 0, ..small_config() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    append_values(&log, 0, 400);
    let segments = log.segment_count();
    assert!(segments > 5, "{segments}");
    assert_eq!(log.truncate_to(123).unwrap(), 123);
    assert!(log.segment_count() < segments);
    append_values_replaced(&log, 123, 200);
    assert_values(&log, original_then_replaced(123));
    // The time and offset indexes of the cut segment still answer correctly.
    common::check_lookups(&log);
    log.close().unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    assert_values(&log, original_then_replaced(123));
    common::check_lookups(&log);
    assert!(!file_names(dir.path()).iter().any(|n| n.ends_with(".deleted")));
}

fn append_values_replaced(log: &Log, from: u64, to: u64) {
    for offset in from..to {
        assert_eq!(log.append(&[Record::new(&replaced(offset))]).unwrap().base_offset, offset);
    }
}

#[test]
fn truncate_to_a_segment_boundary_and_into_a_sealed_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 300);
    let bases = segment_bases(dir.path());
    let boundary = bases[3];
    assert_eq!(log.truncate_to(boundary).unwrap(), boundary);
    assert_eq!(log.next_offset(), boundary);
    // Into the middle of what was a sealed segment: it becomes the active one again.
    let inside = bases[1] + 3;
    assert_eq!(log.truncate_to(inside).unwrap(), inside);
    append_values_replaced(&log, inside, 250);
    assert_values(&log, original_then_replaced(inside));
    common::check_lookups(&log);
}

fn segment_bases(dir: &std::path::Path) -> Vec<u64> {
    file_names(dir).iter().filter_map(|n| n.strip_suffix(".log")).map(|b| b.parse().unwrap()).collect()
}

#[test]
fn truncating_inside_a_batch_removes_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 10);
    let batch: Vec<Owned> = (10..20).map(|o| Owned::value(value_of(o))).collect();
    Owned::append_all(&log, &batch).unwrap();
    append_values(&log, 20, 25);
    assert_eq!(log.truncate_to(15).unwrap(), 10, "the batch 10..20 goes whole");
    assert_eq!(log.next_offset(), 10);
    assert_values(&log, value_of);
}

#[test]
fn truncate_past_the_end_changes_nothing_and_below_the_start_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 100);
    assert_eq!(log.truncate_to(100).unwrap(), 100);
    assert_eq!(log.truncate_to(u64::MAX).unwrap(), 100);
    assert_eq!(log.metrics().truncations, 0);
    let start = log.delete_records_before(60).unwrap();
    assert!(matches!(log.truncate_to(start - 1), Err(Error::OffsetOutOfRange { .. })));
    // Down to the start empties the log without moving it.
    assert_eq!(log.truncate_to(start).unwrap(), start);
    assert_eq!((log.start_offset(), log.next_offset()), (start, start));
    append_values(&log, start, start + 5);
    assert_values(&log, value_of);
}

#[test]
fn truncation_survives_an_unclean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 4096, ..LogConfig::default() }).unwrap();
    append_values(&log, 0, 300);
    log.truncate_to(77).unwrap();
    append_values_replaced(&log, 77, 90);
    // A copy of the live directory is what a crash (not a power cut) would leave.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    let reopened = Log::open(crashed.path(), LogConfig::default()).unwrap();
    assert!(!reopened.recovery_report().clean_shutdown);
    assert_eq!(reopened.next_offset(), 90);
    assert_values(&reopened, original_then_replaced(77));
}

#[test]
fn reset_at_past_the_end_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 200);
    log.reset_at(1000).unwrap();
    assert_eq!((log.start_offset(), log.next_offset(), log.segment_count()), (1000, 1000, 1));
    assert!(matches!(log.read(5, 100), Err(Error::OffsetOutOfRange { .. })));
    append_values(&log, 1000, 1010);
    assert_values(&log, value_of);

    let crashed = tempfile::tempdir().unwrap();
    copy_dir(dir.path(), crashed.path());
    let reopened = Log::open(crashed.path(), small_config()).unwrap();
    assert_eq!((reopened.start_offset(), reopened.next_offset()), (1000, 1010));
    assert_values(&reopened, value_of);
    drop(reopened);

    log.close().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (1000, 1010));
    assert_values(&log, value_of);
}

#[test]
fn reset_at_a_lower_offset_and_at_the_same_base() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { file_delete_delay_ms: 0, ..small_config() }).unwrap();
    append_values(&log, 0, 100);
    log.reset_at(0).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (0, 0));
    append_values_replaced(&log, 0, 20);
    log.reset_at(0).unwrap();
    append_values_replaced(&log, 0, 5);
    assert_values(&log, replaced);
    assert_eq!(log.metrics().truncations, 2);
    log.close().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_values(&log, replaced);
}

#[test]
fn a_tailing_reader_waiting_past_the_cut_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 20);
    // The waiter must be blocked before the truncation for the error to be certain; a waiter that
    // starts late waits on the new log and succeeds. Try with longer pauses until one is told.
    let mut told = 0;
    for attempt in 0..8u64 {
        let next = log.next_offset();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| log.wait_visible(next + 5, Duration::from_secs(30)));
            std::thread::sleep(Duration::from_millis(20 << attempt.min(4)));
            log.truncate_to(next - 10).unwrap();
            append_values_replaced(&log, next - 10, next + 10);
            match waiter.join().unwrap() {
                Err(Error::Truncated { next_offset }) => {
                    assert!((next - 10..=next + 10).contains(&next_offset), "{next_offset}");
                    told += 1;
                }
                Ok(()) => {}
                other => panic!("{other:?}"),
            }
        });
        if told > 0 {
            break;
        }
    }
    assert!(told > 0, "no waiter was told of the truncation");
}

#[test]
fn a_reader_past_the_cut_gets_truncated_and_never_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    append_values(&log, 0, 300);
    // The first chunk ends with the first (sealed) segment; later ones are fetched after the cut.
    let mut reader = log.read(0, 1 << 20).unwrap();
    let first = reader.next().unwrap().unwrap();
    assert_eq!(first.offset(), 0);
    log.truncate_to(100).unwrap();
    append_values_replaced(&log, 100, 300);
    let mut last = 0;
    let mut told = false;
    for record in reader {
        match record {
            Ok(record) => {
                assert_eq!(record.value(), Some(&value_of(record.offset())[..]), "never a replaced record");
                last = record.offset();
            }
            Err(Error::Truncated { next_offset }) => {
                assert_eq!(next_offset, 300);
                told = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(told, "the reader ended without being told (last {last})");
    assert!(last < 100, "records past the cut were returned: {last}");
}

/// Readers racing repeated truncations: every record returned is a whole record at its own offset,
/// written before the reader started (never one appended after a truncation the reader did not
/// see), and the only errors are `Truncated` and `OffsetOutOfRange`.
#[test]
fn readers_racing_truncations_never_see_changed_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { file_delete_delay_ms: 0, ..small_config() }).unwrap();
    let generation_value = |generation: u64, offset: u64| format!("{generation}:{offset}:{}", "x".repeat(40));
    for offset in 0..300 {
        log.append(&[Record::new(generation_value(0, offset).as_bytes())]).unwrap();
    }
    let mut rng = common::rng("readers_racing_truncations_never_see_changed_bytes");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut records, mut told) = (0u64, 0u64);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let Ok(reader) = log.read(0, 1 << 13) else { continue };
                        let seen_truncations = log.metrics().truncations;
                        for record in reader {
                            match record {
                                Ok(record) => {
                                    let value = String::from_utf8(record.value().unwrap().to_vec()).unwrap();
                                    let mut parts = value.split(':');
                                    let generation: u64 = parts.next().unwrap().parse().unwrap();
                                    let offset: u64 = parts.next().unwrap().parse().unwrap();
                                    assert_eq!(offset, record.offset());
                                    assert!(generation <= seen_truncations, "a record from a later truncation");
                                    records += 1;
                                }
                                Err(Error::Truncated { .. }) => {
                                    told += 1;
                                    break;
                                }
                                Err(Error::OffsetOutOfRange { .. }) => break,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                    (records, told)
                })
            })
            .collect();
        for generation in 1..=40u64 {
            let cut = rng.random_range(0..log.next_offset());
            let next = log.truncate_to(cut).unwrap();
            for offset in next..300 {
                log.append(&[Record::new(generation_value(generation, offset).as_bytes())]).unwrap();
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            let (records, told) = reader.join().unwrap();
            assert!(records > 0);
            eprintln!("reader: {records} records, told of a truncation {told} times");
        }
    });
}

/// The log start offset inside a batch: truncating there removes that batch whole, and the log
/// restarts empty at the start offset rather than ending below it.
#[test]
fn truncating_inside_the_batch_holding_the_start_restarts_at_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    let batch: Vec<Owned> = (0..10).map(|o| Owned::value(value_of(o))).collect();
    Owned::append_all(&log, &batch).unwrap(); // 0..10
    Owned::append_all(&log, &batch).unwrap(); // 10..20
    assert_eq!(log.delete_records_before(15).unwrap(), 15);
    assert_eq!(log.truncate_to(17).unwrap(), 15);
    assert_eq!((log.start_offset(), log.next_offset()), (15, 15));
    let info = log.append(&[Record::new(b"after")]).unwrap();
    assert_eq!(info.base_offset, 15);
    assert_eq!(log.read(15, 1 << 10).unwrap().next().unwrap().unwrap().value(), Some(&b"after"[..]));
    log.close().unwrap();
    let log = Log::open(dir.path(), small_config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (15, 16));
}

/// A batch stored with `append_nowait` and removed by a truncation before anyone waits for it:
/// `wait_batch_durable` says so (its epoch is the one the batch was stored under), and
/// `wait_durable` for an offset not stored yet times out instead of spinning on sync rounds.
#[test]
fn waiting_for_a_batch_a_truncation_removed_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    for _ in 0..100 {
        log.append(&[Record::new(b"x")]).unwrap();
    }
    let info = log.append_nowait(&[Record::new(b"mine")]).unwrap();
    assert_eq!(info.base_offset, 100);
    assert_eq!(log.truncate_to(50).unwrap(), 50);
    for _ in 0..60 {
        log.append(&[Record::new(b"someone else")]).unwrap();
    }
    assert!(matches!(log.wait_batch_durable(&info, Duration::from_secs(5)), Err(Error::Truncated { .. })));
    let fsyncs = log.metrics().fsyncs;
    let started = std::time::Instant::now();
    assert!(matches!(log.wait_durable(1000, Duration::from_millis(200)), Err(Error::Timeout { .. })));
    assert!(started.elapsed() < Duration::from_secs(5), "the timeout was honoured");
    assert!(log.metrics().fsyncs - fsyncs < 5, "no sync rounds for an offset not yet stored");
}
