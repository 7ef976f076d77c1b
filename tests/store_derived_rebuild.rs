//! The message store's consume queues and index files are derived from its commit log: whatever
//! happened to them — deleted, cut (to a few bytes, to a partial entry), garbage over part of a
//! file, replaced by another store's copy — and whatever happened to the store checkpoint, the
//! store rebuilds them from the log before `MessageStore::open` returns. After each damage and
//! reopen: the queues and their `[min, max)` are as before, every message is in its queue at its
//! original queue offset with its body, every key finds each of its messages exactly once (the
//! raw `.idx` entries too: no (key hash, log offset) twice, none missing, none foreign), the next
//! put to each queue gets the queue's next offset (none handed out twice), and committed consumer
//! offsets are unchanged. Then the store is closed, its raw index checked, and reopened and
//! checked again.
//!
//! Each damage runs after three shutdowns (`common::store_derived::Shutdown`): a clean close, a
//! crash (a copy of the live files), and a clean close with `abort` recreated.
//!
//! Store A (the one damaged): 240 messages over `t/0..3` and `u/0..3`, `t/0` getting 90 (12
//! `.cq` files of 8 entries), about 290 keys (5 `.idx` files), put in two sessions (150, closed,
//! then 90), consumer offsets committed. Store B (the "other store"): 200 other messages over the
//! same queues, in another order.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::store_derived::{
    CQ_ENTRY, Model, Shutdown, check_raw_index, check_store, checkpoint_file, config, cut, entry_position, fail_if,
    flip, index_files, open, queue_dir, queue_files, replace_dir_with, replace_with, shut_down, slot_position,
    write_garbage,
};
use strata_log::internals::inspect::store::{StoreDump, dump_store_file};
use strata_log::internals::inspect::{RecoverOptions, recover_store};
use strata_log::{Message, MessageStore};

const QUEUES: [(&str, u32); 6] = [("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1), ("u", 2)];
/// The queue most damages hit: it has the most files.
const TOPIC: &str = "t";
const QUEUE: u32 = 0;

/// Message `i` of store A: `t/0` gets 3 of every 8; key `a<i>`, and every 5th a shared key too.
fn a_message(i: u64) -> Message {
    let (topic, queue) = QUEUES[[0, 0, 1, 2, 3, 4, 5, 0][(i % 8) as usize]];
    let mut keys = vec![format!("a{i}")];
    if i.is_multiple_of(5) {
        keys.push(format!("shared{}", i % 7));
    }
    Message::new(topic, queue, format!("A-{i}")).with_keys(keys)
}

/// Message `i` of store B: other queues in another order, other bodies and keys.
fn b_message(i: u64) -> Message {
    let (topic, queue) = QUEUES[[1, 0, 2, 0, 3, 4, 5, 0, 0][(i % 9) as usize]];
    Message::new(topic, queue, format!("B-{i}")).with_keys([format!("b{i}")])
}

/// Store A in `root`, open, with its model: 150 messages and commits, a clean close, a reopen, 90
/// more and commits (flushed).
fn build_a(root: &Path) -> (MessageStore, Model) {
    let mut model = Model::default();
    let store = open(root, "building store A");
    for i in 0..150 {
        model.put(&store, &a_message(i));
    }
    model.commit(&store, "g", "t", 0, 20);
    model.commit(&store, "g", "u", 1, 5);
    store.close().unwrap();
    let store = open(root, "building store A, second session");
    for i in 150..240 {
        model.put(&store, &a_message(i));
    }
    model.commit(&store, "g", "t", 0, 70);
    let (_, u2_end) = model.bounds("u", 2);
    model.commit(&store, "h", "u", 2, u2_end);
    store.flush_offsets().unwrap();
    fail_if(check_store(&store, &model), "store A as built, before any damage (a bug of the test or of the store)");
    (store, model)
}

/// Store B in `root`, closed.
fn build_b(root: &Path) {
    let store = open(root, "building store B");
    for i in 0..200 {
        store.put(&b_message(i)).unwrap();
    }
    store.close().unwrap();
}

/// Which file of several.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Oldest,
    Newest,
}

/// What happens to a file.
#[derive(Debug, Clone, Copy)]
enum Harm {
    Delete,
    /// Cut to 7 bytes.
    CutShort,
    /// Cut to a partial entry: after 3 whole entries (fewer than the file held), and 13 bytes.
    CutOdd,
    /// Random bytes over part of it.
    Garbage,
    /// Replaced by store B's file of the same name.
    Foreign,
}

#[derive(Debug, Clone, Copy)]
enum Damage {
    /// `rm consumequeue/t/0/*.cq index/*.idx`.
    QueueAndIndexFilesDeleted,
    /// `rm -r consumequeue/t/0`.
    QueueDirDeleted,
    /// `rm consumequeue/t/0/*.cq`.
    QueueFilesDeleted,
    /// One `.cq` file of `t/0`.
    QueueFile(Pick, Harm),
    /// `consumequeue/t/0` replaced by store B's.
    QueueDirForeign,
    /// `rm -r consumequeue`.
    ConsumeQueueDirDeleted,
    /// `rm index/*.idx`.
    IndexFilesDeleted,
    /// One `.idx` file.
    IndexFile(Pick, Harm),
    /// Two bytes flipped in a used hash slot of the oldest `.idx` (it points past the entries).
    IndexSlotFlipped,
    /// Two bytes flipped in the newest `.idx`'s header (`end_log_offset`, far past the log).
    IndexHeaderFlipped,
    /// `index/` replaced by store B's.
    IndexDirForeign,
    /// `rm -r index`.
    IndexDirDeleted,
    /// The store checkpoint.
    Checkpoint(Harm),
}

impl Damage {
    fn needs_b(self) -> bool {
        matches!(
            self,
            Damage::QueueFile(_, Harm::Foreign)
                | Damage::QueueDirForeign
                | Damage::IndexFile(_, Harm::Foreign)
                | Damage::IndexDirForeign
                | Damage::Checkpoint(Harm::Foreign)
        )
    }

    /// Does it to the store in `root`; `b` is store B's root. Returns what it did.
    fn apply(self, root: &Path, b: &Path) -> String {
        let in_b = |path: &Path| b.join(path.strip_prefix(root).unwrap());
        let pick = |files: Vec<PathBuf>, pick: Pick| -> PathBuf {
            assert!(files.len() >= 4, "enough files to pick from: {files:?}");
            match pick {
                Pick::Oldest => files[0].clone(),
                Pick::Newest => files[files.len() - 1].clone(),
            }
        };
        let rm = |path: &Path| std::fs::remove_file(path).unwrap();
        let name = |path: &Path| path.strip_prefix(root).unwrap().display().to_string();
        match self {
            Damage::QueueAndIndexFilesDeleted => {
                queue_files(root, TOPIC, QUEUE).iter().chain(&index_files(root)).for_each(|f| rm(f));
                "rm consumequeue/t/0/*.cq index/*.idx".to_owned()
            }
            Damage::QueueDirDeleted => {
                std::fs::remove_dir_all(queue_dir(root, TOPIC, QUEUE)).unwrap();
                "rm -r consumequeue/t/0".to_owned()
            }
            Damage::QueueFilesDeleted => {
                queue_files(root, TOPIC, QUEUE).iter().for_each(|f| rm(f));
                "rm consumequeue/t/0/*.cq".to_owned()
            }
            Damage::QueueFile(which, harm) => {
                let file = pick(queue_files(root, TOPIC, QUEUE), which);
                harm_file(&file, harm, &in_b(&file), 5, 50);
                format!("{harm:?} on the {which:?} .cq of t/0 ({})", name(&file))
            }
            Damage::QueueDirForeign => {
                replace_dir_with(&queue_dir(root, TOPIC, QUEUE), &queue_dir(b, TOPIC, QUEUE));
                "consumequeue/t/0 replaced by another store's".to_owned()
            }
            Damage::ConsumeQueueDirDeleted => {
                std::fs::remove_dir_all(root.join("consumequeue")).unwrap();
                "rm -r consumequeue".to_owned()
            }
            Damage::IndexFilesDeleted => {
                index_files(root).iter().for_each(|f| rm(f));
                "rm index/*.idx".to_owned()
            }
            Damage::IndexFile(which, harm) => {
                let file = pick(index_files(root), which);
                // Garbage over the second half of the slots and the first entries.
                let (at, len) = (slot_position(8), (entry_position(4) - slot_position(8)) as usize);
                harm_file(&file, harm, &in_b(&file), at, len);
                format!("{harm:?} on the {which:?} .idx ({})", name(&file))
            }
            Damage::IndexSlotFlipped => {
                let file = index_files(root)[0].clone();
                let bytes = std::fs::read(&file).unwrap();
                let slot = (0..16).find(|&s| bytes[slot_position(s) as usize..][..4] != [0; 4]).expect("a used slot");
                flip(&file, slot_position(slot), &[0x7f, 0xff]);
                format!("two bytes flipped in hash slot {slot} of the oldest .idx ({})", name(&file))
            }
            Damage::IndexHeaderFlipped => {
                let file = index_files(root).pop().unwrap();
                // end_log_offset (bytes 24..32, big-endian): its high bytes.
                flip(&file, 24, &[0x01, 0x10]);
                format!("two bytes flipped in the end_log_offset of the newest .idx ({})", name(&file))
            }
            Damage::IndexDirForeign => {
                replace_dir_with(&root.join("index"), &b.join("index"));
                "index/ replaced by another store's".to_owned()
            }
            Damage::IndexDirDeleted => {
                std::fs::remove_dir_all(root.join("index")).unwrap();
                "rm -r index".to_owned()
            }
            Damage::Checkpoint(harm) => {
                let file = checkpoint_file(root);
                harm_file(&file, harm, &checkpoint_file(b), 6, 8);
                format!("{harm:?} on store.checkpoint")
            }
        }
    }
}

/// Does `harm` to `file`: garbage is `len` bytes at `at`; a foreign copy is `foreign`.
fn harm_file(file: &Path, harm: Harm, foreign: &Path, at: u64, len: usize) {
    let file_len = std::fs::metadata(file).unwrap().len();
    match harm {
        Harm::Delete => std::fs::remove_file(file).unwrap(),
        Harm::CutShort => cut(file, 7),
        Harm::CutOdd => {
            let len = if file.extension().is_some_and(|e| e == "idx") {
                entry_position(4) + 13
            } else {
                // At most 3 whole entries, and at least one entry fewer than it holds.
                let bytes = std::fs::read(file).unwrap();
                let entries = bytes.chunks(CQ_ENTRY as usize).take_while(|e| e.iter().any(|&b| b != 0)).count() as u64;
                assert!(entries >= 2, "{} holds {entries} entries", file.display());
                3.min(entries - 1) * CQ_ENTRY + 13
            };
            assert!(len < file_len, "{} is longer than {len} bytes", file.display());
            cut(file, len);
        }
        Harm::Garbage => write_garbage(file, at, len, file_len ^ at),
        Harm::Foreign => replace_with(file, foreign),
    }
}

/// Builds store A (and B if needed), stops A as `how` says, damages it, reopens it and checks it.
fn run(damage: Damage, how: Shutdown) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (store, mut model) = build_a(&a);
    if damage.needs_b() {
        build_b(&b);
    }
    let root = shut_down(store, &a, how);
    let what = damage.apply(&root, &b);
    reopen_and_check(&root, &mut model, &format!("{what}, {how}"));
}

/// Reopens the store in `root` and checks it against `model`, puts one more message to every
/// queue, closes it and checks its raw index, then reopens and checks it again.
fn reopen_and_check(root: &Path, model: &mut Model, when: &str) {
    let store = open(root, when);
    let mut problems = check_store(&store, model);
    problems.extend(model.put_one_each(&store, 1));
    fail_if(problems, &format!("{when}: at the first open"));
    store.close().unwrap();
    fail_if(check_raw_index(root, model), &format!("{when}: the index files after a clean close"));
    let store = open(root, when);
    fail_if(check_store(&store, model), &format!("{when}: at the next open"));
    store.close().unwrap();
}

/// One module per damage, with a test per shutdown.
macro_rules! damage_tests {
    ($($name:ident: $damage:expr;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn clean_close() {
                run($damage, Shutdown::Close);
            }

            #[test]
            fn crash() {
                run($damage, Shutdown::Crash);
            }

            #[test]
            fn abort_marker() {
                run($damage, Shutdown::AbortMarker);
            }
        }
    )*};
}

damage_tests! {
    // The rows of the issue.
    queue_and_index_files_deleted: Damage::QueueAndIndexFilesDeleted;
    queue_dir_deleted: Damage::QueueDirDeleted;
    index_slot_flipped: Damage::IndexSlotFlipped;
    index_header_flipped: Damage::IndexHeaderFlipped;
    // Every damage of a .cq, a queue's directory, consumequeue/.
    queue_files_deleted: Damage::QueueFilesDeleted;
    oldest_cq_deleted: Damage::QueueFile(Pick::Oldest, Harm::Delete);
    newest_cq_deleted: Damage::QueueFile(Pick::Newest, Harm::Delete);
    oldest_cq_cut_short: Damage::QueueFile(Pick::Oldest, Harm::CutShort);
    newest_cq_cut_short: Damage::QueueFile(Pick::Newest, Harm::CutShort);
    oldest_cq_cut_odd: Damage::QueueFile(Pick::Oldest, Harm::CutOdd);
    newest_cq_cut_odd: Damage::QueueFile(Pick::Newest, Harm::CutOdd);
    oldest_cq_garbage: Damage::QueueFile(Pick::Oldest, Harm::Garbage);
    newest_cq_garbage: Damage::QueueFile(Pick::Newest, Harm::Garbage);
    oldest_cq_foreign: Damage::QueueFile(Pick::Oldest, Harm::Foreign);
    newest_cq_foreign: Damage::QueueFile(Pick::Newest, Harm::Foreign);
    queue_dir_foreign: Damage::QueueDirForeign;
    consumequeue_dir_deleted: Damage::ConsumeQueueDirDeleted;
    // Every damage of an .idx, index/.
    index_files_deleted: Damage::IndexFilesDeleted;
    oldest_idx_deleted: Damage::IndexFile(Pick::Oldest, Harm::Delete);
    newest_idx_deleted: Damage::IndexFile(Pick::Newest, Harm::Delete);
    oldest_idx_cut_short: Damage::IndexFile(Pick::Oldest, Harm::CutShort);
    newest_idx_cut_short: Damage::IndexFile(Pick::Newest, Harm::CutShort);
    oldest_idx_cut_odd: Damage::IndexFile(Pick::Oldest, Harm::CutOdd);
    newest_idx_cut_odd: Damage::IndexFile(Pick::Newest, Harm::CutOdd);
    oldest_idx_garbage: Damage::IndexFile(Pick::Oldest, Harm::Garbage);
    newest_idx_garbage: Damage::IndexFile(Pick::Newest, Harm::Garbage);
    oldest_idx_foreign: Damage::IndexFile(Pick::Oldest, Harm::Foreign);
    index_dir_foreign: Damage::IndexDirForeign;
    index_dir_deleted: Damage::IndexDirDeleted;
    // Every damage of the store checkpoint.
    checkpoint_deleted: Damage::Checkpoint(Harm::Delete);
    checkpoint_cut_short: Damage::Checkpoint(Harm::CutShort);
    checkpoint_garbage: Damage::Checkpoint(Harm::Garbage);
    checkpoint_foreign: Damage::Checkpoint(Harm::Foreign);
}

/// How many entries the `.idx` files of the closed store in `root` hold, in all.
fn raw_index_entries(root: &Path) -> usize {
    index_files(root)
        .iter()
        .map(|path| match dump_store_file(path).unwrap() {
            Some(StoreDump::IndexFile(dump)) => dump.entries.len(),
            other => panic!("{}: not an index file: {other:?}", path.display()),
        })
        .sum()
}

/// The fourth row of the issue: the store checkpoint deleted before each of four reopens (every
/// message dispatched again each time), then a `.cq` cut to a partial entry: dispatch again is
/// idempotent for every derived file (the index never holds a (key hash, log offset) twice).
fn checkpoint_deleted_before_four_reopens(how: Shutdown) {
    let dir = tempfile::tempdir().unwrap();
    let (store, model) = build_a(&dir.path().join("a"));
    let mut root = shut_down(store, &dir.path().join("a"), how);
    let keys: usize = model.puts.iter().map(|p| p.keys.len()).sum();
    for round in 1..=4 {
        let when = format!("store.checkpoint deleted before reopen {round} of 4, each {how}");
        match std::fs::remove_file(checkpoint_file(&root)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            removed => removed.unwrap(),
        }
        let store = open(&root, &when);
        fail_if(check_store(&store, &model), &when);
        root = shut_down(store, &root, how);
    }
    let newest = queue_files(&root, TOPIC, QUEUE).pop().unwrap();
    cut(&newest, CQ_ENTRY + 7);
    let when = format!("store.checkpoint deleted before 4 reopens, each {how}, then the newest .cq of t/0 cut");
    let store = open(&root, &when);
    fail_if(check_store(&store, &model), &when);
    store.close().unwrap();
    let entries = raw_index_entries(&root);
    let mut problems = check_raw_index(&root, &model);
    if entries != keys {
        problems.push(format!("the index files hold {entries} entries for {keys} keys of messages"));
    }
    fail_if(problems, &format!("{when}: the index files after a clean close"));
}

#[test]
fn checkpoint_deleted_before_four_reopens_clean_close() {
    checkpoint_deleted_before_four_reopens(Shutdown::Close);
}

#[test]
fn checkpoint_deleted_before_four_reopens_crash() {
    checkpoint_deleted_before_four_reopens(Shutdown::Crash);
}

#[test]
fn checkpoint_deleted_before_four_reopens_abort_marker() {
    checkpoint_deleted_before_four_reopens(Shutdown::AbortMarker);
}

/// A store whose `t/0` messages retention removed (all of them, or all but the last few if
/// `late` is), then its derived files lost as `lose` says: `t/0` goes on numbering where it was
/// (the highest queue offset handed out is kept durably), other queues are rebuilt.
fn retention_then_lost(how: Shutdown, late: bool, lose: fn(&Path) -> &'static str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a");
    let mut model = Model::default();
    let store = open(&root, "building the store");
    for i in 0..30 {
        model.put(&store, &Message::new("t", 0, format!("early-{i}")).with_keys([format!("e{i}")]));
    }
    for i in 0..200 {
        let (topic, queue) = QUEUES[1 + (i % 5) as usize];
        model.put(&store, &Message::new(topic, queue, format!("later-{i}")).with_keys([format!("l{i}")]));
    }
    for i in 0..(if late { 10 } else { 0 }) {
        model.put(&store, &Message::new("t", 0, format!("late-{i}")).with_keys([format!("late{i}")]));
    }
    let (_, t0_end) = model.bounds("t", 0);
    model.commit(&store, "g", "t", 0, t0_end);
    model.commit(&store, "g", "u", 1, 20);
    store.flush_offsets().unwrap();
    let start = store.delete_messages_before(200).unwrap();
    assert!(start > 30 && start <= 200, "precondition: retention removed every early t/0 message (start {start})");
    model.start = start;
    fail_if(check_store(&store, &model), "after retention, before any damage (a bug of the test or of the store)");
    let root = shut_down(store, &root, how);
    let what = lose(&root);
    let late = if late { "all but the last 10" } else { "all" };
    reopen_and_check(&root, &mut model, &format!("retention removed {late} of t/0's messages, {what}, {how}"));
}

fn lose_all_derived(root: &Path) -> &'static str {
    std::fs::remove_dir_all(root.join("consumequeue")).unwrap();
    std::fs::remove_dir_all(root.join("index")).unwrap();
    "then rm -r consumequeue index"
}

fn lose_queue_dir(root: &Path) -> &'static str {
    std::fs::remove_dir_all(queue_dir(root, "t", 0)).unwrap();
    "then rm -r consumequeue/t/0"
}

#[test]
fn retention_then_derived_files_lost_clean_close() {
    retention_then_lost(Shutdown::Close, false, lose_all_derived);
}

#[test]
fn retention_then_derived_files_lost_crash() {
    retention_then_lost(Shutdown::Crash, false, lose_all_derived);
}

#[test]
fn retention_then_derived_files_lost_abort_marker() {
    retention_then_lost(Shutdown::AbortMarker, false, lose_all_derived);
}

#[test]
fn retention_then_queue_dir_lost_clean_close() {
    retention_then_lost(Shutdown::Close, false, lose_queue_dir);
}

#[test]
fn retention_then_queue_dir_lost_crash() {
    retention_then_lost(Shutdown::Crash, false, lose_queue_dir);
}

#[test]
fn retention_then_queue_dir_lost_abort_marker() {
    retention_then_lost(Shutdown::AbortMarker, false, lose_queue_dir);
}

#[test]
fn partial_retention_then_derived_files_lost_clean_close() {
    retention_then_lost(Shutdown::Close, true, lose_all_derived);
}

#[test]
fn partial_retention_then_derived_files_lost_crash() {
    retention_then_lost(Shutdown::Crash, true, lose_all_derived);
}

#[test]
fn partial_retention_then_derived_files_lost_abort_marker() {
    retention_then_lost(Shutdown::AbortMarker, true, lose_all_derived);
}

/// A committed offset past a queue's end is clamped to the end of the queue as rebuilt from the
/// log (not to 0, as if the queue were empty), and the others stay.
fn offset_past_the_end_clamped_to_the_rebuilt_end(how: Shutdown) {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut model) = build_a(&dir.path().join("a"));
    let (_, end) = model.bounds(TOPIC, QUEUE);
    store.commit_offset("g", TOPIC, QUEUE, end + 1_000).unwrap();
    model.committed.insert(("g".to_owned(), TOPIC.to_owned(), QUEUE), end);
    store.flush_offsets().unwrap();
    let root = shut_down(store, &dir.path().join("a"), how);
    std::fs::remove_dir_all(queue_dir(&root, TOPIC, QUEUE)).unwrap();
    let when = format!("g committed t/0 at {} (past its end {end}), rm -r consumequeue/t/0, {how}", end + 1_000);
    reopen_and_check(&root, &mut model, &when);
}

#[test]
fn offset_past_the_end_clamped_to_the_rebuilt_end_clean_close() {
    offset_past_the_end_clamped_to_the_rebuilt_end(Shutdown::Close);
}

#[test]
fn offset_past_the_end_clamped_to_the_rebuilt_end_crash() {
    offset_past_the_end_clamped_to_the_rebuilt_end(Shutdown::Crash);
}

#[test]
fn offset_past_the_end_clamped_to_the_rebuilt_end_abort_marker() {
    offset_past_the_end_clamped_to_the_rebuilt_end(Shutdown::AbortMarker);
}

/// A store checkpoint older than the queues (a backup put back, another store's), all of whose
/// records point below the log's start, cannot be told wrong from the log; it is replaced by the
/// open all the same, so that a crash before the next flush, and then the loss of a queue's first
/// file, still finds the queue's first entries missing, not retained away.
#[test]
fn stale_checkpoint_replaced_at_open_then_oldest_cq_lost_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("a");
    let mut model = Model::default();
    let store = open(&root, "building the store");
    for i in 0..12 {
        let (topic, queue) = QUEUES[(i % 6) as usize];
        model.put(&store, &Message::new(topic, queue, format!("early-{i}")));
    }
    store.close().unwrap();
    let stale = std::fs::read(checkpoint_file(&root)).unwrap();
    let store = open(&root, "building the store, second session");
    for i in 0..200 {
        let (topic, queue) = QUEUES[(i % 6) as usize];
        model.put(&store, &Message::new(topic, queue, format!("later-{i}")));
    }
    let start = store.delete_messages_before(60).unwrap();
    assert!(start >= 12, "precondition: retention removed every early message (start {start})");
    model.start = start;
    store.close().unwrap();
    std::fs::write(checkpoint_file(&root), &stale).unwrap();
    let when = "the store checkpoint of an earlier session put back";
    let store = open(&root, when);
    fail_if(check_store(&store, &model), when);
    let root = shut_down(store, &root, Shutdown::Crash);
    let oldest = queue_files(&root, TOPIC, QUEUE).remove(0);
    std::fs::remove_file(&oldest).unwrap();
    let when = format!("{when}, a clean open, a crash, then rm {}", oldest.display());
    reopen_and_check(&root, &mut model, &when);
}

/// Another store's whole `index/` that fits every record this store keeps of its index: both
/// stores index one key per message, so the entry the store checkpoint recorded for the first file
/// (its count, and its log offset) is the other store's first file's too. After an unclean
/// shutdown (a sealed file whose end is past the log's is left to the newest file's recovery)
/// only the entries tell the files apart: their keys are not this log's messages' keys.
fn index_dir_foreign_agreeing_with_the_checkpoint(how: Shutdown) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    build_b(&b);
    let mut model = Model::default();
    let store = open(&a, "building the store");
    for i in 0..30 {
        let (topic, queue) = QUEUES[(i % 6) as usize];
        model.put(&store, &Message::new(topic, queue, format!("A-{i}")).with_keys([format!("a{i}")]));
    }
    store.close().unwrap();
    // The clean open writes no checkpoint: a crash copy keeps the close's, which records the index.
    let store = open(&a, "building the store, second session");
    let root = shut_down(store, &a, how);
    replace_dir_with(&root.join("index"), &b.join("index"));
    reopen_and_check(
        &root,
        &mut model,
        &format!("index/ replaced by another store's agreeing with the checkpoint, {how}"),
    );
}

#[test]
fn index_dir_foreign_agreeing_with_the_checkpoint_clean_close() {
    index_dir_foreign_agreeing_with_the_checkpoint(Shutdown::Close);
}

#[test]
fn index_dir_foreign_agreeing_with_the_checkpoint_crash() {
    index_dir_foreign_agreeing_with_the_checkpoint(Shutdown::Crash);
}

#[test]
fn index_dir_foreign_agreeing_with_the_checkpoint_abort_marker() {
    index_dir_foreign_agreeing_with_the_checkpoint(Shutdown::AbortMarker);
}

/// `store recover` keeps the numbering a queue's own files hold where retention removed its
/// messages, but not from another store's file: one whose entry at the last queue offset the store
/// checkpoint recorded holds another log offset, and whose entries all point below the log's start
/// (no message left to tell it by), does not raise the queue's numbering.
#[test]
fn store_recover_takes_no_numbering_from_another_stores_cq_below_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    build_b(&b);
    let mut model = Model::default();
    let store = open(&a, "building the store");
    for i in 0..4 {
        model.put(&store, &Message::new(TOPIC, QUEUE, format!("A-{i}")));
    }
    for i in 4..200 {
        model.put(&store, &Message::new("u", 0, format!("A-{i}-{}", "x".repeat(100))));
    }
    let start = store.delete_messages_before(150).unwrap();
    model.start = start;
    store.close().unwrap();
    let file = queue_files(&a, TOPIC, QUEUE).remove(0);
    replace_with(&file, &b.join(file.strip_prefix(&a).unwrap()));
    let foreign = match dump_store_file(&file).unwrap() {
        Some(StoreDump::ConsumeQueue(dump)) => dump.entries,
        other => panic!("not a consume queue: {other:?}"),
    };
    assert!(foreign.len() > 4, "precondition: the other store's file holds more of t/0 ({})", foreign.len());
    assert!(foreign.iter().all(|e| e.log_offset < start), "precondition: its entries all point below {start}");
    let outcome = recover_store(&a, config(), RecoverOptions::default()).unwrap();
    assert!(!outcome.refused && outcome.queue_offsets_cut.is_empty());
    reopen_and_check(&a, &mut model, "consumequeue/t/0's first file replaced by another store's, store recover");
}

/// A queue whose first file is lost after a crash, its entries all dispatched after the store
/// checkpoint (which records the queue as empty, or at an offset whose messages retention removed,
/// or not at all): nothing the checkpoint recorded is missing, yet the queue starts past its
/// numbering recorded with its first message in the log, and its lost entries' messages may be
/// there too. It is rebuilt, not kept short.
fn first_cq_lost_after_the_checkpoint(recorded: bool) {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let mut model = Model::default();
    let store = open(&a, "building the store");
    if recorded {
        for i in 0..2 {
            model.put(&store, &Message::new(TOPIC, QUEUE, format!("early-{i}")));
        }
    }
    for i in 0..60 {
        model.put(&store, &Message::new("u", 0, format!("u-{i}-{}", "x".repeat(100))));
    }
    if recorded {
        model.start = store.delete_messages_before(40).unwrap();
        assert!(model.start >= 2, "precondition: retention removed t/0's first messages (start {})", model.start);
    }
    store.close().unwrap();
    // The clean open writes no checkpoint: the crash copy keeps the close's, from before t/0's
    // next 10 messages (two files of 8).
    let store = open(&a, "building the store, second session");
    for i in 0..10 {
        model.put(&store, &Message::new(TOPIC, QUEUE, format!("later-{i}")));
    }
    let root = shut_down(store, &a, Shutdown::Crash);
    let first = queue_files(&root, TOPIC, QUEUE).remove(0);
    std::fs::remove_file(&first).unwrap();
    let when = format!("t/0 recorded: {recorded}, a crash, rm {}", first.display());
    reopen_and_check(&root, &mut model, &when);
}

#[test]
fn first_cq_lost_after_the_checkpoint_queue_unrecorded() {
    first_cq_lost_after_the_checkpoint(false);
}

#[test]
fn first_cq_lost_after_the_checkpoint_queue_recorded_below_the_log_start() {
    first_cq_lost_after_the_checkpoint(true);
}

/// A queue left with nothing but its numbering (retention removed its messages, then its files
/// were lost: it is listed empty at its floor) keeps that numbering when the store checkpoint is
/// replaced by another store's that does not name it: the checkpoint is found stale (its records
/// of the other queues do not fit), so its silence about the queue says nothing.
#[test]
fn queue_empty_at_its_floor_kept_when_another_stores_checkpoint_does_not_name_it() {
    for how in [Shutdown::Close, Shutdown::Crash, Shutdown::AbortMarker] {
        let dir = tempfile::tempdir().unwrap();
        let (a, c) = (dir.path().join("a"), dir.path().join("c"));
        // The other store: a few messages of u/0 only (none of its queues ahead of this one's).
        let other = open(&c, "building the other store");
        for i in 0..5 {
            other.put(&Message::new("u", 0, format!("C-{i}"))).unwrap();
        }
        other.close().unwrap();
        let mut model = Model::default();
        let store = open(&a, "building the store");
        for i in 0..3 {
            model.put(&store, &Message::new(TOPIC, QUEUE, format!("early-{i}")));
        }
        for i in 0..60 {
            model.put(&store, &Message::new("u", 0, format!("u-{i}-{}", "x".repeat(100))));
        }
        model.start = store.delete_messages_before(40).unwrap();
        assert!(model.start >= 3, "precondition: retention removed t/0's messages (start {})", model.start);
        store.close().unwrap();
        std::fs::remove_dir_all(queue_dir(&a, TOPIC, QUEUE)).unwrap();
        let store = open(&a, "t/0's files lost: listed empty at its floor");
        fail_if(check_store(&store, &model), "t/0 empty at its floor");
        let root = shut_down(store, &a, how);
        replace_with(&checkpoint_file(&root), &checkpoint_file(&c));
        let when = format!("t/0 empty at its floor 3, store.checkpoint replaced by another store's, {how}");
        reopen_and_check(&root, &mut model, &when);
    }
}
