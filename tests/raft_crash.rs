//! The Raft store after a kill, with the child a process of its own (this test binary run
//! again, its `raft_child` test alone):
//! - killed at the crash point between the purge's meta write and the deletion of the
//!   entries: the reopened store finishes the purge (no purged entry is served again);
//! - killed with SIGKILL while appending 64 entries per call, and then given a torn tail (half
//!   a batch after the last whole one, as a write cut short leaves): every entry reported
//!   flushed is there, in order and intact, the torn tail is cut, and appends go on.
#![cfg(all(feature = "openraft", feature = "failpoints"))]
#![allow(clippy::unwrap_used)]

#[path = "common/raft.rs"]
mod raft_common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use openraft::EntryPayload;
use openraft::storage::{LogState, RaftLogReader, RaftLogStorage, RaftLogStorageExt};
use raft_common::{Kv, config, log_id, normals, open};
use strata_log::internals::{CRASH_EXIT_CODE, segment_files};
use strata_log::{BatchBuilder, Log, Record};

const CHILD_DIR: &str = "STRATA_RAFT_CHILD_DIR";
const CHILD_OP: &str = "STRATA_RAFT_CHILD_OP";
/// Entries the `purge` child appends before purging up to `PURGED`.
const PURGE_ENTRIES: u64 = 2000;
const PURGED: u64 = 1499;

fn child(dir: &Path, op: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "raft_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_OP, op)
        .env_remove("FAILPOINTS");
    command
}

#[test]
#[ignore = "the child process of the tests in this file"]
fn raft_child() {
    let _scenario = fail::FailScenario::setup();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else {
        // Alone, without a parent: the purge on a store of its own, checked.
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(purge_child(dir.path()));
        return runtime.block_on(check_purged(dir.path()));
    };
    match std::env::var(CHILD_OP).as_deref() {
        Ok("purge") => runtime.block_on(purge_child(&dir)),
        Ok("mixed") => runtime.block_on(mixed_child(&dir)),
        _ => runtime.block_on(append_child(&dir)),
    }
}

/// Appends `PURGE_ENTRIES` entries and purges up to `PURGED`.
async fn purge_child(dir: &Path) {
    let mut store = open(dir).await;
    for start in (0..PURGE_ENTRIES).step_by(64) {
        store.blocking_append(normals(1, start..(start + 64).min(PURGE_ENTRIES))).await.unwrap();
    }
    store.purge(log_id(1, PURGED)).await.unwrap();
    store.close().await.unwrap();
}

/// Appends 64 entries per call forever, printing `ack <last index>` once each call is flushed.
async fn append_child(dir: &Path) {
    let mut store = open(dir).await;
    let mut out = std::io::stdout().lock();
    for start in (0..).step_by(64) {
        store.blocking_append(normals(1, start..start + 64)).await.unwrap();
        writeln!(out, "ack {}", start + 63).unwrap();
        out.flush().unwrap();
    }
}

async fn check_purged(dir: &Path) {
    let mut store = open(dir).await;
    let state = store.get_log_state().await.unwrap();
    let want = LogState::<Kv> { last_purged_log_id: Some(log_id(1, PURGED)), last_log_id: Some(log_id(1, 1999)) };
    assert_eq!(state, want);
    assert_eq!(store.log().start_offset(), PURGED + 1, "the log start hides the purged entries");
    let entries = store.try_get_log_entries(..).await.unwrap();
    let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, (PURGED + 1..PURGE_ENTRIES).collect::<Vec<_>>());
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_purge_meta_write_and_the_deletion_is_finished_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = child(dir.path(), "purge");
    command.env("FAILPOINTS", "raft_purge_after_meta=return").stdout(Stdio::null()).stderr(Stdio::null());
    let status = tokio::task::spawn_blocking(move || command.status().unwrap()).await.unwrap();
    assert_eq!(status.code(), Some(CRASH_EXIT_CODE), "the child stopped at the crash point");
    // The crash came before the deletion: the log still starts at 0.
    let log_dir = dir.path().join("log");
    assert_eq!(segment_files(&log_dir).unwrap()[0].base_offset, 0);
    let log = Log::open_read_only(&log_dir, config()).unwrap();
    assert_eq!((log.start_offset(), log.next_offset()), (0, PURGE_ENTRIES));
    drop(log);
    check_purged(dir.path()).await;
}

/// The position in the last segment after its last whole batch.
fn data_end(log_dir: &Path) -> (PathBuf, u64) {
    let last = segment_files(log_dir).unwrap().pop().unwrap();
    let log = Log::open_read_only(log_dir, config()).unwrap();
    let (mut offset, mut position) = (last.base_offset, 0);
    while offset < log.next_offset() {
        for batch in log.read(offset, 1 << 20).unwrap().batches() {
            let batch = batch.unwrap();
            position += batch.encoded_len();
            offset = batch.last_offset() + 1;
        }
    }
    (last.path, position)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_append_and_a_torn_tail_keep_every_flushed_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = child(dir.path(), "append");
    let mut writer = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = writer.stdout.take().unwrap();
    let acked = tokio::task::spawn_blocking(move || {
        let mut acked = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, index)) = line.split_once("ack ") {
                acked = Some(index.trim().parse::<u64>().unwrap());
                if acked >= Some(3000) {
                    break;
                }
            }
        }
        writer.kill().unwrap();
        writer.wait().unwrap();
        acked.unwrap()
    })
    .await
    .unwrap();

    // A write cut short: half of a batch after the last whole one.
    let (segment, end) = data_end(&dir.path().join("log"));
    let mut builder = BatchBuilder::new(1);
    builder.append(&Record::new(b"key9999999=a torn entry")).unwrap();
    let torn = builder.finish().unwrap().to_vec();
    let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &torn[..torn.len() / 2], end).unwrap();
    drop(file);

    let mut store = open(dir.path()).await;
    assert!(store.log().recovery_report().bytes_truncated > 0, "the torn tail was cut");
    let entries = store.try_get_log_entries(..).await.unwrap();
    let last = entries.last().unwrap().log_id;
    assert!(last.index >= acked, "flushed up to {acked}, the log ends at {}", last.index);
    for (index, entry) in (0..).zip(&entries) {
        assert_eq!(entry.log_id, log_id(1, index));
        let EntryPayload::Normal(command) = &entry.payload else { panic!("entry {index}: {entry:?}") };
        assert_eq!(*command, format!("key{index}=value{index}"));
    }
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(last));
    store.blocking_append(normals(2, last.index + 1..last.index + 10)).await.unwrap();
    store.close().await.unwrap();
    let mut store = open(dir.path()).await;
    assert_eq!(store.get_log_state().await.unwrap().last_log_id, Some(log_id(2, last.index + 9)));
    store.close().await.unwrap();
}

/// Goes on from what the store holds: 16 entries per call of the vote's term, a new vote every
/// 4 calls and a purge (up to 40 entries behind the end) every 3, printing
/// `ack <last index> <vote term> <last purged index>` after each step returned.
async fn mixed_child(dir: &Path) {
    let mut store = open(dir).await;
    let mut out = std::io::stdout().lock();
    let mut term = store.read_vote().await.unwrap().map_or(1, |vote| vote.leader_id().term);
    let state = store.get_log_state().await.unwrap();
    let mut purged = state.last_purged_log_id.map(|id| id.index);
    let mut next = state.last_log_id.map_or(0, |id| id.index + 1);
    for step in 0u64.. {
        if step % 4 == 0 {
            term += 1;
            store.save_vote(&openraft::Vote::new_committed(term, 1)).await.unwrap();
        }
        store.blocking_append(normals(term, next..next + 16)).await.unwrap();
        next += 16;
        if step % 3 == 2 {
            store.purge(log_id(term, next - 40)).await.unwrap();
            purged = Some(next - 40);
        }
        let purged = purged.map_or(-1, |index| index as i64);
        writeln!(out, "ack {} {term} {purged}", next - 1).unwrap();
        out.flush().unwrap();
    }
}

/// Kills a child appending, voting and purging at a random moment, `STRATA_RAFT_KILLS` times
/// (default 4), and checks after each kill that every entry, vote and purge acknowledged before it
/// survived: the log holds every index from the one after the last purged to at least the last
/// acknowledged, each entry at its own index, and the next child goes on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_appends_votes_and_purges_keep_every_acknowledged_step() {
    use rand::RngExt;

    let kills: u32 = std::env::var("STRATA_RAFT_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut checked = 0;
    for kill in 0..kills {
        let delay = std::time::Duration::from_millis(rng.random_range(100..600));
        let mut command = child(dir.path(), "mixed");
        let mut writer = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let stdout = writer.stdout.take().unwrap();
        let acked = tokio::task::spawn_blocking(move || {
            let lines = std::thread::spawn(move || {
                let mut acked = None;
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some((_, rest)) = line.split_once("ack ") {
                        let fields: Vec<i64> = rest.split(' ').map(|f| f.parse().unwrap()).collect();
                        acked = Some((fields[0] as u64, fields[1] as u64, fields[2]));
                    }
                }
                acked
            });
            std::thread::sleep(delay);
            writer.kill().unwrap();
            writer.wait().unwrap();
            lines.join().unwrap()
        })
        .await
        .unwrap();
        let Some((last, term, purged)) = acked else { continue };
        let mut store = raft_common::open(dir.path()).await;
        let vote = store.read_vote().await.unwrap().unwrap();
        assert!(vote.leader_id().term >= term, "kill {kill}: vote {vote} below the acknowledged term {term}");
        let state = store.get_log_state().await.unwrap();
        let stored_purged = state.last_purged_log_id.map_or(-1, |id| id.index as i64);
        assert!(stored_purged >= purged, "kill {kill}: purged {stored_purged}, acknowledged {purged}");
        let start = (stored_purged + 1) as u64;
        assert_eq!(store.log().start_offset(), start, "kill {kill}: the log start hides the purged entries");
        let entries = store.try_get_log_entries(..).await.unwrap();
        let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
        let stored_last = state.last_log_id.unwrap().index;
        assert!(stored_last >= last, "kill {kill}: the log ends at {stored_last}, {last} was acknowledged");
        assert_eq!(indexes, (start..=stored_last).collect::<Vec<_>>(), "kill {kill}: a hole");
        for entry in &entries {
            let EntryPayload::Normal(command) = &entry.payload else { panic!("{entry:?}") };
            let index = entry.log_id.index;
            assert_eq!(*command, format!("key{index}=value{index}"));
        }
        store.close().await.unwrap();
        checked += 1;
    }
    assert!(checked > 0, "no child acknowledged anything before its kill");
}
