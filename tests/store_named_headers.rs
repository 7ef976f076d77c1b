//! Message records as stores wrote them before the compact encoding (docs/FORMAT.md "Message
//! records", version 1: named `strata.*` headers) still read: a committed store of such records,
//! `fixtures/store_named_headers/`, opens, rebuilds its queues and index files from them, returns
//! every field of every message, answers key queries, and takes new (compact) messages beside them.
//!
//! The fixture is only the commit log (`commitlog/*.log` and `log.meta`): everything else is
//! derived. `named_headers_fixture_matches_its_generator` regenerates it into a temporary directory
//! and fails if a checked-in file differs; rewrite it with
//! `STRATA_REGENERATE_FIXTURES=1 cargo test -p strata-log --test store_named_headers`.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use strata_log::internals::format::STORE_COMMIT_LOG_DIR;
use strata_log::{FlushPolicy, Header, Log, LogConfig, ManualClock, Message, MessageStore, Record, StoreConfig};

/// The generator's clock starts here and advances 1 ms per batch.
const START_MS: i64 = 1_700_000_000_000;
/// Batches written (one `put_batch` each, as the store appended them).
const BATCHES: u64 = 12;
/// Messages per batch, cycled.
const BATCH_SIZES: [u64; 4] = [1, 3, 1, 2];

/// The commit log's config: small segments, so the fixture spans several.
fn log_config(clock: &ManualClock) -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_bytes: 1024,
        index_interval_bytes: 100,
        flush_policy: FlushPolicy::Never,
        clock: clock.clock(),
        ..LogConfig::default()
    }
}

fn store_config(clock: &ManualClock) -> StoreConfig {
    StoreConfig {
        log: log_config(clock),
        queue_entries_per_file: 8,
        index_slots: 16,
        index_entries: 64,
        max_message_bytes: 1000,
        ..StoreConfig::default()
    }
}

/// A message of the fixture: everything a message can carry, varied by its number `n`.
#[derive(Debug, Clone, PartialEq)]
struct Expected {
    topic: &'static str,
    queue_id: u32,
    queue_offset: u64,
    body: Vec<u8>,
    tag: Option<String>,
    keys: Vec<String>,
    born: Option<i64>,
    property: Option<(String, Vec<u8>)>,
}

impl Expected {
    fn message(&self) -> Message {
        let mut message = Message::new(self.topic, self.queue_id, self.body.clone()).with_keys(self.keys.clone());
        if let Some(tag) = &self.tag {
            message = message.with_tag(tag.clone());
        }
        if let Some(born) = self.born {
            message = message.with_born_timestamp(born);
        }
        if let Some((name, value)) = &self.property {
            message = message.with_property(name.clone(), value.clone());
        }
        message
    }
}

/// The fixture's batches of messages, in the order they were put.
fn batches() -> Vec<Vec<Expected>> {
    let mut next_queue_offset: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    let mut n = 0u64;
    let mut batches = Vec::new();
    for b in 0..BATCHES {
        let topic = if b % 3 == 2 { "audit" } else { "orders" };
        let queue_id = (b % 4) as u32;
        let mut batch = Vec::new();
        for _ in 0..BATCH_SIZES[(b % 4) as usize] {
            let queue_offset = next_queue_offset.entry((topic, queue_id)).or_default();
            let keys = match n % 3 {
                0 => vec![],
                1 => vec![format!("key-{n}")],
                _ => vec![format!("key-{n}"), format!("alt-{}", n % 5)],
            };
            batch.push(Expected {
                topic,
                queue_id,
                queue_offset: *queue_offset,
                body: format!("body-{n:03}").into_bytes(),
                tag: n.is_multiple_of(2).then(|| format!("tag-{}", n % 3)),
                keys,
                born: (n % 4 != 3).then(|| START_MS - 1000 + n as i64),
                property: n.is_multiple_of(5).then(|| ("source".to_owned(), format!("web-{n}").into_bytes())),
            });
            *queue_offset += 1;
            n += 1;
        }
        batches.push(batch);
    }
    batches
}

/// Writes the fixture's commit log into `dir` the way a store before the compact encoding did:
/// value = body, key = the first key, headers `strata.topic`, `strata.queue` (u32 BE),
/// `strata.qoffset` (u64 BE), `strata.tag`, one `strata.key` per key, `strata.born` (i64 BE), then
/// the user's properties.
fn generate(dir: &Path) {
    let clock = ManualClock::new(START_MS);
    let log = Log::open(dir, log_config(&clock)).unwrap();
    for batch in batches() {
        let fixed: Vec<_> = batch
            .iter()
            .map(|m| (m.queue_id.to_be_bytes(), m.queue_offset.to_be_bytes(), m.born.map(i64::to_be_bytes)))
            .collect();
        let headers: Vec<Vec<Header<'_>>> = batch
            .iter()
            .zip(&fixed)
            .map(|(m, (queue, queue_offset, born))| {
                let mut headers = vec![
                    Header { key: "strata.topic", value: Some(m.topic.as_bytes()) },
                    Header { key: "strata.queue", value: Some(queue) },
                    Header { key: "strata.qoffset", value: Some(queue_offset) },
                ];
                if let Some(tag) = &m.tag {
                    headers.push(Header { key: "strata.tag", value: Some(tag.as_bytes()) });
                }
                headers.extend(m.keys.iter().map(|k| Header { key: "strata.key", value: Some(k.as_bytes()) }));
                if let Some(born) = born {
                    headers.push(Header { key: "strata.born", value: Some(born) });
                }
                if let Some((name, value)) = &m.property {
                    headers.push(Header { key: name, value: Some(value) });
                }
                headers
            })
            .collect();
        let records: Vec<Record<'_>> = batch
            .iter()
            .zip(&headers)
            .map(|(m, headers)| {
                let record = Record::new(&m.body).with_headers(headers);
                match m.keys.first() {
                    Some(key) => record.with_key(key.as_bytes()),
                    None => record,
                }
            })
            .collect();
        log.append(&records).unwrap();
        clock.advance(1);
    }
    log.close().unwrap();
    // Only what is not derived: the segments and the log's format record.
    for name in file_names(dir) {
        if !(name.ends_with(".log") || name == "log.meta") {
            fs::remove_file(dir.join(name)).unwrap();
        }
    }
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join("store_named_headers").join(STORE_COMMIT_LOG_DIR)
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    file_names(dir).into_iter().map(|name| (name.clone(), fs::read(dir.join(name)).unwrap())).collect()
}

#[test]
fn named_headers_fixture_matches_its_generator() {
    let generated = tempfile::tempdir().unwrap();
    generate(generated.path());
    if std::env::var("STRATA_REGENERATE_FIXTURES").is_ok_and(|v| v == "1") {
        let _ = fs::remove_dir_all(fixture());
        fs::create_dir_all(fixture()).unwrap();
        for (name, bytes) in snapshot(generated.path()) {
            fs::write(fixture().join(name), bytes).unwrap();
        }
    }
    assert!(
        snapshot(generated.path()) == snapshot(&fixture()),
        "fixtures/store_named_headers differs from its generator; if intended, run \
         `STRATA_REGENERATE_FIXTURES=1 cargo test -p strata-log --test store_named_headers`"
    );
    assert!(file_names(&fixture()).iter().filter(|n| n.ends_with(".log")).count() >= 2, "spans segments");
}

/// A copy of the fixture as a store root.
fn store_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let commit_log = root.path().join(STORE_COMMIT_LOG_DIR);
    fs::create_dir_all(&commit_log).unwrap();
    for (name, bytes) in snapshot(&fixture()) {
        fs::write(commit_log.join(name), bytes).unwrap();
    }
    root
}

/// Every message of `expected` reads back from `store` with every field, by queue and by key.
fn check_reads(store: &MessageStore, expected: &[Expected]) {
    let mut queues: BTreeMap<(&str, u32), Vec<&Expected>> = BTreeMap::new();
    for m in expected {
        queues.entry((m.topic, m.queue_id)).or_default().push(m);
    }
    for ((topic, queue_id), messages) in &queues {
        let got = store.get_messages(topic, *queue_id, 0, 100, None).unwrap();
        assert_eq!(got.messages.len(), messages.len(), "{topic} queue {queue_id}");
        for (stored, m) in got.messages.iter().zip(messages) {
            assert_eq!(
                (stored.topic(), stored.queue_id(), stored.queue_offset()),
                (m.topic, m.queue_id, m.queue_offset)
            );
            assert_eq!(stored.body(), &m.body[..]);
            assert_eq!(stored.tag(), m.tag.as_deref());
            assert_eq!(stored.keys(), &m.keys[..]);
            assert_eq!(stored.born_timestamp_ms(), m.born);
            match &m.property {
                Some((name, value)) => assert_eq!(stored.property(name), Some(&value[..])),
                None => assert_eq!(stored.property("source"), None),
            }
            assert_eq!(stored.property("strata.topic"), None, "the store's fields are not properties");
        }
        let tagged = store.get_messages(topic, *queue_id, 0, 100, Some("tag-0")).unwrap();
        let want: Vec<u64> =
            messages.iter().filter(|m| m.tag.as_deref() == Some("tag-0")).map(|m| m.queue_offset).collect();
        assert_eq!(tagged.messages.iter().map(|m| m.queue_offset()).collect::<Vec<_>>(), want);
    }
    for m in expected {
        for key in &m.keys {
            let found = store.query_by_key(m.topic, key, 0, i64::MAX, 100).unwrap();
            assert!(
                found.iter().any(|s| s.body() == &m.body[..] && s.queue_offset() == m.queue_offset),
                "{key} of {:?}",
                m.body
            );
            assert!(found.iter().all(|s| s.keys().contains(key) && s.topic() == m.topic), "{key}");
        }
    }
}

#[test]
fn a_store_of_named_header_records_reads_and_takes_new_messages() {
    let root = store_root();
    let clock = ManualClock::new(START_MS + 1000);
    let mut expected: Vec<Expected> = batches().into_iter().flatten().collect();
    {
        let store = MessageStore::open(root.path(), store_config(&clock)).unwrap();
        check_reads(&store, &expected);
        // New messages go beside the old ones, numbered after them in their queues.
        let last = expected.iter().filter(|m| (m.topic, m.queue_id) == ("orders", 1)).count() as u64;
        let new = Expected {
            topic: "orders",
            queue_id: 1,
            queue_offset: last,
            body: b"new".to_vec(),
            tag: Some("tag-0".to_owned()),
            keys: vec!["key-new".to_owned(), "key-1".to_owned()],
            born: Some(7),
            property: Some(("source".to_owned(), b"cli".to_vec())),
        };
        assert_eq!(store.put(&new.message()).unwrap().queue_offset, last);
        expected.push(new);
        check_reads(&store, &expected);
        store.close().unwrap();
    }
    let store = MessageStore::open(root.path(), store_config(&clock)).unwrap();
    check_reads(&store, &expected);
    store.close().unwrap();
    let read_only = MessageStore::open_read_only(root.path(), store_config(&clock)).unwrap();
    check_reads(&read_only, &expected);
}

/// The fixture's records are what a store of the named-header encoding wrote: put through a
/// `MessageStore` of that encoding, the same messages give the same segment bytes. Run against the
/// build that still wrote named headers; kept to show how the fixture was checked.
#[test]
#[ignore = "holds only for a build that writes named headers"]
fn the_generator_writes_what_the_store_wrote() {
    let root = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START_MS);
    let store = MessageStore::open(root.path(), store_config(&clock)).unwrap();
    for batch in batches() {
        let messages: Vec<Message> = batch.iter().map(Expected::message).collect();
        store.put_batch(&messages).unwrap();
        clock.advance(1);
    }
    store.close().unwrap();
    let generated = tempfile::tempdir().unwrap();
    generate(generated.path());
    let commit_log = root.path().join(STORE_COMMIT_LOG_DIR);
    let logs = |dir: &Path| -> BTreeMap<String, Vec<u8>> {
        snapshot(dir).into_iter().filter(|(name, _)| name.ends_with(".log")).collect()
    };
    assert!(logs(&commit_log) == logs(generated.path()), "the store's segments differ from the generator's");
}
