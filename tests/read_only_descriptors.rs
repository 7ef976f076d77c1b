//! Regression: a read-only open (`strata verify`, `dump`, `consume`) held three descriptors per
//! segment for as long as it was open, so ~340 segments exhausted `ulimit -n 1024`. Sealed segments
//! now hold no descriptor (docs/DESIGN.md §5): a read-only one opens its file for each read. This
//! file holds one test only: it counts the process's descriptors.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_read_only_open_of_many_segments_holds_no_descriptor_per_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 256,
        index_bytes: 64,
        flush_policy: FlushPolicy::Never,
        preallocate: false,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for i in 0..1100u32 {
        log.append(&[Record::new(format!("{i:06}-{}", "v".repeat(150)).as_bytes())]).unwrap();
    }
    log.close().unwrap();
    let before = open_descriptors();
    let reader = Log::open_read_only(dir.path(), config).unwrap();
    assert!(reader.segment_count() > 1000, "{} segments", reader.segment_count());
    let held = open_descriptors().saturating_sub(before);
    assert!(held <= 2, "{held} descriptors held by a read-only open");
    assert_eq!(common::values(&reader).len(), 1100);
    let held = open_descriptors().saturating_sub(before);
    assert!(held <= 2, "{held} descriptors held after reading every segment");
}
