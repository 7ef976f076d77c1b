//! `strata store`: put, get, query and stats on a message store (RocketMQ's admin tools as the
//! model: `sendMessage`, `consumeMessage`, `queryMsgByKey`, `topicStatus` / `consumerProgress`).
//! `put` and a get that commits open the store read-write (a `MessageStore` holds its commit
//! log's lock, so a second process gets a clear refusal) and close it cleanly; the reading ones
//! open it read-only (`MessageStore::open_read_only`), so they work beside a running store and
//! change nothing. Reading commands never create a store.

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use serde::Serialize;

use super::ToolError;
use super::text::iso_ms;
use strata_log::internals::format::{STORE_COMMIT_LOG_DIR, STORE_INDEX_DIR};
use strata_log::internals::inspect::store::{IndexFileHeader, index_file_header, is_store_root};
use strata_log::{
    CommittedOffset, Error, GetResult, GetStatus, Message, MessageStore, QueueInfo, StoreConfig, StoredMessage,
};

/// Lines `put` sends in one wait for durability (each is its own message and record).
const PUT_WAIT_EVERY: usize = 1_000;
/// Messages asked of the store per `get` call.
const GET_BATCH: u64 = 256;

/// Entries per consume-queue file of a store `strata store` creates: 200,000-byte files (the
/// library's default, RocketMQ's, is 300,000: 6 MB).
pub const NEW_STORE_QUEUE_ENTRIES_PER_FILE: u64 = 10_000;
/// Hash slots per index file of a store `strata store` creates (the library's default: 5,000,000).
pub const NEW_STORE_INDEX_SLOTS: u32 = 50_000;
/// Entries per index file of a store `strata store` creates (the library's default: 20,000,000):
/// with [`NEW_STORE_INDEX_SLOTS`], 4,200,040-byte index files (the default's are 420,000,040).
pub const NEW_STORE_INDEX_ENTRIES: u32 = 200_000;

/// The geometry of a new store's files (an existing store keeps what its `store.meta` records).
#[derive(Debug, Clone, Default)]
pub struct StoreFiles {
    /// Commit-log segment size [default: the size the segments show, else 128 MiB or less if the
    /// disk has no room].
    pub segment_bytes: Option<u64>,
    /// Entries per consume-queue file [default: the store's, else 10,000].
    pub queue_entries_per_file: Option<u64>,
    /// Hash slots per index file [default: the store's, else 50,000].
    pub index_slots: Option<u32>,
    /// Entries per index file [default: the store's, else 200,000].
    pub index_entries: Option<u32>,
}

/// The configuration `strata store` opens `root` with: for a new store, the sizes asked for, else
/// modest ones ([`NEW_STORE_QUEUE_ENTRIES_PER_FILE`], ...); for an existing store, the parameters
/// it records (`StoreConfig::with_recorded_parameters`: its `store.meta`, or for a store made
/// before that file existed what its files show). A size asked for that an existing store does
/// not have is passed on: the store keeps its own (the open logs which it replaced).
pub fn store_config(root: &Path, files: &StoreFiles) -> Result<StoreConfig, ToolError> {
    let defaults = StoreConfig::default();
    let segment_bytes = match files.segment_bytes {
        Some(bytes) => bytes,
        None => super::produce_segment_bytes(&root.join(STORE_COMMIT_LOG_DIR))?,
    };
    // The commit log keeps the index parameters it records (a command that only reads the store
    // must not record others).
    let log = defaults.log.clone().with_recorded_parameters(root.join(STORE_COMMIT_LOG_DIR))?;
    let new_store = StoreConfig {
        log: strata_log::LogConfig { segment_bytes, ..log },
        queue_entries_per_file: NEW_STORE_QUEUE_ENTRIES_PER_FILE,
        index_slots: NEW_STORE_INDEX_SLOTS,
        index_entries: NEW_STORE_INDEX_ENTRIES,
        ..defaults
    };
    let store = new_store.clone().with_recorded_parameters(root)?;
    let config = StoreConfig {
        queue_entries_per_file: files.queue_entries_per_file.unwrap_or(store.queue_entries_per_file),
        index_slots: files.index_slots.unwrap_or(store.index_slots),
        index_entries: files.index_entries.unwrap_or(store.index_entries),
        ..new_store
    };
    config.validate()?;
    Ok(config)
}

/// Fails unless `root` holds a message store (reading commands never create one).
pub fn require_store(root: &Path) -> Result<(), ToolError> {
    if is_store_root(root) {
        return Ok(());
    }
    let what = if root.exists() {
        "is not a message store (no commitlog/ beside consumequeue/ or index/)"
    } else {
        "does not exist"
    };
    Err(ToolError::Usage(format!("{}: {what}", root.display())))
}

/// Opens the store; a store another process holds open is a usage error saying so.
pub fn open_store(root: &Path, config: StoreConfig) -> Result<MessageStore, ToolError> {
    MessageStore::open(root, config).map_err(|e| store_error(root, e))
}

/// Opens the store read-only: no lock, nothing written, beside the process that may have it open.
pub fn open_read_only(root: &Path, config: StoreConfig) -> Result<MessageStore, ToolError> {
    MessageStore::open_read_only(root, config).map_err(|e| store_error(root, e))
}

/// Opens the store read-write to commit a consumer offset: a store another process holds open
/// owns its `offsets.json`, and the refusal says to commit from that process or to read only.
pub fn open_to_commit(root: &Path, config: StoreConfig) -> Result<MessageStore, ToolError> {
    MessageStore::open(root, config).map_err(|e| match e {
        Error::Locked { .. } => ToolError::Usage(format!(
            "{}: the message store is open in another process, which owns its consumer offsets: commit \
             from that process, or drop --commit to read beside it",
            root.display()
        )),
        e => store_error(root, e),
    })
}

/// A store error as the command reports it.
pub fn store_error(root: &Path, error: Error) -> ToolError {
    match error {
        Error::Locked { path } => ToolError::Usage(format!(
            "{}: the message store is open in another process (it holds {}); stop it first \
             (`strata store get`, `query` and `stats`, `verify` and `dump` only read, and work beside it)",
            root.display(),
            path.display()
        )),
        // What the store refuses of the input: the command line asked for it.
        error @ (Error::InvalidTopic { .. }
        | Error::InvalidQueue { .. }
        | Error::MessageTooLarge { .. }
        | Error::InvalidField { .. }
        | Error::MixedBatch { .. }
        | Error::NotAMessage { .. }
        | Error::DispatchFailed { .. }) => ToolError::Usage(error.to_string()),
        error => ToolError::Log(error),
    }
}

/// What `put` stores each line as.
#[derive(Debug, Clone)]
pub struct PutOptions {
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// The tag of every message.
    pub tag: Option<String>,
    /// The keys of every message.
    pub keys: Vec<String>,
}

/// What `put` stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PutSummary {
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// Messages stored.
    pub messages: u64,
    /// Log offset of the first.
    pub first_log_offset: Option<u64>,
    /// Log offset of the last.
    pub last_log_offset: Option<u64>,
    /// Queue offset of the first.
    pub first_queue_offset: Option<u64>,
    /// Queue offset of the last.
    pub last_queue_offset: Option<u64>,
    /// Stopped by a signal (what was read before it is stored).
    pub interrupted: bool,
}

/// Puts one message per line of `input` (the line without its `\n` or `\r\n` is the body), waiting
/// for them to be durable and dispatched every `PUT_WAIT_EVERY` lines and at the end. Input is
/// read on its own thread, so a stop (Ctrl-C) is noticed while it waits for a line.
pub fn put(
    store: &MessageStore,
    options: &PutOptions,
    input: impl Read + Send + 'static,
    stop: &AtomicBool,
) -> Result<PutSummary, ToolError> {
    let root = Path::new("");
    let lines = read_lines(input);
    let mut summary = PutSummary { topic: options.topic.clone(), queue_id: options.queue_id, ..PutSummary::default() };
    let mut pending = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            summary.interrupted = true;
            break;
        }
        let line = match lines.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => line.map_err(|e| ToolError::Input(format!("reading stdin: {e}")))?,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut message = Message::new(options.topic.as_str(), options.queue_id, line).with_keys(options.keys.clone());
        if let Some(tag) = &options.tag {
            message = message.with_tag(tag.as_str());
        }
        pending.push(store.put_nowait(&message).map_err(|e| store_error(root, e))?);
        if pending.len() == PUT_WAIT_EVERY {
            settle(&mut pending, &mut summary).map_err(|e| store_error(root, e))?;
        }
    }
    settle(&mut pending, &mut summary).map_err(|e| store_error(root, e))?;
    Ok(summary)
}

/// Waits for the puts in flight and counts them.
fn settle(pending: &mut Vec<strata_log::PutHandle>, summary: &mut PutSummary) -> Result<(), Error> {
    for handle in pending.drain(..) {
        let put = handle.wait()?;
        summary.messages += 1;
        summary.first_log_offset.get_or_insert(put.log_offset);
        summary.first_queue_offset.get_or_insert(put.queue_offset);
        summary.last_log_offset = Some(put.log_offset);
        summary.last_queue_offset = Some(put.queue_offset);
    }
    Ok(())
}

/// The lines of `input` from a thread of their own, without their line ends.
fn read_lines(input: impl Read + Send + 'static) -> mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (sender, receiver) = mpsc::sync_channel(PUT_WAIT_EVERY);
    std::thread::spawn(move || {
        let mut input = std::io::BufReader::new(input);
        loop {
            let mut line = Vec::new();
            match input.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    if line.ends_with(b"\n") {
                        line.pop();
                        if line.ends_with(b"\r") {
                            line.pop();
                        }
                    }
                    if sender.send(Ok(line)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = sender.send(Err(e));
                    return;
                }
            }
        }
    });
    receiver
}

/// What `get` reads and prints.
#[derive(Debug, Clone)]
pub struct GetOptions {
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// The first queue offset [default: the group's committed offset, else the queue's first].
    pub from: Option<u64>,
    /// Messages to print at most.
    pub max: Option<u64>,
    /// The consumer group whose committed offset is the default start.
    pub group: Option<String>,
    /// Commit the next offset for `group` at the end.
    pub commit: bool,
    /// Only messages with this tag.
    pub tag: Option<String>,
    /// At the queue's end, wait for more (until stopped).
    pub follow: bool,
    /// With `follow` on a read-only store, how often the queue's end is looked at again.
    pub poll: Duration,
    /// JSON lines instead of text.
    pub json: bool,
}

/// What `get` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GetSummary {
    /// Messages printed.
    pub messages: u64,
    /// The queue offset it started at.
    pub from: u64,
    /// Where the next get goes on.
    pub next_queue_offset: u64,
    /// The offset committed for the group, with `commit`.
    pub committed: Option<u64>,
    /// Stopped by a signal.
    pub interrupted: bool,
}

/// Prints messages of one queue to `out`; with `follow`, long-polls at the end until `stop`.
pub fn get(
    store: &MessageStore,
    o: &GetOptions,
    out: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<GetSummary, ToolError> {
    let (topic, queue_id) = (o.topic.as_str(), o.queue_id);
    let min = store.min_queue_offset(topic, queue_id).map_err(|e| store_error(Path::new(""), e))?;
    let committed = o.group.as_deref().and_then(|g| store.committed_offset(g, topic, queue_id));
    let mut next = o.from.or(committed).unwrap_or(min);
    let mut summary = GetSummary { from: next, ..GetSummary::default() };
    let limit = o.max.unwrap_or(u64::MAX);
    while summary.messages < limit {
        let want = (limit - summary.messages).min(GET_BATCH) as usize;
        let got = fetch(store, o, next, want, stop).map_err(|e| store_error(Path::new(""), e))?;
        for message in &got.messages {
            write_message(out, message, o.json, false)?;
        }
        summary.messages += got.messages.len() as u64;
        out.flush()?;
        match got.status {
            GetStatus::OffsetTooSmall => {
                tracing::warn!(
                    from = next,
                    first = got.next_queue_offset,
                    "messages before the queue's first were removed (retention); going on from its first"
                );
            }
            GetStatus::NoMatchedLogicQueue if !o.follow => return Err(no_such_queue(store, topic, queue_id)),
            GetStatus::OffsetOverflow if o.from.is_some() => {
                return Err(ToolError::Usage(format!(
                    "queue offset {next} is past the end of {topic} queue {queue_id} ({}); use --from {}",
                    got.max_queue_offset, got.max_queue_offset
                )));
            }
            _ => {}
        }
        next = got.next_queue_offset;
        if stop.load(Ordering::Relaxed) {
            summary.interrupted = true;
            break;
        }
        let at_end = next >= got.max_queue_offset;
        if at_end && !o.follow {
            break;
        }
    }
    summary.next_queue_offset = next;
    if o.commit
        && let Some(group) = &o.group
    {
        store.commit_offset(group, topic, queue_id, next).map_err(|e| store_error(Path::new(""), e))?;
        store.flush_offsets().map_err(|e| store_error(Path::new(""), e))?;
        summary.committed = Some(next);
    }
    Ok(summary)
}

/// A get of a queue the store does not have: one line naming the queues it has, e.g. `no queue
/// orders/3 in this store (topics: orders[0,1] payments[0]); --follow waits for it`.
fn no_such_queue(store: &MessageStore, topic: &str, queue_id: u32) -> ToolError {
    let mut topics: Vec<(String, Vec<u32>)> = Vec::new();
    for QueueInfo { topic, queue_id, .. } in store.queues() {
        match topics.last_mut() {
            Some((last, ids)) if *last == topic => ids.push(queue_id),
            _ => topics.push((topic, vec![queue_id])),
        }
    }
    let has = if topics.is_empty() {
        "it has no queue yet".to_owned()
    } else {
        let listed: Vec<String> = topics
            .iter()
            .map(|(topic, ids)| {
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                format!("{topic}[{}]", ids.join(","))
            })
            .collect();
        format!("topics: {}", listed.join(" "))
    };
    ToolError::Usage(format!("no queue {topic}/{queue_id} in this store ({has}); --follow waits for it"))
}

/// One get of `get` from `next`: with `follow`, a wait at the queue's end — the store's long poll,
/// or, on a read-only store (which another process writes: nothing here can wake it), a pause of
/// `poll` (cut short by `stop`) before the next look.
fn fetch(store: &MessageStore, o: &GetOptions, next: u64, want: usize, stop: &AtomicBool) -> Result<GetResult, Error> {
    let (topic, queue_id, tag) = (o.topic.as_str(), o.queue_id, o.tag.as_deref());
    if o.follow && !store.is_read_only() {
        return store.get_messages_wait(topic, queue_id, next, want, tag, Duration::from_millis(100));
    }
    let got = store.get_messages(topic, queue_id, next, want, tag)?;
    if o.follow && got.messages.is_empty() && got.next_queue_offset >= got.max_queue_offset {
        let until = std::time::Instant::now() + o.poll;
        while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
            std::thread::sleep(o.poll.min(Duration::from_millis(20)));
        }
    }
    Ok(got)
}

/// `query`: the newest `max` messages of `topic` with `key` stored in `[begin_ms, end_ms]`.
pub fn query(
    store: &MessageStore,
    topic: &str,
    key: &str,
    (begin_ms, end_ms): (i64, i64),
    max: usize,
) -> Result<Vec<StoredMessage>, ToolError> {
    store.query_by_key(topic, key, begin_ms, end_ms, max).map_err(|e| store_error(Path::new(""), e))
}

/// A message as one JSON line: the body as a string when UTF-8, else base64 (`body_encoding`).
#[derive(Debug, Serialize)]
pub struct JsonMessage {
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// Its offset in the queue.
    pub queue_offset: u64,
    /// Its offset in the commit log.
    pub log_offset: u64,
    /// When the store appended it, ms since the epoch.
    pub timestamp_ms: i64,
    /// The same as ISO 8601.
    pub timestamp: String,
    /// The tag.
    pub tag: Option<String>,
    /// The keys.
    pub keys: Vec<String>,
    /// The producer's timestamp, if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub born_timestamp_ms: Option<i64>,
    /// The body.
    pub body: String,
    /// `base64` when the body is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_encoding: Option<&'static str>,
}

/// `m` as [`JsonMessage`].
pub fn json_message(m: &StoredMessage) -> JsonMessage {
    let (body, body_encoding) = match std::str::from_utf8(m.body()) {
        Ok(text) => (text.to_owned(), None),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(m.body()), Some("base64")),
    };
    JsonMessage {
        topic: m.topic().to_owned(),
        queue_id: m.queue_id(),
        queue_offset: m.queue_offset(),
        log_offset: m.log_offset(),
        timestamp_ms: m.timestamp_ms(),
        timestamp: iso_ms(m.timestamp_ms()),
        tag: m.tag().map(str::to_owned),
        keys: m.keys().to_vec(),
        born_timestamp_ms: m.born_timestamp_ms(),
        body,
        body_encoding,
    }
}

/// One message on one line: a JSON object, or `[topic/queue  ]queue offset  log offset  time
/// [tag=…] [keys=…]  body` with control characters and bytes that are not UTF-8 escaped.
pub fn write_message(out: &mut dyn Write, m: &StoredMessage, json: bool, with_queue: bool) -> Result<(), ToolError> {
    if json {
        serde_json::to_writer(&mut *out, &json_message(m)).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    if with_queue {
        write!(out, "{}/{}  ", m.topic(), m.queue_id())?;
    }
    write!(out, "{}  log {}  {}", m.queue_offset(), m.log_offset(), iso_ms(m.timestamp_ms()))?;
    if let Some(tag) = m.tag() {
        write!(out, "  tag={}", escaped(tag.as_bytes()))?;
    }
    if !m.keys().is_empty() {
        write!(out, "  keys={}", escaped(m.keys().join(",").as_bytes()))?;
    }
    writeln!(out, "  {}", escaped(m.body()))?;
    Ok(())
}

/// `bytes` as text: UTF-8 as it is, control characters escaped (`\n`, `\u{1b}`), other bytes `\xNN`.
pub fn escaped(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                text.extend(c.escape_default());
            } else {
                text.push(c);
            }
        }
        for b in chunk.invalid() {
            text.push_str(&format!("\\x{b:02x}"));
        }
    }
    text
}

/// `stats`: what the store holds and how far its consumer groups are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    /// The commit log's first offset.
    pub log_start_offset: u64,
    /// The commit log's next offset.
    pub log_next_offset: u64,
    /// The sizes of the store's files, as the store records them.
    pub files: FileSizes,
    /// Every queue that ever had a message, by topic and queue id.
    pub queues: Vec<QueueStats>,
    /// The index files, oldest first.
    pub index_files: Vec<IndexFileStats>,
    /// Every committed offset with its lag, by group, topic and queue.
    pub groups: Vec<GroupLag>,
}

/// The sizes a store makes its files with (its `store.meta`), and what each takes on disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FileSizes {
    /// Entries per consume-queue file.
    pub queue_entries_per_file: u64,
    /// Bytes of each consume-queue file (made at full size).
    pub queue_file_bytes: u64,
    /// Hash slots per index file.
    pub index_slots: u32,
    /// Entries per index file (entry 0 included).
    pub index_entries: u32,
    /// Bytes of each index file (made at full size).
    pub index_file_bytes: u64,
}

impl FileSizes {
    /// The sizes `config` makes files with.
    pub fn of(config: &StoreConfig) -> FileSizes {
        use strata_log::internals::format::{
            CQ_ENTRY_LEN, INDEX_FILE_ENTRY_LEN, INDEX_FILE_HEADER_LEN, INDEX_FILE_SLOT_LEN,
        };
        FileSizes {
            queue_entries_per_file: config.queue_entries_per_file,
            queue_file_bytes: config.queue_entries_per_file * CQ_ENTRY_LEN as u64,
            index_slots: config.index_slots,
            index_entries: config.index_entries,
            index_file_bytes: INDEX_FILE_HEADER_LEN as u64
                + u64::from(config.index_slots) * INDEX_FILE_SLOT_LEN as u64
                + u64::from(config.index_entries) * INDEX_FILE_ENTRY_LEN as u64,
        }
    }
}

/// One queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// Its first queue offset.
    pub min_offset: u64,
    /// Its end: it holds `[min_offset, max_offset)`.
    pub max_offset: u64,
}

/// One index file, from its header after the close.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexFileStats {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: IndexFileHeader,
    /// Entries it has room for (entry 0 included).
    pub capacity: u32,
}

/// A group's position in one queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupLag {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// The next queue offset it consumes.
    pub committed: u64,
    /// The queue's end.
    pub max_offset: u64,
    /// Messages it has not consumed: `max_offset − committed`.
    pub lag: u64,
}

/// Reads the store read-only (beside the process that may have it open): its queues and
/// committed offsets, then the index files' headers (as the owner last flushed them).
pub fn stats(root: &Path, config: StoreConfig) -> Result<StoreStats, ToolError> {
    let store = open_read_only(root, config)?;
    let files = FileSizes::of(store.config());
    let queues: Vec<QueueStats> = store
        .queues()
        .into_iter()
        .map(|QueueInfo { topic, queue_id, min_offset, max_offset, .. }| QueueStats {
            topic,
            queue_id,
            min_offset,
            max_offset,
        })
        .collect();
    let max_of = |topic: &str, queue_id| {
        queues.iter().find(|q| q.topic == topic && q.queue_id == queue_id).map_or(0, |q| q.max_offset)
    };
    let groups = store
        .committed_offsets()
        .into_iter()
        .map(|CommittedOffset { group, topic, queue_id, next_offset: committed, .. }| {
            let max_offset = max_of(&topic, queue_id);
            GroupLag { lag: max_offset.saturating_sub(committed), group, topic, queue_id, committed, max_offset }
        })
        .collect();
    let (log_start_offset, log_next_offset) = (store.commit_log_start_offset(), store.metrics().log.next_offset);
    store.close().map_err(|e| store_error(root, e))?;
    let mut index_files = Vec::new();
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(root.join(STORE_INDEX_DIR)) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    paths.sort();
    for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "idx")) {
        if let Some((header, capacity)) = live_index_header(&path)? {
            index_files.push(IndexFileStats { path, header, capacity });
        }
    }
    Ok(StoreStats { log_start_offset, log_next_offset, files, queues, index_files, groups })
}

/// An index file's header and capacity, read beside the store's owner: `None` if retention
/// deleted the file since it was listed; a header failing its check is read once more (the owner
/// may have been writing it) before it is the error.
fn live_index_header(path: &Path) -> Result<Option<(IndexFileHeader, u32)>, ToolError> {
    match index_file_header(path) {
        Ok(found) => Ok(Some(found)),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(Error::Corrupt { .. }) => {
            std::thread::sleep(Duration::from_millis(5));
            Ok(Some(index_file_header(path)?))
        }
        Err(error) => Err(error.into()),
    }
}
