//! Visibility (docs/DESIGN.md §2): under `FlushPolicy::Always` a reader never sees an offset the
//! syncer has not made durable; under the other policies it sees every stored record. `wait_for`
//! blocks without polling until an offset is visible, times out cleanly, and fails instead of
//! hanging on a poisoned log; `wait_durable` pairs with `append_nowait`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

fn open(dir: &std::path::Path, flush_policy: FlushPolicy) -> Log {
    Log::open(dir, LogConfig { segment_bytes: 256 << 10, flush_policy, ..LogConfig::default() }).unwrap()
}

#[test]
fn under_always_readers_never_see_past_the_durable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path(), FlushPolicy::Always));
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..300u32 {
                    log.append_nowait(&[Record::new(&i.to_be_bytes())]).unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let (log, done) = (Arc::clone(&log), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) {
                let visible = log.visible_end();
                assert!(visible <= log.durable_offset(), "visible end {visible} past the durable offset");
                if visible > 0 {
                    let last = log.read(visible - 1, 1).unwrap().next().unwrap().unwrap();
                    assert!(last.offset() < log.durable_offset());
                }
                checks += 1;
            }
            checks
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    log.wait_durable(899, Duration::from_secs(10)).unwrap();
    done.store(true, Ordering::Release);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(log.visible_end(), 900);
}

#[test]
fn append_nowait_is_invisible_until_durable_under_always() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), FlushPolicy::Always);
    let info = log.append_nowait(&[Record::new(b"x")]).unwrap();
    log.wait_durable(info.last_offset, Duration::from_secs(10)).unwrap();
    assert!(log.durable_offset() > info.last_offset);
    assert!(log.visible_end() > info.last_offset);
    assert_eq!(log.read(0, 10).unwrap().next().unwrap().unwrap().value(), Some(&b"x"[..]));
}

#[test]
fn under_never_stored_records_are_visible_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), FlushPolicy::Never);
    log.append(&[Record::new(b"a")]).unwrap();
    assert_eq!(log.visible_end(), 1);
    assert_eq!(log.durable_offset(), 0, "nothing fsynced yet");
    log.flush().unwrap();
    assert_eq!(log.durable_offset(), 1);
}

#[test]
fn every_interval_makes_records_durable_without_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), FlushPolicy::EveryInterval { ms: 20, messages: 1_000_000 });
    log.append(&[Record::new(b"a")]).unwrap();
    assert_eq!(log.visible_end(), 1);
    log.wait_durable(0, Duration::from_secs(10)).unwrap();
    // And by message count: a threshold of 5 records.
    drop(log);
    let log = open(dir.path(), FlushPolicy::EveryInterval { ms: 3_600_000, messages: 5 });
    let started = Instant::now();
    log.append(&[Record::new(b"1"), Record::new(b"2"), Record::new(b"3"), Record::new(b"4"), Record::new(b"5")])
        .unwrap();
    while log.durable_offset() < 6 {
        assert!(started.elapsed() < Duration::from_secs(10), "never synced by count");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `append_nowait` (the message store's put) does not wake the syncer at every append under
/// `EveryInterval`, only once the policy's record count is reached: that count still makes the
/// records durable without anyone waiting.
#[test]
fn every_interval_syncs_nowait_appends_by_count() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), FlushPolicy::EveryInterval { ms: 3_600_000, messages: 5 });
    for i in 0..5u8 {
        log.append_nowait(&[Record::new(&[i])]).unwrap();
    }
    let started = Instant::now();
    while log.durable_offset() < 5 {
        assert!(started.elapsed() < Duration::from_secs(10), "never synced by count");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn wait_for_wakes_a_tailing_consumer_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path(), FlushPolicy::Always));
    let consumer = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            log.wait_visible(4, Duration::from_secs(30)).unwrap();
            log.read(4, 100).unwrap().next().unwrap().unwrap().value().unwrap().to_vec()
        })
    };
    for i in 0..5u8 {
        std::thread::sleep(Duration::from_millis(5));
        log.append(&[Record::new(&[i])]).unwrap();
    }
    assert_eq!(consumer.join().unwrap(), [4]);
    let started = Instant::now();
    assert!(matches!(log.wait_visible(100, Duration::from_millis(30)), Err(Error::Timeout { .. })));
    assert!(started.elapsed() >= Duration::from_millis(30));
}
