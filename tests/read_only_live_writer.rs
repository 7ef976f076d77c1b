//! Regression: `Log::open_read_only` (what `strata consume`, `dump` and `verify` use, documented as
//! safe on a live log) gave false errors while a writer worked: its view of the files, taken at
//! open, went stale as the writer sealed (trimmed), compacted (swapped files), deleted and cut
//! segments (`the data ends at offset 2496, but the log holds offsets up to 2600`, `open …: No
//! such file or directory`, `pread …: failed to fill whole buffer`). A read that fails now takes
//! the view again and retries before it reports an error. Here every read error is false.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::RngExt;
use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_bytes: 8 * 64,
        index_interval_bytes: 256,
        flush_policy: FlushPolicy::Never,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

#[test]
fn reading_a_live_log_read_only_never_fails_falsely() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(Log::open(dir.path(), config()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    {
        let (log, stop) = (Arc::clone(&writer), Arc::clone(&stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = common::rng("live writer");
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("k{}", i % 16);
                log.append(&[Record::new(format!("v{i}-{}", "x".repeat(60)).as_bytes()).with_key(key.as_bytes())])
                    .unwrap();
                i += 1;
                match rng.random_range(0..200) {
                    0 => drop(log.compact().unwrap()),
                    1 => drop(log.delete_records_before(log.next_offset().saturating_sub(400)).unwrap()),
                    2 => drop(log.truncate_to(log.next_offset().saturating_sub(5)).unwrap()),
                    3 => log.flush().unwrap(),
                    _ => {}
                }
                if i.is_multiple_of(32) {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut reads = 0;
    while Instant::now() < deadline {
        let reader = Log::open_read_only(dir.path(), config()).unwrap();
        let mut next = reader.start_offset();
        while next < reader.visible_end() {
            let mut batch = match reader.read(next, 1 << 14) {
                Ok(batch) => batch,
                // The start moved past `next` (a prefix deletion the view has since learned of).
                Err(strata_log::Error::OffsetOutOfRange { .. }) if next < reader.start_offset() => {
                    next = reader.start_offset();
                    continue;
                }
                Err(e) => panic!("read from {next}: {e}"),
            };
            for record in batch.by_ref() {
                match record {
                    Ok(record) => assert!(record.value().unwrap().starts_with(b"v")),
                    // The writer deleted the records the read was in (the view learned of it).
                    Err(strata_log::Error::OffsetOutOfRange { requested, start, .. }) if requested < start => break,
                    Err(e) => panic!("read from {next}: {e}"),
                }
            }
            if batch.next_offset() == next {
                break;
            }
            next = batch.next_offset();
        }
        reader.offset_for_timestamp(0).unwrap();
        reads += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(reads > 3, "{reads} whole reads");
}
