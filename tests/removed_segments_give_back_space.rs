//! Regression (adversarial pass): a segment removed while still preallocated (the active one, by
//! `reset_at` or `truncate_to`) kept its whole preallocation as `.deleted` for
//! `file_delete_delay_ms` (60 s by default): four resets of a one-record log took 30 MiB of a
//! 64 MiB disk, and the fifth failed with `DiskFull` and poisoned the log. A removed segment now
//! gives its preallocation back at once.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Log, LogConfig, Record};

fn deleted_log_lengths(dir: &std::path::Path) -> Vec<u64> {
    common::file_names(dir)
        .iter()
        .filter(|n| n.contains(".log.") && n.ends_with(".deleted"))
        .map(|n| std::fs::metadata(dir.join(n)).unwrap().len())
        .collect()
}

#[test]
fn a_removed_active_segment_keeps_only_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 8 << 20, preallocate: false, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    for round in 0..4u64 {
        log.append(&[Record::new(b"one record")]).unwrap();
        log.reset_at(log.next_offset() + 10).unwrap();
        let lengths = deleted_log_lengths(dir.path());
        assert_eq!(lengths.len() as u64, round + 1);
        assert!(lengths.iter().all(|&len| len < 4096), "a .deleted segment holds its preallocation: {lengths:?}");
    }
    for _ in 0..3 {
        log.append(&[Record::new(b"more")]).unwrap();
    }
    log.truncate_to(log.next_offset() - 1).unwrap();
    log.close().unwrap();
}
