//! Crash test 5: truncate, append fewer bytes, crash before fsync, reopen: no truncated record
//! comes back. Recovery cuts a torn tail (the recovery form of suffix removal: `set_len`, fsync);
//! a child then appends a few new records without fsync and is killed; on reopen every offset holds
//! either the new record or nothing, never a record that was cut.
#![allow(clippy::unwrap_used)]

mod common;

use common::child::{Writer, WriterOptions};
use common::value_of;
use strata_log::internals::Checkpoint;
use strata_log::internals::inspect::{self, Dump};
use strata_log::{Log, LogConfig, Record};

#[test]
fn records_cut_by_recovery_never_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { flush_policy: strata_log::FlushPolicy::Never, ..LogConfig::default() })
        .unwrap();
    for offset in 0..100 {
        log.append(&[Record::new(&value_of(offset))]).unwrap();
    }
    log.close().unwrap();
    // Unclean, recovery point 60, the batch of offset 80 damaged: recovery cuts 80..100.
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    std::fs::write(
        dir.path().join("checkpoint"),
        Checkpoint { log_start_offset: 0, recovery_point: 60 }.encode_file(1),
    )
    .unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let Dump::Log { batches, .. } = inspect::dump_file(&path, false).unwrap() else { unreachable!() };
    let mut bytes = std::fs::read(&path).unwrap();
    let victim = &batches[80];
    bytes[(victim.position + victim.size - 1) as usize] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.next_offset(), 80);
    drop(log);

    // Append three short records (fewer bytes than were cut) and die before any fsync.
    let mut child = Writer::spawn(dir.path(), &WriterOptions::default());
    for offset in 80..83 {
        child.send(format!("new-{offset}").as_bytes());
        assert_eq!(child.next_ack(), Some(offset), "stored (not durable)");
    }
    child.kill();
    child.wait();

    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(log.next_offset() <= 83, "nothing past the new records: {}", log.next_offset());
    for (offset, record) in common::read_all(&log, 0, 1 << 20) {
        let value = record.value.unwrap();
        if offset < 80 {
            assert_eq!(value, value_of(offset));
        } else {
            assert_eq!(value, format!("new-{offset}").into_bytes(), "offset {offset}: a cut record came back");
        }
    }
}

#[test]
#[ignore = "the child process of the test above"]
fn child_process() {
    common::child::main();
}
