//! A truncation waits for readers of the segment it cuts, and gives up with `Error::Busy` after
//! `truncate_wait_ms`, with nothing changed: not an offset, not a byte of a segment file (only the
//! checkpoint's recovery point stays lowered until its next write). The reader it waited for
//! finishes with the records as they were. (The `read_holding_segment` pause point holds a reader
//! inside its read guard.)
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use common::{read_all, small_config, snapshot, value_of};
use strata_log::{Error, Log, LogConfig, Record};

fn segment_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    snapshot(dir).into_iter().filter(|(n, _)| n.ends_with(".log") || n.ends_with("index")).collect()
}

#[test]
fn a_truncation_blocked_by_a_reader_gives_up_and_changes_nothing() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { truncate_wait_ms: 100, ..small_config() }).unwrap();
    for offset in 0..100 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.flush().unwrap();
    let (entered, inside) = mpsc::channel();
    let entered = Mutex::new(entered);
    fail::cfg_callback("read_holding_segment", move || {
        let _ = entered.lock().unwrap().send(());
        std::thread::sleep(Duration::from_millis(1000));
    })
    .unwrap();
    let before = segment_files(dir.path());
    std::thread::scope(|s| {
        let reader = s.spawn(|| log.read(0, 1 << 10).unwrap().map(|r| r.map(|v| v.offset())).collect::<Vec<_>>());
        inside.recv().unwrap();
        // The reader is inside segment 0's guard; cutting segment 0 must wait for it.
        match log.truncate_to(5) {
            Err(Error::Busy { waited }) => assert!(waited >= Duration::from_millis(100), "{waited:?}"),
            other => panic!("expected Busy, got {other:?}"),
        }
        assert_eq!((log.next_offset(), log.durable_offset(), log.visible_end()), (100, 100, 100));
        assert_eq!(segment_files(dir.path()), before, "a Busy truncation changed a file");
        let offsets: Vec<u64> = reader.join().unwrap().into_iter().map(Result::unwrap).collect();
        assert_eq!(offsets[0], 0);
        assert!(offsets.windows(2).all(|w| w[1] == w[0] + 1));
    });
    fail::remove("read_holding_segment");
    assert_eq!(read_all(&log, 0, 1 << 16).len(), 100, "the log is intact and usable");
    assert_eq!(log.truncate_to(5).unwrap(), 5, "with the reader gone it succeeds");
    assert_eq!(log.metrics().truncations, 1);
    drop(log);
    scenario.teardown();
}
