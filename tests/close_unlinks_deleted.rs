//! Regression (review): a log closed before its delayed unlinks ran (`file_delete_delay_ms`, 60 s
//! by default; `strata delete-before`, `truncate` and `compact` close at once) left its removed
//! segments as `.deleted` files, and `verify` then listed each as left by an interrupted
//! operation. At close no reader is left: the files are unlinked.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Log, LogConfig, Record};

#[test]
fn a_clean_close_leaves_no_deleted_files() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for i in 0..100u32 {
        log.append(&[Record::new(format!("{i:03}-{}", "x".repeat(90)).as_bytes())]).unwrap();
    }
    log.delete_records_before(60).unwrap();
    log.truncate_to(90).unwrap();
    assert!(common::file_names(dir.path()).iter().any(|n| n.ends_with(".deleted")), "the unlinks are delayed");
    log.close().unwrap();
    let names = common::file_names(dir.path());
    assert!(!names.iter().any(|n| n.ends_with(".deleted")), "{names:?}");
    let log = Log::open(dir.path(), config).unwrap();
    assert!(log.recovery_report().clean_shutdown);
    assert_eq!((log.start_offset(), log.next_offset()), (60, 90));
}
