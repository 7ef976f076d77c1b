//! The queue's unit tests: appends and reads across rolls, reopens, recovery's cuts, damaged and
//! foreign files, retention, truncation, flushes, a full disk and a failed fdatasync (failpoints),
//! readers racing the writer, and a property test against a `Vec` model. The format's own tests
//! are in `layout.rs`.

use std::ops::Range;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;

use super::Appended;
use super::layout::{ENTRY_LEN, file_name};
use super::recover::QueueRecovery;
use super::{ConsumeQueue, Entry, FlushedUpTo};
use crate::config::ReadPath;
use crate::error::{Corruption, Error, Result};
use crate::format::CQ_ENTRY_LEN;
use crate::storage;

const BOTH: [ReadPath; 2] = [ReadPath::Mmap, ReadPath::Pread];
const TOPIC: &str = "orders";
const QUEUE: u32 = 3;

/// The entry every test stores at queue offset `q`: log offsets 5, 15, 25, ...
fn entry(q: u64) -> Entry {
    Entry { log_offset: q * 10 + 5, size: 100 + q as u32, tag_hash: q % 3 }
}

fn open(root: &Path, per_file: u64) -> ConsumeQueue {
    open_with(root, per_file, ReadPath::Mmap)
}

fn open_with(root: &Path, per_file: u64, reads: ReadPath) -> ConsumeQueue {
    ConsumeQueue::open(root, TOPIC, QUEUE, per_file, reads).expect("open")
}

fn append(queue: &ConsumeQueue, q: u64, e: Entry) -> Result<Appended> {
    queue.append(q, e.log_offset, e.size, e.tag_hash)
}

fn fill(queue: &ConsumeQueue, range: Range<u64>) {
    for q in range {
        assert_eq!(append(queue, q, entry(q)).expect("append"), Appended::Stored, "entry {q} appended");
    }
}

fn queue_dir(root: &Path) -> PathBuf {
    root.join(TOPIC).join(QUEUE.to_string())
}

fn cq_path(root: &Path, first: u64) -> PathBuf {
    queue_dir(root).join(file_name(first))
}

/// The queue files' first offsets, and every other name, sorted.
fn names(root: &Path) -> Vec<String> {
    let mut names = storage::list_dir(&queue_dir(root)).expect("list");
    names.sort();
    names
}

fn cq_names(firsts: &[u64]) -> Vec<String> {
    firsts.iter().map(|&first| file_name(first)).collect()
}

/// Checks the queue holds exactly `entry(q)` for `q` in `range`, by `get` and by `entries`.
fn assert_holds(queue: &ConsumeQueue, range: Range<u64>) {
    assert_eq!((queue.min_offset(), queue.max_offset()), (range.start, range.end), "bounds");
    for q in range.clone() {
        assert_eq!(queue.get(q).expect("get"), Some(entry(q)), "entry {q}");
    }
    assert_eq!(queue.get(range.end).expect("get"), None, "nothing at the end");
    let all = queue.entries(0, usize::MAX).expect("entries");
    assert_eq!(all, range.map(|q| (q, entry(q))).collect::<Vec<_>>());
}

fn encode(e: Entry) -> [u8; CQ_ENTRY_LEN] {
    e.encode()
}

/// Writes `bytes` over the slot of queue offset `q` in the file starting at `first`.
fn overwrite_slot(root: &Path, first: u64, q: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
    file.write_all_at(bytes, (q - first) * ENTRY_LEN).expect("write");
}

/// Writes `bytes` at byte `position` of the file starting at `first`.
fn overwrite_slot_bytes(root: &Path, first: u64, position: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
    file.write_all_at(bytes, position).expect("write");
}

fn file_bytes(root: &Path, first: u64) -> Vec<u8> {
    std::fs::read(cq_path(root, first)).expect("read")
}

fn set_len(root: &Path, first: u64, len: u64) {
    let file = std::fs::OpenOptions::new().write(true).open(cq_path(root, first)).expect("open");
    file.set_len(len).expect("set_len");
}

#[test]
fn appends_and_gets_across_file_rolls() {
    for reads in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open_with(dir.path(), 4, reads);
        assert_holds(&queue, 0..0);
        assert!(!queue_dir(dir.path()).exists(), "no directory before the first entry");
        fill(&queue, 0..10);
        assert_holds(&queue, 0..10);
        assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
        for first in [0, 4, 8] {
            assert_eq!(file_bytes(dir.path(), first).len(), 80, "created at full size");
        }
        let batch = |from, max| queue.entries(from, max).expect("entries");
        assert_eq!(batch(2, 5), (2..7).map(|q| (q, entry(q))).collect::<Vec<_>>(), "across a file boundary");
        assert_eq!(batch(8, 100), (8..10).map(|q| (q, entry(q))).collect::<Vec<_>>(), "stops at the end");
        assert!(batch(10, 5).is_empty() && batch(0, 0).is_empty() && batch(u64::MAX, 5).is_empty());
    }
}

#[test]
fn an_entry_not_beyond_the_last_is_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 0..3);
    for (q, log_offset) in [(3, entry(2).log_offset), (3, 0), (0, entry(0).log_offset), (9, 1)] {
        let skipped = Entry { log_offset, size: 1, tag_hash: 0 };
        assert_eq!(append(&queue, q, skipped).expect("append"), Appended::AlreadyHeld, "{q} at {log_offset}");
    }
    assert_holds(&queue, 0..3);
    for found in [2, 5] {
        let appended = append(&queue, found, Entry { log_offset: 1000, size: 1, tag_hash: 0 }).expect("append");
        assert_eq!(appended, Appended::Gap { expected: 3, found }, "nothing written");
    }
    assert_eq!(append(&queue, 3, entry(3)).expect("append"), Appended::Stored);
    assert_holds(&queue, 0..4);
}

#[test]
fn a_queue_starts_at_any_offset_and_keeps_it_across_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 1000..1002);
    assert_eq!(names(dir.path()), cq_names(&[1000]));
    assert_eq!(queue.get(999).expect("get"), None);
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 1000..1002);
    fill(&queue, 1002..1005);
    assert_eq!(names(dir.path()), cq_names(&[1000, 1004]));
}

/// A queue offset comes from the message's header: one near `u64::MAX` (a damaged record, or
/// a queue rebuilt from one) used to panic the dispatcher at the file's creation, and a read
/// of the entry at `u64::MAX - 1` overflowed while checking it.
#[test]
fn a_queue_offset_without_room_for_a_file_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    let error = append(&queue, u64::MAX - 2, entry(0)).expect_err("no room for a first file");
    assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
    assert_holds(&queue, 0..0);
    let start = u64::MAX - 4;
    for (i, q) in (start..u64::MAX).enumerate() {
        assert_eq!(append(&queue, q, entry(i as u64)).expect("append"), Appended::Stored);
    }
    let error = append(&queue, u64::MAX, entry(9)).expect_err("no room for the next file");
    assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
    assert_eq!((queue.min_offset(), queue.max_offset()), (start, u64::MAX));
    assert_eq!(queue.get(u64::MAX - 1).expect("get"), Some(entry(3)));
    assert_eq!(queue.entries(start, 10).expect("entries").len(), 4);
    assert_eq!(queue.queue_offset_for_log_offset(u64::MAX).expect("search"), u64::MAX);
    assert_eq!(queue.recover(start, u64::MAX).expect("recover").removed, 0);
    queue.truncate_to(u64::MAX - 1).expect("truncate");
    assert_eq!(queue.max_offset(), u64::MAX - 1);
}

#[test]
fn reopen_keeps_the_entries_and_the_last_log_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 0..6);
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..6);
    assert_eq!(
        append(&queue, 6, entry(5)).expect("append"),
        Appended::AlreadyHeld,
        "the last log offset survived the reopen"
    );
    fill(&queue, 6..8);
    drop(queue);
    // The active file is full: the next append rolls.
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..8);
    fill(&queue, 8..9);
    assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
}

#[test]
fn the_last_log_offset_is_found_in_the_sealed_file_when_the_active_one_is_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 0..8);
    queue.truncate_to(4).expect("truncate");
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..4);
    assert_eq!(append(&queue, 4, entry(3)).expect("append"), Appended::AlreadyHeld, "entry 3 is in the sealed file");
    fill(&queue, 4..5);
}

/// A known pitfall: an index that looked for its first zero entry mistook a legitimate 0 for
/// empty, and could not reopen after one record. Log offset 0 is data; a size never is 0.
#[test]
fn one_entry_at_log_offset_zero_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    let first = Entry { log_offset: 0, size: 1, tag_hash: 0 };
    assert_eq!(append(&queue, 0, first).expect("append"), Appended::Stored);
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_eq!((queue.max_offset(), queue.get(0).expect("get")), (1, Some(first)));
    assert_eq!(append(&queue, 1, first).expect("append"), Appended::AlreadyHeld, "not beyond the last");
    assert_eq!(queue.recover(0, 1).expect("recover").removed, 0);
}

#[test]
fn recovery_cuts_at_a_zero_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..10);
    overwrite_slot(dir.path(), 4, 5, &[0; CQ_ENTRY_LEN]);
    let queue = open(dir.path(), 4);
    assert_eq!(queue.max_offset(), 10, "sealed files are trusted until recovery");
    let read = queue.get(5);
    let unused = Corruption::QueueEntryUnused { queue_offset: 5 };
    assert!(matches!(&read, Err(Error::Corrupt { reason, position: 20, .. }) if *reason == unused), "{read:?}");
    let report = queue.recover(0, 1000).expect("recover");
    let expected = QueueRecovery { checked_from: 0, end: 5, removed: 5, reason: Some(unused), zeroed_tail: false };
    assert_eq!(report, expected);
    assert_holds(&queue, 0..5);
    assert_eq!(names(dir.path()), cq_names(&[0, 4]), "later files deleted");
    assert!(file_bytes(dir.path(), 4)[20..].iter().all(|&b| b == 0), "the rest of the cut file zeroed");
    fill(&queue, 5..10);
    drop(queue);
    assert_holds(&open(dir.path(), 4), 0..10);
}

#[test]
fn recovery_cuts_at_a_hole_in_the_active_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 8), 0..6);
    // A crash wrote the pages of entries 3..6 and not the one of entry 2.
    overwrite_slot(dir.path(), 0, 2, &[0; CQ_ENTRY_LEN]);
    let queue = open(dir.path(), 8);
    assert_eq!(queue.max_offset(), 6, "the open's binary search stepped over the hole");
    assert!(matches!(queue.get(2), Err(Error::Corrupt { .. })));
    let from = queue.queue_offset_for_log_offset(entry(2).log_offset).expect("search");
    assert_eq!(from, 2, "the search for the checkpoint's entry counts the hole as not below");
    let report = queue.recover(from, 1000).expect("recover");
    let reason = Corruption::QueueEntryUnused { queue_offset: 2 };
    assert_eq!((report.end, report.removed, report.reason), (2, 4, Some(reason)));
    assert!(file_bytes(dir.path(), 0)[40..].iter().all(|&b| b == 0));
    assert_holds(&queue, 0..2);
}

#[test]
fn recovery_cuts_at_a_log_offset_not_above_the_previous() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..10);
    overwrite_slot(dir.path(), 4, 6, &encode(entry(2)));
    let queue = open(dir.path(), 4);
    let report = queue.recover(0, 1000).expect("recover");
    let reason = Corruption::QueueLogOffsetNotIncreasing { queue_offset: 6, previous: 55, found: 25 };
    assert_eq!((report.end, report.removed, report.reason), (6, 4, Some(reason)));
    assert_holds(&queue, 0..6);
    assert_eq!(names(dir.path()), cq_names(&[0, 4]));
}

#[test]
fn recovery_cuts_at_an_entry_past_the_log_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..10);
    let queue = open(dir.path(), 4);
    let report = queue.recover(2, entry(7).log_offset).expect("recover");
    let reason = Corruption::QueueEntryPastLogEnd { queue_offset: 7, log_offset: 75, log_next: 75 };
    assert_eq!((report.checked_from, report.end, report.reason), (2, 7, Some(reason)));
    assert_holds(&queue, 0..7);
    fill(&queue, 7..10);
    assert_holds(&queue, 0..10);
}

/// A crash (power loss) writes a file's sectors independently, so an entry that straddles a
/// sector boundary can be torn: its head written, its tail (its tag hash, or its size and tag
/// hash) still zero. Recovery used to keep it (its log offset is fine), and the redispatch then
/// skipped the message as already queued: a tag filter missed it for good.
#[test]
fn recovery_drops_a_last_entry_torn_at_a_sector_boundary() {
    // Entry 25 spans bytes 500..520 (the tag hash past 512); entry 102 spans 2040..2060 (size
    // and tag hash past 2048).
    for (torn, lost_from) in [(25u64, 512u64), (102, 2048)] {
        let dir = tempfile::tempdir().expect("tempdir");
        fill(&open(dir.path(), 200), 0..torn + 5);
        let zeros = vec![0u8; (torn + 5) as usize * CQ_ENTRY_LEN - lost_from as usize];
        overwrite_slot_bytes(dir.path(), 0, lost_from, &zeros);
        let queue = open(dir.path(), 200);
        let report = queue.recover(torn - 3, 1 << 20).expect("recover");
        assert_eq!((report.end, report.removed), (torn, 1), "{report:?}");
        assert_holds(&queue, 0..torn);
        fill(&queue, torn..torn + 5);
        assert_holds(&queue, 0..torn + 5);
    }
    // Below the entries recovery checks (durable at the checkpoint), nothing is dropped.
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 200), 0..26);
    let queue = open(dir.path(), 200);
    assert_eq!(queue.recover(26, 1 << 20).expect("recover").removed, 0);
}

#[test]
fn an_entry_of_size_zero_is_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 8), 0..6);
    overwrite_slot(dir.path(), 0, 3, &encode(Entry { log_offset: entry(3).log_offset, size: 0, tag_hash: 0 }));
    let queue = open(dir.path(), 8);
    assert!(matches!(queue.get(3), Err(Error::Corrupt { position: 60, .. })), "{:?}", queue.get(3));
    let report = queue.recover(0, 1 << 20).expect("recover");
    assert_eq!((report.end, report.removed), (3, 3), "{report:?}");
    assert_holds(&queue, 0..3);
}

#[test]
fn recovery_trusts_the_entries_below_its_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..10);
    let queue = open(dir.path(), 4);
    let clean = queue.recover(0, 1000).expect("recover");
    assert_eq!(clean, QueueRecovery { checked_from: 0, end: 10, removed: 0, reason: None, zeroed_tail: false });
    overwrite_slot(dir.path(), 0, 1, &[0; CQ_ENTRY_LEN]);
    assert_eq!(queue.recover(4, 1000).expect("recover").removed, 0, "entry 1 is below the start");
    assert_eq!(queue.recover(50, 1000).expect("recover").checked_from, 10, "a start past the end checks nothing");
}

#[test]
fn recovery_zeroes_garbage_past_the_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 8), 0..3);
    // Entry 6 written and entries 3..6 not: pages a crash tore off.
    overwrite_slot(dir.path(), 0, 6, &encode(entry(6)));
    let queue = open(dir.path(), 8);
    assert_holds(&queue, 0..3);
    let report = queue.recover(0, 1000).expect("recover");
    assert_eq!(report, QueueRecovery { checked_from: 0, end: 3, removed: 0, reason: None, zeroed_tail: true });
    assert!(file_bytes(dir.path(), 0)[60..].iter().all(|&b| b == 0));
    drop(queue);
    let queue = open(dir.path(), 8);
    assert!(!queue.recover(0, 1000).expect("recover").zeroed_tail, "nothing left to zero");
    fill(&queue, 3..8);
    assert_holds(&queue, 0..8);
}

#[test]
fn names_that_are_not_queue_files_are_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..6);
    let others = ["00000000000000000004.cq.bak", "123.cq", "notes.txt"];
    for name in others {
        std::fs::write(queue_dir(dir.path()).join(name), b"x").expect("write");
    }
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..6);
    let mut expected = cq_names(&[0, 4]);
    expected.extend(others.map(str::to_owned));
    expected.sort();
    assert_eq!(names(dir.path()), expected);
}

#[test]
fn a_short_last_file_holds_the_whole_entries_it_has() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..6);
    // One whole entry and half of the next.
    set_len(dir.path(), 4, 30);
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..5);
    assert_eq!(queue.recover(0, 1000).expect("recover").removed, 0);
    // The file is full at one entry: the next append rolls and seals it, trimmed.
    fill(&queue, 5..7);
    assert_eq!(names(dir.path()), cq_names(&[0, 4, 5]));
    assert_eq!(file_bytes(dir.path(), 4).len(), 20);
    drop(queue);
    assert_holds(&open(dir.path(), 4), 0..7);
}

#[test]
fn files_after_a_gap_are_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..10);
    set_len(dir.path(), 0, 40);
    let queue = open(dir.path(), 4);
    assert_eq!(names(dir.path()), cq_names(&[0]), "file 4 no longer continues file 0");
    assert_holds(&queue, 0..2);
    fill(&queue, 2..7);
    assert_eq!(names(dir.path()), cq_names(&[0, 2, 6]));
    drop(queue);
    assert_holds(&open(dir.path(), 4), 0..7);
}

#[test]
fn an_empty_file_left_by_a_crash_at_its_creation_is_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&open(dir.path(), 4), 0..8);
    std::fs::write(cq_path(dir.path(), 8), b"").expect("write");
    let queue = open(dir.path(), 4);
    assert_eq!(names(dir.path()), cq_names(&[0, 4]));
    assert_holds(&queue, 0..8);
    fill(&queue, 8..9);
    assert_eq!(names(dir.path()), cq_names(&[0, 4, 8]));
}

#[test]
fn a_file_of_garbage_recovers_without_a_panic() {
    for seed in 1..40u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(queue_dir(dir.path())).expect("mkdir");
        let mut state = seed;
        // Small random fields, so entries increase, repeat, go back, pass the log's end or
        // are zero, in every order; then a partial entry.
        let mut garbage = Vec::new();
        for _ in 0..12 {
            let mut random = |n| next_random(&mut state) % n;
            let e = if random(5) == 0 {
                Entry { log_offset: 0, size: 0, tag_hash: 0 }
            } else {
                Entry { log_offset: random(50), size: random(3) as u32, tag_hash: random(2) }
            };
            garbage.extend(encode(e));
        }
        garbage.extend([7; 7]);
        std::fs::write(cq_path(dir.path(), 0), &garbage).expect("write");
        let queue = open(dir.path(), 4);
        let report = queue.recover(0, 40).expect("recover");
        let end = queue.max_offset();
        assert_eq!(report.end, end, "seed {seed}: {report:?}");
        let rest = &file_bytes(dir.path(), 0)[end as usize * CQ_ENTRY_LEN..12 * CQ_ENTRY_LEN];
        assert!(rest.iter().all(|&b| b == 0), "seed {seed}: every slot past the end zeroed");
        let kept = queue.entries(0, usize::MAX).expect("what recovery kept reads back");
        assert_eq!(kept.len() as u64, end, "seed {seed}");
        assert!(kept.iter().all(|(_, e)| e.log_offset < 40), "seed {seed}");
        let last = kept.last().map_or(0, |(_, e)| e.log_offset);
        assert_eq!(
            append(&queue, end, Entry { log_offset: last + 1, size: 1, tag_hash: 0 }).expect("append"),
            Appended::Stored
        );
        drop(queue);
        let queue = open(dir.path(), 4);
        assert_eq!(queue.max_offset(), end + 1, "seed {seed}");
        assert_eq!(queue.recover(0, 1 << 20).expect("recover").removed, 0, "seed {seed}");
    }
}

#[test]
fn retention_deletes_whole_files_and_moves_min() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 0..10);
    assert_eq!(queue.delete_files_below(entry(0).log_offset).expect("retention"), 0);
    assert_eq!(queue.delete_files_below(entry(6).log_offset).expect("retention"), 1);
    assert_eq!(names(dir.path()), cq_names(&[4, 8]));
    assert_holds(&queue, 6..10);
    let error = queue.truncate_to(5).expect_err("below min");
    assert!(matches!(error, Error::OffsetOutOfRange { requested: 5, start: 6, next: 10 }), "{error:?}");
    assert_eq!(queue.delete_files_below(u64::MAX).expect("retention"), 1);
    assert_eq!(names(dir.path()), cq_names(&[8]), "the active file stays: it carries the numbering");
    assert_holds(&queue, 10..10);
    fill(&queue, 10..12);
    assert_holds(&queue, 10..12);
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_eq!(queue.min_offset(), 8, "after a reopen, min is the first file's until retention runs");
    assert_eq!(queue.delete_files_below(entry(10).log_offset).expect("retention"), 0);
    assert_holds(&queue, 10..12);
}

#[test]
fn truncation_cuts_the_active_file_and_sealed_ones() {
    for reads in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open_with(dir.path(), 4, reads);
        fill(&queue, 0..10);
        queue.truncate_to(10).expect("at the end: nothing");
        queue.truncate_to(9).expect("truncate");
        assert_holds(&queue, 0..9);
        assert!(file_bytes(dir.path(), 8)[20..].iter().all(|&b| b == 0));
        queue.truncate_to(6).expect("into a sealed file");
        assert_holds(&queue, 0..6);
        assert_eq!(names(dir.path()), cq_names(&[0, 4]));
        assert!(file_bytes(dir.path(), 4)[40..].iter().all(|&b| b == 0));
        fill(&queue, 6..10);
        queue.truncate_to(4).expect("at a file's first entry");
        assert_holds(&queue, 0..4);
        fill(&queue, 4..6);
        drop(queue);
        let queue = open_with(dir.path(), 4, reads);
        assert_holds(&queue, 0..6);
        queue.truncate_to(0).expect("everything");
        assert_holds(&queue, 0..0);
        assert_eq!(names(dir.path()), cq_names(&[0]));
        fill(&queue, 0..2);
        assert_holds(&queue, 0..2);
    }
}

#[test]
fn queue_offset_for_log_offset_finds_the_first_entry_at_or_above() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    assert_eq!(queue.queue_offset_for_log_offset(7).expect("search"), 0, "empty");
    fill(&queue, 0..10);
    for (log_offset, expected) in [(0, 0), (5, 0), (6, 1), (15, 1), (44, 4), (45, 4), (95, 9), (96, 10), (u64::MAX, 10)]
    {
        assert_eq!(queue.queue_offset_for_log_offset(log_offset).expect("search"), expected, "{log_offset}");
    }
    queue.delete_files_below(entry(4).log_offset).expect("retention");
    assert_eq!(queue.queue_offset_for_log_offset(0).expect("search"), 4, "never below min");
}

#[test]
fn flush_reports_what_is_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    assert_eq!(queue.flushed_up_to(), FlushedUpTo::default());
    fill(&queue, 0..6);
    assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 0, last_log_offset: None });
    let flushed = FlushedUpTo { queue_offset: 6, last_log_offset: Some(55) };
    assert_eq!(queue.flush().expect("flush"), flushed);
    assert_eq!(queue.flushed_up_to(), flushed);
    queue.truncate_to(3).expect("truncate");
    assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 3, last_log_offset: Some(25) });
    fill(&queue, 3..5);
    assert_eq!(queue.flush().expect("flush"), FlushedUpTo { queue_offset: 5, last_log_offset: Some(45) });
    drop(queue);
    // After an open only the sealed files count: the active one may hold entries a crashed
    // process never synced, until the next flush syncs it.
    let queue = open(dir.path(), 4);
    assert_eq!(queue.flushed_up_to(), FlushedUpTo { queue_offset: 4, last_log_offset: Some(35) });
    assert_eq!(queue.flush().expect("flush"), FlushedUpTo { queue_offset: 5, last_log_offset: Some(45) });
}

/// Configures failpoint `name` for the paths under one directory while it lives (so the
/// tests running beside this one are unaffected).
#[cfg(feature = "failpoints")]
struct Failpoint(&'static str);

#[cfg(feature = "failpoints")]
impl Failpoint {
    fn under(name: &'static str, dir: &Path) -> Failpoint {
        fail::cfg(name, &format!("return({})", dir.display())).expect("failpoint");
        Failpoint(name)
    }
}

#[cfg(feature = "failpoints")]
impl Drop for Failpoint {
    fn drop(&mut self) {
        fail::remove(self.0);
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn a_full_disk_fails_the_file_creation_never_a_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    let full = Failpoint::under("fallocate_enospc", dir.path());
    let first = append(&queue, 0, entry(0));
    assert!(matches!(first, Err(Error::DiskFull { .. })), "{first:?}");
    assert!(names(dir.path()).is_empty(), "nothing left behind");
    drop(full);
    fill(&queue, 0..4);
    let full = Failpoint::under("fallocate_enospc", dir.path());
    let roll = append(&queue, 4, entry(4));
    assert!(matches!(roll, Err(Error::DiskFull { .. })), "{roll:?}");
    assert_eq!(names(dir.path()), cq_names(&[0]));
    assert_holds(&queue, 0..4);
    drop(full);
    fill(&queue, 4..6);
    assert_holds(&queue, 0..6);
}

#[cfg(feature = "failpoints")]
#[test]
fn a_failed_fdatasync_poisons_the_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 4);
    fill(&queue, 0..2);
    let failing = Failpoint::under("fdatasync", dir.path());
    let flushed = queue.flush();
    assert!(matches!(flushed, Err(Error::Io { op: "fdatasync", .. })), "{flushed:?}");
    drop(failing);
    assert!(matches!(queue.flush(), Err(Error::Poisoned)), "a retry proves nothing");
    assert!(matches!(append(&queue, 2, entry(2)), Err(Error::Poisoned)));
    assert!(matches!(queue.truncate_to(1), Err(Error::Poisoned)));
    assert!(matches!(queue.recover(0, 1000), Err(Error::Poisoned)));
    assert!(matches!(queue.delete_files_below(1000), Err(Error::Poisoned)));
    assert_holds(&queue, 0..2);
    assert_eq!(queue.flushed_up_to(), FlushedUpTo::default(), "nothing claimed durable");
    drop(queue);
    let queue = open(dir.path(), 4);
    assert_holds(&queue, 0..2);
    fill(&queue, 2..3);
}

/// A small deterministic generator for the reader threads.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

/// Reads `q` and a batch from it; whatever comes back must be the entries stored there.
fn check_reads(queue: &ConsumeQueue, q: u64) {
    if let Some(found) = queue.get(q).expect("get") {
        assert_eq!(found, entry(q), "entry {q}");
    }
    let batch = queue.entries(q, 40).expect("entries");
    for (i, (at, found)) in batch.iter().enumerate() {
        assert_eq!((*at, *found), (batch[0].0 + i as u64, entry(*at)), "batch from {q}");
    }
}

#[test]
fn readers_never_see_a_partial_entry_while_the_writer_appends_and_rolls() {
    for reads in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open_with(dir.path(), 128, reads);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for reader in 0..3u64 {
                let (queue, done) = (&queue, &done);
                scope.spawn(move || {
                    let mut state = reader + 1;
                    while !done.load(Ordering::Acquire) {
                        let max = queue.max_offset();
                        if max == 0 {
                            continue;
                        }
                        assert_eq!(queue.get(max - 1).expect("get"), Some(entry(max - 1)), "the newest entry");
                        check_reads(queue, next_random(&mut state) % max);
                    }
                });
            }
            fill(&queue, 0..10_000);
            done.store(true, Ordering::Release);
        });
        assert_holds(&queue, 0..10_000);
    }
}

#[test]
fn readers_see_an_entry_or_nothing_while_the_queue_is_cut_and_trimmed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queue = open(dir.path(), 16);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for reader in 0..3u64 {
            let (queue, done) = (&queue, &done);
            scope.spawn(move || {
                let mut state = reader + 7;
                while !done.load(Ordering::Acquire) {
                    let low = queue.min_offset().saturating_sub(5);
                    check_reads(queue, low + next_random(&mut state) % (queue.max_offset() + 10 - low));
                }
            });
        }
        let mut state = 99;
        for round in 0..60 {
            let max = queue.max_offset();
            fill(&queue, max..max + 40);
            let cut = queue.max_offset() - next_random(&mut state) % 30;
            queue.truncate_to(cut.max(queue.min_offset())).expect("truncate");
            if round % 6 == 5 {
                let below = queue.max_offset().saturating_sub(50);
                queue.delete_files_below(entry(below).log_offset).expect("retention");
            }
        }
        done.store(true, Ordering::Release);
    });
    let (min, max) = (queue.min_offset(), queue.max_offset());
    assert!(min > 0, "retention ran");
    assert_holds(&queue, min..max);
}

/// How long the race tests run per case: `STRATA_RACE_SECS` (seconds), else 300 ms.
fn race_time() -> std::time::Duration {
    std::env::var("STRATA_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(std::time::Duration::from_millis(300), std::time::Duration::from_secs)
}

/// Tiny files (3 entries) so rolls, cuts at file boundaries, sealed-file reopens and
/// retention all happen under readers; every read is the entry stored there, nothing, or
/// `Error::Unsettled`.
#[test]
fn readers_race_appends_cuts_retention_recovery_and_flushes() {
    for reads in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let queue = open_with(dir.path(), 3, reads);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for reader in 0..3u64 {
                let (queue, done) = (&queue, &done);
                scope.spawn(move || {
                    let mut state = reader + 11;
                    while !done.load(Ordering::Acquire) {
                        let (min, max) = (queue.min_offset(), queue.max_offset());
                        let q = min.saturating_sub(3) + next_random(&mut state) % (max - min + 8);
                        match queue.get(q) {
                            Ok(found) => assert!(found.is_none_or(|e| e == entry(q)), "get {q}: {found:?}"),
                            Err(error) => assert!(matches!(error, Error::Unsettled { .. }), "get {q}: {error:?}"),
                        }
                        match queue.entries(q, 1 + (next_random(&mut state) % 10) as usize) {
                            Ok(batch) => {
                                for (i, (at, found)) in batch.iter().enumerate() {
                                    assert_eq!((*at, *found), (batch[0].0 + i as u64, entry(*at)), "from {q}");
                                }
                            }
                            Err(error) => assert!(matches!(error, Error::Unsettled { .. }), "{q}: {error:?}"),
                        }
                    }
                });
            }
            let mut state = 5;
            let start = std::time::Instant::now();
            while start.elapsed() < race_time() {
                let max = queue.max_offset();
                fill(&queue, max..max + next_random(&mut state) % 9);
                let (min, max) = (queue.min_offset(), queue.max_offset());
                match next_random(&mut state) % 5 {
                    0 => queue.truncate_to(max.saturating_sub(next_random(&mut state) % 7).max(min)).expect("cut"),
                    1 => {
                        queue.delete_files_below(entry(max.saturating_sub(10)).log_offset).expect("retention");
                    }
                    2 => {
                        queue.recover(min, entry(max.saturating_sub(2)).log_offset).expect("recover");
                    }
                    3 => assert!(queue.flush().expect("flush").queue_offset <= queue.max_offset()),
                    _ => {}
                }
            }
            done.store(true, Ordering::Release);
        });
        let (min, max) = (queue.min_offset(), queue.max_offset());
        assert_holds(&queue, min..max);
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Append this many entries, each this far past the previous log offset.
    Append(u8, u8),
    /// Append an entry at an old log offset (skipped).
    Duplicate,
    /// Truncate this many entries from the end.
    Truncate(u8),
    Reopen,
    Recover,
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1..12u8, 1..4u8).prop_map(|(n, gap)| Op::Append(n, gap)),
        1 => Just(Op::Duplicate),
        2 => any::<u8>().prop_map(|back| Op::Truncate(back % 16)),
        2 => Just(Op::Reopen),
        1 => Just(Op::Recover),
        1 => Just(Op::Flush),
    ]
}

/// Applies `op` to the queue and to the model (the entries in queue-offset order).
fn apply(queue: &mut ConsumeQueue, model: &mut Vec<Entry>, op: &Op, reopen: &dyn Fn() -> ConsumeQueue) {
    let end = model.len() as u64;
    match *op {
        Op::Append(n, gap) => {
            for _ in 0..n {
                let log_offset = model.last().map_or(0, |e| e.log_offset + u64::from(gap));
                let e = Entry { log_offset, size: 1 + (log_offset % 1000) as u32, tag_hash: log_offset % 7 };
                assert_eq!(append(queue, model.len() as u64, e).expect("append"), Appended::Stored);
                model.push(e);
            }
        }
        Op::Duplicate => {
            if let Some(&last) = model.last() {
                assert_eq!(append(queue, end, last).expect("append"), Appended::AlreadyHeld);
            }
        }
        Op::Truncate(back) => {
            let cut = end.saturating_sub(u64::from(back));
            queue.truncate_to(cut).expect("truncate");
            model.truncate(cut as usize);
        }
        Op::Reopen => *queue = reopen(),
        Op::Recover => assert_eq!(queue.recover(0, u64::MAX).expect("recover").removed, 0),
        Op::Flush => assert_eq!(queue.flush().expect("flush").queue_offset, end),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_queue_matches_a_vec_model(
        per_file in 1..6u64,
        pread in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..30),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let reads = if pread { ReadPath::Pread } else { ReadPath::Mmap };
        let reopen = || open_with(dir.path(), per_file, reads);
        let mut queue = reopen();
        let mut model = Vec::new();
        for op in &ops {
            apply(&mut queue, &mut model, op, &reopen);
            let all: Vec<_> = (0..).zip(model.iter().copied()).collect();
            prop_assert_eq!(queue.entries(0, usize::MAX).expect("entries"), all, "after {:?}", op);
            prop_assert_eq!((queue.min_offset(), queue.max_offset()), (0, model.len() as u64));
            prop_assert_eq!(queue.get(model.len() as u64).expect("get"), None);
            if let Some(&last) = model.last() {
                let found = queue.queue_offset_for_log_offset(last.log_offset).expect("search");
                prop_assert_eq!(found, model.len() as u64 - 1);
            }
        }
    }
}
