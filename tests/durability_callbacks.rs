//! `Log::on_durable`: durability without a waiting thread. Each callback is called exactly once,
//! in offset order, on the thread that finished the round covering it (or the registering thread
//! if its fate is decided already), with `Ok` or the error that stopped its batch.
#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Duration;

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record, Result};

const WAIT: Duration = Duration::from_secs(10);

fn config(flush_policy: FlushPolicy) -> LogConfig {
    LogConfig { flush_policy, ..LogConfig::default() }
}

/// A policy under which no round runs unless someone forces one (registration does not: only the
/// interval or the message count call for a round).
fn lazy() -> FlushPolicy {
    FlushPolicy::EveryInterval { ms: 3_600_000, messages: u64::MAX }
}

type Outcome = (u64, Result<()>, Option<String>);

/// Registers a callback for `info` that reports its offset, result and thread name on `tx`.
fn report(log: &Log, info: &strata_log::AppendInfo, tx: &mpsc::Sender<Outcome>) {
    let (tx, last) = (tx.clone(), info.last_offset);
    log.on_durable(info, move |result| {
        let thread = std::thread::current().name().map(str::to_owned);
        tx.send((last, result, thread)).unwrap();
    });
}

#[test]
fn under_never_registering_asks_the_syncer_for_a_round() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(FlushPolicy::Never)).unwrap();
    let info = log.append_nowait(&[Record::new(b"entry")]).unwrap();
    let (tx, rx) = mpsc::channel();
    report(&log, &info, &tx);
    let (offset, result, thread) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(offset, info.last_offset);
    result.unwrap();
    assert_eq!(thread.as_deref(), Some("strata-syncer"), "run by the thread that finished the round");
    assert!(log.durable_offset() > info.last_offset);
}

#[test]
fn callbacks_run_in_offset_order_whatever_the_order_they_were_registered_in() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(lazy())).unwrap();
    let infos: Vec<_> = (0..5).map(|i| log.append_nowait(&[Record::new(&[i])]).unwrap()).collect();
    let (tx, rx) = mpsc::channel();
    for info in infos.iter().rev() {
        report(&log, info, &tx);
    }
    assert!(rx.try_recv().is_err(), "nothing is durable yet");
    log.flush().unwrap();
    let order: Vec<u64> = (0..5).map(|_| rx.recv_timeout(WAIT).unwrap()).map(|(o, r, _)| (r.unwrap(), o).1).collect();
    assert_eq!(order, [0, 1, 2, 3, 4]);
}

#[test]
fn a_batch_already_durable_is_reported_on_the_registering_thread() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(FlushPolicy::Always)).unwrap();
    let info = log.append(&[Record::new(b"durable")]).unwrap();
    let (tx, rx) = mpsc::channel();
    report(&log, &info, &tx);
    let (_, result, thread) = rx.try_recv().expect("called before on_durable returned");
    result.unwrap();
    assert_eq!(thread, std::thread::current().name().map(str::to_owned));
}

#[test]
fn a_truncated_batch_is_reported_truncated_whenever_it_was_registered() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(lazy())).unwrap();
    let kept = log.append_nowait(&[Record::new(b"kept")]).unwrap();
    let pending = log.append_nowait(&[Record::new(b"cut while pending")]).unwrap();
    let (tx, rx) = mpsc::channel();
    report(&log, &kept, &tx);
    report(&log, &pending, &tx);
    log.truncate_to(pending.base_offset).unwrap();
    let (offset, result, _) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(offset, kept.last_offset);
    result.unwrap();
    let (offset, result, _) = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(offset, pending.last_offset);
    assert!(matches!(result, Err(Error::Truncated { next_offset: 1 })), "{result:?}");
    // Registered after the truncation: its epoch tells.
    report(&log, &pending, &tx);
    let (_, result, _) = rx.try_recv().unwrap();
    assert!(matches!(result, Err(Error::Truncated { .. })), "{result:?}");
}

#[test]
fn close_makes_pending_batches_durable_and_reports_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(lazy())).unwrap();
    let info = log.append_nowait(&[Record::new(b"closing")]).unwrap();
    let (tx, rx) = mpsc::channel();
    report(&log, &info, &tx);
    log.close().unwrap();
    let (_, result, _) = rx.try_recv().expect("reported by the time close returns");
    result.unwrap();
}

#[test]
fn a_callback_may_panic_or_register_another_and_the_rest_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(Log::open(dir.path(), config(lazy())).unwrap());
    let first = log.append_nowait(&[Record::new(b"first")]).unwrap();
    let second = log.append_nowait(&[Record::new(b"second")]).unwrap();
    let (tx, rx) = mpsc::channel();
    log.on_durable(&first, |_| panic!("a callback's own bug"));
    {
        let (inner_log, tx) = (std::sync::Arc::clone(&log), tx.clone());
        log.on_durable(&first, move |result| {
            result.unwrap();
            // Re-entrant: registers from inside a callback (the batch is durable: runs at once).
            report(&inner_log, &first, &tx);
        });
    }
    report(&log, &second, &tx);
    log.flush().unwrap();
    let mut seen: Vec<u64> =
        (0..2).map(|_| rx.recv_timeout(WAIT).unwrap()).map(|(o, r, _)| (r.unwrap(), o).1).collect();
    seen.sort_unstable();
    assert_eq!(seen, [first.last_offset, second.last_offset]);
}

#[test]
fn a_read_only_log_refuses_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let info = {
        let log = Log::open(dir.path(), LogConfig::default()).unwrap();
        log.append(&[Record::new(b"x")]).unwrap()
    };
    let log = Log::open_read_only(dir.path(), LogConfig::default()).unwrap();
    let (tx, rx) = mpsc::channel();
    report(&log, &info, &tx);
    assert!(matches!(rx.try_recv().unwrap().1, Err(Error::ReadOnly)));
}

/// Regression (review): a reset past the end raised the durable offset before it noted the
/// truncation, so a callback run in between got `Ok` for a batch the reset removed and nothing
/// ever synced. Registrations race the reset; every outcome must be `Truncated`.
#[test]
fn a_reset_past_the_end_never_reports_a_removed_batch_durable() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    for _ in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(dir.path(), config(lazy())).unwrap());
        let info = log.append_nowait(&[Record::new(b"never durable")]).unwrap();
        let (oks, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let spinner = {
            let (log, oks, stop) = (Arc::clone(&log), Arc::clone(&oks), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let oks = Arc::clone(&oks);
                    log.on_durable(&info, move |result| match result {
                        Ok(()) => drop(oks.fetch_add(1, Ordering::SeqCst)),
                        Err(Error::Truncated { .. }) => {}
                        Err(error) => panic!("{error}"),
                    });
                }
            })
        };
        std::thread::sleep(Duration::from_millis(5));
        log.reset_at(1000).unwrap();
        stop.store(true, Ordering::SeqCst);
        spinner.join().unwrap();
        assert_eq!(oks.load(Ordering::SeqCst), 0, "a batch reset_at removed, never synced, reported durable");
    }
}

/// Regression (review): a callback that drops the last `Log` ran `Log::drop` on the syncer
/// thread, which then tried to join itself (a panic) and never closed the log cleanly.
#[test]
fn a_callback_may_drop_the_last_reference_to_the_log() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config(FlushPolicy::Never)).unwrap());
    let info = log.append_nowait(&[Record::new(b"x")]).unwrap();
    let (tx, rx) = mpsc::channel();
    let (go, wait_for_go) = mpsc::channel::<()>();
    let last = Arc::clone(&log);
    log.on_durable(&info, move |result| {
        wait_for_go.recv().unwrap();
        drop(last); // `Log::drop` runs here, on the thread running the callback
        tx.send(result).unwrap();
    });
    drop(log);
    go.send(()).unwrap();
    rx.recv_timeout(WAIT).unwrap().unwrap();
    // The close ran to its end: the next open finds the clean-shutdown marker.
    let reopened = (0..200)
        .find_map(|_| match Log::open(dir.path(), LogConfig::default()) {
            Err(Error::Locked { .. }) => {
                std::thread::sleep(Duration::from_millis(10));
                None
            }
            other => Some(other),
        })
        .expect("the lock is released")
        .unwrap();
    assert!(reopened.recovery_report().clean_shutdown);
}
