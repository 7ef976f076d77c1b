//! A writer in a child process, for the tests that kill one or crash it at a named step: the test
//! binary runs itself again (`current_exe()`) with only its `child_process` test, which appends the
//! records it reads on stdin through the library and prints each offset once it is acknowledged.
//! No `strata` binary is needed (it belongs to another package), and the child is the library
//! itself. Every test file that starts children has this test:
//!
//! ```ignore
//! #[test]
//! #[ignore = "the child process of the tests in this file"]
//! fn child_process() {
//!     common::child::main();
//! }
//! ```
//!
//! Started alone (`cargo test -- --ignored`, no parent), `main` writes and checks a log of its
//! own, so it runs rather than passing without doing anything.

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;

use strata_log::internals::inspect::{self, RecoverOptions};
use strata_log::{LogConfig, Record};

use super::{check_recovered, value_of};

/// The log directory of a child (set only in children).
pub const CHILD_DIR: &str = "STRATA_CHILD_DIR";
/// What the child does: `write` (the default) or `recover`.
const CHILD_OP: &str = "STRATA_CHILD_OP";
/// The writer's options, as `WriterOptions::encode` writes them.
const CHILD_OPTIONS: &str = "STRATA_CHILD_OPTIONS";

/// A command running this test binary's `child_process` test alone on `dir`, its output not
/// captured by the harness, and no crash point configured (set `FAILPOINTS` to configure one).
pub fn command(dir: &Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "child_process", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env_remove(CHILD_OP)
        .env_remove(CHILD_OPTIONS)
        .env_remove("FAILPOINTS");
    command
}

/// How the writer child opens the log and when it acknowledges a record.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// `LogConfig::segment_bytes`.
    pub segment_bytes: u64,
    /// `LogConfig::index_interval_bytes`.
    pub index_interval_bytes: u64,
    /// Records per append.
    pub batch: usize,
    /// Flush after each append before acknowledging its records. Otherwise a record is
    /// acknowledged when its append returns: durable too, under the default `FlushPolicy::Always`.
    pub sync: bool,
    /// `FAILPOINTS` of the child (`point=spec;...`): a crash point exits it with `CRASH_EXIT_CODE`.
    pub failpoints: Option<String>,
}

impl Default for WriterOptions {
    fn default() -> WriterOptions {
        let config = LogConfig::default();
        WriterOptions {
            segment_bytes: config.segment_bytes,
            index_interval_bytes: config.index_interval_bytes,
            batch: 1,
            sync: false,
            failpoints: None,
        }
    }
}

impl WriterOptions {
    fn config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            index_interval_bytes: self.index_interval_bytes,
            ..LogConfig::default()
        }
    }

    fn encode(&self) -> String {
        format!("{} {} {} {}", self.segment_bytes, self.index_interval_bytes, self.batch, self.sync)
    }

    fn decode(text: &str) -> WriterOptions {
        let fields: Vec<&str> = text.split(' ').collect();
        WriterOptions {
            segment_bytes: fields[0].parse().unwrap(),
            index_interval_bytes: fields[1].parse().unwrap(),
            batch: fields[2].parse().unwrap(),
            sync: fields[3].parse().unwrap(),
            failpoints: None,
        }
    }
}

/// A writer child: write records to its stdin, read the offsets it acknowledges, kill it.
pub struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    acks: Lines<BufReader<ChildStdout>>,
    feeder: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts a writer on the log in `dir` (created if missing).
    pub fn spawn(dir: &Path, options: &WriterOptions) -> Writer {
        let mut command = command(dir);
        command.env(CHILD_OPTIONS, options.encode());
        if let Some(failpoints) = &options.failpoints {
            command.env("FAILPOINTS", failpoints);
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let stdin = child.stdin.take();
        let acks = BufReader::new(child.stdout.take().unwrap()).lines();
        Writer { child, stdin, acks, feeder: None }
    }

    /// Writes `value_of(offset)` for every offset of `offsets`, one record a line, from a thread
    /// (which stops when the child is gone), then closes the input.
    pub fn feed(&mut self, offsets: impl Iterator<Item = u64> + Send + 'static) {
        let mut stdin = self.stdin.take().expect("the input is open");
        self.feeder = Some(std::thread::spawn(move || {
            for offset in offsets {
                let mut line = value_of(offset);
                line.push(b'\n');
                if stdin.write_all(&line).is_err() {
                    return; // the child is gone
                }
            }
        }));
    }

    /// Writes one record now.
    pub fn send(&mut self, record: &[u8]) {
        let stdin = self.stdin.as_mut().expect("the input is open");
        stdin.write_all(record).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes the input: the child appends what it holds, closes the log and exits.
    pub fn close_input(&mut self) {
        self.stdin.take();
    }

    /// The next offset the child acknowledged; `None` once its output ended.
    pub fn next_ack(&mut self) -> Option<u64> {
        self.next_ack_timed().map(|(offset, _)| offset)
    }

    /// The next offset the child acknowledged and when (ns since the Unix epoch); `None` once its
    /// output ended.
    pub fn next_ack_timed(&mut self) -> Option<(u64, u128)> {
        for line in self.acks.by_ref().map_while(Result::ok) {
            // The harness prints "test child_process ... " without a newline before the first.
            if let Some((_, ack)) = line.split_once("ack ") {
                let (offset, at) = ack.trim().split_once(" t=").expect("ack OFFSET t=NS");
                return Some((offset.parse().unwrap(), at.parse().unwrap()));
            }
        }
        None
    }

    /// After a power cut that began at `cut_ns` (ns since the Unix epoch): reads the rest of the
    /// acknowledgements, asserting that they are dense and in order from `next`; returns the
    /// offset after the last one the child made before the cut began, and after the last one.
    /// One made after the cut began came from a call the cut overlapped, which a real power cut
    /// never lets return.
    pub fn read_acks_before(&mut self, mut next: u64, cut_ns: u128) -> (u64, u64) {
        let mut before = next;
        while let Some((offset, at)) = self.next_ack_timed() {
            assert_eq!(offset, next, "acknowledgements are dense and in order");
            next = offset + 1;
            if at < cut_ns {
                before = next;
            }
        }
        (before, next)
    }

    /// Reads up to `max` acknowledgements, asserting that they are dense and in order from
    /// `next`; returns the offset after the last one read.
    pub fn read_acks(&mut self, mut next: u64, max: u64) -> u64 {
        for _ in 0..max {
            let Some(offset) = self.next_ack() else { break };
            assert_eq!(offset, next, "acknowledgements are dense and in order");
            next = offset + 1;
        }
        next
    }

    /// Kills the child with SIGKILL, as a crash would (the page cache keeps what it wrote).
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
    }

    /// Waits for the child to end; returns its exit code (`None` if it was killed).
    pub fn wait(mut self) -> Option<i32> {
        self.stdin.take();
        let status = self.child.wait().unwrap();
        if let Some(feeder) = self.feeder.take() {
            feeder.join().unwrap();
        }
        status.code()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // A test that failed part-way leaves no writer behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `recover` (as `strata recover` does, without `--force`) on `dir` in a child with
/// `failpoints`; returns its exit code.
pub fn recover(dir: &Path, failpoints: &str) -> Option<i32> {
    run(command(dir).env(CHILD_OP, "recover"), failpoints)
}

/// Runs a child `command` with `failpoints` to its end, its output discarded; returns its exit code
/// (`CRASH_EXIT_CODE` if it stopped at a crash point).
pub fn run(command: &mut Command, failpoints: &str) -> Option<i32> {
    let status = command.env("FAILPOINTS", failpoints).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    status.code()
}

/// The child's side: does what the parent asked in the environment.
pub fn main() {
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else {
        return alone();
    };
    let _scenario = fail::FailScenario::setup();
    match std::env::var(CHILD_OP).as_deref() {
        Ok("recover") => drop(inspect::recover(&dir, RecoverOptions::default()).unwrap()),
        _ => {
            let options = WriterOptions::decode(&std::env::var(CHILD_OPTIONS).unwrap());
            write(&dir, &options, std::io::stdin().lock(), &mut std::io::stdout().lock());
        }
    }
}

/// Appends the lines of `input` to the log in `dir`, `options.batch` per append, printing
/// `ack <offset>` for each record once acknowledged; at the end of the input, closes the log.
fn write(dir: &Path, options: &WriterOptions, input: impl BufRead, out: &mut impl Write) {
    let log = super::open_unlocked(dir, options.config()).unwrap();
    let mut lines = input.split(b'\n');
    let mut pending = Vec::with_capacity(options.batch);
    loop {
        let line = lines.next().map(Result::unwrap);
        let end = line.is_none();
        pending.extend(line);
        if pending.len() >= options.batch || (end && !pending.is_empty()) {
            let records: Vec<Record<'_>> = pending.iter().map(|value| Record::new(value)).collect();
            let info = log.append(&records).unwrap();
            if options.sync {
                log.flush().unwrap();
            }
            // When: a power-loss test counts only what was acknowledged before its cut began.
            let at_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            for offset in info.base_offset..=info.last_offset {
                writeln!(out, "ack {offset} t={at_ns}").unwrap();
            }
            out.flush().unwrap();
            pending.clear();
        }
        if end {
            break;
        }
    }
    log.flush().unwrap();
    log.close().unwrap();
}

/// Without a parent: writes 100 records to a log of its own and checks them.
fn alone() {
    let dir = tempfile::tempdir().unwrap();
    let options = WriterOptions { segment_bytes: 4096, batch: 3, ..WriterOptions::default() };
    let input: Vec<u8> = (0..100).flat_map(|offset| [value_of(offset), b"\n".to_vec()].concat()).collect();
    let mut acks = Vec::new();
    write(dir.path(), &options, &input[..], &mut acks);
    let acks: Vec<String> =
        String::from_utf8(acks).unwrap().lines().map(|l| l.split(" t=").next().unwrap().to_owned()).collect();
    let expected: Vec<String> = (0..100).map(|offset| format!("ack {offset}")).collect();
    assert_eq!(acks, expected);
    drop(check_recovered(dir.path(), options.config(), 100));
}
