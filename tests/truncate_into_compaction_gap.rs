//! Regression: `truncate_to` an offset whose batch follows a compaction gap set the next offset to
//! that batch's base (read from the offset index) instead of the end of the batch before it; the
//! next append then started a normal batch past the previous batch's end, and every read across it
//! failed (`UnexpectedOffset { expected: 1, found: 2 }`), compaction too, and a reopen after a
//! crash refused the log. The cut is now the end of the last batch kept.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

#[test]
fn a_truncation_after_a_compaction_gap_ends_the_log_where_the_kept_data_ends() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 0, // an index entry for every batch: the lookup lands on the batch itself
        flush_policy: FlushPolicy::Never,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for key in [b"a", b"b", b"c", b"d"] {
        log.append(&[Record::new(b"v").with_key(key)]).unwrap();
    }
    // A record for key b large enough to roll: offsets 0..4 become a sealed segment, and
    // compaction empties offset 1 (superseded by offset 4).
    log.append(&[Record::new(&[7u8; 960]).with_key(b"b")]).unwrap();
    log.append(&[Record::new(b"after").with_key(b"e")]).unwrap();
    let report = log.compact().unwrap().expect("a dirty sealed segment");
    assert!(report.records_removed >= 1);
    // Offset 2's batch follows the gap at 1: cutting at 2 ends the log after offset 0's batch.
    assert_eq!(log.truncate_to(2).unwrap(), 1);
    assert_eq!(log.next_offset(), 1);
    assert_eq!(log.append(&[Record::new(b"new one").with_key(b"z")]).unwrap().base_offset, 1);
    let values = common::values(&log);
    assert_eq!(values, [b"v".to_vec(), b"new one".to_vec()]);
    log.compact().unwrap();
    // A crash now: the copy reopens (strictly) with the same records.
    let crashed = tempfile::tempdir().unwrap();
    common::copy_dir(dir.path(), crashed.path());
    log.close().unwrap();
    let reopened = Log::open(crashed.path(), config).unwrap();
    assert_eq!(common::values(&reopened), values);
}
