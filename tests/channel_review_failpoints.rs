//! Regressions of the channel found in review that need fail points: a commit paused between
//! storing its batch and waiting for it while the channel closes, and a commit whose durability
//! wait fails.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use strata_log::{Channel, ChannelConfig, Error, Event, LogConfig};

fn config() -> ChannelConfig {
    ChannelConfig {
        keep_alive_ms: 0,
        log: LogConfig { segment_bytes: 64 << 10, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    }
}

/// Pauses the commits of threads named `name` at the fail point, once each, telling `entered`.
fn pause_commits_of(name: &'static str, entered: mpsc::Sender<()>) {
    let entered = Mutex::new(entered);
    fail::cfg_callback("channel_commit_stored", move || {
        if std::thread::current().name() == Some(name) {
            let _ = entered.lock().unwrap().send(());
            std::thread::sleep(Duration::from_millis(300));
        }
    })
    .unwrap();
}

/// A commit whose batch is stored when the close starts: the close waits for it (the log's slot
/// is held from the append through the durability wait), so the commit returns `Ok` and its put
/// is there after a reopen. It used to let go of the slot between the two, so the close took
/// the log away and the commit returned `Error::Closed`, its transaction emptied, for a batch the
/// close then made durable: a source retrying it puts it twice.
#[test]
fn a_commit_stored_before_the_close_returns_ok_not_closed() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let channel = Channel::open(dir.path(), config()).unwrap();
    let (entered, inside) = mpsc::channel();
    pause_commits_of("stored-then-closed", entered);
    let committer = {
        let channel = channel.clone();
        std::thread::Builder::new()
            .name("stored-then-closed".into())
            .spawn(move || {
                let mut tx = channel.transaction();
                tx.put(Event::new("stored")).unwrap();
                let result = tx.commit();
                (result, tx.puts())
            })
            .unwrap()
    };
    inside.recv().unwrap();
    channel.close().unwrap();
    let (result, left) = committer.join().unwrap();
    fail::remove("channel_commit_stored");
    let reopened = Channel::open(dir.path(), config()).unwrap();
    let mut tx = reopened.transaction();
    let there = tx.take().unwrap().map(|e| e.body().to_vec());
    tx.rollback().unwrap();
    reopened.close().unwrap();
    assert!(
        matches!(result, Ok(())),
        "the commit was stored before the close: {result:?}, {left} puts left in its transaction, put there after the reopen: {there:?}"
    );
    assert_eq!(there.as_deref(), Some(&b"stored"[..]));
    scenario.teardown();
}

/// A commit that both takes and puts, whose fsync fails: the commit fails with the transaction
/// emptied, the log is poisoned, later commits are refused with their transaction open, the rest
/// of the channel still takes and rolls back, the close fails but lets go of the directory, and
/// the reopen applies the failed commit all or nothing; nothing else is lost or doubled.
#[test]
fn a_commit_whose_fsync_fails_is_all_or_nothing_after_the_reopen() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("poisoned-channel");
    let channel = Channel::open(&path, config()).unwrap();
    let mut tx = channel.transaction();
    for body in ["e0", "e1"] {
        tx.put(Event::new(body)).unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(tx.take().unwrap().unwrap().body(), b"e0");
    tx.put(Event::new("p0")).unwrap();
    fail::cfg("fdatasync", "return(poisoned-channel)").unwrap();
    let failed = tx.commit();
    fail::remove("fdatasync");
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!((tx.puts(), tx.takes()), (0, 0), "the batch was stored: its fate is the reopen's");
    let mut later = channel.transaction();
    assert_eq!(later.take().unwrap().unwrap().body(), b"e1", "p0 never becomes visible, e1 still is");
    assert!(later.take().unwrap().is_none());
    later.put(Event::new("p1")).unwrap();
    assert!(matches!(later.commit(), Err(Error::Poisoned)));
    assert_eq!((later.puts(), later.takes()), (1, 1), "refused before anything is stored: still open");
    later.rollback().unwrap();
    let metrics = channel.metrics().unwrap();
    assert_eq!((metrics.size, metrics.held), (1, 2), "e1 ready; p0 held (pending) until the reopen");
    drop(tx);
    drop(later);
    assert!(channel.close().is_err(), "closing a poisoned log reports it");
    let reopened = Channel::open(&path, config()).unwrap();
    let mut tx = reopened.transaction();
    let mut held = Vec::new();
    while let Some(event) = tx.take().unwrap() {
        held.push(String::from_utf8(event.body().to_vec()).unwrap());
    }
    tx.rollback().unwrap();
    reopened.close().unwrap();
    assert!(held == ["e1", "p0"] || held == ["e0", "e1"], "all or nothing: {held:?}");
    scenario.teardown();
}
