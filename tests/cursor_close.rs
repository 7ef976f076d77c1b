//! A cursor holds the log's state, never its directory lock: once the log is closed (or dropped)
//! the directory opens again while old cursors live, and every call of an old cursor returns
//! `Error::Closed` (never a false `OffsetOutOfRange`, nor an error from the files the closed log
//! let go of), including a wait in progress when the log closes.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strata_log::{Error, Log, LogConfig, Record};

fn config() -> LogConfig {
    // Small segments: the cursor's position is in a sealed, mapped segment the close retires.
    LogConfig { segment_bytes: 4096, index_interval_bytes: 200, ..LogConfig::default() }
}

fn open_with_records(dir: &std::path::Path, count: u32) -> Log {
    let log = Log::open(dir, config()).unwrap();
    for i in 0..count {
        log.append(&[Record::new(format!("record-{i:04}-{}", "x".repeat(40)).as_bytes())]).unwrap();
    }
    log
}

#[test]
fn after_close_every_call_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_with_records(dir.path(), 200);
    assert!(log.segment_count() > 2);
    let mut reading = log.cursor(0).unwrap();
    assert!(!reading.next_batch(256).unwrap().is_empty());
    let mut at_end = log.cursor(200).unwrap();
    let mut past_end = log.cursor(200).unwrap();
    past_end.seek(500);
    // A pending interrupt does not hide the close either.
    at_end.interrupter().interrupt();
    log.close().unwrap();
    for cursor in [&mut reading, &mut at_end, &mut past_end] {
        assert!(matches!(cursor.next_batch(256), Err(Error::Closed)));
        assert!(matches!(cursor.next_batch_wait(256, Duration::from_secs(30)), Err(Error::Closed)));
    }
}

#[test]
fn a_drop_closes_cursors_too() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_with_records(dir.path(), 50);
    let mut cursor = log.cursor(10).unwrap();
    drop(log);
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Closed)));
}

#[test]
fn a_wait_in_progress_ends_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_with_records(dir.path(), 5);
    let mut cursor = log.cursor(5).unwrap();
    let tail = std::thread::spawn(move || {
        let started = Instant::now();
        (cursor.next_batch_wait(1 << 20, Duration::from_secs(30)).map(|b| b.len()), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    log.close().unwrap();
    let (result, waited) = tail.join().unwrap();
    assert!(matches!(result, Err(Error::Closed)), "{result:?}");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
}

#[test]
fn the_directory_reopens_while_an_old_cursor_lives() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_with_records(dir.path(), 100);
    let mut old = log.cursor(0).unwrap();
    log.close().unwrap();

    let log = Log::open(dir.path(), config()).expect("an old cursor holds no directory lock");
    assert!(log.recovery_report().clean_shutdown);
    log.append(&[Record::new(b"after reopen")]).unwrap();
    let mut new = log.cursor(0).unwrap();
    assert_eq!(new.next_batch(1 << 20).unwrap()[0].records()[0].offset(), 0);
    assert!(matches!(old.next_batch(1 << 20), Err(Error::Closed)));
    // The old cursor changes nothing of the new log's, and the new log closes cleanly.
    drop(old);
    log.close().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!(log.next_offset(), 101);
}

#[test]
fn reads_racing_a_close_end_in_closed() {
    // A close retires the segments under a running read: whatever the read met then is reported
    // as `Closed` (the unit test in `cursor.rs` makes that read happen every time).
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let log = open_with_records(dir.path(), 300);
        let mut cursor = log.cursor(0).unwrap();
        let reader = std::thread::spawn(move || {
            loop {
                match cursor.next_batch(1 << 20) {
                    Ok(batches) if batches.is_empty() => cursor.seek(0),
                    Ok(_) => {}
                    Err(error) => return error,
                }
            }
        });
        std::thread::sleep(Duration::from_millis(round % 5));
        log.close().unwrap();
        let error = reader.join().unwrap();
        assert!(matches!(error, Error::Closed), "round {round}: {error:?}");
    }
}
