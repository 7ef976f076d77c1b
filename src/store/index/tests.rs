//! The tests of the index files and of the set: puts, queries, rolls, reopening, damage,
//! recovery, races, and a model. The codecs' tests are in `layout.rs`, the active state's in
//! `active.rs`.

use std::collections::HashMap;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::Error;
use crate::format::{
    INDEX_ENTRY_LOG_OFFSET_POS, INDEX_ENTRY_PREV_POS, INDEX_ENTRY_TIME_DIFF_POS, INDEX_FILE_BEGIN_LOG_OFFSET_POS,
    INDEX_FILE_END_TIMESTAMP_POS, INDEX_FILE_HEADER_LEN, INDEX_FILE_INDEX_COUNT_POS, INDEX_FILE_MAX_SLOTS,
    INDEX_FILE_SLOT_COUNT_POS, INDEX_FILE_SUFFIX, file_name,
};
use crate::storage;
use crate::store::index::file::IndexFile;
use crate::store::index::files::IndexFiles;
use crate::store::index::layout::{IndexFileEntry, IndexHeader, index_file_len, key_hash};
use crate::store::index::recover::FileRecovery;

/// A timestamp on a whole second, so whole-second times are exact in tests.
const T0: i64 = 1_700_000_000_000;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn patch(path: &Path, position: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open");
    file.write_all_at(bytes, position).expect("patch");
}

fn read_raw(path: &Path, position: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    std::fs::File::open(path).expect("open").read_exact_at(&mut bytes, position).expect("read");
    bytes
}

/// Writes the entries a put keeps in memory, and nothing else (no header, no slots).
fn write_entries_only(file: &IndexFile) {
    let mut active = file.active.write();
    file.write_pending(active.as_mut().expect("active")).expect("write");
}

fn all(file: &IndexFile, key_hash: u32) -> Vec<u64> {
    file.query(key_hash, i64::MIN, i64::MAX, usize::MAX).expect("query")
}

fn all_in(files: &IndexFiles, key_hash: u32) -> Vec<u64> {
    files.query(key_hash, i64::MIN, i64::MAX, usize::MAX).expect("query")
}

#[test]
fn a_header_claiming_too_many_slots_is_damage_not_an_allocation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slots = INDEX_FILE_MAX_SLOTS + 1;
    let header = IndexHeader {
        begin_timestamp_ms: 0,
        end_timestamp_ms: 0,
        begin_log_offset: 0,
        end_log_offset: 0,
        slot_count: slots,
        index_count: 0,
    };
    let path = dir.path().join(file_name(0, INDEX_FILE_SUFFIX));
    std::fs::write(&path, header.encode()).expect("write");
    // Sparse: the length a file of that many slots would have, without its blocks.
    std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(index_file_len(slots, 2)).expect("len");
    assert!(matches!(IndexFile::open(&path), Err(Error::Corrupt { .. })));
    assert!(matches!(IndexFiles::open(dir.path(), slots, 4), Err(Error::InvalidConfig { field: "index_slots", .. })));
}

#[test]
fn a_new_file_has_its_full_size_and_a_durable_header() {
    let dir = tempdir();
    let file = IndexFile::create(dir.path(), 42, T0, 8, 16).expect("create");
    let path = dir.path().join("00000000000000000042.idx");
    assert_eq!(file.path(), path);
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), 40 + 4 * 8 + 20 * 16);
    let header = IndexHeader::decode(&read_raw(&path, 0, 40).try_into().expect("40 bytes"));
    assert_eq!(header, file.header());
    assert_eq!((header.begin_log_offset, header.end_log_offset, header.index_count), (42, 42, 0));
    assert!(matches!(IndexFile::create(dir.path(), 42, T0, 8, 16), Err(Error::Io { .. })), "exists");
    assert!(matches!(IndexFile::create(dir.path(), 1, T0, 0, 16), Err(Error::InvalidConfig { .. })));
    assert!(matches!(IndexFile::create(dir.path(), 1, T0, 8, 1), Err(Error::InvalidConfig { .. })));
    assert!(!dir.path().join("00000000000000000001.idx").exists(), "a refused file is not created");
}

#[test]
fn many_keys_are_found_at_their_offsets() {
    let dir = tempdir();
    let file = IndexFile::create(dir.path(), 0, T0, 1024, 20_001).expect("create");
    let keys: Vec<u32> = (0..997).map(|k| key_hash("topic", &format!("key-{k}"))).collect();
    for offset in 0..20_000u64 {
        assert!(file.put(keys[offset as usize % keys.len()], offset, T0).expect("put"));
    }
    assert!(file.is_full());
    for (k, &hash) in keys.iter().enumerate() {
        let expected: Vec<u64> = (0..20_000u64).rev().filter(|o| *o as usize % keys.len() == k).collect();
        assert_eq!(all(&file, hash), expected, "key {k}: every offset, newest first");
    }
    assert_eq!(all(&file, key_hash("topic", "never put")), Vec::<u64>::new());
}

#[test]
fn colliding_hashes_share_chains_and_only_the_asked_hash_is_returned() {
    let dir = tempdir();
    // 4 slots for 40 hashes: every slot's chain interleaves 10 of them.
    let file = IndexFile::create(dir.path(), 0, T0, 4, 1000).expect("create");
    let mut model: HashMap<u32, Vec<u64>> = HashMap::new();
    for offset in 0..800u64 {
        let hash = (offset * 7 % 40) as u32;
        file.put(hash, offset, T0).expect("put");
        model.entry(hash).or_default().insert(0, offset);
    }
    for (hash, offsets) in &model {
        assert_eq!(&all(&file, *hash), offsets, "hash {hash}");
        assert_eq!(file.query(*hash, i64::MIN, i64::MAX, 3).expect("query"), offsets[..3], "the newest 3");
    }
    assert_eq!(all(&file, 40), Vec::<u64>::new(), "slot 0's chain holds other hashes only");
    // One message with several keys of the same hash is reported once.
    file.put(5, 900, T0).expect("put");
    file.put(5, 900, T0).expect("put");
    assert_eq!(all(&file, 5)[..2], [900, model[&5][0]]);
}

#[test]
fn time_filtering_is_by_whole_seconds_and_never_drops_a_match() {
    let dir = tempdir();
    let file = IndexFile::create(dir.path(), 0, T0 + 250, 16, 100).expect("create");
    let puts = [(0, 250), (1, 900), (2, 1_400), (3, 3_249), (4, 3_250), (5, 10_000)];
    for (offset, ms) in puts {
        file.put(9, offset, T0 + ms).expect("put");
    }
    let query = |from: i64, to: i64| file.query(9, T0 + from, T0.saturating_add(to), usize::MAX).expect("query");
    // Entry seconds from T0+250: [250,1249] holds 0 and 1, [1250,2249] holds 2, [2250,3249]
    // holds 3, [3250,4249] holds 4, [9250,10249] holds 5.
    assert_eq!(query(0, 249), Vec::<u64>::new(), "before the file's begin");
    assert_eq!(query(1_000, 1_100), [1, 0], "a second's entries are all returned");
    assert_eq!(query(1_300, 1_300), [2]);
    assert_eq!(query(3_249, 3_249), [3]);
    assert_eq!(query(3_250, 9_249), [4]);
    assert_eq!(query(10_000, i64::MAX), [5]);
    assert_eq!(query(5, 4), Vec::<u64>::new(), "an empty range");
    assert_eq!((file.begin_timestamp_ms(), file.end_timestamp_ms()), (T0 + 250, T0 + 10_000));
    // A timestamp going back counts as the latest second so far: times never decrease.
    file.put(9, 6, T0).expect("put");
    assert_eq!(query(9_250, 9_250), [6, 5]);
    assert_eq!(file.end_timestamp_ms(), T0 + 10_000);
}

#[test]
fn a_full_file_refuses_and_the_set_rolls() {
    let dir = tempdir();
    let file = IndexFile::create(dir.path(), 10, T0, 2, 4).expect("create");
    for offset in 10..13 {
        assert!(file.put(1, offset, T0).expect("put"), "entries 1 to 3");
    }
    assert!(file.is_full());
    assert!(!file.put(1, 13, T0).expect("put"), "full: entry 0 is never used");
    assert_eq!(all(&file, 1), [12, 11, 10]);

    let files = IndexFiles::open(&dir.path().join("index"), 2, 4).expect("open");
    for offset in 0..20u64 {
        assert!(files.put((offset % 2) as u32, offset, T0 + offset as i64 * 1000).expect("put"));
    }
    files.catch_up().expect("the puts taken ahead go in");
    assert_eq!(files.file_count(), 7, "3 entries a file");
    let names = storage::list_dir(files.dir()).expect("list");
    assert!(names.contains(&"00000000000000000018.idx".to_owned()), "{names:?}");
    assert_eq!(all_in(&files, 0), (0..20).step_by(2).collect::<Vec<_>>(), "ascending, across files");
    assert_eq!(files.query(1, i64::MIN, i64::MAX, 4).expect("query"), [13, 15, 17, 19], "the newest 4");
    assert_eq!(files.query(1, T0 + 5_000, T0 + 9_000, 10).expect("query"), [5, 7, 9]);
    assert_eq!(files.end_log_offset(), Some(19));
}

#[test]
fn a_message_with_more_keys_than_a_file_holds_is_a_config_error() {
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 2, 3).expect("open");
    files.put(1, 5, T0).expect("put");
    files.put(2, 5, T0).expect("put");
    assert!(matches!(files.put(3, 5, T0), Err(Error::InvalidConfig { field: "index_entries", .. })));
    assert!(files.put(3, 6, T0).expect("the next message rolls"));
    assert_eq!(all_in(&files, 2), [5]);
}

#[test]
fn redispatched_messages_are_skipped_and_reported_once() {
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 4, 100).expect("open");
    files.put(1, 3, T0).expect("put");
    files.put(1, 4, T0).expect("put");
    assert!(!files.put(1, 3, T0).expect("put"), "below the end: already indexed");
    assert!(!files.put(1, 4, T0).expect("put"), "the last message's key it holds: not again");
    assert!(files.put(2, 4, T0).expect("put"), "a key of the last message a crash kept it from: put");
    assert!(!files.put(2, 4, T0).expect("put"), "and only once");
    assert_eq!(all_in(&files, 1), [3, 4]);
    assert_eq!(files.files.read()[0].index_count(), 3, "one entry per (key hash, log offset)");
}

#[test]
fn reopen_keeps_every_entry_and_continues() {
    let dir = tempdir();
    let expected: Vec<u64>;
    {
        let files = IndexFiles::open(dir.path(), 3, 5).expect("open");
        for offset in 0..10 {
            files.put(7, offset, T0 + offset as i64).expect("put");
        }
        files.flush().expect("flush");
        expected = all_in(&files, 7);
    }
    let files = IndexFiles::open(dir.path(), 3, 5).expect("reopen");
    assert_eq!(all_in(&files, 7), expected);
    assert_eq!(files.end_log_offset(), Some(9));
    {
        let list = files.files.read();
        assert!(list[..list.len() - 1].iter().all(|f| f.is_sealed()) && !list[list.len() - 1].is_sealed());
        let newest = &list[list.len() - 1];
        assert_eq!((newest.index_count(), newest.end_log_offset(), newest.end_timestamp_ms()), (2, 9, T0 + 9));
    }
    files.put(7, 10, T0 + 10).expect("put after reopen");
    assert_eq!(all_in(&files, 7), (0..=10).collect::<Vec<_>>());
}

#[test]
fn sealed_files_hold_no_descriptor_until_queried() {
    let dir = tempdir();
    let descriptors = || {
        let fds = std::fs::read_dir("/proc/self/fd").expect("list fds");
        fds.filter_map(|fd| std::fs::read_link(fd.expect("fd").path()).ok())
            .filter(|target| target.starts_with(dir.path()))
            .count()
    };
    {
        let files = IndexFiles::open(dir.path(), 3, 5).expect("open");
        for offset in 0..12 {
            files.put(1, offset, T0).expect("put");
        }
        files.flush().expect("flush");
    }
    let files = IndexFiles::open(dir.path(), 3, 5).expect("reopen");
    assert_eq!(files.file_count(), 3);
    assert_eq!(descriptors(), 1, "only the active file is open");
    assert_eq!(all_in(&files, 1).len(), 12, "sealed files mapped at the query");
    assert_eq!(descriptors(), 1, "and closed again: a map needs no descriptor");
}

#[test]
fn corrupt_chains_end_the_walk() {
    let dir = tempdir();
    let path = {
        let file = IndexFile::create(dir.path(), 0, T0, 1, 8).expect("create");
        for offset in 0..5 {
            file.put(3, offset, T0).expect("put");
        }
        file.flush().expect("flush");
        file.path()
    };
    let link = |n: u32, to: u32| patch(&path, index_file_len(1, n) + INDEX_ENTRY_PREV_POS as u64, &to.to_be_bytes());
    let walk = || all(&IndexFile::open_sealed(&path).expect("open"), 3);
    assert_eq!(walk(), [4, 3, 2, 1, 0]);
    link(3, 5);
    assert_eq!(walk(), [4, 3, 2], "entry 3 points forward: the walk stops after it");
    link(5, 5);
    assert_eq!(walk(), [4], "entry 5 points at itself");
    link(5, 4);
    link(4, 5);
    assert_eq!(walk(), [4, 3], "a loop between 5 and 4 ends at 4, whose link points forward");
    patch(&path, INDEX_FILE_HEADER_LEN as u64, &6u32.to_be_bytes());
    assert_eq!(walk(), Vec::<u64>::new(), "a slot past the entries used leads nowhere");
}

#[test]
fn truncated_or_garbage_files_are_corrupt_errors() {
    let dir = tempdir();
    let good = IndexFile::create(dir.path(), 0, T0, 4, 8).expect("create");
    good.put(1, 0, T0).expect("put");
    good.flush().expect("flush");
    let good_bytes = std::fs::read(good.path()).expect("read");
    drop(good);
    let header_with = |pos: usize, bytes: &[u8]| {
        let mut b = good_bytes.clone();
        b[pos..pos + bytes.len()].copy_from_slice(bytes);
        b
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("shorter than a header", good_bytes[..30].to_vec()),
        ("header only", good_bytes[..40].to_vec()),
        ("cut inside an entry", good_bytes[..good_bytes.len() - 7].to_vec()),
        ("garbage", (0..good_bytes.len()).map(|i| (i * 131 % 251) as u8).collect()),
        ("no slots", header_with(INDEX_FILE_SLOT_COUNT_POS, &0u32.to_be_bytes())),
        ("more slots than bytes", header_with(INDEX_FILE_SLOT_COUNT_POS, &1000u32.to_be_bytes())),
        ("count past the entries", header_with(INDEX_FILE_INDEX_COUNT_POS, &8u32.to_be_bytes())),
        ("another name", header_with(INDEX_FILE_BEGIN_LOG_OFFSET_POS, &9u64.to_be_bytes())),
        ("end before begin", header_with(INDEX_FILE_END_TIMESTAMP_POS, &(T0 - 1).to_be_bytes())),
    ];
    let path = dir.path().join("00000000000000000000.idx");
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).expect("write");
        for opened in [IndexFile::open(&path).map(drop), IndexFile::open_sealed(&path).map(drop)] {
            match opened {
                Err(Error::Corrupt { path: named, .. }) => assert_eq!(named, path, "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        let opened = IndexFiles::open(dir.path(), 4, 8);
        assert!(matches!(opened, Err(Error::Corrupt { .. })), "{what}: {opened:?}");
    }
    assert_eq!(IndexFiles::discard(dir.path()).expect("discard"), 1);
    let files = IndexFiles::open(dir.path(), 4, 8).expect("an empty set to rebuild into");
    assert_eq!((files.file_count(), files.end_log_offset()), (0, None));
    assert_eq!(IndexFiles::discard(&dir.path().join("missing")).expect("discard"), 0);
}

#[test]
fn recover_cuts_entries_past_the_log_end_and_rebuilds_the_slots() {
    let dir = tempdir();
    let path = {
        let files = IndexFiles::open(dir.path(), 8, 1000).expect("open");
        for offset in 0..200u64 {
            files.put((offset % 13) as u32, offset, T0 + offset as i64 * 100).expect("put");
            if offset == 99 {
                files.flush().expect("flush");
            }
        }
        // A crash after the kernel had the entries past the flush, not the header.
        write_entries_only(&files.files.read()[0]);
        files.files.read()[0].path()
    };
    let files = IndexFiles::open(dir.path(), 8, 1000).expect("reopen");
    assert_eq!(files.end_log_offset(), Some(99), "the header as last flushed");
    let recovery = files.recover(150).expect("recover");
    let newest = recovery.newest.expect("a file");
    assert_eq!((newest.kept, newest.counted), (150, 100), "entries past the header's count kept");
    assert_eq!(newest.cut_at, Some((151, "log offset at or past the recovered end")));
    for hash in 0..13u32 {
        let expected: Vec<u64> = (0..150).filter(|o| o % 13 == u64::from(hash)).collect();
        assert_eq!(all_in(&files, hash), expected, "hash {hash}");
    }
    assert_eq!(files.end_log_offset(), Some(149));
    let stale = index_file_len(8, 151);
    assert!(read_raw(&path, stale, 50 * 20).iter().all(|&b| b == 0), "the cut entries are zeroed");
    let header = IndexHeader::decode(&read_raw(&path, 0, 40).try_into().expect("40 bytes"));
    assert_eq!((header.index_count, header.end_log_offset), (150, 149), "the header is written");
    assert!(header.end_timestamp_ms >= T0 + 14_900);
    // Dispatch resumes at 150.
    for offset in 150..160u64 {
        files.put((offset % 13) as u32, offset, T0 + offset as i64 * 100).expect("put");
    }
    assert_eq!(all_in(&files, 3), (0..160).filter(|o| o % 13 == 3).collect::<Vec<_>>());
    // Recovering again changes nothing.
    let again = files.recover(160).expect("recover").newest.expect("a file");
    assert_eq!((again.kept, again.cut_at), (160, None));
}

#[test]
fn recover_cuts_at_damage_and_ignores_the_slots_on_disk() {
    let dir = tempdir();
    let path = {
        let file = IndexFile::create(dir.path(), 0, T0, 4, 100).expect("create");
        for offset in 0..50u64 {
            file.put((offset % 6 + 1) as u32, offset, T0 + offset as i64 * 1000).expect("put");
        }
        file.flush().expect("flush");
        file.path()
    };
    // Entry 31's log offset goes back; the slots are garbage.
    patch(&path, index_file_len(4, 31) + INDEX_ENTRY_LOG_OFFSET_POS as u64, &3u64.to_be_bytes());
    patch(&path, INDEX_FILE_HEADER_LEN as u64, &[0xff; 16]);
    let file = IndexFile::open(&path).expect("open");
    let recovery = file.recover(u64::MAX).expect("recover");
    assert_eq!(recovery, FileRecovery { kept: 30, counted: 50, cut_at: Some((31, "log offset goes back")) });
    assert_eq!(all(&file, 3), [26, 20, 14, 8, 2]);
    assert_eq!((file.end_log_offset(), file.end_timestamp_ms()), (29, T0 + 29_999));
    // A chain link that is not its slot's previous entry, and time going back.
    for (n, pos, bytes, reason) in [
        (10, INDEX_ENTRY_PREV_POS, 1u32.to_be_bytes(), "chain link is not its slot's previous entry"),
        (5, INDEX_ENTRY_TIME_DIFF_POS, 0u32.to_be_bytes(), "time goes back"),
    ] {
        patch(&path, index_file_len(4, n) + pos as u64, &bytes);
        let recovery = file.recover(u64::MAX).expect("recover");
        assert_eq!((recovery.kept, recovery.cut_at), (n - 1, Some((n, reason))));
    }
}

/// An all-zero entry is what an unused one looks like. Past the header's count it ends the
/// entries, even when it was a put (key hash 0 at log offset 0 in the first second, the
/// first entry of a log's first file): the store dispatches again everything past the count.
#[test]
fn past_the_count_an_all_zero_entry_ends_the_entries() {
    let dir = tempdir();
    let file = IndexFile::create(dir.path(), 0, T0, 4, 100).expect("create");
    file.put(0, 0, T0).expect("put");
    file.put(1, 1, T0).expect("put");
    write_entries_only(&file);
    let path = file.path();
    drop(file);
    let file = IndexFile::open(&path).expect("open");
    assert_eq!(
        read_raw(&path, index_file_len(4, 2), 20),
        IndexFileEntry::encode(&IndexFileEntry { key_hash: 1, log_offset: 1, time_diff_s: 0, prev_entry: 0 })
    );
    assert_eq!(file.recover(u64::MAX).expect("recover").kept, 0);
    file.put(0, 0, T0).expect("put");
    file.put(1, 1, T0).expect("put");
    file.flush().expect("flush");
    assert_eq!(file.recover(u64::MAX).expect("recover").kept, 2, "counted by the header: kept");
}

#[test]
fn entries_lost_in_a_crash_come_back_with_the_redispatch() {
    let dir = tempdir();
    {
        let files = IndexFiles::open(dir.path(), 4, 100).expect("open");
        for offset in 0..20u64 {
            files.put((offset % 3) as u32, offset, T0).expect("put");
            if offset == 9 {
                files.flush().expect("flush");
            }
        }
    } // 10 to 19 were never written
    let files = IndexFiles::open(dir.path(), 4, 100).expect("reopen");
    let recovery = files.recover(20).expect("recover").newest.expect("a file");
    assert_eq!((recovery.kept, recovery.cut_at), (10, None));
    assert_eq!(files.end_log_offset(), Some(9));
    // The store's checkpoint said 5 (flushes were behind): dispatch redoes 5 to 19.
    let indexed: Vec<u64> = (5..20).filter(|&o| files.put((o % 3) as u32, o, T0).expect("put")).collect();
    assert_eq!(indexed, (10..20).collect::<Vec<_>>(), "5 to 9 are held (9's one key included)");
    for hash in 0..3u32 {
        let expected: Vec<u64> = (0..20).filter(|o| o % 3 == u64::from(hash)).collect();
        assert_eq!(all_in(&files, hash), expected, "each once");
    }
}

#[test]
fn recover_deletes_files_past_the_end_and_reopens_the_newest_writable() {
    let dir = tempdir();
    {
        let files = IndexFiles::open(dir.path(), 2, 5).expect("open");
        for offset in 0..20u64 {
            files.put(1, offset, T0).expect("put");
        }
        files.catch_up().expect("the puts taken ahead go in (unflushed)");
    }
    let files = IndexFiles::open(dir.path(), 2, 5).expect("reopen");
    assert_eq!(files.file_count(), 5);
    let recovery = files.recover(6).expect("recover");
    assert_eq!(recovery.removed.len(), 3, "the files beginning at 8, 12 and 16");
    assert_eq!(recovery.newest.map(|r| r.kept), Some(2), "4 and 5 kept");
    assert_eq!(files.file_count(), 2);
    assert_eq!(all_in(&files, 1), (0..6).collect::<Vec<_>>());
    files.put(1, 6, T0).expect("put into the reopened file");
    files.put(1, 7, T0).expect("put into the reopened file");
    assert_eq!(files.file_count(), 2);
    assert_eq!(all_in(&files, 1), (0..8).collect::<Vec<_>>());
    let empty = files.recover(0).expect("recover everything away");
    assert_eq!((empty.removed.len(), empty.newest, files.end_log_offset()), (2, None, None));
}

#[test]
fn delete_files_below_keeps_the_active_file() {
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 2, 5).expect("open");
    for offset in 0..14u64 {
        files.put(1, offset, T0).expect("put");
    }
    files.catch_up().expect("the puts taken ahead go in");
    assert_eq!(files.file_count(), 4, "ends 3, 7, 11; the active one 12..13");
    assert_eq!(files.delete_files_below(7).expect("delete"), 1, "end 7 is not below 7");
    assert_eq!(files.delete_files_below(100).expect("delete"), 2);
    assert_eq!(files.file_count(), 1);
    assert_eq!(storage::list_dir(dir.path()).expect("list"), ["00000000000000000012.idx"]);
    assert_eq!(all_in(&files, 1), [12, 13]);
}

/// A known pitfall: a failed fsync followed by one that succeeds proves nothing (the kernel may
/// have dropped the pages, and reports the error once). A retried flush used to succeed and
/// write a header counting the entries whose sync failed, and the store's checkpoint then
/// skipped their redispatch after a crash.
#[cfg(feature = "failpoints")]
#[test]
fn a_failed_fdatasync_poisons_the_index() {
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 4, 16).expect("open");
    files.put(1, 0, T0).expect("put");
    files.flush().expect("flush");
    files.put(1, 1, T0).expect("put");
    fail::cfg("fdatasync", &format!("return({})", dir.path().display())).expect("failpoint");
    let failed = files.flush();
    fail::remove("fdatasync");
    assert!(matches!(failed, Err(Error::Io { op: "fdatasync", .. })), "{failed:?}");
    assert!(matches!(files.flush(), Err(Error::Poisoned)), "a retry proves nothing");
    assert!(matches!(files.put(1, 2, T0), Err(Error::Poisoned)));
    let path = dir.path().join("00000000000000000000.idx");
    let header = read_raw(&path, INDEX_FILE_INDEX_COUNT_POS as u64, 4);
    assert_eq!(header, 1u32.to_be_bytes(), "the header on disk counts only the synced entry");
    assert_eq!(all_in(&files, 1), [0, 1], "queries go on");
    drop(files);
    let files = IndexFiles::open(dir.path(), 4, 16).expect("reopen");
    files.recover(2).expect("recover");
    files.put(1, 2, T0).expect("put after a reopen");
}

/// One writer puts (rolling files), readers query all the while: every result holds only
/// offsets put under the hash asked, in order, and every offset put before the query began.
#[test]
fn queries_during_puts_see_whole_entries() {
    const KEYS: u64 = 37;
    const PUTS: u64 = 60_000;
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 16, 5_000).expect("open");
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for offset in 0..PUTS {
                files.put((offset % KEYS) as u32, offset, T0 + offset as i64).expect("put");
                done.store(offset + 1, Ordering::Release);
                if offset % 20_000 == 0 {
                    files.flush().expect("flush");
                }
            }
        });
        for reader in 0..3u64 {
            let (files, done) = (&files, &done);
            s.spawn(move || {
                let mut queries = 0u64;
                loop {
                    let before = done.load(Ordering::Acquire);
                    let key = (queries * 7 + reader) % KEYS;
                    let found = all_in(files, key as u32);
                    assert!(found.iter().all(|o| o % KEYS == key && *o < PUTS), "key {key}: {found:?}");
                    assert!(found.windows(2).all(|w| w[0] < w[1]), "ascending, each once");
                    let expected = (0..before).filter(|o| o % KEYS == key).count();
                    assert!(found.len() >= expected, "key {key}: {} of {expected} put before", found.len());
                    queries += 1;
                    if before == PUTS {
                        break;
                    }
                }
                assert!(queries > 10, "reader {reader} ran {queries} queries");
            });
        }
    });
    assert_eq!(files.file_count(), 13);
}

/// Tiny files (3 slots, 39 entries) under puts, rolls, flushes and retention: every query
/// finds every offset put before it and not yet past retention, once, in order. Runs for
/// `STRATA_RACE_SECS` seconds (else 300 ms).
#[test]
fn queries_race_puts_rolls_flushes_and_retention() {
    const KEYS: u64 = 11;
    let time = std::env::var("STRATA_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(std::time::Duration::from_millis(300), std::time::Duration::from_secs);
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 3, 40).expect("open");
    let (done, put_up_to, deleted_below) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for reader in 0..3u64 {
            let (files, done, put_up_to, deleted_below) = (&files, &done, &put_up_to, &deleted_below);
            s.spawn(move || {
                let mut key = reader;
                while !done.load(Ordering::Acquire) {
                    key = (key + 1) % KEYS;
                    let before = put_up_to.load(Ordering::Acquire);
                    let found = all_in(files, key as u32);
                    // Loaded after the query: retention before it deleted no more than this.
                    let low = deleted_below.load(Ordering::Acquire);
                    assert!(found.iter().all(|o| o % KEYS == key) && found.windows(2).all(|w| w[0] < w[1]));
                    for o in (low + 200..before).filter(|o| o % KEYS == key) {
                        assert!(found.contains(&o), "key {key}: {o} missing ({before} put, retention {low})");
                    }
                }
            });
        }
        let start = std::time::Instant::now();
        let mut offset = 0u64;
        while start.elapsed() < time {
            files.put((offset % KEYS) as u32, offset, T0 + offset as i64 * 10).expect("put");
            offset += 1;
            put_up_to.store(offset, Ordering::Release);
            if offset.is_multiple_of(97) {
                files.flush().expect("flush");
            }
            if offset.is_multiple_of(500) {
                deleted_below.store(offset - 300, Ordering::Release);
                files.delete_files_below(offset - 300).expect("retention");
            }
        }
        done.store(true, Ordering::Release);
    });
}

#[test]
fn queries_during_retention_end_quietly() {
    let dir = tempdir();
    let files = IndexFiles::open(dir.path(), 4, 50).expect("open");
    for offset in 0..5_000u64 {
        files.put((offset % 5) as u32, offset, T0).expect("put");
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let found = all_in(&files, 2);
                assert!(found.iter().all(|o| o % 5 == 2) && found.windows(2).all(|w| w[0] < w[1]));
            }
        });
        for start in (0..5_000).step_by(100) {
            files.delete_files_below(start).expect("delete");
        }
        stop.store(true, Ordering::Relaxed);
    });
    // 49 entries a file: the file holding 4_900 to 4_948 is the oldest left.
    assert_eq!(all_in(&files, 2), (4_900..5_000).filter(|o| o % 5 == 2).collect::<Vec<_>>());
}

mod model {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// A key's hash (few, so chains collide), how far the offset moves (0: another key of
        /// the same message), how many seconds pass.
        Put {
            hash: u32,
            step: u64,
            seconds: i64,
        },
        Query {
            hash: u32,
            from_s: i64,
            len_s: i64,
            max: usize,
        },
        Flush,
        Reopen,
        /// Reopen after a crash that lost the log's last `lost` offsets.
        Crash {
            lost: u64,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (1..10u32, 0..3u64, 0..3i64).prop_map(|(hash, step, seconds)| Op::Put { hash, step, seconds }),
            4 => (0..10u32, 0..30i64, 0..30i64, 1..8usize)
                .prop_map(|(hash, from_s, len_s, max)| Op::Query { hash, from_s, len_s, max }),
            1 => Just(Op::Flush),
            1 => Just(Op::Reopen),
            1 => (0..6u64).prop_map(|lost| Op::Crash { lost }),
        ]
    }

    /// The model: every entry put, in order.
    #[derive(Default)]
    struct Model {
        entries: Vec<(u32, u64, i64)>,
        next_offset: u64,
        now_ms: i64,
    }

    impl Model {
        /// The entries of the last message put.
        fn keys_of_last(&self) -> usize {
            let last = self.entries.last().map(|(_, offset, _)| *offset);
            self.entries.iter().rev().take_while(|(_, offset, _)| Some(*offset) == last).count()
        }

        fn query(&self, hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Vec<u64> {
            let mut found: Vec<u64> = self
                .entries
                .iter()
                .rev()
                .filter(|(h, _, ts)| *h == hash && (begin_ms..=end_ms).contains(ts))
                .map(|(_, offset, _)| *offset)
                .collect();
            found.dedup();
            found.truncate(max);
            found.reverse();
            found
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn index_files_agree_with_a_model(ops in proptest::collection::vec(op(), 1..80)) {
            let dir = tempdir();
            let (slots, entries) = (3, 6);
            let mut files = IndexFiles::open(dir.path(), slots, entries).expect("open");
            let mut model = Model { now_ms: T0, ..Model::default() };
            for op in ops {
                match op {
                    Op::Put { hash, step, seconds } => {
                        // A file holds 5 entries: a message (at most 4 keys) never fills one alone.
                        let step = if model.keys_of_last() >= 4 { 1 } else { step };
                        let offset = if model.entries.is_empty() { model.next_offset } else { model.next_offset - 1 + step };
                        model.now_ms += seconds * 1000;
                        let held = model.entries.iter().any(|&(h, o, _)| (h, o) == (hash, offset));
                        prop_assert_eq!(files.put(hash, offset, model.now_ms).expect("put"), !held, "a (key hash, log offset) is held once");
                        if !held {
                            model.entries.push((hash, offset, model.now_ms));
                        }
                        model.next_offset = offset + 1;
                    }
                    Op::Query { hash, from_s, len_s, max } => {
                        let begin_ms = T0 + from_s * 1000;
                        let end_ms = begin_ms + len_s * 1000;
                        prop_assert_eq!(files.query(hash, begin_ms, end_ms, max).expect("query"), model.query(hash, begin_ms, end_ms, max));
                    }
                    Op::Flush => {
                        files.flush().expect("flush");
                    }
                    Op::Reopen => {
                        files.flush().expect("flush");
                        drop(files);
                        files = IndexFiles::open(dir.path(), slots, entries).expect("reopen");
                    }
                    Op::Crash { lost } => {
                        // Entries past the last flush may be lost in a crash: the store
                        // dispatches them again. Here the log loses its last offsets.
                        files.flush().expect("flush");
                        drop(files);
                        files = IndexFiles::open(dir.path(), slots, entries).expect("reopen");
                        let cut = model.next_offset.saturating_sub(lost);
                        files.recover(cut).expect("recover");
                        model.entries.retain(|(_, offset, _)| *offset < cut);
                        model.next_offset = cut;
                        let end = model.entries.last().map(|(_, offset, _)| *offset);
                        prop_assert_eq!(files.end_log_offset(), end);
                    }
                }
            }
            for hash in 0..10 {
                prop_assert_eq!(all_in(&files, hash), model.query(hash, i64::MIN, i64::MAX, usize::MAX));
            }
        }
    }
}

/// Not a test: `cargo test --release --lib store::index::tests::measure -- --ignored
/// --nocapture` times 1M puts and 100k key queries with the default sizes (5M slots, 20M
/// entries: one 420 MB file): queries of the active file alone, while another thread puts, and
/// of the file sealed.
#[test]
#[ignore = "a measurement, run by hand in release"]
fn measure_puts_and_queries() {
    const PUTS: u64 = 1_000_000;
    const QUERIES: u64 = 100_000;
    let dir = tempdir();
    let hashes: Vec<u32> = (0..2 * PUTS).map(|i| key_hash("measure", &format!("key-{i}"))).collect();
    let started = std::time::Instant::now();
    let files = IndexFiles::open(dir.path(), 5_000_000, 20_000_000).expect("open");
    files.put(hashes[0], 0, T0).expect("put");
    let created = started.elapsed();
    let started = std::time::Instant::now();
    for offset in 1..PUTS {
        files.put(hashes[offset as usize], offset, T0 + offset as i64 / 10).expect("put");
    }
    let puts = started.elapsed();
    let started = std::time::Instant::now();
    files.flush().expect("flush");
    let flushed = started.elapsed();
    let query_all = |query: &dyn Fn(u32) -> Vec<u64>| {
        let mut latencies = Vec::with_capacity(QUERIES as usize);
        for i in 0..QUERIES {
            let offset = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % PUTS;
            let one = std::time::Instant::now();
            let found = query(hashes[offset as usize]);
            latencies.push(one.elapsed());
            assert!(found.contains(&offset));
        }
        latencies.sort_unstable();
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
        let total: std::time::Duration = latencies.iter().sum();
        format!(
            "{:.0}/s, p50 {:?} p99 {:?} p99.9 {:?} max {:?}",
            QUERIES as f64 / total.as_secs_f64(),
            at(0.5),
            at(0.99),
            at(0.999),
            at(1.0)
        )
    };
    let by_key = |hash| files.query(hash, T0, T0 + 1_000_000, 32).expect("query");
    let quiet = query_all(&by_key);
    let busy = std::thread::scope(|s| {
        s.spawn(|| {
            for offset in PUTS..2 * PUTS {
                files.put(hashes[offset as usize], offset, T0 + offset as i64 / 10).expect("put");
                if offset % 100_000 == 0 {
                    files.flush().expect("flush");
                }
            }
        });
        query_all(&by_key)
    });
    files.flush().expect("flush");
    let path = files.files.read()[0].path();
    drop(files);
    let sealed = IndexFile::open_sealed(&path).expect("open sealed");
    let from_sealed = query_all(&|hash| sealed.query(hash, T0, T0 + 1_000_000, 32).expect("query"));
    println!(
        "create {created:?}; {PUTS} puts {puts:?} ({:.0}/s, {:?} each); flush {flushed:?}\n\
         {QUERIES} queries of the active file: {quiet}\n\
         {QUERIES} queries while another thread puts {PUTS} (a flush every 100k): {busy}\n\
         {QUERIES} queries of the file sealed: {from_sealed}",
        PUTS as f64 / puts.as_secs_f64(),
        puts / PUTS as u32,
    );
}

/// A crash inside `flush`, after its slot writes and before its header write, leaves slots
/// pointing past the header's count: after an unclean shutdown that is what recovery repairs, so
/// the open's check leaves the newest file to it; after a clean one it is damage.
#[test]
fn slots_past_a_stale_header_are_recoverys_after_a_crash_and_damage_after_a_clean_close() {
    let dir = tempdir();
    let (path, first_flush) = {
        let files = IndexFiles::open(dir.path(), 8, 1000).expect("open");
        for offset in 0..100u64 {
            files.put((offset % 13) as u32, offset, T0).expect("put");
        }
        let first_flush = files.flush().expect("flush");
        for offset in 100..200u64 {
            files.put((offset % 13) as u32, offset, T0).expect("put");
        }
        files.flush().expect("flush");
        (files.files.read()[0].path(), first_flush)
    };
    // The header as the first flush left it: the second flush's header write never happened.
    let header_now = IndexHeader::decode(&read_raw(&path, 0, 40).try_into().expect("40 bytes"));
    patch(&path, 0, &IndexHeader { index_count: 100, end_log_offset: 99, ..header_now }.encode());
    let files = IndexFiles::open(dir.path(), 8, 1000).expect("reopen");
    assert_eq!(files.check(&first_flush, (0, 1000), true).expect("check"), None, "recovery's to repair");
    assert!(files.check(&first_flush, (0, 1000), false).expect("check").is_some(), "damage after a clean close");
    let recovered = files.recover(1000).expect("recover").newest.expect("a file");
    assert_eq!(recovered.kept, 200, "recovery keeps the entries the header did not count yet");
}
