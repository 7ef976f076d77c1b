//! A cursor on a read-only log (`Log::open_read_only`, as `strata consume` opens one) reads what
//! the files held at open, returns nothing at the end, waits out its timeout (nothing becomes
//! visible in a read-only view), and returns `Error::Closed` once the view is closed.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{small_config, value_of};
use strata_log::{Error, Log, Record};

#[test]
fn a_cursor_reads_a_read_only_log_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Log::open(dir.path(), small_config()).unwrap();
    for offset in 0..200 {
        writer.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    writer.flush().unwrap();
    let view = Log::open_read_only(dir.path(), small_config()).unwrap();
    let mut cursor = view.cursor(0).unwrap();
    let mut seen = Vec::new();
    loop {
        let batches = cursor.next_batch(512).unwrap();
        if batches.is_empty() {
            break;
        }
        seen.extend(batches.iter().flat_map(|b| b.records()).map(|r| (r.offset(), r.value().unwrap().to_vec())));
    }
    assert_eq!(seen, (0..200).map(|o| (o, value_of(o))).collect::<Vec<_>>());
    assert_eq!(cursor.position(), 200);

    let started = Instant::now();
    assert!(cursor.next_batch_wait(1 << 20, Duration::from_millis(50)).unwrap().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(50));

    view.close().unwrap();
    assert!(matches!(cursor.next_batch(1 << 20), Err(Error::Closed)));
    assert!(matches!(cursor.next_batch_wait(1 << 20, Duration::from_secs(1)), Err(Error::Closed)));
    writer.close().unwrap();
}
