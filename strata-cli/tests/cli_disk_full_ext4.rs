//! `strata produce` on a full disk, for real: a small ext4 image filled to the last block. Regression
//! for fs2's `allocate` reporting errno after `posix_fallocate`: the error showed as `Success (os
//! error 0)`; now it says `disk full`, in words. (The library on a full disk:
//! `tests/log_disk_full_ext4.rs` of the root package.)
//!
//! Needs root and loop devices: `cargo test --all-features --test cli_disk_full_ext4 -- --ignored`.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::ext4::{Mount, fill};

#[test]
#[ignore = "opt-in: needs root and loop devices; cargo test --all-features --test cli_disk_full_ext4 -- --ignored"]
fn strata_produce_on_a_full_disk_says_disk_full() {
    let mount = Mount::new(32, None);
    let dir = mount.path().join("log");
    fill(mount.path());
    // A new log needs blocks for its first files: the error says so, in words.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", "--sync"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(b"one\ntwo\n")?;
            child.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("disk full"), "{stderr}");
    assert!(!stderr.contains("os error 0"), "{stderr}");
}
