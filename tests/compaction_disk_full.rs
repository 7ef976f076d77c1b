//! A write failure during compaction (a full disk, injected at `cleaner_write`): the pass reports
//! the error, its partial output is removed, the old segments stay byte for byte, nothing is lost,
//! and a later pass succeeds.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::{file_names, read_all, snapshot};
use strata_log::{Error, Log, LogConfig, Record};

#[test]
fn a_failed_write_during_compaction_keeps_the_old_segments() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let config =
        LogConfig { segment_bytes: 2048, flush_policy: strata_log::FlushPolicy::Never, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    for round in 0..50 {
        for key in 0..4 {
            log.append(&[Record::new(format!("{round}").as_bytes()).with_key(format!("key-{key}").as_bytes())])
                .unwrap();
        }
    }
    log.flush().unwrap();
    let segments = |dir: &std::path::Path| {
        snapshot(dir).into_iter().filter(|(n, _)| n.ends_with(".log") || n.ends_with("index")).collect::<Vec<_>>()
    };
    let before = segments(dir.path());
    let records_before = read_all(&log, 0, 1 << 20);
    // Let the first write through, fail the second: a partial `.cleaned` file exists when it fails.
    fail::cfg("cleaner_write", "1*off->return").unwrap();
    match log.compact() {
        Err(Error::Io { op: "cleaner_write", .. }) => {}
        other => panic!("expected the injected failure, got {other:?}"),
    }
    fail::remove("cleaner_write");
    assert_eq!(segments(dir.path()), before, "the old segments are unchanged");
    assert!(!file_names(dir.path()).iter().any(|n| n.ends_with(".cleaned")), "partial output removed");
    assert_eq!(read_all(&log, 0, 1 << 20), records_before);
    assert_eq!(log.metrics().compaction_passes, 0);
    // The log is not poisoned: appends and a later pass work.
    log.append(&[Record::new(b"after").with_key(b"key-0")]).unwrap();
    let report = log.compact().unwrap().unwrap();
    assert!(report.records_removed > 0);
    drop(log);
    scenario.teardown();
}
