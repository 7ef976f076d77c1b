//! `Cursor::next_batch_wait`: a cursor at the end waits, without polling, until its position is
//! visible (woken by the append that makes it so), returns nothing once its timeout passes, and is
//! stopped by another thread through its `CursorInterrupt` with `Error::Interrupted` (the store's
//! dispatcher must stop before its log closes). One interrupt ends one call, also when it comes
//! while the cursor is not waiting.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

/// Long enough that a call returning early was woken, not timed out.
const LONG: Duration = Duration::from_secs(30);
/// What "promptly" allows on a loaded test machine.
const PROMPT: Duration = Duration::from_secs(5);

fn tailing_is_woken_by_an_append(policy: FlushPolicy) {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), LogConfig { flush_policy: policy, ..LogConfig::default() }).unwrap());
    let mut cursor = log.cursor(0).unwrap();
    let tail = std::thread::spawn(move || {
        let started = Instant::now();
        let batches = cursor.next_batch_wait(1 << 20, LONG).unwrap();
        (batches, started.elapsed(), cursor.position())
    });
    std::thread::sleep(Duration::from_millis(50));
    log.append(&[Record::new(b"first")]).unwrap();
    let (batches, waited, position) = tail.join().unwrap();
    assert!(waited < PROMPT, "woken by the append, not the timeout ({waited:?})");
    assert_eq!(batches[0].records()[0].value(), Some(&b"first"[..]));
    assert_eq!(position, 1);
}

#[test]
fn a_waiting_cursor_is_woken_by_an_append_under_always() {
    tailing_is_woken_by_an_append(FlushPolicy::Always);
}

#[test]
fn a_waiting_cursor_is_woken_by_an_append_under_never() {
    tailing_is_woken_by_an_append(FlushPolicy::Never);
}

#[test]
fn a_record_already_visible_is_returned_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"there")]).unwrap();
    let mut cursor = log.cursor(0).unwrap();
    let started = Instant::now();
    assert_eq!(cursor.next_batch_wait(1 << 20, LONG).unwrap().len(), 1);
    assert!(started.elapsed() < PROMPT);
}

#[test]
fn a_stored_but_not_yet_durable_record_is_returned_once_durable() {
    // Under Always a record `append_nowait` stored is visible once durable: the waiting cursor may
    // lead that sync round itself, as an appender does.
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut cursor = log.cursor(0).unwrap();
    let info = log.append_nowait(&[Record::new(b"queued")]).unwrap();
    let batches = cursor.next_batch_wait(1 << 20, LONG).unwrap();
    assert_eq!(batches[0].records()[0].offset(), info.base_offset);
    assert!(log.durable_offset() > info.last_offset);
}

#[test]
fn the_timeout_returns_nothing_and_the_cursor_stays() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    log.append(&[Record::new(b"a")]).unwrap();
    let mut cursor = log.cursor(1).unwrap();
    let started = Instant::now();
    let batches = cursor.next_batch_wait(1 << 20, Duration::from_millis(100)).unwrap();
    let waited = started.elapsed();
    assert!(batches.is_empty());
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    assert!(waited < PROMPT, "{waited:?}");
    assert_eq!(cursor.position(), 1);
    assert!(cursor.next_batch_wait(1 << 20, Duration::ZERO).unwrap().is_empty());
}

#[test]
fn another_thread_interrupts_a_wait_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let mut cursor = log.cursor(0).unwrap();
    let interrupt = cursor.interrupter();
    let tail = std::thread::spawn(move || {
        let started = Instant::now();
        let result = cursor.next_batch_wait(1 << 20, LONG);
        (result, started.elapsed(), cursor)
    });
    std::thread::sleep(Duration::from_millis(100));
    let interrupted_at = Instant::now();
    interrupt.clone().interrupt();
    let (result, waited, mut cursor) = tail.join().unwrap();
    assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
    assert!(interrupted_at.elapsed() < PROMPT, "woken by the interrupt ({waited:?})");
    assert_eq!(cursor.position(), 0);
    // Used up: the next wait waits (and here times out) instead of failing.
    assert!(cursor.next_batch_wait(1 << 20, Duration::from_millis(10)).unwrap().is_empty());
    // Reads are not affected by an interrupt.
    log.append(&[Record::new(b"after")]).unwrap();
    interrupt.interrupt();
    assert_eq!(cursor.next_batch(1 << 20).unwrap().len(), 1);
    // ... but the pending interrupt ends the next wait at once, even with records to read.
    log.append(&[Record::new(b"more")]).unwrap();
    assert!(matches!(cursor.next_batch_wait(1 << 20, LONG), Err(Error::Interrupted)));
    assert_eq!(cursor.next_batch_wait(1 << 20, LONG).unwrap()[0].records()[0].value(), Some(&b"more"[..]));
}

#[test]
fn an_interrupt_wakes_only_its_own_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(
        Log::open(dir.path(), LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }).unwrap(),
    );
    let mut stopped = log.cursor(0).unwrap();
    let mut other = log.cursor(0).unwrap();
    let interrupt = stopped.interrupter();
    let other_tail = std::thread::spawn(move || other.next_batch_wait(1 << 20, LONG).map(|b| b.len()));
    let stopped_tail = std::thread::spawn(move || stopped.next_batch_wait(1 << 20, LONG).map(|b| b.len()));
    std::thread::sleep(Duration::from_millis(100));
    interrupt.interrupt();
    assert!(matches!(stopped_tail.join().unwrap(), Err(Error::Interrupted)));
    assert!(!other_tail.is_finished(), "the other cursor still waits");
    log.append(&[Record::new(b"x")]).unwrap();
    assert_eq!(other_tail.join().unwrap().unwrap(), 1);
}

#[test]
fn an_interrupt_outliving_its_log_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    let cursor = log.cursor(0).unwrap();
    let interrupt = cursor.interrupter();
    drop(cursor);
    log.close().unwrap();
    interrupt.interrupt();
}
