//! A truncation racing the end of a compaction pass: it waits for the swap (the structure lock),
//! which now includes the cleaner-checkpoint update, and then lowers it, so records appended after
//! the cut are mapped by later passes and a tombstone among them keeps its key deleted.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Barrier};

use strata_log::{Clock, FlushPolicy, Log, LogConfig, Record};

fn values_of(log: &Log, key: &[u8]) -> BTreeMap<u64, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut next = log.start_offset();
    while next < log.next_offset() {
        for record in log.read(next, 1 << 16).unwrap() {
            let record = record.unwrap();
            next = record.offset() + 1;
            if record.key() == Some(key) {
                out.insert(record.offset(), record.value().map(<[u8]>::to_vec));
            }
        }
    }
    out
}

#[test]
fn a_truncation_during_a_swap_lowers_the_new_cleaner_checkpoint() {
    let scenario = fail::FailScenario::setup();
    let now = Arc::new(AtomicI64::new(1_000_000));
    let n = Arc::clone(&now);
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        delete_retention_ms: 10_000,
        file_delete_delay_ms: 0,
        flush_policy: FlushPolicy::Never,
        clock: Clock::from_fn(move || n.load(Ordering::SeqCst)),
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    for i in 0..400u32 {
        log.append(&[Record::new(b"filler").with_key(format!("f{i:05}").as_bytes())]).unwrap();
    }
    let mid_swap = Arc::new(Barrier::new(2));
    let once = Arc::new(AtomicBool::new(false));
    let (barrier, first) = (Arc::clone(&mid_swap), Arc::clone(&once));
    fail::cfg_callback("cleaner_mid_strip", move || {
        if !first.swap(true, Ordering::SeqCst) {
            barrier.wait();
        }
    })
    .unwrap();
    std::thread::scope(|s| {
        let pass = s.spawn(|| log.compact());
        mid_swap.wait();
        // Blocks on the structure lock until the swap and its checkpoint are done, then lowers it.
        assert_eq!(log.truncate_to(10).unwrap(), 10);
        assert!(pass.join().unwrap().unwrap().unwrap().cleaned_up_to > 10);
    });
    fail::remove("cleaner_mid_strip");
    log.append(&[Record::new(b"v1").with_key(b"K")]).unwrap();
    log.append(&[Record::tombstone(b"K")]).unwrap();
    for i in 0..1500u32 {
        log.append(&[Record::new(b"filler").with_key(format!("g{i:05}").as_bytes())]).unwrap();
    }
    now.fetch_add(60_000, Ordering::SeqCst);
    while log.compact().unwrap().is_some() {}
    let k = values_of(&log, b"K");
    assert!(k.values().all(Option::is_none), "K was deleted; compaction brought back {k:?}");
    drop(log);
    scenario.teardown();
}
