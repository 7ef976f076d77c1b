//! `strata dump` and `strata verify` for the message store's files (docs/DESIGN.md §11; the bytes
//! are in docs/FORMAT.md, "Consume queue", "`.idx`", "`offsets.json`", "`store.checkpoint`"):
//! values, never text. Files are read with `pread` and the commit log through
//! `Log::open_read_only`, so a live store can be inspected; nothing is changed. Every count a file
//! states is checked against the file's length before anything is allocated for it, and garbage is
//! a finding or an error, never a panic.
//!
//! `verify_store` judges a problem at a commit-log offset at or past the store checkpoint of a
//! store that did not close cleanly (`abort` present: open, or crashed) as a note: that is what
//! the next open checks and cuts (docs/DESIGN.md §11), or what a live dispatcher is writing.

use std::collections::BTreeMap;
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{Damage, Dump, Finding, VerifyReport};
use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CQ_ENTRY_LEN, CQ_SUFFIX, INDEX_FILE_ENTRY_LEN, INDEX_FILE_SLOT_LEN, INDEX_FILE_SUFFIX, OFFSETS_BACKUP_FILE,
    OFFSETS_FILE, STORE_ABORT_FILE, STORE_CHECKPOINT_FILE, STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR,
    STORE_INDEX_DIR, STORE_META_FILE, parse_file_name,
};
use crate::log::Log;
use crate::store::checkpoint;
use crate::store::consume_queue::Entry;
use crate::store::consumer_offsets;
use crate::store::hash::tag_hash;
use crate::store::index::{
    EntryRules, IndexFileEntry, IndexHeader, entry_position, key_hash, read_header, slot_of, slot_position,
};
use crate::store::message::{StoredMessage, validate_topic};
use crate::store::message_reader::MessageReader;
use crate::store::meta::{self, StoreMeta, StoreParameters};

/// Entries read from a file at once (1.3 MB of `.cq`, of `.idx`).
const CHUNK_ENTRIES: u64 = 1 << 16;
/// Problems listed per file; the rest are counted in one last line.
const MAX_PROBLEMS: usize = 100;
/// How often `verify_store` opens a fresh view of a live commit log that grew past the last one.
const MAX_VIEWS: u32 = 100;
/// [`CQ_ENTRY_LEN`] as a byte count.
const CQ_LEN: u64 = CQ_ENTRY_LEN as u64;

/// One consume-queue entry as `dump` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct QueueEntryInfo {
    /// Its queue offset (the file's first plus its slot).
    pub queue_offset: u64,
    /// Byte position in the file.
    pub position: u64,
    /// The message's offset in the commit log.
    pub log_offset: u64,
    /// The record's encoded size.
    pub size: u32,
    /// FNV-1a 64 of the tag (0: no tag).
    pub tag_hash: u64,
}

/// A `.cq` file: its entries up to the first all-zero slot, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct QueueFileDump {
    /// The file.
    pub path: PathBuf,
    /// The queue offset of its first slot (its name).
    pub first_queue_offset: u64,
    /// Its length in bytes.
    pub file_len: u64,
    /// Whole entries it has room for.
    pub capacity: u64,
    /// The entries, up to the first all-zero slot (the queue's end in this file).
    pub entries: Vec<QueueEntryInfo>,
    /// Slots after them (the all-zero tail, and any garbage in it).
    pub unused: u64,
    /// Non-zero slots among the unused ones: entries a crash tore off, or garbage.
    pub non_zero_unused: u64,
    /// Bytes of a partial entry at the end (ignored by the store).
    pub partial_bytes: u64,
    /// What is wrong: log offsets not increasing, a non-zero tail.
    pub problems: Vec<Damage>,
}

/// An IndexFile's header as `dump` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndexFileHeader {
    /// Timestamp (ms) of the put that created the file.
    pub begin_timestamp_ms: i64,
    /// The largest timestamp put (ms).
    pub end_timestamp_ms: i64,
    /// The log offset the file was created for (its name).
    pub begin_log_offset: u64,
    /// The largest log offset put.
    pub end_log_offset: u64,
    /// Hash slots.
    pub hash_slot_count: u32,
    /// Entries used, numbered 1 to `index_count`.
    pub index_count: u32,
}

/// One IndexFile entry as `dump` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndexEntryInfo {
    /// Its number (1 to `index_count`).
    pub number: u32,
    /// Byte position in the file.
    pub position: u64,
    /// Low 32 bits of FNV-1a 64 of `topic#key`.
    pub key_hash: u32,
    /// Its slot: `key_hash % hash_slot_count`.
    pub slot: u32,
    /// The message's offset in the commit log.
    pub log_offset: u64,
    /// Whole seconds after the file's begin timestamp.
    pub time_diff_s: u32,
    /// The previous entry of its slot's chain (0: the chain ends).
    pub prev_entry: u32,
}

/// A `.idx` file: header, slot usage, entries with their chain links, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndexFileDump {
    /// The file.
    pub path: PathBuf,
    /// Its length in bytes.
    pub file_len: u64,
    /// The header, if it passes the store's check (else the first problem says why).
    pub header: Option<IndexFileHeader>,
    /// Entries it has room for (entry 0, never used, included).
    pub capacity: u32,
    /// Slots holding an entry number.
    pub slots_used: u64,
    /// Entries 1 to `index_count`.
    pub entries: Vec<IndexEntryInfo>,
    /// What is wrong: a bad header, slot or prev pointers out of range or into another slot,
    /// log offsets or times going back.
    pub problems: Vec<Damage>,
}

/// One committed consumer offset.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroupOffset {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: u32,
    /// The next queue offset the group consumes.
    pub offset: u64,
}

/// `offsets.json` or its backup.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct OffsetsDump {
    /// The file.
    pub path: PathBuf,
    /// Its offsets, sorted by group, topic and queue, if it is readable.
    pub offsets: Vec<GroupOffset>,
    /// Why it is not.
    pub problems: Vec<Damage>,
}

/// `store.checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CheckpointDump {
    /// The file.
    pub path: PathBuf,
    /// Every queue and index entry for log offsets below this is durable, if the file is valid.
    pub dispatched_up_to: Option<u64>,
    /// Why it is not (the store then redispatches from the log's start).
    pub problems: Vec<Damage>,
}

/// `store.meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MetaDump {
    /// The file.
    pub path: PathBuf,
    /// What it records, if it is readable.
    pub meta: Option<StoreMeta>,
    /// Why it is not (every open refuses the store until the file is deleted; it holds no
    /// message, and the next writer open infers the parameters from the store's files again).
    pub problems: Vec<Damage>,
}

/// One file of a message store, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
pub enum StoreDump {
    /// A consume-queue file.
    ConsumeQueue(QueueFileDump),
    /// An IndexFile.
    IndexFile(IndexFileDump),
    /// `offsets.json` or `offsets.json.bak`.
    ConsumerOffsets(OffsetsDump),
    /// `store.checkpoint`.
    StoreCheckpoint(CheckpointDump),
    /// `store.meta`.
    StoreMeta(MetaDump),
}

impl StoreDump {
    /// What is wrong with the file (empty: nothing).
    pub fn problems(&self) -> &[Damage] {
        match self {
            StoreDump::ConsumeQueue(d) => &d.problems,
            StoreDump::IndexFile(d) => &d.problems,
            StoreDump::ConsumerOffsets(d) => &d.problems,
            StoreDump::StoreCheckpoint(d) => &d.problems,
            StoreDump::StoreMeta(d) => &d.problems,
        }
    }
}

/// Every file of a store root: the commit log's, then the store's own.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StoreRootDump {
    /// The store root.
    pub root: PathBuf,
    /// Whether `abort` is there: the store is open, or did not close cleanly.
    pub abort: bool,
    /// The commit log's files.
    pub commit_log: Vec<Dump>,
    /// `store.checkpoint`, `offsets.json` (and backup), every `.cq` by topic and queue, every `.idx`.
    pub files: Vec<StoreDump>,
}

impl StoreRootDump {
    /// Whether any file is damaged.
    pub fn is_damaged(&self) -> bool {
        self.commit_log.iter().any(|d| d.damage().is_some()) || self.files.iter().any(|d| !d.problems().is_empty())
    }
}

/// Whether `dir` is a message store's root: a `commitlog/` beside a `consumequeue/` or `index/`.
pub fn is_store_root(dir: &Path) -> bool {
    dir.join(STORE_COMMIT_LOG_DIR).is_dir()
        && (dir.join(STORE_CONSUME_QUEUE_DIR).is_dir() || dir.join(STORE_INDEX_DIR).is_dir())
}

/// Whether `path` names a store file `dump_store_file` reads.
pub fn is_store_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    matches!(parse_file_name(name), Some((_, CQ_SUFFIX | INDEX_FILE_SUFFIX)))
        || [OFFSETS_FILE, OFFSETS_BACKUP_FILE, STORE_CHECKPOINT_FILE, STORE_META_FILE].contains(&name)
}

/// Dumps one store file, by its name; `None` if it is not one ([`is_store_file`]). A `store.meta`
/// naming a format version or feature this build does not know is `Error::UnsupportedFormat`.
pub fn dump_store_file(path: &Path) -> Result<Option<StoreDump>> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    Ok(Some(match parse_file_name(name) {
        Some((first, CQ_SUFFIX)) => StoreDump::ConsumeQueue(dump_queue_file(path, first)?),
        Some((_, INDEX_FILE_SUFFIX)) => StoreDump::IndexFile(dump_index_file(path)?),
        _ if name == OFFSETS_FILE || name == OFFSETS_BACKUP_FILE => StoreDump::ConsumerOffsets(dump_offsets(path)?),
        _ if name == STORE_CHECKPOINT_FILE => StoreDump::StoreCheckpoint(dump_checkpoint(path)?),
        _ if name == STORE_META_FILE => StoreDump::StoreMeta(dump_meta(path)?),
        _ => return Ok(None),
    }))
}

/// Dumps the store files directly in `dir` (a queue's directory, `index/`), in name order.
pub fn dump_store_files_in(dir: &Path) -> Result<Vec<StoreDump>> {
    let mut dumps = Vec::new();
    for path in sorted_files(dir)? {
        if let Some(dump) = dump_store_file(&path)? {
            dumps.push(dump);
        }
    }
    Ok(dumps)
}

/// Dumps every file of the store in `root` (read-only). A store of a format this build does not
/// know (its `store.meta`) is `Error::UnsupportedFormat`.
pub fn dump_store(root: &Path) -> Result<StoreRootDump> {
    let commit_log = super::dump_dir(&root.join(STORE_COMMIT_LOG_DIR), false)?;
    let mut files = Vec::new();
    for name in [STORE_META_FILE, STORE_CHECKPOINT_FILE, OFFSETS_FILE, OFFSETS_BACKUP_FILE] {
        if root.join(name).is_file()
            && let Some(dump) = dump_store_file(&root.join(name))?
        {
            files.push(dump);
        }
    }
    for (_, _, dir) in queue_dirs(root, &mut Vec::new())? {
        files.extend(dump_store_files_in(&dir)?);
    }
    files.extend(dump_store_files_in(&root.join(STORE_INDEX_DIR))?);
    Ok(StoreRootDump { root: root.to_path_buf(), abort: root.join(STORE_ABORT_FILE).exists(), commit_log, files })
}

// ---- Reading the files ----------------------------------------------------------------------------

/// The regular files of `dir` sorted by name (none if it does not exist).
fn sorted_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("list", dir))?;
        if entry.file_type().map_err(Error::io("stat", entry.path()))?.is_file() {
            paths.push(entry.path());
        }
    }
    paths.sort();
    Ok(paths)
}

/// The sub-directories of `dir` by name (none if it does not exist).
fn sorted_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("list", dir))?;
        if entry.file_type().map_err(Error::io("stat", entry.path()))?.is_dir() {
            dirs.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Every queue directory of the store in `root`: (topic, queue id, directory), sorted. Directories
/// that cannot be a topic or a queue are noted in `findings`.
fn queue_dirs(root: &Path, findings: &mut Vec<Finding>) -> Result<Vec<(String, u32, PathBuf)>> {
    let mut queues = Vec::new();
    for (topic, topic_dir) in sorted_dirs(&root.join(STORE_CONSUME_QUEUE_DIR))? {
        if validate_topic(&topic).is_err() {
            findings.push(Finding::note(&topic_dir, "not a topic's directory (not a valid topic name); ignored"));
            continue;
        }
        for (queue, dir) in sorted_dirs(&topic_dir)? {
            match queue.parse::<u32>() {
                Ok(queue_id) if queue_id.to_string() == queue => queues.push((topic.clone(), queue_id, dir)),
                _ => findings.push(Finding::note(&dir, "not a queue's directory (not a queue id); ignored")),
            }
        }
    }
    queues.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    Ok(queues)
}

/// Reads `len` bytes at `position` of `file`.
fn read_at(file: &File, path: &Path, position: u64, len: usize) -> Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, position).map_err(Error::io("read", path))?;
    Ok(bytes)
}

/// Calls `f` with each of `count` fixed-size items from `start` in `file`, read a chunk at a time.
fn for_each_item(
    (file, path): (&File, &Path),
    start: u64,
    item_len: usize,
    count: u64,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<()> {
    let mut done = 0;
    while done < count {
        let n = (count - done).min(CHUNK_ENTRIES);
        let bytes = read_at(file, path, start + done * item_len as u64, n as usize * item_len)?;
        for (i, item) in bytes.chunks_exact(item_len).enumerate() {
            f(done + i as u64, item);
        }
        done += n;
    }
    Ok(())
}

fn open(path: &Path) -> Result<(File, u64)> {
    let file = File::open(path).map_err(Error::io("open", path))?;
    let len = file.metadata().map_err(Error::io("stat", path))?.len();
    Ok((file, len))
}

/// Adds a problem, up to [`MAX_PROBLEMS`]; past that, one line counts the rest.
fn problem(problems: &mut Vec<Damage>, position: u64, reason: String) {
    match problems.len() {
        n if n < MAX_PROBLEMS => problems.push(Damage { position, reason }),
        MAX_PROBLEMS => problems.push(Damage { position, reason: "more problems follow (not listed)".to_owned() }),
        _ => {}
    }
}

/// Reads a `.cq` file whose name says it starts at queue offset `first`.
fn dump_queue_file(path: &Path, first: u64) -> Result<QueueFileDump> {
    let (file, file_len) = open(path)?;
    let capacity = file_len / CQ_LEN;
    let mut dump = QueueFileDump {
        path: path.to_path_buf(),
        first_queue_offset: first,
        file_len,
        capacity,
        entries: Vec::new(),
        unused: 0,
        non_zero_unused: 0,
        partial_bytes: file_len % CQ_LEN,
        problems: Vec::new(),
    };
    if first.checked_add(capacity).is_none() {
        let reason = "the file's queue offsets overflow: its name is not a queue offset".to_owned();
        problem(&mut dump.problems, 0, reason);
        return Ok(dump);
    }
    let mut ended = false;
    for_each_item((&file, path), 0, CQ_ENTRY_LEN, capacity, |slot, bytes| {
        let entry = Entry::decode(bytes);
        let (queue_offset, position) = (first + slot, slot * CQ_LEN);
        ended |= entry.is_zero();
        if ended {
            dump.unused += 1;
            dump.non_zero_unused += u64::from(!entry.is_zero());
            return;
        }
        // The store's own rules (the log's end is checked against the log, in `check_messages`).
        let previous = dump.entries.last().map(|p| p.log_offset);
        if let Err(reason) = entry.check(queue_offset, previous, None) {
            problem(&mut dump.problems, position, reason.to_string());
        }
        let Entry { log_offset, size, tag_hash } = entry;
        dump.entries.push(QueueEntryInfo { queue_offset, position, log_offset, size, tag_hash });
    })?;
    if dump.non_zero_unused > 0 {
        let position = dump.entries.len() as u64 * CQ_LEN;
        let reason = format!(
            "{} non-zero slots after the queue's end at queue offset {} (entries a crash tore off, or garbage: \
             recovery after an unclean shutdown zeroes them)",
            dump.non_zero_unused,
            first + dump.entries.len() as u64
        );
        problem(&mut dump.problems, position, reason);
    }
    Ok(dump)
}

/// Reads a `.idx` file: a header that fails the store's check is the one problem reported.
fn dump_index_file(path: &Path) -> Result<IndexFileDump> {
    let (file, file_len) = open(path)?;
    let mut dump = IndexFileDump {
        path: path.to_path_buf(),
        file_len,
        header: None,
        capacity: 0,
        slots_used: 0,
        entries: Vec::new(),
        problems: Vec::new(),
    };
    let (header, capacity) = match read_header(path) {
        Ok((header, _, capacity)) => (header, capacity),
        Err(Error::Corrupt { position, reason, .. }) => {
            let reason = format!("not a valid index file: {reason}");
            dump.problems.push(Damage { position, reason });
            return Ok(dump);
        }
        Err(error) => return Err(error),
    };
    dump.header = Some(header_info(&header));
    dump.capacity = capacity;
    let heads = read_slots(&file, path, &header, &mut dump)?;
    read_entries(&file, path, &header, &mut dump)?;
    check_chains(&header, &heads, &mut dump);
    Ok(dump)
}

fn header_info(h: &IndexHeader) -> IndexFileHeader {
    IndexFileHeader {
        begin_timestamp_ms: h.begin_timestamp_ms,
        end_timestamp_ms: h.end_timestamp_ms,
        begin_log_offset: h.begin_log_offset,
        end_log_offset: h.end_log_offset,
        hash_slot_count: h.slot_count,
        index_count: h.index_count,
    }
}

/// Counts the used slots, flags those past `index_count`; returns (slot, entry) of the others.
fn read_slots(file: &File, path: &Path, header: &IndexHeader, dump: &mut IndexFileDump) -> Result<Vec<(u32, u32)>> {
    let mut heads = Vec::new();
    let slots = u64::from(header.slot_count);
    for_each_item((file, path), slot_position(0), INDEX_FILE_SLOT_LEN, slots, |slot, bytes| {
        let entry = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if entry == 0 {
            return;
        }
        dump.slots_used += 1;
        if entry > header.index_count {
            let reason = format!("slot {slot} points at entry {entry}, past index_count {}", header.index_count);
            problem(&mut dump.problems, slot_position(slot), reason);
        } else {
            heads.push((slot as u32, entry));
        }
    })?;
    Ok(heads)
}

/// Reads entries 1 to `index_count` and checks each against the one before it and the header.
fn read_entries(file: &File, path: &Path, header: &IndexHeader, dump: &mut IndexFileDump) -> Result<()> {
    let count = u64::from(header.index_count);
    let start = entry_position(header.slot_count, 1);
    for_each_item((file, path), start, INDEX_FILE_ENTRY_LEN, count, |i, bytes| {
        let e = IndexFileEntry::decode(bytes);
        let number = i as u32 + 1;
        let position = entry_position(header.slot_count, u64::from(number));
        let info = IndexEntryInfo {
            number,
            position,
            key_hash: e.key_hash,
            slot: slot_of(e.key_hash, header.slot_count),
            log_offset: e.log_offset,
            time_diff_s: e.time_diff_s,
            prev_entry: e.prev_entry,
        };
        for reason in entry_problems(header, dump.entries.last(), &info) {
            problem(&mut dump.problems, position, reason);
        }
        dump.entries.push(info);
    })
}

/// What is wrong with entry `e` of a file with `header`, after entry `previous`.
fn entry_problems(header: &IndexHeader, previous: Option<&IndexEntryInfo>, e: &IndexEntryInfo) -> Vec<String> {
    let mut problems = Vec::new();
    let n = e.number;
    let (begin, end) = (header.begin_log_offset, header.end_log_offset);
    let rules = EntryRules { begin_log_offset: begin, end_log_offset: Bound::Included(end) };
    let faults = rules.check(n, &stored(e), previous.map(stored).as_ref());
    if faults.link_not_back {
        problems.push(format!("entry {n}: prev_entry {} does not point back (out of range)", e.prev_entry));
    }
    if faults.below_begin || faults.past_end {
        problems.push(format!("entry {n}: log offset {} outside the header's [{begin}, {end}]", e.log_offset));
    }
    if let Some(p) = previous {
        if faults.log_offset_goes_back {
            problems
                .push(format!("entry {n}: log offset {} below entry {}'s {}", e.log_offset, p.number, p.log_offset));
        }
        if faults.time_goes_back {
            problems
                .push(format!("entry {n}: time_diff_s {} below entry {}'s {}", e.time_diff_s, p.number, p.time_diff_s));
        }
    }
    problems
}

/// The entry `e` shows, as stored.
fn stored(e: &IndexEntryInfo) -> IndexFileEntry {
    IndexFileEntry {
        key_hash: e.key_hash,
        log_offset: e.log_offset,
        time_diff_s: e.time_diff_s,
        prev_entry: e.prev_entry,
    }
}

/// Each slot's head and each entry's `prev_entry` must be an entry of the same slot.
fn check_chains(header: &IndexHeader, heads: &[(u32, u32)], dump: &mut IndexFileDump) {
    let slot_of = |entries: &[IndexEntryInfo], number: u32| entries.get(number as usize - 1).map(|e| e.slot);
    for &(slot, head) in heads {
        if let Some(found) = slot_of(&dump.entries, head).filter(|&s| s != slot) {
            let reason = format!("slot {slot} points at entry {head}, which is in slot {found}");
            problem(&mut dump.problems, slot_position(u64::from(slot)), reason);
        }
    }
    let mut wrong = Vec::new();
    for e in dump.entries.iter().filter(|e| e.prev_entry != 0 && e.prev_entry < e.number) {
        if let Some(found) = slot_of(&dump.entries, e.prev_entry).filter(|&s| s != e.slot) {
            let reason = format!("entry {}: prev_entry {} is in slot {found}, not {}", e.number, e.prev_entry, e.slot);
            wrong.push((e.position, reason));
        }
    }
    debug_assert!(dump.entries.len() as u64 <= u64::from(header.index_count), "entries are bounded by the header");
    for (position, reason) in wrong {
        problem(&mut dump.problems, position, reason);
    }
}

fn dump_offsets(path: &Path) -> Result<OffsetsDump> {
    let mut dump = OffsetsDump { path: path.to_path_buf(), offsets: Vec::new(), problems: Vec::new() };
    match consumer_offsets::read(path) {
        Ok(Some(offsets)) => dump.offsets = group_offsets(offsets),
        Ok(None) => return Err(Error::io("read", path)(std::io::ErrorKind::NotFound.into())),
        Err(Error::Corrupt { position, reason, .. }) => {
            dump.problems.push(Damage { position, reason: reason.to_string() })
        }
        Err(error) => return Err(error),
    }
    Ok(dump)
}

fn group_offsets(offsets: BTreeMap<consumer_offsets::Key, u64>) -> Vec<GroupOffset> {
    offsets
        .into_iter()
        .map(|((group, topic, queue_id), offset)| GroupOffset { group, topic, queue_id, offset })
        .collect()
}

fn dump_checkpoint(path: &Path) -> Result<CheckpointDump> {
    let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
    let mut dump = CheckpointDump { path: path.to_path_buf(), dispatched_up_to: None, problems: Vec::new() };
    match checkpoint::Checkpoint::decode(&bytes) {
        Ok(value) => dump.dispatched_up_to = Some(value.dispatched_up_to),
        Err(reason) => dump.problems.push(Damage { position: 0, reason: reason.to_string() }),
    }
    Ok(dump)
}

fn dump_meta(path: &Path) -> Result<MetaDump> {
    let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
    let mut dump = MetaDump { path: path.to_path_buf(), meta: None, problems: Vec::new() };
    match StoreMeta::decode(&bytes) {
        Ok(found) => {
            found.check_known(path.parent().unwrap_or(Path::new(".")))?;
            dump.meta = Some(found);
        }
        Err(reason) => dump.problems.push(Damage { position: 0, reason: reason.to_string() }),
    }
    Ok(dump)
}

// ---- Verify ---------------------------------------------------------------------------------------

/// What `verify` checked and found in a message store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StoreVerifyReport {
    /// The commit log's check ([`super::verify`] of `commitlog/`).
    pub commit_log: VerifyReport,
    /// Queues checked.
    pub queues: u64,
    /// Consume-queue entries checked.
    pub queue_entries: u64,
    /// Index files checked.
    pub index_files: u64,
    /// Index entries checked.
    pub index_entries: u64,
    /// Messages read from the commit log to check an entry against.
    pub messages_checked: u64,
    /// Committed consumer offsets checked.
    pub consumer_offsets: u64,
    /// The store checkpoint, if it is readable.
    pub dispatched_up_to: Option<u64>,
    /// Whether the store was closed cleanly (no `abort`).
    pub closed_cleanly: bool,
    /// The parameters the store's files are made with, as its `store.meta` records them (`None`:
    /// missing or damaged, see the findings).
    pub parameters: Option<StoreParameters>,
    /// The store's own findings (the commit log's are in `commit_log`), errors first.
    pub findings: Vec<Finding>,
}

impl StoreVerifyReport {
    /// Whether nothing is damaged (notes do not count), the commit log included.
    pub fn is_clean(&self) -> bool {
        self.commit_log.is_clean() && self.findings.iter().all(|f| f.severity != super::Severity::Error)
    }
}

/// A queue's entries as read, with where each is.
struct QueueRead {
    entries: Vec<(QueueEntryInfo, PathBuf)>,
    min: u64,
    max: u64,
}

/// The state of one `verify_store`.
struct Checker {
    log_dir: PathBuf,
    view: Log,
    views: u32,
    /// In a store that did not close cleanly, problems at log offsets from here on are notes.
    unclean_from: Option<u64>,
    report: StoreVerifyReport,
}

/// Checks the message store in `root`, read-only (safe on a live store): the commit log as
/// `verify` does; every queue entry against the message it points at (topic, queue, the queue
/// offset in its header, size, tag hash) and the one before it; every index entry's links and
/// the key hash of its message; consumer offsets against the queues; the store checkpoint;
/// `store.meta`. A store (or commit log) of a format this build does not know is
/// `Error::UnsupportedFormat`, checked before anything else.
pub fn verify_store(root: &Path) -> Result<StoreVerifyReport> {
    let mut report = StoreVerifyReport::default();
    report.parameters = check_meta(root, &mut report.findings)?;
    let log_dir = root.join(STORE_COMMIT_LOG_DIR);
    report.commit_log = super::verify(&log_dir, &LogConfig::default())?;
    report.closed_cleanly = !root.join(STORE_ABORT_FILE).exists();
    let checkpoint = check_checkpoint(root, &mut report)?;
    let unclean_from = (!report.closed_cleanly).then(|| checkpoint.unwrap_or(0));
    let view = Log::open_read_only(&log_dir, LogConfig::default())?;
    let mut checker = Checker { log_dir, view, views: 1, unclean_from, report };
    let mut bounds = BTreeMap::new();
    for (topic, queue_id, dir) in queue_dirs(root, &mut checker.report.findings)? {
        let read = checker.read_queue(&dir)?;
        checker.check_messages(&topic, queue_id, &read.entries)?;
        bounds.insert((topic, queue_id), (read.min, read.max));
        checker.report.queues += 1;
    }
    for path in sorted_files(&root.join(STORE_INDEX_DIR))? {
        checker.check_index_file(&path)?;
    }
    let mut report = checker.report;
    check_offsets(root, &bounds, &mut report)?;
    report.findings.sort_by(|a, b| {
        (a.severity, &a.file, a.position, &a.problem).cmp(&(b.severity, &b.file, b.position, &b.problem))
    });
    Ok(report)
}

/// `store.meta`: its parameters; missing is a note (the next writer open writes it), damaged an
/// error (every open refuses the store until it is deleted); a format this build does not know
/// refuses the check.
fn check_meta(root: &Path, findings: &mut Vec<Finding>) -> Result<Option<StoreParameters>> {
    let path = root.join(STORE_META_FILE);
    match meta::check(root) {
        Ok(Some(found)) => Ok(Some(found.parameters)),
        Ok(None) => {
            let note = "missing (a store made before the file existed): the next writer open writes it, with the \
                        parameters the store's files show";
            findings.push(Finding::note(&path, note));
            Ok(None)
        }
        Err(Error::Corrupt { reason, .. }) => {
            let problem = format!(
                "{reason}: every open refuses the store until it is deleted (it holds no message; the next writer \
                 open infers the parameters from the store's files and writes it again)"
            );
            findings.push(Finding::error(&path, 0, problem));
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

fn check_checkpoint(root: &Path, report: &mut StoreVerifyReport) -> Result<Option<u64>> {
    let path = root.join(STORE_CHECKPOINT_FILE);
    if !report.closed_cleanly {
        let note = "present: the store is open, or did not close cleanly (the next open checks its queues and \
                    index from the store checkpoint on)";
        report.findings.push(Finding::note(&root.join(STORE_ABORT_FILE), note));
    }
    if !path.exists() {
        return Ok(None);
    }
    let dump = dump_checkpoint(&path)?;
    if let Some(damage) = dump.problems.first() {
        let note = format!("{}: the next open redispatches from the commit log's start", damage.reason);
        report.findings.push(Finding::note(&path, note));
    }
    let end = report.commit_log.next_offset;
    if let Some(x) = dump.dispatched_up_to.filter(|&x| x > end) {
        let note = format!("dispatched up to {x}, past the commit log's end {end}: the next open starts at the end");
        report.findings.push(Finding::note(&path, note));
    }
    report.dispatched_up_to = dump.dispatched_up_to;
    Ok(dump.dispatched_up_to)
}

impl Checker {
    /// A problem at `log_offset` (`None`: not at one): a note if the next open would check and
    /// cut it (past the store checkpoint of a store that did not close cleanly), else an error.
    fn judge(&mut self, file: &Path, position: u64, log_offset: Option<u64>, problem: String) {
        let recoverable = matches!((self.unclean_from, log_offset), (Some(from), Some(at)) if at >= from);
        let finding = if recoverable {
            let problem = format!("{problem} (past the store checkpoint of a store that did not close cleanly)");
            Finding::note_at(file, position, problem)
        } else {
            Finding::error(file, position, problem)
        };
        self.report.findings.push(finding);
    }

    /// Reads the `.cq` files of one queue's directory and checks that they form one queue.
    fn read_queue(&mut self, dir: &Path) -> Result<QueueRead> {
        let mut read = QueueRead { entries: Vec::new(), min: 0, max: 0 };
        let mut expected: Option<u64> = None;
        let files: Vec<(u64, PathBuf)> = sorted_files(dir)?
            .into_iter()
            .filter_map(|path| match path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name) {
                Some((first, CQ_SUFFIX)) => Some((first, path)),
                _ => {
                    self.report.findings.push(Finding::note(&path, "not a consume-queue file name; ignored"));
                    None
                }
            })
            .collect();
        for (i, (first, path)) in files.iter().enumerate() {
            let dump = dump_queue_file(path, *first)?;
            self.check_queue_file(
                &dump,
                expected,
                i + 1 == files.len(),
                read.entries.last().map(|(e, _)| e.log_offset),
            );
            if i == 0 {
                read.min = *first;
            }
            read.max = *first + dump.entries.len() as u64;
            expected = first.checked_add(dump.capacity);
            self.report.queue_entries += dump.entries.len() as u64;
            read.entries.extend(dump.entries.into_iter().map(|e| (e, path.clone())));
        }
        Ok(read)
    }

    /// One file's structure, and how it continues the file before it (ending at queue offset
    /// `expected`, its last entry at `previous`).
    fn check_queue_file(&mut self, dump: &QueueFileDump, expected: Option<u64>, last: bool, previous: Option<u64>) {
        let path = &dump.path;
        if let Some(e) = expected.filter(|&e| e != dump.first_queue_offset) {
            let problem = format!("does not continue the queue: the file before it ends at queue offset {e}");
            self.judge(path, 0, None, problem);
        }
        if dump.capacity == 0 {
            self.judge(path, 0, None, "holds no whole entry".to_owned());
        }
        if !last && dump.unused > 0 {
            let problem = format!(
                "a full file (not the queue's last) with {} unused slots: queue offsets from {} hold no entry",
                dump.unused,
                dump.first_queue_offset + dump.entries.len() as u64
            );
            self.judge(path, dump.entries.len() as u64 * CQ_LEN, None, problem);
        }
        // Across files, the rule within one (log offsets increase along the queue).
        if let Some(first) = dump.entries.first()
            && let Err(problem @ Corruption::QueueLogOffsetNotIncreasing { .. }) =
                stored_entry(first).check(first.queue_offset, previous, None)
        {
            self.judge(path, 0, Some(first.log_offset), format!("{problem} (the previous file's last)"));
        }
        let unclean_tail = self.unclean_from.is_some();
        for damage in &dump.problems {
            let at = dump.entries.iter().find(|e| e.position == damage.position).map(|e| e.log_offset);
            // A torn tail past the end is what an unclean store's next open zeroes.
            let at = if at.is_none() && unclean_tail { self.unclean_from } else { at };
            self.judge(path, damage.position, at, damage.reason.clone());
        }
    }

    /// A view of the commit log that holds `log_offset` if the log does (a live store appends
    /// while it is checked: a fresh view is opened, up to [`MAX_VIEWS`] times).
    fn cover(&mut self, log_offset: u64) -> Result<u64> {
        if log_offset >= self.view.visible_end() && self.views < MAX_VIEWS {
            self.view = Log::open_read_only(&self.log_dir, LogConfig::default())?;
            self.views += 1;
        }
        Ok(self.view.visible_end())
    }

    /// Every entry of a queue against the message it points at.
    fn check_messages(&mut self, topic: &str, queue_id: u32, entries: &[(QueueEntryInfo, PathBuf)]) -> Result<()> {
        let Some(last) = entries.last() else { return Ok(()) };
        let end = self.cover(last.0.log_offset)?;
        let start = self.view.start_offset();
        let mut problems = Vec::new();
        let mut reader = MessageReader::new(&self.view);
        for (i, (e, path)) in entries.iter().enumerate() {
            if e.log_offset < start {
                continue; // removed by retention
            }
            // The queue's own rule (the log holds the message), as recovery applies it.
            if let Err(problem) = stored_entry(e).check(e.queue_offset, None, Some(end)) {
                problems.push((path, e.position, e.log_offset, problem.to_string()));
                continue;
            }
            let ahead = || entries[i..].iter().take(64).map(|(e, _)| e.size as usize + 64).sum();
            let found = match reader.read(e.log_offset, ahead) {
                Ok(Some(record)) => record,
                Ok(None) => continue,
                Err(error) => {
                    let problem =
                        format!("queue offset {}: reading log offset {}: {error}", e.queue_offset, e.log_offset);
                    problems.push((path, e.position, e.log_offset, problem));
                    continue;
                }
            };
            self.report.messages_checked += 1;
            if let Some(problem) = entry_mismatch(topic, queue_id, e, found) {
                problems.push((path, e.position, e.log_offset, format!("queue offset {}: {problem}", e.queue_offset)));
            }
        }
        drop(reader);
        for (path, position, log_offset, problem) in problems.into_iter().take(MAX_PROBLEMS) {
            self.judge(path, position, Some(log_offset), problem);
        }
        Ok(())
    }

    /// One index file: its structure, then each entry's message has a key with its hash.
    fn check_index_file(&mut self, path: &Path) -> Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).and_then(parse_file_name);
        if !matches!(name, Some((_, INDEX_FILE_SUFFIX))) {
            self.report.findings.push(Finding::note(path, "not an index file name; ignored"));
            return Ok(());
        }
        let dump = dump_index_file(path)?;
        self.report.index_files += 1;
        self.report.index_entries += dump.entries.len() as u64;
        for damage in &dump.problems {
            let at = dump.entries.iter().find(|e| e.position == damage.position).map(|e| e.log_offset);
            self.judge(path, damage.position, at, damage.reason.clone());
        }
        let Some(last) = dump.entries.last() else { return Ok(()) };
        let end = self.cover(last.log_offset)?;
        let start = self.view.start_offset();
        let mut problems = Vec::new();
        let mut reader = MessageReader::new(&self.view);
        for e in dump.entries.iter().filter(|e| e.log_offset >= start) {
            if e.log_offset >= end {
                let problem =
                    format!("entry {}: log offset {} is at or past the commit log's end {end}", e.number, e.log_offset);
                problems.push((e.position, e.log_offset, problem));
                continue;
            }
            let message = match reader.read(e.log_offset, || 1) {
                Ok(Some(record)) => StoredMessage::decode(record),
                Ok(None) => continue,
                Err(error) => Err(error),
            };
            self.report.messages_checked += 1;
            let problem = match message {
                Err(error) => Some(error.to_string()),
                Ok(m) if m.keys().iter().any(|k| key_hash(m.topic(), k) == e.key_hash) => None,
                Ok(m) => Some(format!("its message (topic {:?}) has no key with hash {:#010x}", m.topic(), e.key_hash)),
            };
            if let Some(problem) = problem {
                problems.push((
                    e.position,
                    e.log_offset,
                    format!("entry {}, log offset {}: {problem}", e.number, e.log_offset),
                ));
            }
        }
        drop(reader);
        for (position, log_offset, problem) in problems.into_iter().take(MAX_PROBLEMS) {
            self.judge(path, position, Some(log_offset), problem);
        }
        Ok(())
    }
}

/// The queue entry a report line describes, as the store's layout holds it, for checking one
/// rule across entries: its size is taken as at least 1, since a size-0 entry is reported by the
/// file's own dump, and must not hide the rule asked about (nor be reported twice).
fn stored_entry(e: &QueueEntryInfo) -> Entry {
    Entry { log_offset: e.log_offset, size: e.size.max(1), tag_hash: e.tag_hash }
}

/// Why the queue entry `e` of `topic`'s queue `queue_id` does not describe `record`, if it does not.
fn entry_mismatch(topic: &str, queue_id: u32, e: &QueueEntryInfo, record: crate::log::RecordView) -> Option<String> {
    let size = record.encoded_len();
    let message = match StoredMessage::decode(record) {
        Ok(message) => message,
        Err(error) => return Some(error.to_string()),
    };
    let at = e.log_offset;
    if message.topic() != topic || message.queue_id() != queue_id {
        return Some(format!("log offset {at} is a message of {:?} queue {}", message.topic(), message.queue_id()));
    }
    if message.queue_offset() != e.queue_offset {
        return Some(format!("the message at log offset {at} has queue offset {}", message.queue_offset()));
    }
    if size != e.size as usize {
        return Some(format!("size {} but the message at log offset {at} has {size} bytes", e.size));
    }
    let expected = tag_hash(message.tag());
    (expected != e.tag_hash)
        .then(|| format!("tag hash {:#x} but the message's tag hashes to {expected:#x}", e.tag_hash))
}

/// Committed consumer offsets against the queues' bounds (`min`, `max`).
fn check_offsets(
    root: &Path,
    bounds: &BTreeMap<(String, u32), (u64, u64)>,
    report: &mut StoreVerifyReport,
) -> Result<()> {
    let (main, backup) = (root.join(OFFSETS_FILE), root.join(OFFSETS_BACKUP_FILE));
    let mut read = if main.exists() { Some(dump_offsets(&main)?) } else { None };
    if let Some(damage) = read.as_ref().and_then(|d| d.problems.first()) {
        let note = format!("{}: the store uses {OFFSETS_BACKUP_FILE}", damage.reason);
        report.findings.push(Finding::note(&main, note));
        read = None;
    }
    if read.is_none() && backup.exists() {
        let dump = dump_offsets(&backup)?;
        if let Some(damage) = dump.problems.first() {
            let problem =
                format!("{} (and {OFFSETS_FILE} is missing or unreadable: the store cannot open)", damage.reason);
            report.findings.push(Finding::error(&backup, damage.position, problem));
        }
        read = Some(dump);
    }
    let Some(read) = read else { return Ok(()) };
    for o in &read.offsets {
        report.consumer_offsets += 1;
        let (min, max) = bounds.get(&(o.topic.clone(), o.queue_id)).copied().unwrap_or((0, 0));
        let what =
            format!("group {:?} topic {:?} queue {}: committed offset {}", o.group, o.topic, o.queue_id, o.offset);
        if o.offset > max {
            let problem = format!("{what} is past the queue's end {max} (the next open lowers it)");
            // After an unclean shutdown the queue may have lost a torn tail the group had read.
            let finding = if report.closed_cleanly { Finding::error } else { Finding::note_at };
            report.findings.push(finding(&read.path, 0, problem));
        } else if o.offset < min {
            let note = format!("{what} is below the queue's first offset {min} (retention): it resumes at {min}");
            report.findings.push(Finding::note(&read.path, note));
        }
    }
    Ok(())
}

/// The header of the `.idx` file at `path` and the entries it has room for (entry 0 included),
/// checked as the store checks it; `Error::Corrupt` naming the file and field if it fails.
pub fn index_file_header(path: &Path) -> Result<(IndexFileHeader, u32)> {
    let (header, _, capacity) = read_header(path)?;
    Ok((header_info(&header), capacity))
}
