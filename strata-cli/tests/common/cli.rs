//! Helpers for the tests of the `strata` binary (assert_cmd).
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use strata_log::{Log, LogConfig, Record};

/// The `strata` binary of this build.
pub fn strata() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata"))
}

/// A closed log of `n` keyed records (`key-{i%3}`, `value-{i}`) in segments of 1 KiB.
pub fn build(dir: &Path, n: u64) {
    let log = Log::open(dir, LogConfig { segment_bytes: 1024, ..LogConfig::default() }).unwrap();
    for i in 0..n {
        let (key, value) = (format!("key-{}", i % 3), format!("value-{i}"));
        log.append(&[Record::new(value.as_bytes()).with_key(key.as_bytes())]).unwrap();
    }
    log.close().unwrap();
}

/// Stdout of a finished command as text.
pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stderr of a finished command as text.
pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Fails if `text` shows Rust `Debug` formatting.
pub fn assert_no_debug(text: &str) {
    for debug in ["Some(", "None", "key=None", " { ", "Ok(", "Err("] {
        assert!(!text.contains(debug), "Debug output {debug:?} in:\n{text}");
    }
}

/// Flips one bit of a file.
pub fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}
