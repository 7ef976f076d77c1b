//! Review regressions of the channel (issue 13): what a crash after the background deletion may
//! lose, and races of every call from many threads with the invariants checked throughout.
//!
//! The race test runs 2 s by default; `STRATA_CHANNEL_RACE_MS` sets its length, `STRATA_SEED`
//! replays its choices.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{Channel, ChannelConfig, Error, Event, FlushPolicy, LogConfig};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != ".lock" {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn segment_files(log_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

fn take_all(channel: &Channel) -> Vec<Vec<u8>> {
    let mut tx = channel.transaction();
    let mut bodies = Vec::new();
    while let Some(event) = tx.take().unwrap() {
        bodies.push(event.body().to_vec());
    }
    tx.rollback().unwrap();
    bodies
}

/// The background deletion moved the log's start past events whose take record was not durable
/// yet: the start offset is written to the checkpoint (fsynced) at once, so a power cut that then
/// loses the take record (never durable: its commit did not return under `Always`, or the policy
/// is weaker) also loses the events it took, which must be delivered again.
///
/// Simulated under `FlushPolicy::Never`, where the window is wide (under `Always` it is the fsync
/// of the take commit's group): the take commit is stored, not synced; the deletion runs; then a
/// copy of the live files, with the segment cut back to what was durable, is opened.
#[test]
fn a_take_not_yet_durable_never_lets_the_deletion_lose_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let config = ChannelConfig {
        keep_alive_ms: 0,
        delete_interval_ms: 2,
        log: LogConfig { segment_bytes: 4096, flush_policy: FlushPolicy::Never, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    };
    let channel = Channel::open(&live, config.clone()).unwrap();
    let mut tx = channel.transaction();
    tx.put(Event::new("e0")).unwrap();
    tx.put(Event::new("e1")).unwrap();
    tx.commit().unwrap();
    channel.close().unwrap();
    // What is durable now: the clean close synced and trimmed the segment.
    let durable: Vec<(PathBuf, Vec<u8>)> =
        segment_files(&live.join("log")).into_iter().map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect();

    let channel = Channel::open(&live, config.clone()).unwrap();
    let mut tx = channel.transaction();
    assert_eq!(tx.take().unwrap().unwrap().body(), b"e0");
    assert_eq!(tx.take().unwrap().unwrap().body(), b"e1");
    tx.commit().unwrap();
    // Give the deletion its turns.
    std::thread::sleep(Duration::from_millis(100));
    let metrics = channel.metrics().unwrap();
    let synced = metrics.log.durable_offset;
    // A power cut now: the files as they are, but what was never fsynced is gone.
    let crashed = dir.path().join("crashed");
    copy_dir(&live, &crashed);
    if synced < metrics.log.next_offset {
        for (path, bytes) in &durable {
            let target = crashed.join("log").join(path.file_name().unwrap());
            std::fs::write(&target, bytes).unwrap();
        }
        for extra in segment_files(&crashed.join("log")) {
            if !durable.iter().any(|(p, _)| p.file_name() == extra.file_name()) {
                std::fs::remove_file(extra).unwrap();
            }
        }
    }
    assert!(metrics.deletions >= 1, "the deletion ran: {metrics:?}");
    let reopened = Channel::open(&crashed, config).unwrap();
    // The take record is offset 2: durable, its takes are committed; else delivered again.
    let expected: Vec<Vec<u8>> = if synced > 2 { vec![] } else { vec![b"e0".to_vec(), b"e1".to_vec()] };
    assert_eq!(
        take_all(&reopened),
        expected,
        "what the power cut left (start {}, durable {synced})",
        metrics.log.start_offset
    );
    reopened.close().unwrap();
    channel.close().unwrap();
}
