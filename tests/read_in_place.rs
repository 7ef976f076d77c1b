//! `Log::read_batches` and `Cursor::read_batches`: the in-place read returns exactly what `Log::read`
//! returns (records, bounds, next offset) on random logs — several segments, compaction gaps, a
//! prefix deletion, `pread` files, reads starting inside batches; never a record of a damaged
//! batch; a visitor that breaks; and a visitor holding a segment does not hold up appends, rolls
//! or durable appends (sealing does not wait for it), while a truncation of that segment does.
#![allow(clippy::unwrap_used)]

mod common;

use std::ops::ControlFlow;
use std::sync::{Arc, Barrier, mpsc};
use std::time::Duration;

use common::Owned;
use rand::{Rng, RngExt};
use strata_log::{CleanupPolicy, Error, FlushPolicy, Header, Log, LogConfig, ReadPath, Record};

/// Every record from `from` on through `Log::read_batches` in calls of `max_bytes`, with offsets,
/// encoded sizes and the next offset after each call.
fn read_in_place(log: &Log, from: u64, max_bytes: usize) -> (Vec<(u64, Owned, usize)>, Vec<u64>) {
    let (mut out, mut nexts, mut next) = (Vec::new(), Vec::new(), from);
    while next < log.visible_end() {
        next = log
            .read_batches(next, max_bytes, |batch| {
                assert!(batch.records().len() > 0, "a batch without records of the read: {batch:?}");
                for record in batch.records() {
                    let owned = Owned {
                        key: record.key().map(<[u8]>::to_vec),
                        value: record.value().map(<[u8]>::to_vec),
                        headers: record.headers().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec))).collect(),
                    };
                    out.push((record.offset(), owned, record.encoded_len()));
                }
                ControlFlow::Continue(())
            })
            .unwrap();
        nexts.push(next);
    }
    (out, nexts)
}

/// The same through `Log::read`.
fn read_copied(log: &Log, from: u64, max_bytes: usize) -> (Vec<(u64, Owned, usize)>, Vec<u64>) {
    let (mut out, mut nexts, mut next) = (Vec::new(), Vec::new(), from);
    while next < log.visible_end() {
        let mut reader = log.read(next, max_bytes).unwrap();
        for record in reader.by_ref() {
            let record = record.unwrap();
            out.push((record.offset(), Owned::of(&record), record.encoded_len()));
        }
        next = reader.next_offset();
        nexts.push(next);
    }
    (out, nexts)
}

fn random_record(rng: &mut impl Rng, i: usize) -> Owned {
    let value = (rng.random_range(0..10) > 0).then(|| vec![i as u8; rng.random_range(0..300)]);
    let key = rng.random_bool(0.5).then(|| format!("k{}", rng.random_range(0..20)).into_bytes());
    let headers = (0..rng.random_range(0..3)).map(|h| (format!("h{h}"), Some(vec![h as u8; 3]))).collect();
    // Tombstones need a key.
    let key = if value.is_none() { Some(key.unwrap_or_else(|| b"t".to_vec())) } else { key };
    Owned { key, value, headers }
}

#[test]
fn in_place_reads_return_what_copying_reads_return() {
    let mut rng = common::rng("in_place_reads_return_what_copying_reads_return");
    for read_path in [ReadPath::Mmap, ReadPath::Pread] {
        for compact in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let config = LogConfig {
                read_path,
                cleanup_policy: if compact { CleanupPolicy::Compact } else { CleanupPolicy::Delete },
                ..common::small_config()
            };
            let log = Log::open(dir.path(), config).unwrap();
            for i in 0..150 {
                let batch: Vec<Owned> = (0..rng.random_range(1..8)).map(|_| random_record(&mut rng, i)).collect();
                Owned::append_all(&log, &batch).unwrap();
            }
            if compact {
                log.compact().unwrap();
            } else {
                log.delete_records_before(37).unwrap();
            }
            assert!(log.segment_count() > 3, "several segments");
            for _ in 0..30 {
                let from = rng.random_range(log.start_offset()..=log.next_offset());
                let max_bytes = [1, 100, 700, 5000, 1 << 20][rng.random_range(0..5)];
                let in_place = read_in_place(&log, from, max_bytes);
                let copied = read_copied(&log, from, max_bytes);
                assert_eq!(in_place.0, copied.0, "{read_path:?} compact {compact} from {from} max {max_bytes}");
                assert_eq!(in_place.1, copied.1, "next offsets, from {from} max {max_bytes}");
            }
        }
    }
}

#[test]
fn a_batch_ref_shows_the_batch_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }).unwrap();
    let headers = [Header { key: "h", value: Some(b"v") }];
    log.append(&[Record::new(b"a"), Record::new(b"b").with_headers(&headers)]).unwrap();
    let now = log.config().clock.now_ms();
    log.append(&[Record::new(b"c").with_timestamp(now - 5).with_key(b"k")]).unwrap();
    let copies: Vec<_> = log.read(0, 1 << 20).unwrap().batches().map(Result::unwrap).collect();
    let mut seen = Vec::new();
    let next = log
        .read_batches(1, 1 << 20, |batch| {
            // (A visitor must not call into the log: the copies were read before.)
            let copy = copies.iter().find(|c| c.base_offset() == batch.base_offset()).unwrap();
            assert_eq!(batch.as_bytes().len() as u64, copy.encoded_len());
            seen.push((
                batch.base_offset(),
                batch.last_offset(),
                batch.record_count(),
                batch.is_create_time(),
                batch.records().map(|r| r.offset()).collect::<Vec<_>>(),
            ));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(next, 3);
    // The read starts inside the first batch: its header says 2 records, the read returns 1.
    assert_eq!(seen, [(0, 1, 2, false, vec![1]), (2, 2, 1, true, vec![2])]);
    // The stored bytes are a batch `append_batch` takes as they are.
    let mut raw = Vec::new();
    log.read_batches(0, 1, |batch| {
        raw = batch.as_bytes().to_vec();
        ControlFlow::Continue(())
    })
    .unwrap();
    let info = log.append_batch(&raw).unwrap();
    let copied: Vec<_> =
        log.records(info.base_offset..).unwrap().map(|r| r.unwrap().value().unwrap().to_vec()).collect();
    assert_eq!(copied, [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn a_visitor_that_breaks_ends_the_read_after_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }).unwrap();
    for i in 0..10u8 {
        log.append(&[Record::new(&[i]), Record::new(&[i])]).unwrap();
    }
    let mut visits = 0;
    let next = log
        .read_batches(3, 1 << 20, |_| {
            visits += 1;
            if visits == 2 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })
        .unwrap();
    assert_eq!((visits, next), (2, 6));
    // At the visible end: nothing is visited and the offset stays; out of range is an error.
    assert_eq!(log.read_batches(20, 1 << 20, |_| unreachable!("nothing to visit")).unwrap(), 20);
    assert!(matches!(log.read_batches(21, 1, |_| ControlFlow::Continue(())), Err(Error::OffsetOutOfRange { .. })));
}

#[test]
fn no_record_of_a_damaged_batch_is_visited() {
    let dir = tempfile::tempdir().unwrap();
    // The first segment is sealed (a clean open does not scan it) and holds the damaged batch.
    let config = LogConfig { segment_bytes: 1000, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    let infos: Vec<_> =
        (0..10u8).map(|i| log.append(&[Record::new(&[i; 50]), Record::new(&[i; 50])]).unwrap()).collect();
    assert_eq!(infos[5].base_offset, 10);
    let batch_len = log.read(0, 1).unwrap().batches().next().unwrap().unwrap().encoded_len() as usize;
    log.close().unwrap();
    // Flip a byte inside the third batch's second record.
    let path = dir.path().join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(common::file_names(dir.path()).iter().filter(|n| n.ends_with(".log")).count(), 2);
    bytes[2 * batch_len + batch_len - 10] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(infos[2].base_offset, 4);

    let log = common::open_unlocked(dir.path(), config).unwrap();
    let mut offsets = Vec::new();
    let mut visit = |batch: strata_log::BatchRef<'_>| {
        offsets.extend(batch.records().map(|r| r.offset()));
        ControlFlow::Continue(())
    };
    // The batches before the damage, nothing of it; the damage is the next call's.
    assert_eq!(log.read_batches(0, 1 << 20, &mut visit).unwrap(), 4);
    let read = log.read_batches(4, 1 << 20, &mut visit);
    assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
    assert_eq!(offsets, [0, 1, 2, 3]);
    // A cursor returns the good batches, then the damage, and stays before it.
    let mut cursor = log.cursor(0).unwrap();
    assert_eq!(cursor.read_batches(1 << 20, |_| ControlFlow::Continue(())).unwrap(), 2);
    assert_eq!(cursor.position(), 4);
    assert!(matches!(cursor.read_batches(1 << 20, |_| ControlFlow::Continue(())), Err(Error::Corrupt { .. })));
    assert_eq!(cursor.position(), 4);
}

#[test]
fn a_cursor_reads_in_place_what_next_batch_returns() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), common::small_config()).unwrap();
    for i in 0..200u32 {
        log.append(&[Record::new(&i.to_be_bytes()), Record::new(b"x")]).unwrap();
    }
    let (mut in_place, mut copied) = (log.cursor(13).unwrap(), log.cursor(13).unwrap());
    loop {
        let mut a = Vec::new();
        let visited = in_place
            .read_batches(3000, |batch| {
                a.push(batch.records().map(|r| (r.offset(), r.value().unwrap().to_vec())).collect::<Vec<_>>());
                ControlFlow::Continue(())
            })
            .unwrap();
        let b: Vec<Vec<_>> = copied
            .next_batch(3000)
            .unwrap()
            .iter()
            .map(|batch| batch.records().iter().map(|r| (r.offset(), r.value().unwrap().to_vec())).collect())
            .collect();
        assert_eq!((visited, &a), (b.len(), &b));
        assert_eq!(in_place.position(), copied.position());
        if visited == 0 {
            break;
        }
    }
    assert_eq!(in_place.position(), 400);
    let state = log.cursor(0).unwrap();
    log.close().unwrap();
    let mut state = state;
    assert!(matches!(state.read_batches(1 << 20, |_| ControlFlow::Continue(())), Err(Error::Closed)));
}

/// A visitor holding the active segment while other threads append, roll it and wait for
/// durability: sealing the segment it reads must not wait for it.
#[test]
fn a_visitor_holding_a_segment_does_not_hold_up_rolls_or_durable_appends() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 4096, flush_policy: FlushPolicy::Always, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    log.append(&[Record::new(&[1; 100])]).unwrap();
    let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let reader = {
        let (log, entered, release) = (Arc::clone(&log), Arc::clone(&entered), Arc::clone(&release));
        std::thread::spawn(move || {
            let mut value = Vec::new();
            log.read_batches(0, 1 << 20, |batch| {
                entered.wait();
                release.wait();
                value = batch.records().next().unwrap().value().unwrap().to_vec();
                ControlFlow::Break(())
            })
            .unwrap();
            value
        })
    };
    entered.wait();
    // Durable appends that roll the segment the visitor holds, several times over.
    let (done, finished) = mpsc::channel();
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for i in 0..200u32 {
                log.append(&[Record::new(&[i as u8; 100])]).unwrap();
            }
            done.send(()).unwrap();
        })
    };
    let finished = finished.recv_timeout(Duration::from_secs(30));
    release.wait();
    assert!(finished.is_ok(), "durable appends waited for a visitor");
    writer.join().unwrap();
    assert!(log.segment_count() > 3);
    assert_eq!(reader.join().unwrap(), [1; 100], "the visitor's bytes stayed as they were");
    // The sealed segment reads as it should once the visitor is gone.
    assert_eq!(common::read_all(&log, 0, 1 << 20).len(), 201);
}

/// A truncation of the segment a visitor holds waits for it (`truncate_wait_ms`, then
/// `Error::Busy`): the bytes under a visitor never change.
#[test]
fn a_truncation_waits_for_a_visitor_of_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { flush_policy: FlushPolicy::Never, truncate_wait_ms: 100, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    for i in 0..10u8 {
        log.append(&[Record::new(&[i; 10])]).unwrap();
    }
    let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let reader = {
        let (log, entered, release) = (Arc::clone(&log), Arc::clone(&entered), Arc::clone(&release));
        std::thread::spawn(move || {
            let mut values = Vec::new();
            log.read_batches(0, 1 << 20, |batch| {
                if values.is_empty() {
                    entered.wait();
                    release.wait();
                }
                values.extend(batch.records().map(|r| r.value().unwrap()[0]));
                ControlFlow::Continue(())
            })
            .map(|next| (values, next))
        })
    };
    entered.wait();
    assert!(matches!(log.truncate_to(5), Err(Error::Busy { .. })), "the cut waited for the visitor, then gave up");
    release.wait();
    let (values, next) = reader.join().unwrap().unwrap();
    assert_eq!((values, next), ((0..10).collect::<Vec<u8>>(), 10));
    // Without a visitor the cut goes through, and a read sees only what is left.
    assert_eq!(log.truncate_to(5).unwrap(), 5);
    assert_eq!(read_in_place(&log, 0, 1 << 20).0.len(), 5);
}

/// Regression (review): a read whose segment saw more truncations than the retry bound (each
/// above the read's upper bound, a Raft-style append-then-cut of a conflict) failed with
/// `Error::Unsettled` although it kept moving.
#[test]
fn truncations_above_the_read_do_not_use_up_its_retries() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 64 << 10, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    for i in 0..80u32 {
        log.append(&[Record::new(&[i as u8; 1000])]).unwrap();
    }
    assert!(log.segment_count() >= 2);
    let end = log.visible_end();
    // A writer that appends a record past the read's bound and cuts it away, once per batch read
    // (on another thread: a visitor must not call into the log).
    let (ask, asked) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel::<()>();
    let writer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for () in asked {
                let info = log.append(&[Record::new(b"conflict")]).unwrap();
                log.truncate_to(info.base_offset).unwrap();
                done.send(()).unwrap();
            }
        })
    };
    let mut records = 0;
    let next = log.read_batches(0, usize::MAX, |batch| {
        records += batch.records().len() as u64;
        if records <= 40 {
            ask.send(()).unwrap();
            finished.recv().unwrap();
        }
        ControlFlow::Continue(())
    });
    drop(ask);
    writer.join().unwrap();
    assert_eq!((next.unwrap(), records), (end, end));
}

fn descriptors_of(path: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|target| target == path)
        .count()
}

/// Regression (review): a visitor that panicked while its segment was being sealed left the seal
/// pending for good (the descriptor and the writable map kept until the segment was deleted).
#[test]
fn a_panicking_visitor_does_not_leave_its_segment_half_sealed() {
    for panic in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes: 4096, flush_policy: FlushPolicy::Always, ..LogConfig::default() };
        let log = Arc::new(Log::open(dir.path(), config).unwrap());
        log.append(&[Record::new(&[1; 100])]).unwrap();
        let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let reader = {
            let (log, entered, release) = (Arc::clone(&log), Arc::clone(&entered), Arc::clone(&release));
            std::thread::spawn(move || {
                let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    log.read_batches(0, 1 << 20, |_| {
                        entered.wait();
                        release.wait();
                        assert!(!panic, "a visitor's bug");
                        ControlFlow::Break(())
                    })
                }));
                assert_eq!(read.is_err(), panic);
            })
        };
        entered.wait();
        for i in 0..100u32 {
            log.append(&[Record::new(&[i as u8; 100])]).unwrap();
        }
        release.wait();
        reader.join().unwrap();
        let first = dir.path().join(format!("{:020}.log", 0)).canonicalize().unwrap();
        assert_eq!(descriptors_of(&first), 0, "panic {panic}: a sealed segment keeps no descriptor");
    }
}
