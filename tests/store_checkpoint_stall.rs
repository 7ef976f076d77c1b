//! The store checkpoint's fsyncs of the queues and the index do not hold the dispatch lock, which
//! every put takes to dispatch its own message: with many queues, one fdatasync each, puts
//! stalled for all of them at every checkpoint. The `fdatasync` error point, configured to
//! `pause`, holds the checkpoint inside its first queue flush while a put runs.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Duration;

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

#[test]
fn a_put_does_not_wait_for_the_checkpoint_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        // Nothing on the put path fsyncs: only the checkpoint's flushes meet the pause.
        log: LogConfig { flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        flush_interval_ms: 10,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(dir.path(), config).unwrap();
    // The queue and the index file exist (their creation fsyncs).
    store.put(&Message::new("t", 0, "first").with_keys(["k"])).unwrap();
    fail::cfg("fdatasync", "pause").unwrap();
    // The next checkpoint flushes the dirty queue and stops in its fdatasync.
    std::thread::sleep(Duration::from_millis(300));
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let put = store.put(&Message::new("t", 0, "second").with_keys(["k"]));
            done_tx.send(put).unwrap();
        });
        let put = done_rx.recv_timeout(Duration::from_secs(5));
        fail::cfg("fdatasync", "off").unwrap();
        let put = put.expect("the put waited for the checkpoint's fsyncs").unwrap();
        assert_eq!(put.queue_offset, 1);
    });
    assert!(store.metrics().checkpoints >= 1);
    store.close().unwrap();
}
