//! `strata store`: put then get round trip, a group's committed offset resumes a get, query by
//! key, stats with a group's lag, and the clear refusal of a put when another process holds the
//! store (its reading commands work beside it).
#![allow(clippy::unwrap_used)]

#[path = "common/cli.rs"]
mod cli;

use std::path::Path;

use cli::{stderr, stdout, strata};
use strata_log::{LogConfig, Message, MessageStore, StoreConfig};

/// Small files, so each test allocates kilobytes, not the defaults' gigabyte.
const SMALL: [&str; 8] =
    ["--segment-bytes", "1048576", "--index-slots", "64", "--index-entries", "1024", "--queue-entries-per-file", "16"];

fn small_config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, ..StoreConfig::default().log },
        queue_entries_per_file: 16,
        index_slots: 64,
        index_entries: 1024,
        ..StoreConfig::default()
    }
}

/// A closed store with `n` messages `m{i}` in `orders` queue 2, keyed `order-{i % 3}`.
fn build(root: &Path, n: u64) {
    let store = MessageStore::open(root, small_config()).unwrap();
    for i in 0..n {
        store.put(&Message::new("orders", 2, format!("m{i}")).with_keys([format!("order-{}", i % 3)])).unwrap();
    }
    store.close().unwrap();
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn put_then_get_round_trips_lines() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let put = strata()
        .args(["store", "put"])
        .arg(&root)
        .args(["--topic", "orders", "--queue", "1", "--tag", "created", "--key", "k", "--json"])
        .args(SMALL)
        .write_stdin("first\nsecond\r\nthird\n")
        .output()
        .unwrap();
    assert!(put.status.success(), "{}", stderr(&put));
    let summary: serde_json::Value = serde_json::from_slice(&put.stdout).unwrap();
    assert_eq!(summary["messages"], 3);
    assert_eq!((summary["first_queue_offset"].as_u64(), summary["last_queue_offset"].as_u64()), (Some(0), Some(2)));
    let got = strata()
        .args(["store", "get"])
        .arg(&root)
        .args(["--topic", "orders", "--queue", "1", "--json"])
        .output()
        .unwrap();
    assert!(got.status.success(), "{}", stderr(&got));
    let messages = json_lines(&stdout(&got));
    let bodies: Vec<&str> = messages.iter().map(|m| m["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["first", "second", "third"]);
    assert_eq!((messages[1]["queue_offset"].as_u64(), messages[1]["tag"].as_str()), (Some(1), Some("created")));
    assert_eq!(messages[2]["keys"][0], "k");
    let text = stdout(
        &strata().args(["store", "get"]).arg(&root).args(["--topic", "orders", "--queue", "1"]).output().unwrap(),
    );
    assert!(text.lines().next().unwrap().starts_with("0  log 0  "), "{text}");
    assert!(text.contains("tag=created  keys=k  second"), "{text}");
}

#[test]
fn a_committed_group_offset_is_where_the_next_get_resumes() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 5);
    let get = |extra: &[&str]| {
        let out = strata()
            .args(["store", "get"])
            .arg(dir.path())
            .args(["--topic", "orders", "--queue", "2", "--group", "billing", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        json_lines(&stdout(&out)).iter().map(|m| m["queue_offset"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(get(&["--max", "2", "--commit"]), [0, 1]);
    assert_eq!(get(&["--commit"]), [2, 3, 4], "resumes after what the group committed");
    assert!(get(&[]).is_empty(), "everything is consumed");
}

#[test]
fn query_finds_messages_by_key() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 7);
    let out = strata()
        .args(["store", "query"])
        .arg(dir.path())
        .args(["--topic", "orders", "--key", "order-1", "--begin", "2000-01-01", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let bodies: Vec<String> =
        json_lines(&stdout(&out)).iter().map(|m| m["body"].as_str().unwrap().to_owned()).collect();
    assert_eq!(bodies, ["m1", "m4"]);
    let none = strata()
        .args(["store", "query"])
        .arg(dir.path())
        .args(["--topic", "orders", "--key", "nope"])
        .output()
        .unwrap();
    assert!(none.status.success() && none.stdout.is_empty());
}

#[test]
fn stats_shows_each_groups_lag() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 6);
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    store.commit_offset("billing", "orders", 2, 4).unwrap();
    store.close().unwrap();
    let out = strata().args(["store", "stats"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("orders queue 2  offsets [0, 6)  6 messages"), "{text}");
    assert!(text.contains("billing  orders queue 2  committed 4  max 6  lag 2"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&strata().args(["store", "stats", "--json"]).arg(dir.path()).output().unwrap().stdout)
            .unwrap();
    assert_eq!(json["groups"][0]["lag"], 2);
    assert_eq!(json["index_files"].as_array().unwrap().len(), 1);
}

#[test]
fn a_put_into_a_store_open_in_another_process_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 1);
    let held = MessageStore::open(dir.path(), small_config()).unwrap();
    let out = strata()
        .args(["store", "put"])
        .arg(dir.path())
        .args(["--topic", "orders"])
        .write_stdin("x\n")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("the message store is open in another process"), "{}", stderr(&out));
    // The reading commands read it beside its owner (`cli_store_live.rs`).
    let stats = strata().args(["store", "stats"]).arg(dir.path()).output().unwrap();
    assert!(stats.status.success(), "{}", stderr(&stats));
    held.close().unwrap();
}

/// A store `store put` creates has small files unless told otherwise (the library's defaults made
/// a 420,000,040-byte index file and a 6,000,000-byte queue file for the README's first command);
/// an existing store keeps its recorded sizes, and `put` says when it ignores one asked for.
#[test]
fn a_new_store_gets_small_files_and_an_existing_one_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("st");
    let put = |extra: &[&str]| {
        strata()
            .args(["store", "put"])
            .arg(&root)
            .args(["--topic", "orders", "--key", "order-17", "--segment-bytes", "1048576"])
            .args(extra)
            .write_stdin("hello\nworld\n")
            .output()
            .unwrap()
    };
    let first = put(&[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let len = |path: &str| std::fs::metadata(root.join(path)).unwrap().len();
    assert_eq!(len("consumequeue/orders/0/00000000000000000000.cq"), 200_000);
    assert_eq!(len("index/00000000000000000000.idx"), 4_200_040);
    let again = put(&["--queue-entries-per-file", "5", "--index-slots", "50000"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(
        stderr(&again).trim(),
        "strata: --queue-entries-per-file 5 ignored: the store's files are made with 10000 (store.meta)"
    );
    let stats = strata().args(["store", "stats"]).arg(&root).output().unwrap();
    assert!(
        stdout(&stats).contains(
            "file sizes  queue files 10000 entries (200000 bytes), index files 50000 slots, 200000 entries (4200040 bytes)"
        ),
        "{}",
        stdout(&stats)
    );
}

/// A get of a queue the store does not have says so in one line, naming the queues it has, and
/// exits 2 (it printed nothing and exited 0, as for an empty queue).
#[test]
fn get_of_a_queue_the_store_does_not_have_says_so() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), 2);
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    store.put(&Message::new("orders", 0, "x")).unwrap();
    store.put(&Message::new("payments", 1, "y")).unwrap();
    store.close().unwrap();
    let got = strata().args(["store", "get", "--topic", "orders", "--queue", "3"]).arg(dir.path()).output().unwrap();
    assert_eq!(got.status.code(), Some(2));
    assert_eq!(stdout(&got), "");
    assert_eq!(
        stderr(&got).trim(),
        "strata: no queue orders/3 in this store (topics: orders[0,2] payments[1]); --follow waits for it"
    );
}
