//! `Log::open_read_only`: no lock, no change to any file, `pread` instead of mmap, and a torn tail
//! at the end of the last segment past the recovery point is the end of the log (on a live log it
//! is a batch being written); below the recovery point it is damage a read reports
//! (`read_only_damage.rs`).
#![allow(clippy::unwrap_used)]

mod common;

use common::{snapshot, value_of};
use strata_log::internals::Checkpoint;
use strata_log::{Error, Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 2048, index_interval_bytes: 200, ..LogConfig::default() }
}

#[test]
fn reads_a_live_log_without_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), config()).unwrap();
    for offset in 0..100 {
        writer.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    let reader = Log::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(reader.next_offset(), 100);
    let got = common::read_all(&reader, 0, 1000);
    assert_eq!(got.len(), 100);
    assert!(got.iter().all(|(o, r)| r.value.as_deref() == Some(&value_of(*o)[..])));
    assert!(matches!(reader.append(&[Record::new(b"x")]), Err(Error::ReadOnly)));
    assert!(matches!(reader.flush(), Err(Error::ReadOnly)));
    // The writer goes on; a new read-only open sees the new records.
    writer.append(&[Record::new(&value_of(100))]).unwrap();
    assert_eq!(Log::open_read_only(dir.path(), config()).unwrap().next_offset(), 101);
    drop(reader);
    writer.close().unwrap();
}

#[test]
fn changes_nothing_and_treats_a_torn_tail_as_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for offset in 0..50 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let last = common::file_names(dir.path()).into_iter().rfind(|n| n.ends_with(".log")).unwrap();
    let path = dir.path().join(last);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    bytes.truncate(len - 5); // the last batch torn
    std::fs::write(&path, bytes).unwrap();
    // As on a live log: the last batch is past the recovery point (it is being written).
    let checkpoint = Checkpoint { log_start_offset: 0, recovery_point: 40 };
    std::fs::write(dir.path().join("checkpoint"), checkpoint.encode_file(1)).unwrap();
    let before = snapshot(dir.path());
    let log = Log::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(log.next_offset(), 49, "the torn batch is where the log ends");
    assert_eq!(common::read_all(&log, 0, 1 << 20).len(), 49);
    drop(log);
    assert_eq!(snapshot(dir.path()), before, "a read-only open changes nothing");
}

#[test]
fn a_missing_directory_is_an_error_not_a_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert!(matches!(Log::open_read_only(&missing, config()), Err(Error::Io { .. })));
    assert!(!missing.exists());
}
