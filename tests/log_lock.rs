//! One writer per directory: a second open, in this process or another, gets `Error::Locked`.
#![allow(clippy::unwrap_used)]

mod common;

use common::child::{Writer, WriterOptions};
use strata_log::{Error, Log, LogConfig};

#[test]
fn second_open_in_process_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogConfig::default()).unwrap();
    assert!(matches!(Log::open(dir.path(), LogConfig::default()), Err(Error::Locked { .. })));
    drop(log);
    common::open_unlocked(dir.path(), LogConfig::default()).unwrap();
}

#[test]
fn open_while_another_process_holds_the_log_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let options = WriterOptions { sync: true, ..WriterOptions::default() };
    let mut child = Writer::spawn(dir.path(), &options);
    child.send(b"hello");
    assert_eq!(child.next_ack(), Some(0), "the child acknowledged its first record");
    assert!(matches!(Log::open(dir.path(), LogConfig::default()), Err(Error::Locked { .. })));
    child.close_input();
    assert_eq!(child.wait(), Some(0));
    let log = common::open_unlocked(dir.path(), LogConfig::default()).unwrap();
    assert_eq!(log.next_offset(), 1);
}

#[test]
#[ignore = "the child process of the test above"]
fn child_process() {
    common::child::main();
}
