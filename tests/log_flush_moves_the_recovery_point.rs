//! Regression (found in review): `flush()` made records durable but did not move the checkpoint's
//! recovery point, so after a crash damage to those records was cut as a torn tail, silently, in
//! Strict mode. Fix: an explicit flush writes the checkpoint.
#![allow(clippy::unwrap_used)]

use strata_log::internals::Checkpoint;
use strata_log::internals::inspect::{self, Dump};
use strata_log::{Error, Log, LogConfig, Record};

#[test]
fn damage_to_flushed_records_is_reported_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() }).unwrap();
    for i in 0..10u8 {
        log.append(&[Record::new(&[i; 100])]).unwrap();
    }
    log.flush().unwrap();
    let checkpoint = Checkpoint::decode(&std::fs::read(dir.path().join("checkpoint")).unwrap()).unwrap();
    assert_eq!(checkpoint.recovery_point, 10);
    // A crash: no close. (The leaked handle keeps its lock on the old lock file; a new one is used.)
    std::mem::forget(log);
    std::fs::remove_file(dir.path().join(".lock")).unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let Dump::Log { batches, .. } = inspect::dump_file(&path, false).unwrap() else { unreachable!() };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(batches[5].position + 60) as usize] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let result = Log::open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() });
    assert!(matches!(result, Err(Error::Corrupt { position, .. }) if position == batches[5].position), "{result:?}");
}
