//! Crash test 3: a child process (this test binary run again as a writer through the library,
//! flushing each batch or under the default `Always` policy) appends records and reports each
//! offset only once it is durable; the parent SIGKILLs it at a random moment, sometimes damages
//! bytes after the last acknowledged position (never before it), reopens, and checks: every
//! acknowledged record present and intact, offsets dense without duplicates, every record returned
//! has the value written at its offset, lookups agree with a linear scan, no temporary files. Then
//! it starts the next child on the same directory. (Bytes after the checkpoint's recovery point are
//! damaged too: the writer may have made a batch durable and been killed before acknowledging it.)
//!
//! Kills: 50 by default, `STRATA_KILL_LOOPS` for more. Seeded: `STRATA_SEED` replays.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::check_recovered;
use common::child::{Writer, WriterOptions};
use rand::{Rng, RngExt};
use strata_log::LogConfig;
use strata_log::internals::Checkpoint;
use strata_log::internals::inspect::{self, Dump};

const SEGMENT_BYTES: u64 = 8192;

fn config() -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, index_interval_bytes: 512, ..LogConfig::default() }
}

/// Runs one child from offset `next` until it is killed; returns the offset after the last
/// acknowledged one.
fn run_child(dir: &Path, next: u64, rng: &mut impl Rng) -> u64 {
    // Durable before acknowledged either way: an explicit flush per batch (`sync`), or the
    // default flush policy (`Always`: append returns once its group commit fsynced it).
    let options = WriterOptions {
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 512,
        batch: rng.random_range(1..8),
        sync: rng.random_bool(0.5),
        failpoints: None,
    };
    let mut child = Writer::spawn(dir, &options);
    child.feed(next..);
    let acked = child.read_acks(next, rng.random_range(1..300));
    std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
    child.kill();
    // Acknowledgements already written before the kill still count.
    let acked = child.read_acks(acked, u64::MAX);
    child.wait();
    acked
}

/// Flips random bytes in the last segment file after everything that was durable: after the last
/// acknowledged batch, and after the checkpoint's recovery point (the writer may have fsynced and
/// checkpointed a batch it was killed before acknowledging; a crash cannot tear that).
fn damage_after(dir: &Path, acked: u64, rng: &mut impl Rng) {
    let checkpoint = Checkpoint::decode(&std::fs::read(dir.join("checkpoint")).unwrap()).unwrap();
    let durable = acked.max(checkpoint.recovery_point);
    let last = common::file_names(dir).into_iter().rfind(|n| n.ends_with(".log")).unwrap();
    let path = dir.join(&last);
    let Dump::Log { batches, .. } = inspect::dump_file(&path, false).unwrap() else { unreachable!() };
    let from = batches.iter().filter(|b| b.base_offset < durable).map(|b| b.position + b.size).max().unwrap_or(0);
    let mut bytes = std::fs::read(&path).unwrap();
    if from as usize >= bytes.len() {
        return;
    }
    for _ in 0..rng.random_range(1..20) {
        let at = rng.random_range(from as usize..bytes.len());
        bytes[at] = rng.random();
    }
    std::fs::write(&path, bytes).unwrap();
}

#[test]
fn kill_at_random_moments_loses_nothing_acknowledged() {
    let kills = std::env::var("STRATA_KILL_LOOPS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let mut rng = common::rng("kill_at_random_moments_loses_nothing_acknowledged");
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0;
    let mut total_acked = 0;
    for kill in 0..kills {
        let acked = run_child(dir.path(), next, &mut rng);
        if rng.random_bool(0.5) {
            damage_after(dir.path(), acked, &mut rng);
        }
        let log = check_recovered(dir.path(), config(), acked);
        assert!(!log.recovery_report().clean_shutdown, "kill {kill}: a killed writer never shuts down cleanly");
        next = log.next_offset();
        total_acked = acked;
        drop(log);
    }
    eprintln!("{kills} kills, {total_acked} records acknowledged, all present");
    assert!(total_acked > kills as u64, "every child acknowledged something");
}

#[test]
#[ignore = "the child process of the test above"]
fn child_process() {
    common::child::main();
}
