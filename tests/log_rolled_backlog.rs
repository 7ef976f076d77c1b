//! Regression: under `Never` or `EveryInterval` nothing slowed a fast appender while the syncer
//! sealed rolled segments one by one (each keeping three descriptors and three maps until sealed):
//! with `ulimit -n 1024`, 1 MiB segments and 16 KiB records, appends failed after a second with
//! `Too many open files`. Past a small bound the appender now seals the backlog itself. This file
//! holds one test only: it lowers the process's descriptor limit.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use strata_log::{FlushPolicy, Log, LogConfig, Record};

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_fast_appender_never_runs_out_of_descriptors() {
    let limit = getrlimit(Resource::Nofile);
    let low = 96;
    setrlimit(Resource::Nofile, Rlimit { current: Some(low), maximum: limit.maximum }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 64 << 10,
        index_bytes: 8 * 128,
        flush_policy: FlushPolicy::Never,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let value = vec![0x5Au8; 16 << 10];
    let started = Instant::now();
    let (mut appends, mut most_fds, mut most_unsealed) = (0u64, 0, 0);
    while started.elapsed() < Duration::from_secs(2) && appends < 20_000 {
        log.append(&[Record::new(&value)]).unwrap_or_else(|e| panic!("append {appends}: {e}"));
        appends += 1;
        if appends % 16 == 0 {
            most_fds = most_fds.max(open_descriptors());
            most_unsealed = most_unsealed.max(log.metrics().unsealed_segments);
        }
    }
    let metrics = log.metrics();
    eprintln!(
        "{appends} appends, {} rolls, {} inline seals, at most {most_unsealed} unsealed, {most_fds} descriptors",
        metrics.rolls, metrics.inline_seals
    );
    assert!(metrics.rolls > 100, "the test rolled enough segments to matter");
    assert!(most_unsealed <= 8, "the unsealed backlog stays small: {most_unsealed}");
    assert!((most_fds as u64) < low);
    log.close().unwrap();
    setrlimit(Resource::Nofile, limit).unwrap();
}
