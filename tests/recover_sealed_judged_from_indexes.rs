//! Regression (adversarial pass): whether a damaged segment in the middle of the log was sealed
//! was judged from its `.log` (shorter than the configured segment size, or no zero tail). Reopened
//! with a smaller `segment_bytes`, a sealed segment whose last record ends in zero bytes read as
//! "never sealed": damage in it was taken for a torn write and every later segment was deleted
//! without a word. The judgment now reads the indexes (trimmed at sealing, preallocated before),
//! and a sealed segment's damage refuses the open.
#![allow(clippy::unwrap_used)]

mod common;

use common::file_names;
use strata_log::internals::Checkpoint;
use strata_log::{Error, Log, LogConfig, Record};

#[test]
fn damage_in_a_sealed_segment_refuses_even_after_the_segment_size_shrinks() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 8192, ..LogConfig::default() };
    let log = Log::open(dir.path(), config).unwrap();
    let value = |offset: u64| {
        let mut value = format!("record {offset} ").into_bytes();
        value.resize(100, 0); // ends in zero bytes, like many binary payloads
        value
    };
    for offset in 0..400 {
        log.append(&[Record::new(&value(offset))]).unwrap();
    }
    log.close().unwrap();
    let logs: Vec<String> = file_names(dir.path()).into_iter().filter(|n| n.ends_with(".log")).collect();
    assert!(logs.len() >= 4, "{logs:?}");
    let base = |name: &String| name.trim_end_matches(".log").parse::<u64>().unwrap();

    // An unclean shutdown whose checkpoint is older than the second segment, and damage in the
    // second segment's last batch.
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let checkpoint = Checkpoint { log_start_offset: 0, recovery_point: base(&logs[1]) - 1 };
    std::fs::write(dir.path().join("checkpoint"), checkpoint.encode_file(1)).unwrap();
    let damaged = dir.path().join(&logs[1]);
    let mut bytes = std::fs::read(&damaged).unwrap();
    let at = bytes.len() - 150;
    bytes[at] ^= 0x40;
    std::fs::write(&damaged, bytes).unwrap();
    let before = common::snapshot(dir.path());

    // The segment size shrank below the sealed segments' length.
    let smaller = LogConfig { segment_bytes: 4096, ..LogConfig::default() };
    match Log::open(dir.path(), smaller) {
        Err(Error::Corrupt { .. }) => {}
        Err(other) => panic!("expected a refusal naming the damage, got {other}"),
        Ok(log) => panic!("opened with {} records: the later segments were cut", log.next_offset()),
    }
    for later in &logs[2..] {
        assert!(dir.path().join(later).exists(), "{later} was deleted");
    }
    let after = common::snapshot(dir.path());
    let changed: Vec<_> = before.iter().filter(|entry| !after.contains(entry)).map(|(name, _)| name).collect();
    assert!(changed.is_empty() || changed.iter().all(|n| n.starts_with('.')), "files changed: {changed:?}");
}
