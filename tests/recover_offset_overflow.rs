//! Regression (found in review): a CRC-valid batch whose offsets run past `u64::MAX` (its base
//! offset is outside the CRC) made recovery panic in debug builds and wrap to offset 0 in release,
//! where the "empty log past its start" step then deleted the segment. Fix: a batch whose next offset
//! would overflow is invalid.
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Log, LogConfig, Record};

#[test]
fn offsets_past_u64_max_are_invalid_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let base = u64::MAX - 1;
    let mut batch = common::encode(&[Record::new(b"a"), Record::new(b"b")], 1_700_000_000_000).unwrap();
    batch[..8].copy_from_slice(&base.to_be_bytes());
    std::fs::write(dir.path().join(format!("{base:020}.log")), &batch).unwrap();
    let report = strata_log::internals::inspect::verify(dir.path(), &LogConfig::default()).unwrap();
    assert_eq!(report.next_offset, base, "the batch is not valid data");
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.next_offset(), base, "the invalid batch is a torn tail: cut, nothing wraps");
    assert_eq!(log.start_offset(), base);
}
