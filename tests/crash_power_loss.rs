//! Crash test 7 (opt-in): simulated power loss. The same durable writer as the kill test runs on a
//! fresh ext4 image mounted through a loop device; at a random moment `powercut cut` shuts the file
//! system down with `EXT4_IOC_SHUTDOWN(NOLOGFLUSH)`, which drops everything not fsynced exactly as
//! a power cut would; the writer is killed, the file system remounted (journal replay), and every
//! acknowledged record must be there. Unlike a SIGKILL (the page cache survives), this catches a
//! missing fdatasync or directory fsync.
//!
//! Opt-in, so marked `#[ignore]` (a skipped test must never read as a passed one): run it with
//! `cargo test --all-features --test crash_power_loss -- --ignored` as root with loop devices
//! (`powercut available` must succeed; the test fails, not skips, when it does not).
//! Cycles: `STRATA_POWERLOSS_CYCLES` (default 20); the file system's block size:
//! `STRATA_POWERLOSS_BLOCK_SIZE` (1024, 2048 or 4096; default: mkfs's choice, 1024 for the 256 MB
//! image). The tool: `STRATA_POWERCUT` (default `../shared/tools/powercut`).
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::ext4::{Mount, tool};
use common::{check_recovered, value_of};
use rand::{Rng, RngExt};
use strata_log::LogConfig;

const SEGMENT_BYTES: u64 = 64 << 10;

fn config() -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, index_interval_bytes: 1024, ..LogConfig::default() }
}

/// One cycle: write from `next` until a power cut at a random moment. Returns the offset after the
/// last acknowledged record.
fn cycle(mount: &str, dir: &Path, next: u64, rng: &mut impl Rng) -> u64 {
    let batch = rng.random_range(1..6u32);
    // Acknowledged after an explicit flush, or after the default `Always` group commit.
    let durability = if rng.random_bool(0.5) { "--sync" } else { "--print-offsets" };
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", durability, "--batch", &batch.to_string(), "--segment-bytes", &SEGMENT_BYTES.to_string()])
        .args(["--index-interval-bytes", "1024"])
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
                return;
            }
        }
    });
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = next;
    for _ in 0..rng.random_range(1..600u32) {
        let Some(Ok(line)) = acks.next() else { break };
        assert_eq!(line.parse::<u64>().unwrap(), acked);
        acked += 1;
    }
    std::thread::sleep(Duration::from_micros(rng.random_range(0..2000)));
    tool(&["cut", mount]);
    // Offsets printed before the cut took effect were durable before it: they count too.
    child.kill().unwrap();
    for line in acks.map_while(Result::ok) {
        assert_eq!(line.parse::<u64>().unwrap(), acked);
        acked += 1;
    }
    child.wait().unwrap();
    writer.join().unwrap();
    tool(&["remount", mount]);
    acked
}

#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test crash_power_loss -- --ignored"]
fn power_loss_loses_nothing_acknowledged() {
    let cycles = std::env::var("STRATA_POWERLOSS_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let block_size = std::env::var("STRATA_POWERLOSS_BLOCK_SIZE").ok().and_then(|s| s.parse().ok());
    let mut rng = common::rng("power_loss_loses_nothing_acknowledged");
    let mount = Mount::new(256, block_size);
    let mount_dir = mount.path().to_string_lossy().into_owned();
    let dir = mount.path().join("log");
    let mut next = 0;
    let mut checked = 0;
    for _ in 0..cycles {
        let acked = cycle(&mount_dir, &dir, next, &mut rng);
        let log = check_recovered(&dir, config(), acked);
        next = log.next_offset();
        checked += next;
        drop(log);
    }
    eprintln!(
        "{cycles} power cuts; {next} records in the log; {checked} record checks in all; every acknowledged record present"
    );
}

/// Regression (found in review): recovery raised the recovery point over a kept segment it never
/// fsynced (one whose valid data reached its file end, so nothing was cut): a crashed writer's
/// unsynced batch in a segment of its own was then claimed durable, and lost at the next power cut.
#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test crash_power_loss -- --ignored"]
fn recovery_fsyncs_what_it_claims_durable() {
    let mount = Mount::new(64, None);
    let mount_dir = mount.path().to_string_lossy().into_owned();
    let dir = mount.path().join("log");
    // A writer that never fsyncs: a small record, then one larger than a segment (it gets a
    // segment of exactly its size), then it is killed.
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", "--print-offsets", "--segment-bytes", "1024"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut acks = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(stdin, "small").unwrap();
    writeln!(stdin, "{}", "x".repeat(3000)).unwrap();
    assert_eq!(acks.next().unwrap().unwrap(), "0");
    assert_eq!(acks.next().unwrap().unwrap(), "1");
    child.kill().unwrap();
    child.wait().unwrap();
    // Recovery claims offsets below 2 durable; then the power goes.
    let log = strata_log::Log::open(&dir, LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    assert_eq!(log.recovery_report().recovery_point, 2);
    tool(&["cut", &mount_dir]);
    drop(log);
    tool(&["remount", &mount_dir]);
    let log = strata_log::Log::open(&dir, LogConfig { segment_bytes: 1024, ..LogConfig::default() });
    let log = log.unwrap_or_else(|e| panic!("what recovery claimed durable is gone: {e}"));
    assert_eq!(log.next_offset(), 2);
}
