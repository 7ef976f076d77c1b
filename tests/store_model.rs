//! Model test of the message store: random puts (single and batched, several topics and queues,
//! tags, keys), gets (any offset, any max, with and without a tag), key queries, consumer-offset
//! commits, prefix deletions, clean reopens and unclean ones (a copy of the live files), each
//! checked against an in-memory model.
//!
//! Seeded: `STRATA_SEED` replays a run; `STRATA_MODEL_STEPS` (default 400) sets its length.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::copy_dir;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{FlushPolicy, GetStatus, LogConfig, Message, MessageStore, StoreConfig};

const TOPICS: [&str; 3] = ["a", "b.c", "d_e-f"];
const QUEUES: u32 = 3;
const TAGS: [&str; 3] = ["red", "green", "blue"];

fn config(policy: FlushPolicy) -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 8 << 10, flush_policy: policy, ..StoreConfig::default().log },
        queue_entries_per_file: 5,
        index_slots: 7,
        index_entries: 40,
        max_queues_per_topic: QUEUES,
        max_entries_examined: 50,
        ..StoreConfig::default()
    }
}

/// A message as the model keeps it.
#[derive(Debug, Clone)]
struct Stored {
    log_offset: u64,
    body: Vec<u8>,
    tag: Option<String>,
    keys: Vec<String>,
}

#[derive(Default)]
struct Model {
    /// (topic, queue) → the queue's messages, by queue offset.
    queues: BTreeMap<(String, u32), Vec<Stored>>,
    /// The commit log's start.
    start: u64,
    next_log_offset: u64,
    offsets: BTreeMap<(String, String, u32), u64>,
    /// Offsets committed since the last flush (lost by an unclean reopen unless flushed).
    unflushed: bool,
}

impl Model {
    /// The queue's [min, max): min is the first message still in the log.
    fn bounds(&self, topic: &str, queue: u32) -> (u64, u64) {
        let Some(messages) = self.queues.get(&(topic.to_owned(), queue)) else { return (0, 0) };
        let min = messages.iter().position(|m| m.log_offset >= self.start).unwrap_or(messages.len());
        (min as u64, messages.len() as u64)
    }
}

fn random_message(rng: &mut StdRng, topic: &str, queue: u32, n: u64) -> Message {
    let mut message = Message::new(topic, queue, format!("{topic}/{queue}/{n}/{}", rng.random_range(0..1000)));
    if rng.random_bool(0.6) {
        message = message.with_tag(TAGS[rng.random_range(0..TAGS.len())]);
    }
    let keys: Vec<String> = (0..rng.random_range(0..3)).map(|_| format!("k{}", rng.random_range(0..40))).collect();
    message.with_keys(keys)
}

#[test]
fn the_store_agrees_with_a_model() {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let steps: u64 = std::env::var("STRATA_MODEL_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    println!("seed {seed} (STRATA_SEED replays), {steps} steps");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let policy = if rng.random_bool(0.5) { FlushPolicy::Always } else { FlushPolicy::Never };
    let mut root: PathBuf = dir.path().join("0");
    let mut store = MessageStore::open(&root, config(policy)).unwrap();
    let mut model = Model::default();
    let mut counter = 0;
    for step in 0..steps {
        let topic = TOPICS[rng.random_range(0..TOPICS.len())];
        let queue = rng.random_range(0..QUEUES);
        let context = format!("seed {seed} step {step}");
        match rng.random_range(0..100) {
            0..40 => {
                let count = if rng.random_bool(0.3) { rng.random_range(1..6) } else { 1 };
                let messages: Vec<Message> =
                    (0..count).map(|i| random_message(&mut rng, topic, queue, counter + i)).collect();
                counter += count;
                let results = if count == 1 {
                    vec![store.put(&messages[0]).unwrap()]
                } else {
                    store.put_batch(&messages).unwrap()
                };
                let queue_messages = model.queues.entry((topic.to_owned(), queue)).or_default();
                for (message, result) in messages.iter().zip(&results) {
                    assert_eq!(result.queue_offset, queue_messages.len() as u64, "{context}");
                    assert_eq!(result.log_offset, model.next_log_offset, "{context}");
                    model.next_log_offset += 1;
                    queue_messages.push(Stored {
                        log_offset: result.log_offset,
                        body: message.body().to_vec(),
                        tag: message.tag().map(str::to_owned),
                        keys: message.keys().to_vec(),
                    });
                }
            }
            40..70 => check_get(&store, &model, &mut rng, topic, queue, &context),
            70..80 => {
                let key = format!("k{}", rng.random_range(0..40));
                let max = rng.random_range(1..6);
                let found = store.query_by_key(topic, &key, 0, i64::MAX, max).unwrap();
                let mut expected: Vec<(u64, Vec<u8>)> = model
                    .queues
                    .iter()
                    .filter(|((t, _), _)| t == topic)
                    .flat_map(|(_, messages)| messages.iter())
                    .filter(|m| m.log_offset >= model.start && m.keys.contains(&key))
                    .map(|m| (m.log_offset, m.body.clone()))
                    .collect();
                expected.sort();
                let newest = expected.split_off(expected.len().saturating_sub(max));
                let got: Vec<(u64, Vec<u8>)> = found.iter().map(|m| (m.log_offset(), m.body().to_vec())).collect();
                assert_eq!(got, newest, "{context}: query {topic} {key}");
            }
            80..86 => {
                let (_, max) = model.bounds(topic, queue);
                let offset = rng.random_range(0..=max);
                store.commit_offset("g", topic, queue, offset).unwrap();
                model.offsets.insert(("g".to_owned(), topic.to_owned(), queue), offset);
                model.unflushed = true;
                if rng.random_bool(0.3) {
                    store.flush_offsets().unwrap();
                    model.unflushed = false;
                }
                let committed = store.committed_offset("g", topic, queue);
                assert_eq!(committed, Some(offset), "{context}");
            }
            86..89 => {
                let target = rng.random_range(model.start..=model.next_log_offset);
                let start = store.delete_messages_before(target).unwrap();
                assert!(start <= target && start >= model.start, "{context}: start {start}, asked {target}");
                model.start = start;
            }
            89..95 => {
                store.close().unwrap();
                store = MessageStore::open(&root, config(policy)).unwrap();
                model.unflushed = false;
            }
            _ => {
                // Unclean: a copy of the live files (page cache intact), the original dropped.
                let copy = dir.path().join(format!("{}", step + 1));
                copy_dir(&root, &copy);
                let old = std::mem::replace(&mut store, MessageStore::open(&copy, config(policy)).unwrap());
                drop(old);
                root = copy;
                if model.unflushed {
                    // Commits since the last offsets write may be lost: take what the store has.
                    model.offsets.retain(|(group, topic, queue), offset| {
                        match store.committed_offset(group, topic, *queue) {
                            Some(stored) => {
                                *offset = stored;
                                true
                            }
                            None => false,
                        }
                    });
                    model.unflushed = false;
                }
            }
        }
        for ((group, topic, queue), offset) in &model.offsets {
            let (_, max) = model.bounds(topic, *queue);
            let stored = store.committed_offset(group, topic, *queue);
            assert!(stored.is_some(), "{context}");
            assert!(stored.unwrap() <= (*offset).max(max), "{context}");
        }
    }
    for topic in TOPICS {
        for queue in 0..QUEUES {
            let (min, max) = model.bounds(topic, queue);
            assert_eq!(store.min_queue_offset(topic, queue).unwrap(), min, "seed {seed}: {topic}/{queue} min");
            assert_eq!(store.max_queue_offset(topic, queue).unwrap(), max, "seed {seed}: {topic}/{queue} max");
        }
    }
    store.close().unwrap();
}

fn check_get(store: &MessageStore, model: &Model, rng: &mut StdRng, topic: &str, queue: u32, context: &str) {
    let (min, max) = model.bounds(topic, queue);
    let offset = rng.random_range(0..max + 3);
    let count = rng.random_range(0..8);
    let tag = rng.random_bool(0.3).then(|| TAGS[rng.random_range(0..TAGS.len())]);
    let got = store.get_messages(topic, queue, offset, count, tag).unwrap();
    assert_eq!((got.min_queue_offset, got.max_queue_offset), (min, max), "{context}: bounds of {topic}/{queue}");
    if !model.queues.contains_key(&(topic.to_owned(), queue)) {
        let no_queue = (GetStatus::NoMatchedLogicQueue, 0, true);
        assert_eq!((got.status, got.next_queue_offset, got.messages.is_empty()), no_queue, "{context}");
        return;
    }
    let expected_status = if offset < min {
        GetStatus::OffsetTooSmall
    } else if offset == max {
        GetStatus::NoNewMessage
    } else if offset > max {
        GetStatus::OffsetOverflow
    } else {
        GetStatus::Found // or NoMatchedMessage, decided below
    };
    if expected_status != GetStatus::Found {
        assert_eq!(got.status, expected_status, "{context}: status at {offset} of [{min}, {max})");
        assert!(got.messages.is_empty());
        let next = if offset < min { min } else { max.min(offset) };
        assert_eq!(got.next_queue_offset, next, "{context}");
        return;
    }
    let messages = &model.queues[&(topic.to_owned(), queue)];
    let mut expected = Vec::new();
    let mut next = offset;
    let last = max.min(offset + 50);
    while next < last && expected.len() < count {
        let m = &messages[next as usize];
        next += 1;
        if tag.is_none() || m.tag.as_deref() == tag {
            expected.push((m.log_offset, m.body.clone()));
        }
    }
    let got_messages: Vec<(u64, Vec<u8>)> = got.messages.iter().map(|m| (m.log_offset(), m.body().to_vec())).collect();
    assert_eq!(got_messages, expected, "{context}: get {topic}/{queue} from {offset} max {count} tag {tag:?}");
    assert_eq!(got.next_queue_offset, next, "{context}");
    let status = if expected.is_empty() { GetStatus::NoMatchedMessage } else { GetStatus::Found };
    assert_eq!(got.status, status, "{context}");
}
