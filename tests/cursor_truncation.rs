//! A truncation that removes a cursor's position (a cut at or below it) is reported by the cursor's
//! next call, once, as `Error::Truncated` with the log's new end; the caller seeks and reads on. A
//! cursor below the cut is not told: nothing it returned was removed.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use strata_log::{BatchView, Error, FlushPolicy, Log, LogConfig, Record};

fn log_of(dir: &std::path::Path, records: u64) -> Log {
    let log = Log::open(dir, LogConfig { flush_policy: FlushPolicy::Never, ..LogConfig::default() }).unwrap();
    for i in 0..records {
        log.append(&[Record::new(format!("old-{i}").as_bytes())]).unwrap();
    }
    log
}

fn values(batches: &[BatchView]) -> Vec<String> {
    batches
        .iter()
        .flat_map(BatchView::records)
        .map(|r| format!("{}:{}", r.offset(), String::from_utf8_lossy(r.value().unwrap())))
        .collect()
}

#[test]
fn a_cursor_past_the_cut_is_told_once_then_seeks() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of(dir.path(), 10);
    let mut cursor = log.cursor(0).unwrap();
    assert_eq!(values(&cursor.next_batch(1 << 20).unwrap()).len(), 10);
    assert_eq!(log.truncate_to(6).unwrap(), 6);
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Truncated { next_offset: 6 })));
    // Once: the position is now simply past the end.
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::OffsetOutOfRange { requested: 10, next: 6, .. })));
    log.append(&[Record::new(b"new-6")]).unwrap();
    cursor.seek(6);
    assert_eq!(values(&cursor.next_batch(1 << 20).unwrap()), ["6:new-6"]);
    assert!(cursor.next_batch(1 << 20).unwrap().is_empty());
}

#[test]
fn a_cursor_below_the_cut_reads_on_into_the_new_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of(dir.path(), 10);
    let mut cursor = log.cursor(0).unwrap();
    assert_eq!(values(&cursor.next_batch(1).unwrap()), ["0:old-0"]);
    log.truncate_to(3).unwrap();
    log.append(&[Record::new(b"new-3")]).unwrap();
    let read = values(&cursor.next_batch(1 << 20).unwrap());
    assert_eq!(read, ["1:old-1", "2:old-2", "3:new-3"]);
}

#[test]
fn a_cursor_exactly_at_the_cut_is_told_like_readers() {
    // The cut removed its position's record (had it been stored), as for `Log::read` readers.
    let dir = tempfile::tempdir().unwrap();
    let log = log_of(dir.path(), 10);
    let mut cursor = log.cursor(4).unwrap();
    log.truncate_to(4).unwrap();
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Truncated { next_offset: 4 })));
    assert!(cursor.next_batch(1 << 20).unwrap().is_empty());
}

#[test]
fn a_waiting_cursor_is_told_of_a_truncation_during_its_wait() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(log_of(dir.path(), 10));
    let mut cursor = log.cursor(10).unwrap();
    let tail = std::thread::spawn(move || {
        let result = cursor.next_batch_wait(1 << 20, Duration::from_secs(30)).map(|b| b.len());
        (result, cursor)
    });
    std::thread::sleep(Duration::from_millis(100));
    log.truncate_to(7).unwrap();
    let (result, mut cursor) = tail.join().unwrap();
    assert!(matches!(result, Err(Error::Truncated { next_offset: 7 })), "{result:?}");
    // Told once: the next call says the position is past the end.
    assert!(matches!(cursor.next_batch_wait(1 << 20, Duration::ZERO), Err(Error::OffsetOutOfRange { .. })));
    cursor.seek(7);
    log.append(&[Record::new(b"new-7")]).unwrap();
    assert_eq!(values(&cursor.next_batch_wait(1 << 20, Duration::from_secs(30)).unwrap()), ["7:new-7"]);
}

#[test]
fn a_seek_after_an_unreported_truncation_is_still_told() {
    // The cursor cannot know whether the caller chose its new position before or after the
    // truncation: a cut at or below it is reported once.
    let dir = tempfile::tempdir().unwrap();
    let log = log_of(dir.path(), 10);
    let mut cursor = log.cursor(2).unwrap();
    log.truncate_to(5).unwrap();
    cursor.seek(5);
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Truncated { next_offset: 5 })));
    log.append(&[Record::new(b"new-5")]).unwrap();
    assert_eq!(values(&cursor.next_batch(1 << 20).unwrap()), ["5:new-5"]);
}

#[test]
fn a_reset_is_told_to_every_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_of(dir.path(), 10);
    let mut cursor = log.cursor(3).unwrap();
    log.reset_at(100).unwrap();
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Truncated { next_offset: 100 })));
    cursor.seek(100);
    assert!(cursor.next_batch(1 << 20).unwrap().is_empty());
}
