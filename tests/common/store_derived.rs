//! Shared by the tests of the message store's derived files (`tests/store_derived_*.rs`): a model
//! of what a store holds (every message put, the commit log's start, the committed consumer
//! offsets), the checks of a reopened store against it (through the API, and the raw `.idx`
//! entries on disk), the ways a store stops (clean or not), and the damages a derived file or the
//! store checkpoint can take.
//!
//! The derived files (`consumequeue/<topic>/<queue>/*.cq`, `index/*.idx`) are rebuilt from the
//! commit log: whatever happened to them, a reopened store must hold every message at its queue
//! offset, find each key once per message, hand out no queue offset twice, and keep every committed
//! consumer offset.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use strata_log::internals::format::{
    CQ_ENTRY_LEN, INDEX_FILE_HEADER_LEN, INDEX_FILE_SLOT_LEN, STORE_ABORT_FILE, STORE_CHECKPOINT_FILE,
    STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR, STORE_INDEX_DIR,
};
use strata_log::internals::inspect::store::{StoreDump, dump_store_file};
use strata_log::{FlushPolicy, Log, LogConfig, Message, MessageStore, StoreConfig};

use super::copy_dir;

/// Bytes of a consume-queue entry.
pub const CQ_ENTRY: u64 = CQ_ENTRY_LEN as u64;
/// Hash slots and entries of an index file in these tests (so a few hundred keys fill several).
pub const INDEX_SLOTS: u32 = 16;
pub const INDEX_ENTRIES: u32 = 64;
/// Entries of a consume-queue file in these tests.
pub const QUEUE_ENTRIES: u64 = 8;

/// The store's configuration in these tests: small files, so queues and the index have several
/// each, and no background checkpoint or offsets write (once an hour): a copy of the live files
/// is then a consistent picture of a crash (nothing writes while it is taken), and the store
/// checkpoint is what the last open or close left.
pub fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 4 << 10, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        queue_entries_per_file: QUEUE_ENTRIES,
        index_slots: INDEX_SLOTS,
        index_entries: INDEX_ENTRIES,
        flush_interval_ms: 3_600_000,
        offsets_flush_ms: 3_600_000,
        ..StoreConfig::default()
    }
}

/// Opens the store in `root` with [`config`], panicking with `when` if it fails.
pub fn open(root: &Path, when: &str) -> MessageStore {
    MessageStore::open(root, config()).unwrap_or_else(|e| panic!("{when}: MessageStore::open failed: {e}"))
}

/// How a store stops before it is damaged and reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// `MessageStore::close`.
    Close,
    /// A copy of the live store's files, as a SIGKILL leaves them (the page cache intact): `abort`
    /// present, the store checkpoint where the last open or close wrote it, index entries still in
    /// the process's memory lost. The store goes on in the copy.
    Crash,
    /// A clean close, then the `abort` marker created again: everything is on disk, and the next
    /// open believes the last run did not close.
    AbortMarker,
}

impl fmt::Display for Shutdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shutdown::Close => "after a clean close",
            Shutdown::Crash => "after a crash (a copy of the live files)",
            Shutdown::AbortMarker => "after a clean close with `abort` recreated",
        })
    }
}

/// Stops `store` (whose files are in `root`) as `how` says; returns where the store's files now
/// are (a crash's copy is beside `root`, its name with a `+` more).
pub fn shut_down(store: MessageStore, root: &Path, how: Shutdown) -> PathBuf {
    match how {
        Shutdown::Close => {
            store.close().unwrap();
            root.to_path_buf()
        }
        Shutdown::Crash => {
            let copy = PathBuf::from(format!("{}+", root.display()));
            copy_dir(root, &copy);
            assert!(copy.join(STORE_ABORT_FILE).exists(), "the copy is of an open store");
            drop(store);
            copy
        }
        Shutdown::AbortMarker => {
            store.close().unwrap();
            std::fs::write(root.join(STORE_ABORT_FILE), b"").unwrap();
            root.to_path_buf()
        }
    }
}

/// A message as the model keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    pub topic: String,
    pub queue_id: u32,
    pub queue_offset: u64,
    pub log_offset: u64,
    pub body: String,
    pub keys: Vec<String>,
}

/// What a store holds.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// Every message put, in log order.
    pub puts: Vec<Put>,
    /// The commit log's first offset (retention).
    pub start: u64,
    /// (group, topic, queue) → the committed offset.
    pub committed: BTreeMap<(String, String, u32), u64>,
}

impl Model {
    /// Every queue that ever had a message, sorted.
    pub fn queue_ids(&self) -> BTreeSet<(String, u32)> {
        self.puts.iter().map(|p| (p.topic.clone(), p.queue_id)).collect()
    }

    /// The queue's messages still in the log, by queue offset.
    pub fn in_queue<'a>(&'a self, topic: &'a str, queue_id: u32) -> impl Iterator<Item = &'a Put> + 'a {
        self.puts.iter().filter(move |p| p.topic == topic && p.queue_id == queue_id && p.log_offset >= self.start)
    }

    /// The queue's `[min, max)`: max is one past the highest queue offset handed out, min the
    /// first still in the log (max if none is).
    pub fn bounds(&self, topic: &str, queue_id: u32) -> (u64, u64) {
        let max = self.puts.iter().filter(|p| p.topic == topic && p.queue_id == queue_id).count() as u64;
        let min = self.in_queue(topic, queue_id).map(|p| p.queue_offset).next().unwrap_or(max);
        (min, max)
    }

    /// The commit log's next offset.
    pub fn next_log_offset(&self) -> u64 {
        self.puts.last().map_or(0, |p| p.log_offset + 1)
    }

    /// (topic, key) → the log offsets of the messages still in the log with that key, ascending.
    pub fn keys(&self) -> BTreeMap<(String, String), Vec<u64>> {
        let mut keys: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
        for put in self.puts.iter().filter(|p| p.log_offset >= self.start) {
            for key in &put.keys {
                keys.entry((put.topic.clone(), key.clone())).or_default().push(put.log_offset);
            }
        }
        keys
    }

    /// Puts `message`; `Err` says what went wrong (a queue offset handed out twice, an error).
    pub fn try_put(&mut self, store: &MessageStore, message: &Message) -> Result<(), String> {
        let (topic, queue_id) = (message.topic(), message.queue_id());
        let (_, expected) = self.bounds(topic, queue_id);
        let put = store.put(message).map_err(|e| format!("a put to {topic}/{queue_id} failed: {e}"))?;
        let body = String::from_utf8(message.body().to_vec()).unwrap();
        self.puts.push(Put {
            topic: topic.to_owned(),
            queue_id,
            queue_offset: expected,
            log_offset: put.log_offset,
            body,
            keys: message.keys().to_vec(),
        });
        if put.queue_offset != expected {
            let twice = if put.queue_offset < expected {
                format!(
                    ": queue offsets [0, {expected}) were handed out before, so {} is handed out twice",
                    put.queue_offset
                )
            } else {
                String::new()
            };
            return Err(format!(
                "the next put to {topic}/{queue_id} got queue offset {}, expected {expected}{twice}",
                put.queue_offset
            ));
        }
        Ok(())
    }

    /// Puts `messages` (one queue) as one batch; `Err` says what went wrong.
    pub fn try_put_batch(&mut self, store: &MessageStore, messages: &[Message]) -> Result<(), String> {
        let Some(first) = messages.first() else { return Ok(()) };
        let (topic, queue_id) = (first.topic(), first.queue_id());
        let (_, expected) = self.bounds(topic, queue_id);
        let puts = store.put_batch(messages).map_err(|e| format!("a batch put to {topic}/{queue_id} failed: {e}"))?;
        for (i, (message, put)) in messages.iter().zip(&puts).enumerate() {
            self.puts.push(Put {
                topic: topic.to_owned(),
                queue_id,
                queue_offset: expected + i as u64,
                log_offset: put.log_offset,
                body: String::from_utf8(message.body().to_vec()).unwrap(),
                keys: message.keys().to_vec(),
            });
        }
        match puts.first() {
            Some(put) if put.queue_offset != expected => Err(format!(
                "a batch of {} put to {topic}/{queue_id} got queue offsets from {}, expected {expected}{}",
                messages.len(),
                put.queue_offset,
                if put.queue_offset < expected { " (handed out twice)" } else { "" }
            )),
            _ => Ok(()),
        }
    }

    /// [`Model::try_put`], panicking on a problem.
    pub fn put(&mut self, store: &MessageStore, message: &Message) {
        self.try_put(store, message).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Commits `offset` for `group` on the queue.
    pub fn commit(&mut self, store: &MessageStore, group: &str, topic: &str, queue_id: u32, offset: u64) {
        store.commit_offset(group, topic, queue_id, offset).unwrap();
        self.committed.insert((group.to_owned(), topic.to_owned(), queue_id), offset);
    }

    /// Puts one more message to every queue (key `next-<n>-<topic>-<queue>`), each of which must
    /// get its queue's next offset, and be found by its key at once. Returns the problems.
    pub fn put_one_each(&mut self, store: &MessageStore, n: u32) -> Vec<String> {
        let mut problems = Vec::new();
        for (topic, queue_id) in self.queue_ids() {
            let key = format!("next-{n}-{topic}-{queue_id}");
            let message = Message::new(topic.as_str(), queue_id, key.clone()).with_keys([key.clone()]);
            if let Err(problem) = self.try_put(store, &message) {
                problems.push(problem);
                continue;
            }
            let log_offset = self.next_log_offset() - 1;
            match store.query_by_key(&topic, &key, 0, i64::MAX, 10) {
                Ok(found) if found.len() == 1 && found[0].log_offset() == log_offset => {}
                Ok(found) => problems.push(format!(
                    "key {key} of the message just put at log offset {log_offset}: found at log offsets {:?}",
                    found.iter().map(|m| m.log_offset()).collect::<Vec<_>>()
                )),
                Err(e) => problems.push(format!("query of key {key} just put: {e}")),
            }
        }
        problems
    }
}

/// Panics listing `problems` (if any), after `when`.
pub fn fail_if(problems: Vec<String>, when: &str) {
    if problems.is_empty() {
        return;
    }
    let shown = problems.len().min(25);
    let more =
        if problems.len() > shown { format!("\n  ... and {} more", problems.len() - shown) } else { String::new() };
    panic!("{when}: {} problem(s):\n  {}{more}", problems.len(), problems[..shown].join("\n  "));
}

/// Everything the API says about the store against `model`: the queues and their bounds, every
/// queue's messages (queue offset from the record's `strata.qoffset`, log offset, body), every
/// key's messages (each once), the committed offsets. Returns the problems, each saying what was
/// expected and what was found.
pub fn check_store(store: &MessageStore, model: &Model) -> Vec<String> {
    let mut problems = Vec::new();
    check_queue_list(store, model, &mut problems);
    for (topic, queue_id) in model.queue_ids() {
        check_queue(store, model, &topic, queue_id, &mut problems);
    }
    check_keys(store, model, &mut problems);
    check_committed(store, model, &mut problems);
    problems
}

fn show_bounds(list: &[(String, u32, u64, u64)]) -> String {
    list.iter().map(|(t, q, min, max)| format!("{t}/{q} [{min}, {max})")).collect::<Vec<_>>().join(", ")
}

/// `queues()` lists every queue of the model with its bounds (a queue retention emptied may be
/// left out, but its bounds must still be right).
fn check_queue_list(store: &MessageStore, model: &Model, problems: &mut Vec<String>) {
    let found: Vec<(String, u32, u64, u64)> =
        store.queues().into_iter().map(|q| (q.topic, q.queue_id, q.min_offset, q.max_offset)).collect();
    let listed: BTreeSet<(String, u32)> = found.iter().map(|(t, q, _, _)| (t.clone(), *q)).collect();
    let expected: Vec<(String, u32, u64, u64)> = model
        .queue_ids()
        .into_iter()
        .map(|(t, q)| {
            let (min, max) = model.bounds(&t, q);
            (t, q, min, max)
        })
        .filter(|(t, q, min, max)| min < max || listed.contains(&(t.clone(), *q)))
        .collect();
    if found != expected {
        problems.push(format!("queues(): expected {}; found {}", show_bounds(&expected), show_bounds(&found)));
    }
    for (topic, queue_id) in model.queue_ids() {
        let expected = model.bounds(&topic, queue_id);
        let found = (store.min_queue_offset(&topic, queue_id), store.max_queue_offset(&topic, queue_id));
        if let (Ok(min), Ok(max)) = found {
            if (min, max) != expected {
                problems.push(format!(
                    "{topic}/{queue_id}: min/max_queue_offset expected [{}, {}), found [{min}, {max})",
                    expected.0, expected.1
                ));
            }
        } else {
            problems.push(format!("{topic}/{queue_id}: min/max_queue_offset failed: {found:?}"));
        }
    }
}

/// The queue's messages from its min: each at its queue offset (the record's), with its log
/// offset and body, none missing, none twice.
fn check_queue(store: &MessageStore, model: &Model, topic: &str, queue_id: u32, problems: &mut Vec<String>) {
    let (min, _) = model.bounds(topic, queue_id);
    let expected: Vec<(u64, u64, String)> =
        model.in_queue(topic, queue_id).map(|p| (p.queue_offset, p.log_offset, p.body.clone())).collect();
    let got = match store.get_messages(topic, queue_id, min, usize::MAX, None) {
        Ok(got) => got,
        Err(e) => {
            problems.push(format!("{topic}/{queue_id}: get_messages from {min} failed: {e}"));
            return;
        }
    };
    let found: Vec<(u64, u64, String)> = got
        .messages
        .iter()
        .map(|m| (m.queue_offset(), m.log_offset(), String::from_utf8_lossy(m.body()).into_owned()))
        .collect();
    if found == expected {
        return;
    }
    let first_difference = expected
        .iter()
        .zip(&found)
        .position(|(e, f)| e != f)
        .map(|i| format!("first difference at #{i}: expected {:?}, found {:?}", expected[i], found[i]))
        .unwrap_or_else(|| "one is a prefix of the other".to_owned());
    problems.push(format!(
        "{topic}/{queue_id}: get_messages from {min} expected {} messages (queue offset, log offset, body), found {} \
         (status {:?}, bounds [{}, {})); {first_difference}",
        expected.len(),
        found.len(),
        got.status,
        got.min_queue_offset,
        got.max_queue_offset
    ));
}

/// Every key finds exactly the messages with it, each once. The keys that do not make one
/// problem: how many, and the first few.
fn check_keys(store: &MessageStore, model: &Model, problems: &mut Vec<String>) {
    let keys = model.keys();
    let mut wrong = Vec::new();
    for ((topic, key), expected) in &keys {
        match store.query_by_key(topic, key, 0, i64::MAX, 10_000) {
            Ok(found) => {
                let found: Vec<u64> = found.iter().map(|m| m.log_offset()).collect();
                if &found != expected {
                    wrong.push(format!("{topic}#{key}: expected {expected:?}, found {found:?}"));
                }
            }
            Err(e) => wrong.push(format!("{topic}#{key}: query failed: {e}")),
        }
    }
    if !wrong.is_empty() {
        problems.push(format!(
            "query_by_key: {} of {} keys do not find exactly their messages' log offsets, each once; e.g. {}",
            wrong.len(),
            keys.len(),
            wrong[..wrong.len().min(4)].join("; ")
        ));
    }
}

/// The committed offsets are the model's, none fallen, none lost, none added.
fn check_committed(store: &MessageStore, model: &Model, problems: &mut Vec<String>) {
    let found: BTreeMap<(String, String, u32), u64> =
        store.committed_offsets().into_iter().map(|c| ((c.group, c.topic, c.queue_id), c.next_offset)).collect();
    for (key @ (group, topic, queue_id), &offset) in &model.committed {
        match found.get(key) {
            Some(&got) if got == offset => {}
            Some(&got) => problems.push(format!(
                "committed offset of {group} on {topic}/{queue_id}: expected {offset}, found {got}{}",
                if got < offset { " (it fell)" } else { "" }
            )),
            None => problems
                .push(format!("committed offset of {group} on {topic}/{queue_id}: expected {offset}, found none")),
        }
    }
    for (group, topic, queue_id) in found.keys().filter(|k| !model.committed.contains_key(*k)) {
        problems.push(format!("committed offset of {group} on {topic}/{queue_id} that was never committed"));
    }
}

/// The index key hash of `key` in `topic`: the low 32 bits of FNV-1a 64 of `topic#key`
/// (docs/DESIGN.md §11).
pub fn key_hash(topic: &str, key: &str) -> u32 {
    let hash = format!("{topic}#{key}")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    hash as u32
}

/// The `.idx` files of the store in `root`, sorted (oldest first).
pub fn index_files(root: &Path) -> Vec<PathBuf> {
    files_in(&root.join(STORE_INDEX_DIR), ".idx")
}

/// The `.cq` files of a queue, sorted (oldest first).
pub fn queue_files(root: &Path, topic: &str, queue_id: u32) -> Vec<PathBuf> {
    files_in(&queue_dir(root, topic, queue_id), ".cq")
}

/// The directory of a queue.
pub fn queue_dir(root: &Path, topic: &str, queue_id: u32) -> PathBuf {
    root.join(STORE_CONSUME_QUEUE_DIR).join(topic).join(queue_id.to_string())
}

/// The store checkpoint's path.
pub fn checkpoint_file(root: &Path) -> PathBuf {
    root.join(STORE_CHECKPOINT_FILE)
}

/// The files of `dir` whose name ends with `suffix`, sorted (none if `dir` is missing).
pub fn files_in(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    files.sort();
    files
}

/// The raw entries of every `.idx` file of a closed store: no (key hash, log offset) twice, and
/// for the messages still in the log exactly the model's (no entry missing, none left over from
/// damage or from another store). Entries below the log's start may remain (their files go
/// whole). Returns the problems.
pub fn check_raw_index(root: &Path, model: &Model) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names: HashMap<(u32, u64), String> = HashMap::new();
    for put in &model.puts {
        for key in &put.keys {
            names.insert((key_hash(&put.topic, key), put.log_offset), format!("{}#{key}", put.topic));
        }
    }
    let expected: BTreeSet<(u32, u64)> = model
        .puts
        .iter()
        .filter(|p| p.log_offset >= model.start)
        .flat_map(|p| p.keys.iter().map(|k| (key_hash(&p.topic, k), p.log_offset)))
        .collect();
    let mut counts: BTreeMap<(u32, u64), Vec<String>> = BTreeMap::new();
    for path in index_files(root) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match dump_store_file(&path) {
            Ok(Some(StoreDump::IndexFile(dump))) => {
                if dump.header.is_none() || !dump.problems.is_empty() {
                    problems.push(format!("index file {name} after a clean close: {:?}", dump.problems));
                }
                for entry in dump.entries {
                    counts
                        .entry((entry.key_hash, entry.log_offset))
                        .or_default()
                        .push(format!("{name}#{}", entry.number));
                }
            }
            other => problems.push(format!("index file {name} cannot be dumped: {other:?}")),
        }
    }
    let show = |pair: &(u32, u64)| {
        let name = names.get(pair).cloned().unwrap_or_else(|| "no key of this store".to_owned());
        format!("(key hash {:#010x} = {name}, log offset {})", pair.0, pair.1)
    };
    for (pair, places) in counts.iter().filter(|(_, places)| places.len() > 1) {
        problems.push(format!("the index holds {} {} times (entries {})", show(pair), places.len(), places.join(", ")));
    }
    let found: BTreeSet<(u32, u64)> =
        counts.keys().filter(|(_, log_offset)| *log_offset >= model.start).copied().collect();
    let missing: Vec<String> = expected.difference(&found).map(show).collect();
    let extra: Vec<String> = found.difference(&expected).map(show).collect();
    if !missing.is_empty() {
        problems.push(format!(
            "the index lacks {} entries, e.g. {}",
            missing.len(),
            missing[..missing.len().min(5)].join(", ")
        ));
    }
    if !extra.is_empty() {
        problems.push(format!(
            "the index holds {} entries no message of the store has, e.g. {}",
            extra.len(),
            extra[..extra.len().min(5)].join(", ")
        ));
    }
    problems
}

/// Bytes that look random (xorshift from `seed`), never all zero.
pub fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8 | 1
        })
        .collect()
}

/// Overwrites `len` bytes of `path` from `at` with [`garbage`] (the file grows if it is shorter).
pub fn write_garbage(path: &Path, at: u64, len: usize, seed: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&garbage(seed, len), at).unwrap();
}

/// Cuts `path` to `len` bytes.
pub fn cut(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// XORs `mask` into the bytes of `path` at `at..`.
pub fn flip(path: &Path, at: u64, mask: &[u8]) {
    let mut bytes = std::fs::read(path).unwrap();
    for (i, m) in mask.iter().enumerate() {
        bytes[at as usize + i] ^= m;
    }
    std::fs::write(path, bytes).unwrap();
}

/// Replaces `path` with a copy of `foreign`.
pub fn replace_with(path: &Path, foreign: &Path) {
    assert!(foreign.exists(), "the other store has {}", foreign.display());
    std::fs::copy(foreign, path).unwrap();
}

/// Replaces the directory `dir` with a copy of `foreign`.
pub fn replace_dir_with(dir: &Path, foreign: &Path) {
    assert!(foreign.is_dir(), "the other store has {}", foreign.display());
    if dir.exists() {
        std::fs::remove_dir_all(dir).unwrap();
    }
    copy_dir(foreign, dir);
}

/// Byte position of hash slot `slot` of an index file.
pub fn slot_position(slot: u32) -> u64 {
    (INDEX_FILE_HEADER_LEN + slot as usize * INDEX_FILE_SLOT_LEN) as u64
}

/// Byte position of entry `n` of an index file with [`INDEX_SLOTS`] slots.
pub fn entry_position(n: u32) -> u64 {
    slot_position(INDEX_SLOTS) + u64::from(n) * 20
}

/// A closed store (made with `config`) of messages `m0`..`m39` in `t` queue 0, consumer group `g`
/// committed at 40, whose commit log then lost its last ten messages (as `strata truncate` or a
/// lost tail does): its next open cuts the queue to 30 and clamps `g` to 30.
pub fn store_with_a_cut_queue(root: &Path, config: StoreConfig) {
    let log_config = config.log.clone();
    let store = MessageStore::open(root, config).unwrap();
    let mut at = Vec::new();
    for i in 0..40 {
        at.push(store.put(&Message::new("t", 0, format!("m{i}"))).unwrap().log_offset);
    }
    store.commit_offset("g", "t", 0, 40).unwrap();
    store.close().unwrap();
    let log = Log::open(root.join(STORE_COMMIT_LOG_DIR), log_config).unwrap();
    log.truncate_to(at[30]).unwrap();
    log.close().unwrap();
}
