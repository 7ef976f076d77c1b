//! One writer per directory: a second open, in this process or another, gets `Error::Locked`.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use strata_log::{Error, Log, LogConfig};

#[test]
fn second_open_in_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(matches!(Log::open(dir.path(), LogConfig::default()), Err(Error::Locked { .. })));
    drop(log);
    Log::open(dir.path(), LogConfig::default()).unwrap();
}

#[test]
fn open_while_another_process_holds_the_log_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["produce", "--sync"])
        .arg(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "hello").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "0", "the child acknowledged its first record");
    assert!(matches!(Log::open(dir.path(), LogConfig::default()), Err(Error::Locked { .. })));
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.next_offset(), 1);
}
