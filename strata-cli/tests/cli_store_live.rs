//! The reading commands on a message store another process has open (a `strata store put`
//! waiting for stdin holds it): `store get`, `stats`, `query`, `verify` and `dump` work beside it
//! while its puts go on, and on a closed store made read-only they change no file; `store get
//! --follow` prints what `store put` in another process appends; `store get --commit` beside it is
//! refused in one line that says what to do.
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;
mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli::{stderr, stdout, strata};
use common::{set_read_only_tree, tree_snapshot};
use strata_log::{LogConfig, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 1024,
        flush_interval_ms: 50,
        ..StoreConfig::default()
    }
}

/// A closed store with `n` messages `m{i}` in `orders` queue 2, keyed `order-{i % 3}`, and group
/// `billing` committed at 1.
fn build(root: &Path, n: u64) {
    let store = MessageStore::open(root, config()).unwrap();
    for i in 0..n {
        let message = strata_log::Message::new("orders", 2, format!("m{i}")).with_keys([format!("order-{}", i % 3)]);
        store.put(&message).unwrap();
    }
    store.commit_offset("billing", "orders", 2, 1).unwrap();
    store.close().unwrap();
}

/// `strata` with `args`, the store root after the command's name (`store get ROOT …`, `verify ROOT …`).
fn command(args: &[&str], root: &Path) -> assert_cmd::Command {
    let name = if args[0] == "store" { 2 } else { 1 };
    let mut command = strata();
    command.args(&args[..name]).arg(root).args(&args[name..]);
    command
}

/// The `strata` binary (a store command), with piped input and output.
fn spawn(args: &[&str], root: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(&args[..2])
        .arg(root)
        .args(&args[2..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits (up to a minute) for `child` to end; kills it and fails if it does not.
fn finish(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("{what} did not end: {}", stdout(&child.wait_with_output().unwrap()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A `strata store put` into `orders` queue 2 that holds the store open while its stdin is.
struct Holder {
    child: Child,
    stdin: ChildStdin,
}

impl Holder {
    /// Starts it and waits until its first message (`live-0`) is in the queue: it has the store.
    fn start(root: &Path) -> Holder {
        let mut child = spawn(&["store", "put", "--topic", "orders", "--queue", "2"], root);
        let stdin = child.stdin.take().unwrap();
        let mut holder = Holder { child, stdin };
        holder.put("live-0");
        let reader = MessageStore::open_read_only(root, config()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = reader.get_messages("orders", 2, 0, 1000, None).unwrap();
            if got.messages.iter().any(|m| m.body() == b"live-0") {
                return holder;
            }
            assert!(Instant::now() < deadline, "the holder never stored its first message");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn put(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Ends its input; it closes the store and says what it stored.
    fn finish(self) -> Output {
        drop(self.stdin);
        finish(self.child, "store put")
    }
}

#[test]
fn reading_commands_work_beside_a_running_store_and_its_puts_go_on() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 6);
    let mut holder = Holder::start(dir.path());
    let run = |args: &[&str]| {
        let out = command(args, dir.path()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let got = run(&["store", "get", "--topic", "orders", "--queue", "2"]);
    assert_eq!(got.lines().count(), 7, "{got}");
    assert!(got.contains("  m0") && got.contains("  live-0"), "{got}");
    let from_group = run(&["store", "get", "--topic", "orders", "--queue", "2", "--group", "billing"]);
    assert!(from_group.lines().next().unwrap().starts_with("1  "), "from the committed offset: {from_group}");
    let stats = run(&["store", "stats"]);
    assert!(stats.contains("orders queue 2  offsets [0, 7)  7 messages"), "{stats}");
    assert!(stats.contains("billing  orders queue 2  committed 1  max 7  lag 6"), "{stats}");
    let found = run(&["store", "query", "--topic", "orders", "--key", "order-1"]);
    assert!(found.contains("m1") && found.contains("m4"), "{found}");
    let verified = run(&["verify"]);
    assert!(verified.contains("clean"), "{verified}");
    let dumped = run(&["dump"]);
    assert!(!dumped.is_empty());
    // The holder's puts went on, and go on.
    holder.put("live-1");
    let put = holder.finish();
    assert!(put.status.success(), "{}", stderr(&put));
    assert!(stdout(&put).contains("stored 2 messages"), "{}", stdout(&put));
    let after = run(&["store", "get", "--topic", "orders", "--queue", "2", "--from", "6"]);
    assert_eq!(after.lines().count(), 2, "{after}");
    assert!(after.contains("live-0") && after.contains("live-1"), "{after}");
}

#[test]
fn reading_commands_change_no_file_and_need_read_access_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    build(&root, 6);
    let before = tree_snapshot(&root);
    set_read_only_tree(&root, true);
    let commands: [&[&str]; 9] = [
        &["store", "get", "--topic", "orders", "--queue", "2"],
        &["store", "get", "--topic", "orders", "--queue", "2", "--group", "billing", "--json"],
        &["store", "get", "--topic", "orders", "--queue", "2", "--follow", "--max", "6", "--poll-ms", "10"],
        &["store", "stats"],
        &["store", "stats", "--json"],
        &["store", "query", "--topic", "orders", "--key", "order-2"],
        &["verify"],
        &["dump"],
        &["dump", "--json"],
    ];
    let outputs: Vec<Output> = commands.iter().map(|args| command(args, &root).output().unwrap()).collect();
    set_read_only_tree(&root, false);
    for (args, out) in commands.iter().zip(&outputs) {
        assert!(out.status.success(), "{args:?}: {}", stderr(out));
    }
    assert_eq!(stdout(&outputs[2]).lines().count(), 6, "--follow ends at --max");
    assert_eq!(tree_snapshot(&root), before, "no file changed, none created or removed");
}

#[test]
fn get_follow_prints_what_another_process_puts() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 2);
    let args = ["store", "get", "--topic", "orders", "--queue", "2", "--from", "2", "--follow", "--max", "3"];
    let follower = spawn(&[&args[..], &["--poll-ms", "20", "--json"]].concat(), dir.path());
    let mut holder = Holder::start(dir.path());
    holder.put("live-1");
    holder.put("live-2");
    let followed = finish(follower, "store get --follow");
    assert!(followed.status.success(), "{}", stderr(&followed));
    let bodies: Vec<String> = stdout(&followed)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["body"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(bodies, ["live-0", "live-1", "live-2"]);
    assert!(holder.finish().status.success());
}

#[test]
fn get_commit_beside_a_running_store_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 3);
    let holder = Holder::start(dir.path());
    let out = strata()
        .args(["store", "get"])
        .arg(dir.path())
        .args(["--topic", "orders", "--queue", "2", "--group", "billing", "--commit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("open in another process") && text.contains("drop --commit"), "{text}");
    assert!(out.stdout.is_empty());
    assert!(holder.finish().status.success());
    let reader = MessageStore::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(reader.committed_offset("billing", "orders", 2), Some(1), "nothing was committed");
}
