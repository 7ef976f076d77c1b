//! Crash test 3: a child process (`strata produce`, with `--sync` or under the default `Always`
//! policy) appends records and reports each offset only once it is durable; the parent SIGKILLs
//! it at a random moment, sometimes damages bytes after the last acknowledged position (never
//! before it), reopens, and checks: every acknowledged
//! record present and intact, offsets dense without duplicates, every record returned has the
//! value written at its offset, lookups agree with a linear scan, no temporary files. Then it
//! starts the next child on the same directory. (Bytes after the checkpoint's recovery point are
//! damaged too: the writer may have made a batch durable and been killed before acknowledging it.)
//!
//! Kills: 50 by default, `STRATA_KILL_LOOPS` for more. Seeded: `STRATA_SEED` replays.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{check_recovered, value_of};
use rand::{Rng, RngExt};
use strata_log::inspect::{self, Dump};
use strata_log::{Checkpoint, LogConfig};

const SEGMENT_BYTES: u64 = 8192;

fn config() -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, index_interval_bytes: 512, ..LogConfig::default() }
}

/// Runs one child from offset `next` until it is killed; returns the offset after the last
/// acknowledged one.
fn run_child(dir: &Path, next: u64, rng: &mut impl Rng) -> u64 {
    let batch = rng.random_range(1..8u32);
    // Durable before acknowledged either way: an explicit flush per batch (`--sync`), or the
    // default flush policy (`Always`: append returns once its group commit fsynced it).
    let durability = if rng.random_bool(0.5) { "--sync" } else { "--print-offsets" };
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", durability, "--batch", &batch.to_string()])
        .args(["--segment-bytes", &SEGMENT_BYTES.to_string(), "--index-interval-bytes", "512"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for offset in next.. {
            let mut line = value_of(offset);
            line.push(b'\n');
            if stdin.write_all(&line).is_err() {
                return; // the child is gone
            }
        }
    });
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    let kill_after = rng.random_range(1..300u64);
    let mut acked = next;
    for _ in 0..kill_after {
        let Some(Ok(line)) = acks.next() else { break };
        let offset: u64 = line.parse().unwrap();
        assert_eq!(offset, acked, "acknowledgements are dense and in order");
        acked = offset + 1;
    }
    std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
    child.kill().unwrap();
    child.wait().unwrap();
    // Acknowledgements already written before the kill still count.
    for line in acks.map_while(Result::ok) {
        let offset: u64 = line.parse().unwrap();
        assert_eq!(offset, acked);
        acked = offset + 1;
    }
    writer.join().unwrap();
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
