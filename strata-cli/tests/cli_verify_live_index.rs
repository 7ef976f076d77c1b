//! Regression: `strata verify` on a live log read a segment's `.log`, then its `.timeindex`, which
//! the writer had extended in between: the last segment's time index then pointed past the data
//! verify had read, and verify reported corruption (`points past the segment's last offset`, exit
//! code 1) on a healthy log. Here the log is closed and the last segment cut back at a batch
//! boundary: the state verify sees in that race (the recovery point below the cut, as on a live
//! log).
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;

use cli::strata;
use strata_log::internals::Checkpoint;
use strata_log::{Log, LogConfig, Record};

#[test]
fn a_last_time_index_ahead_of_the_data_is_not_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig { segment_bytes: 1 << 20, ..LogConfig::default() }).unwrap();
    let mut last = None;
    for i in 0..20u32 {
        let info = log.append(&[Record::new(format!("record {i}").as_bytes())]).unwrap();
        if i == 14 {
            last = Some(info);
        }
    }
    log.close().unwrap();
    // Keep offsets 0..=14: cut the file after that batch (found by walking the batch headers).
    let path = dir.path().join("00000000000000000000.log");
    let bytes = std::fs::read(&path).unwrap();
    let mut at = 0usize;
    for _ in 0..=last.unwrap().base_offset {
        at += 12 + u32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(at as u64).unwrap();
    std::fs::remove_file(dir.path().join(".clean-shutdown")).unwrap();
    let checkpoint = Checkpoint { log_start_offset: 0, recovery_point: 10 };
    std::fs::write(dir.path().join("checkpoint"), checkpoint.encode_file(1)).unwrap();
    let out = strata().arg("verify").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}{}", cli::stdout(&out), cli::stderr(&out));
}
