//! Readers running during appends never see a torn, missing or out-of-order record, and never
//! block the appender.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::small_config;
use strata_log::{Log, LogConfig, Record};

fn value_of(offset: u64) -> Vec<u8> {
    let len = (offset % 97) as usize + 8;
    let mut v = offset.to_be_bytes().to_vec();
    v.resize(len, (offset % 251) as u8);
    v
}

fn run(config: LogConfig, total: u64) {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path(), config).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (log, done) = (Arc::clone(&log), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut next = 0u64;
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || next < log.visible_end() {
                    if next >= log.visible_end() {
                        std::thread::yield_now();
                        continue;
                    }
                    let mut reader = log.read(next, 2000 + r * 3000).unwrap();
                    for record in reader.by_ref() {
                        let record = record.unwrap();
                        assert_eq!(record.offset(), next, "dense and in order");
                        assert_eq!(record.value().unwrap(), value_of(next), "intact");
                        next += 1;
                    }
                    reads += 1;
                }
                (next, reads)
            })
        })
        .collect();
    let mut offset = 0;
    while offset < total {
        let n = offset % 5 + 1;
        let values: Vec<Vec<u8>> = (offset..offset + n).map(value_of).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        assert_eq!(log.append(&records).unwrap().base_offset, offset);
        offset += n;
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let (next, reads) = reader.join().unwrap();
        assert_eq!(next, offset, "each reader saw every record");
        assert!(reads > 1);
    }
}

#[test]
fn readers_during_appends_with_many_rolls() {
    run(small_config(), 20_000);
}

#[test]
fn readers_during_appends_in_one_segment() {
    run(LogConfig { segment_bytes: 64 << 20, ..LogConfig::default() }, 50_000);
}
