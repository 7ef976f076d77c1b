//! Regression (found in review): the first reads of a sealed segment whose index fails its check
//! ran the check and the rebuild concurrently in several threads; a rebuild shrank the index's
//! published length while another reader's range had been checked against the old one, and
//! `read_with` sliced past the new map (a debug assertion, a SIGSEGV in release). Fix: bounds are
//! checked under the file's lock, and the check-and-rebuild runs once per segment under a mutex.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Barrier};

use common::value_of;
use strata_log::{Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_bytes: 8 * 64, index_interval_bytes: 100, ..LogConfig::default() }
}

#[test]
fn concurrent_first_reads_of_segments_with_bad_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    for offset in 0..1500 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    let indexes: Vec<_> = common::file_names(dir.path()).into_iter().filter(|n| n.ends_with(".index")).collect();
    let sealed = &indexes[..indexes.len() - 1];
    let originals: Vec<Vec<u8>> = sealed.iter().map(|n| std::fs::read(dir.path().join(n)).unwrap()).collect();
    for round in 0..10 {
        for (name, original) in sealed.iter().zip(&originals) {
            // Whole entries, but not increasing: fails the check; the rebuilt index is shorter.
            let mut bad = original.clone();
            bad.extend(std::iter::repeat_n(0xffu8, 64 << 10));
            std::fs::write(dir.path().join(name), bad).unwrap();
        }
        let log = Arc::new(Log::open(dir.path(), config()).unwrap());
        let barrier = Arc::new(Barrier::new(8));
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let (log, barrier) = (Arc::clone(&log), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    let records = common::read_all(&log, 0, 1 << 12);
                    assert_eq!(records.len(), 1500);
                    assert!(records.iter().all(|(o, r)| r.value.as_deref() == Some(&value_of(*o)[..])));
                })
            })
            .collect();
        for reader in readers {
            reader.join().unwrap_or_else(|_| panic!("round {round}: a reader failed"));
        }
    }
}
