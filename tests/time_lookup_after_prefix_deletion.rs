//! Regression: `offset_for_timestamp` stopped at the first batch whose max timestamp reached the
//! target; when that batch's matching records were all below the log start (a prefix deletion
//! inside the batch), it answered `None` for the whole segment instead of looking further
//! (`offset_for_timestamp(now) = None`, a linear scan finds offset 2).
#![allow(clippy::unwrap_used)]

mod common;

use strata_log::{Clock, FlushPolicy, Log, LogConfig, Record};

#[test]
fn a_match_below_the_start_does_not_hide_a_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::from_fn(|| 1_000_000);
    let config = LogConfig { flush_policy: FlushPolicy::Never, clock, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    // One batch: offset 0 at "now", offset 1 a second earlier (create time).
    log.append(&[Record::new(b"now").with_timestamp(1_000_000), Record::new(b"earlier").with_timestamp(999_000)])
        .unwrap();
    assert_eq!(log.delete_records_before(1).unwrap(), 1);
    log.append(&[Record::new(b"later").with_timestamp(1_000_000)]).unwrap();
    assert_eq!(log.offset_for_timestamp(1_000_000).unwrap(), Some(2), "offset 0 is gone; offset 2 matches");
    assert_eq!(log.offset_for_timestamp(999_000).unwrap(), Some(1));
    common::check_lookups(&log);
}
