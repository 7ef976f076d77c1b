//! Crash test 7 (opt-in): simulated power loss. The same durable writer as the kill test runs on a
//! fresh ext4 image mounted through a loop device; at a random moment the test shuts the file
//! system down with `EXT4_IOC_SHUTDOWN(NOLOGFLUSH)`, which drops
//! everything not fsynced exactly as a power cut would; the writer is killed, the file system
//! remounted (journal replay), and every record acknowledged before the cut began must be there. Unlike a SIGKILL (the page cache survives), this catches a
//! missing fdatasync or directory fsync.
//!
//! Opt-in, so marked `#[ignore]` (a skipped test must never read as a passed one): run it with
//! `cargo test --all-features --test crash_power_loss -- --ignored` as root with loop devices
//! (`mkfs.ext4`, `losetup`, `mount`; the test fails, not skips, when it cannot mount an image).
//! Cycles: `STRATA_POWERLOSS_CYCLES` (default 20); the file system's block size:
//! `STRATA_POWERLOSS_BLOCK_SIZE` (1024, 2048 or 4096; default: mkfs's choice, 1024 for the 256 MB
//! image). The image is made by `tests/common/ext4.rs`.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::check_recovered;
use common::child::{Writer, WriterOptions};
use common::ext4::{Mount, cut_now, tool};
use rand::{Rng, RngExt};
use strata_log::LogConfig;

const SEGMENT_BYTES: u64 = 64 << 10;

fn config() -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, index_interval_bytes: 1024, ..LogConfig::default() }
}

/// One cycle: write from `next` until a power cut at a random moment. Returns the offset after the
/// last record acknowledged before the cut began, and how many were acknowledged after it began.
fn cycle(mount: &str, dir: &Path, next: u64, rng: &mut impl Rng) -> (u64, u64) {
    // Acknowledged after an explicit flush, or after the default `Always` group commit.
    let options = WriterOptions {
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 1024,
        batch: rng.random_range(1..6),
        sync: rng.random_bool(0.5),
        failpoints: None,
    };
    let mut child = Writer::spawn(dir, &options);
    child.feed(next..);
    let acked = child.read_acks(next, rng.random_range(1..600));
    std::thread::sleep(Duration::from_micros(rng.random_range(0..2000)));
    // From this process, so the cut begins when noted (the tool takes tens of ms to start).
    let cut_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    cut_now(Path::new(mount));
    child.kill();
    // Offsets acknowledged before the cut began were durable before it: they count too. One
    // acknowledged later came from an fdatasync the cut overlapped, which returned 0 after the
    // shutdown although its batch was not durable (docs/POWER_LOSS.md); after a real
    // power cut that call never returns.
    let (acked, printed) = child.read_acks_before(acked, cut_ns);
    child.wait();
    tool(&["remount", mount]);
    (acked, printed - acked)
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
    let (mut checked, mut overlapped) = (0, 0);
    for _ in 0..cycles {
        let (acked, after_cut) = cycle(&mount_dir, &dir, next, &mut rng);
        overlapped += after_cut;
        let log = check_recovered(&dir, config(), acked);
        next = log.next_offset();
        checked += next;
        drop(log);
    }
    eprintln!(
        "{cycles} power cuts; {next} records in the log; {checked} record checks in all; every record acknowledged \
         before its cut present ({overlapped} acknowledged after a cut began, not counted)"
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
    let options = WriterOptions { segment_bytes: 1024, ..WriterOptions::default() };
    let mut child = Writer::spawn(&dir, &options);
    child.send(b"small");
    child.send("x".repeat(3000).as_bytes());
    assert_eq!(child.read_acks(0, 2), 2);
    child.kill();
    child.wait();
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

#[test]
#[ignore = "the child process of the tests above"]
fn child_process() {
    common::child::main();
}
