//! Regression: a flush that ended exactly at the end of the active segment, followed by a roll,
//! left that segment unsealed (untrimmed, no final time entry), because sealing started from the
//! segment holding the durable offset, which was already the new one. The next open trusted the
//! untrimmed file's zero tail as data and reads failed with `Corrupt`. Fix: the log keeps a list of
//! rolled-away segments and seals exactly those.
#![allow(clippy::unwrap_used)]

mod common;

use common::{file_names, values};
use strata_log::{Log, LogConfig, Record};

#[test]
fn flush_at_a_segment_end_then_roll_still_seals_the_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 1024, ..LogConfig::default() };
    let log = Log::open(dir.path(), config()).unwrap();
    let value = vec![b'v'; 300];
    let mut written = 0;
    for _ in 0..12 {
        log.append(&[Record::new(&value)]).unwrap();
        written += 1;
        // Flushing after every append puts the durable offset at the end of the active segment
        // each time the next append rolls.
        log.flush().unwrap();
    }
    assert!(log.segment_count() >= 4);
    log.close().unwrap();
    for name in file_names(dir.path()).iter().filter(|n| n.ends_with(".log")) {
        let len = std::fs::metadata(dir.path().join(name)).unwrap().len();
        assert!(len < 1024, "{name} is {len} bytes: every segment is trimmed to its data");
    }
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(values(&log).len(), written);
}
