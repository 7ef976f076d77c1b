//! Crash points of the message store, for exact replay: a child process (`store_child`) runs with
//! `FAILPOINTS=<point>=<spec>` and exits on the spot at that step (status 86, asserted, so each
//! test proves its step was reached) — in dispatch, a queue roll, the store checkpoint, the
//! offsets write, the close, and each step of recovery; the parent then reopens and checks that
//! everything acknowledged is in its queue once, in order, findable by key, and that the store
//! goes on working.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::store_child::{self, Ack, StoreChild, check, open_unlocked};
use strata_log::internals::CRASH_EXIT_CODE;

#[test]
#[ignore = "the child process of the tests in this file"]
fn store_child() {
    store_child::main();
}

/// Runs a child doing `op` with `failpoints` until it exits; asserts it crashed there.
fn crash(dir: &Path, op: &str, round: u64, failpoints: &str, acked: &mut Vec<Ack>) {
    let mut child = StoreChild::spawn(dir, op, round, failpoints);
    child.read_acks(usize::MAX, acked);
    let code = child.finish(false, acked);
    assert_eq!(code, Some(CRASH_EXIT_CODE), "{failpoints}: the crash point was reached");
}

/// After a crash: reopen and check, then a child puts a few more, is killed, and all is checked
/// again.
fn check_and_go_on(dir: &Path, round: u64, acked: &mut Vec<Ack>, failpoints: &str) {
    let store = open_unlocked(dir);
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&store, acked)));
    assert!(checked.is_ok(), "after a crash at {failpoints}");
    store.close().unwrap();
    let mut child = StoreChild::spawn(dir, "put", round + 1, "");
    child.read_acks(30, acked);
    child.finish(true, acked);
    check(&open_unlocked(dir), acked);
}

/// A `put` child crashes at `failpoints`.
fn put_crash(failpoints: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    crash(dir.path(), "put", 0, failpoints, &mut acked);
    check_and_go_on(dir.path(), 0, &mut acked, failpoints);
}

/// A store left unclean by a killed `put` child (messages acknowledged), then an `open` child
/// crashing at `failpoints` in recovery, after `damage` (if any) to the killed store's files.
fn recovery_crash(failpoints: &str, damage: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    let mut child = StoreChild::spawn(dir.path(), "put", 0, "");
    child.read_acks(120, &mut acked);
    child.finish(true, &mut acked);
    damage(dir.path());
    crash(dir.path(), "open", 1, failpoints, &mut acked);
    check_and_go_on(dir.path(), 1, &mut acked, failpoints);
}

#[test]
fn crash_between_a_queue_entry_and_its_index_entries() {
    put_crash("store_after_queue_entry=30*off->return");
}

#[test]
fn crash_after_a_queue_file_rolls() {
    put_crash("store_after_queue_roll=return");
}

#[test]
fn crash_after_the_flushes_before_the_store_checkpoint() {
    put_crash("store_before_checkpoint=2*off->return");
}

#[test]
fn crash_while_the_store_checkpoint_is_replaced() {
    // The abort marker is the first file replaced atomically; the checkpoint comes after it.
    put_crash("after_tmp_write=3*off->return");
    put_crash("after_rename=4*off->return");
}

#[test]
fn crash_between_the_offsets_backup_and_the_new_offsets() {
    put_crash("store_offsets_after_backup=return");
}

#[test]
fn crash_after_abort_is_created_at_open() {
    put_crash("store_after_abort_created=return");
}

#[test]
fn crash_at_close_before_abort_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Vec::new();
    crash(dir.path(), "close", 0, "store_before_abort_removed=return", &mut acked);
    assert_eq!(acked.len(), 40);
    assert!(dir.path().join("abort").exists());
    check_and_go_on(dir.path(), 0, &mut acked, "store_before_abort_removed");
}

#[test]
fn crash_in_recovery_after_the_index_is_recovered() {
    recovery_crash("store_recovery_after_index=return", |_| {});
}

#[test]
fn crash_in_recovery_after_a_queue_is_cut() {
    // An entry past every queue's end pointing past the log's end: recovery cuts it.
    recovery_crash("store_recovery_after_queue_cut=return", |root| {
        let queue = root.join("consumequeue/orders/0");
        let mut files: Vec<_> = std::fs::read_dir(&queue).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let newest = files.pop().unwrap();
        let mut bytes = std::fs::read(&newest).unwrap();
        let end = bytes.chunks(20).take_while(|e| e.iter().any(|&b| b != 0)).count();
        assert!(end < bytes.len() / 20, "room after the last entry");
        let bogus = [u64::MAX / 2, 1, 0].map(u64::to_be_bytes).concat();
        bytes[end * 20..end * 20 + 20].copy_from_slice(&bogus[..20]);
        std::fs::write(&newest, bytes).unwrap();
    });
}

#[test]
fn crash_while_dispatch_rebuilds_a_deleted_consume_queue_at_open() {
    recovery_crash("store_after_queue_entry=25*off->return", |root| {
        std::fs::remove_dir_all(root.join("consumequeue")).unwrap();
    });
}
