//! Group commit under `FlushPolicy::Always`: many threads appending one record per call all get
//! durable, dense, distinct offsets, and share fsyncs (fewer sync rounds than appends).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::value_of;
use strata_log::{FlushPolicy, Log, LogConfig, Record};

#[test]
fn concurrent_appenders_share_fsyncs_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig { segment_bytes: 64 << 10, flush_policy: FlushPolicy::Always, ..LogConfig::default() };
    let log = Arc::new(Log::open(dir.path(), config()).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut offsets = Vec::new();
                for i in 0..150u64 {
                    let value = format!("thread {t} record {i}");
                    let info = log.append(&[Record::new(value.as_bytes())]).unwrap();
                    assert!(log.durable_offset() > info.last_offset, "append returned before its record was durable");
                    offsets.push((info.base_offset, value));
                }
                offsets
            })
        })
        .collect();
    let mut all: Vec<(u64, String)> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.sort();
    assert_eq!(all.iter().map(|(o, _)| *o).collect::<Vec<_>>(), (0..1200).collect::<Vec<_>>(), "dense, no duplicates");
    let metrics = log.metrics();
    assert_eq!(metrics.appends, 1200);
    assert!(metrics.sync_rounds < 1200, "some fsyncs were shared: {} rounds for 1200 appends", metrics.sync_rounds);
    eprintln!(
        "{} appends in {} sync rounds ({:.1} per round)",
        metrics.appends, metrics.sync_rounds, metrics.appends_per_sync
    );
    for (offset, value) in &all {
        let record = log.read(*offset, 1).unwrap().next().unwrap().unwrap();
        assert_eq!(record.value().unwrap(), value.as_bytes());
    }
    drop(log);
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(log.next_offset(), 1200);
    assert_eq!(common::read_all(&log, 0, 1 << 20).len(), 1200);
    let _ = value_of;
}
