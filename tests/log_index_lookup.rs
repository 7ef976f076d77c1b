//! The sparse offset index: entries are added every `index_interval_bytes`, each points at a batch
//! with its base offset, and a read from any offset (at an entry, between entries, before the first)
//! starts exactly there.
#![allow(clippy::unwrap_used)]

mod common;

use byteorder::{BigEndian, ByteOrder};
use strata_log::{Log, LogConfig, Record};

#[test]
fn reads_from_every_offset_start_exactly_there() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { index_interval_bytes: 300, segment_bytes: 64 << 10, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    let mut count = 0u64;
    for i in 0..300u64 {
        let n = i % 4 + 1;
        let values: Vec<Vec<u8>> = (0..n).map(|j| vec![(i + j) as u8; (i as usize * 13) % 200]).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        log.append(&records).unwrap();
        count += n;
    }
    for offset in 0..count {
        let first = log.read(offset, 1).unwrap().next().unwrap().unwrap();
        assert_eq!(first.offset(), offset);
    }
    log.close().unwrap();

    // Every entry of every .index points at a batch that starts with that offset.
    let mut entries = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "index") {
            let base: u64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            let index = std::fs::read(&path).unwrap();
            let log_bytes = std::fs::read(path.with_extension("log")).unwrap();
            let mut previous = (0, 0);
            for e in index.chunks_exact(8) {
                let (relative, position) = (BigEndian::read_u32(e), BigEndian::read_u32(&e[4..]) as usize);
                assert!(relative > previous.0 && position > previous.1, "entries increase");
                assert_eq!(BigEndian::read_u64(&log_bytes[position..]), base + u64::from(relative));
                previous = (relative, position);
                entries += 1;
            }
        }
    }
    assert!(entries > 20, "only {entries} index entries");
    let log =
        Log::open(dir.path(), LogConfig { index_interval_bytes: 300, segment_bytes: 64 << 10, ..LogConfig::default() })
            .unwrap();
    for offset in (0..count).rev().step_by(7) {
        assert_eq!(log.read(offset, 1).unwrap().next().unwrap().unwrap().offset(), offset);
    }
}
