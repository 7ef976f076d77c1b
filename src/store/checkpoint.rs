//! The store checkpoint (`store.checkpoint`, docs/FORMAT.md, docs/DESIGN.md §11) and the `abort`
//! marker.
//!
//! The checkpoint holds X, the commit-log offset below which every message's consume-queue and
//! index entries are fdatasynced (dispatch at open restarts there), and a summary of what was
//! durable when it was written: per queue, its next queue offset and the log offset of its last
//! entry; per index file, its entry count and last log offset. The summary lets an open check in
//! O(queues) that the derived files still hold what they held (a queue file deleted, cut or
//! replaced is rebuilt), and keeps each queue's numbering when neither its files nor its records
//! are left (retention removed the records, the files were lost): a queue offset is never handed
//! out twice. Written only after those flushes. A missing or damaged file means "redispatch from
//! the log's start, with no summary" (dispatch is idempotent); logged.
//!
//! `abort` exists while the store is open: created (durably) at open, removed at a clean close.
//! Present at open, the last run did not close, and the newest index file is validated before use.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::format::{
    MAX_TOPIC_LEN, STORE_ABORT_FILE, STORE_CHECKPOINT_FILE, STORE_CHECKPOINT_MAGIC, STORE_CHECKPOINT_NO_ENTRY,
    STORE_CHECKPOINT_VERSION, STORE_CHECKPOINT_VERSION_1,
};
use crate::storage::{self, ValueFile};
use crate::store::message::validate_topic;

/// The version-1 file (`dispatched_up_to` alone), still read.
const VERSION_1: ValueFile =
    ValueFile { name: STORE_CHECKPOINT_FILE, magic: STORE_CHECKPOINT_MAGIC, version: STORE_CHECKPOINT_VERSION_1 };

/// What the checkpoint says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// Every queue and index entry for log offsets below this is durable.
    pub(crate) dispatched_up_to: u64,
    /// Each queue as it was durable, sorted by topic and queue id (empty from a version-1 file).
    pub(crate) queues: Vec<QueueSummary>,
    /// Each index file as it was durable, in log-offset order (empty from a version-1 file).
    pub(crate) index_files: Vec<IndexFileSummary>,
    /// Whether `queues` names every queue the store had (a version-2 file; not written, implied
    /// by the version).
    pub(crate) summarised: bool,
}

/// One queue in the checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QueueSummary {
    pub(crate) topic: String,
    pub(crate) queue_id: u32,
    /// The first queue offset the queue held (retention raises it, whole files at a time).
    pub(crate) min_queue_offset: u64,
    /// The log offset of the entry at `min_queue_offset` (`None`: the queue had none).
    pub(crate) first_log_offset: Option<u64>,
    /// Every queue offset below this was handed out (and its entry durable, or its message removed
    /// by retention).
    pub(crate) next_queue_offset: u64,
    /// The log offset of the entry at `next_queue_offset - 1` (`None`: the queue had none).
    pub(crate) last_log_offset: Option<u64>,
}

/// One index file in the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexFileSummary {
    /// Its name.
    pub(crate) begin_log_offset: u64,
    /// Entries durable in it.
    pub(crate) index_count: u32,
    /// The log offset of its last entry (its begin offset while empty).
    pub(crate) end_log_offset: u64,
}

/// The largest queue offset a summary may hold (a queue offset near `u64::MAX` leaves no room
/// for a file, and never reaches a checkpoint).
const MAX_QUEUE_OFFSET: u64 = u64::MAX / 2;

/// Bytes before the summaries: magic, version, `dispatched_up_to`, the two counts.
const HEAD_LEN: usize = 4 + 2 + 8 + 4 + 4;
const INDEX_FILE_LEN: usize = 8 + 4 + 8;

impl Checkpoint {
    /// The file's bytes (version [`STORE_CHECKPOINT_VERSION`]).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEAD_LEN + self.queues.len() * 40 + self.index_files.len() * INDEX_FILE_LEN + 4);
        b.extend_from_slice(&STORE_CHECKPOINT_MAGIC);
        b.extend_from_slice(&STORE_CHECKPOINT_VERSION.to_be_bytes());
        b.extend_from_slice(&self.dispatched_up_to.to_be_bytes());
        b.extend_from_slice(&(self.queues.len() as u32).to_be_bytes());
        b.extend_from_slice(&(self.index_files.len() as u32).to_be_bytes());
        for queue in &self.queues {
            debug_assert!(queue.topic.len() <= MAX_TOPIC_LEN, "topics are validated before they reach a queue");
            b.push(queue.topic.len() as u8);
            b.extend_from_slice(queue.topic.as_bytes());
            b.extend_from_slice(&queue.queue_id.to_be_bytes());
            b.extend_from_slice(&queue.min_queue_offset.to_be_bytes());
            b.extend_from_slice(&queue.first_log_offset.unwrap_or(STORE_CHECKPOINT_NO_ENTRY).to_be_bytes());
            b.extend_from_slice(&queue.next_queue_offset.to_be_bytes());
            b.extend_from_slice(&queue.last_log_offset.unwrap_or(STORE_CHECKPOINT_NO_ENTRY).to_be_bytes());
        }
        for file in &self.index_files {
            b.extend_from_slice(&file.begin_log_offset.to_be_bytes());
            b.extend_from_slice(&file.index_count.to_be_bytes());
            b.extend_from_slice(&file.end_log_offset.to_be_bytes());
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_be_bytes());
        b
    }

    /// Parses and checks the file's bytes (either version).
    pub(crate) fn decode(b: &[u8]) -> std::result::Result<Checkpoint, Corruption> {
        if b.len() >= 6
            && b[..4] == STORE_CHECKPOINT_MAGIC
            && BigEndian::read_u16(&b[4..]) == STORE_CHECKPOINT_VERSION_1
        {
            let dispatched_up_to = VERSION_1.decode(b)?;
            return Ok(Checkpoint { dispatched_up_to, ..Checkpoint::default() });
        }
        if b.len() < HEAD_LEN + 4 || b[..4] != STORE_CHECKPOINT_MAGIC {
            return Err(Corruption::BadFile("the file has the wrong length or magic"));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crc32fast::hash(body) != BigEndian::read_u32(crc) {
            return Err(Corruption::BadFile("the file fails its CRC"));
        }
        if BigEndian::read_u16(&body[4..]) != STORE_CHECKPOINT_VERSION {
            return Err(Corruption::BadFile("the file has an unsupported version"));
        }
        let mut reader = Reader { bytes: body, at: 6 };
        let dispatched_up_to = reader.u64()?;
        let (queue_count, file_count) = (reader.u32()?, reader.u32()?);
        let mut queues = Vec::with_capacity((queue_count as usize).min(body.len() / 37));
        for _ in 0..queue_count {
            queues.push(reader.queue()?);
        }
        let mut index_files = Vec::with_capacity((file_count as usize).min(body.len() / INDEX_FILE_LEN));
        for _ in 0..file_count {
            let (begin_log_offset, index_count, end_log_offset) = (reader.u64()?, reader.u32()?, reader.u64()?);
            index_files.push(IndexFileSummary { begin_log_offset, index_count, end_log_offset });
        }
        if reader.at != body.len() {
            return Err(Corruption::BadFile("the file has bytes after its summaries"));
        }
        Ok(Checkpoint { dispatched_up_to, queues, index_files, summarised: true })
    }
}

/// Reads a summary's fields in order; running out of bytes is damage.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, len: usize) -> std::result::Result<&[u8], Corruption> {
        let taken =
            self.bytes.get(self.at..self.at + len).ok_or(Corruption::BadFile("the file ends inside a summary"))?;
        self.at += len;
        Ok(taken)
    }

    fn u32(&mut self) -> std::result::Result<u32, Corruption> {
        self.take(4).map(BigEndian::read_u32)
    }

    fn u64(&mut self) -> std::result::Result<u64, Corruption> {
        self.take(8).map(BigEndian::read_u64)
    }

    fn queue(&mut self) -> std::result::Result<QueueSummary, Corruption> {
        let len = self.take(1)?[0] as usize;
        let topic = std::str::from_utf8(self.take(len)?)
            .map_err(|_| Corruption::BadFile("a queue summary's topic is not UTF-8"))?
            .to_owned();
        let (queue_id, min_queue_offset, first) = (self.u32()?, self.u64()?, self.u64()?);
        let (next_queue_offset, last) = (self.u64()?, self.u64()?);
        let entry = |offset| (offset != STORE_CHECKPOINT_NO_ENTRY).then_some(offset);
        let (first_log_offset, last_log_offset) = (entry(first), entry(last));
        if validate_topic(&topic).is_err() {
            return Err(Corruption::BadFile("a queue summary names an invalid topic"));
        }
        // Queue offsets this large leave no room for a consume-queue file: never written.
        if min_queue_offset > next_queue_offset || next_queue_offset > MAX_QUEUE_OFFSET {
            return Err(Corruption::BadFile("a queue summary's offsets are out of order or out of range"));
        }
        Ok(QueueSummary { topic, queue_id, min_queue_offset, first_log_offset, next_queue_offset, last_log_offset })
    }
}

/// The checkpoint in `root`, or an empty one (dispatch from the log's start, no summary) if there
/// is no usable file (logged).
pub(crate) fn read(root: &Path) -> Result<Checkpoint> {
    Ok(read_usable(root)?.unwrap_or_default())
}

/// The checkpoint in `root`; `None` if there is no usable file (logged if it is damaged).
pub(crate) fn read_usable(root: &Path) -> Result<Option<Checkpoint>> {
    let Some(bytes) = storage::read_if_exists(&root.join(STORE_CHECKPOINT_FILE))? else {
        return Ok(None);
    };
    Ok(Checkpoint::decode(&bytes)
        .inspect_err(|reason| {
            tracing::warn!(root = %root.display(), %reason, "ignoring the store checkpoint: dispatch restarts at the log's start");
        })
        .ok())
}

/// Replaces the file atomically and durably. Call only once every queue and index entry for
/// offsets below `checkpoint.dispatched_up_to`, and every entry the summaries count, is
/// fdatasynced.
/// A checkpoint read from a version-1 file (`summarised` false: it names no queue) is written
/// as version 1 again, so it never claims to name every queue.
pub(crate) fn write(root: &Path, checkpoint: &Checkpoint) -> Result<()> {
    if !checkpoint.summarised {
        return VERSION_1.write(root, checkpoint.dispatched_up_to);
    }
    storage::write_atomically(root, STORE_CHECKPOINT_FILE, &checkpoint.encode())
}

/// Lowers the claim of the checkpoint in `root`, read as `read`, to `dispatched_up_to` in place:
/// the file overwritten with the same number of bytes and fdatasynced, so it needs no new block
/// (the way to lower it on a full disk). The summaries are kept; each index file's record keeps
/// its place with no entries counted, which no check reads (the index is being rebuilt or
/// recovered from here). Not atomic: a torn write fails the CRC and reads as no checkpoint (a
/// redispatch from the log's start, without the queues' floors). `Error::Io` if the file is not
/// the length `read` encodes to.
pub(crate) fn lower_in_place(root: &Path, read: &Checkpoint, dispatched_up_to: u64) -> Result<()> {
    let lowered = Checkpoint {
        dispatched_up_to,
        index_files: read.index_files.iter().map(|f| IndexFileSummary { index_count: 0, ..*f }).collect(),
        ..read.clone()
    };
    let bytes = if lowered.summarised { lowered.encode() } else { VERSION_1.encode(dispatched_up_to).to_vec() };
    let path = root.join(STORE_CHECKPOINT_FILE);
    crate::failpoint::error_point!("lower_store_checkpoint", &path);
    let len = storage::file_len(&path)?;
    if len != bytes.len() as u64 {
        let reason = format!("{len} bytes on disk, the lowered checkpoint has {}", bytes.len());
        return Err(crate::error::Error::io("overwrite", &path)(std::io::Error::other(reason)));
    }
    storage::overwrite(&path, 0, &bytes)
}

/// Creates `abort` durably; returns whether it was already there (the last run did not close).
pub(crate) fn mark_open(root: &Path) -> Result<bool> {
    let existed = storage::read_if_exists(&root.join(STORE_ABORT_FILE))?.is_some();
    if !existed {
        storage::write_atomically(root, STORE_ABORT_FILE, b"")?;
    }
    Ok(existed)
}

/// Removes `abort` durably (the last step of a clean close).
pub(crate) fn mark_closed(root: &Path) -> Result<()> {
    if storage::remove_if_exists(&root.join(STORE_ABORT_FILE))? {
        storage::sync_dir(root)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            summarised: true,
            dispatched_up_to: 12_345,
            queues: vec![
                QueueSummary {
                    topic: "orders".into(),
                    queue_id: 0,
                    min_queue_offset: 2,
                    first_log_offset: Some(300),
                    next_queue_offset: 7,
                    last_log_offset: Some(900),
                },
                QueueSummary {
                    topic: "payments".into(),
                    queue_id: 3,
                    min_queue_offset: 0,
                    first_log_offset: None,
                    next_queue_offset: 0,
                    last_log_offset: None,
                },
            ],
            index_files: vec![IndexFileSummary { begin_log_offset: 0, index_count: 9, end_log_offset: 12_000 }],
        }
    }

    #[test]
    fn the_checkpoint_round_trips_and_damage_means_start_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()).expect("missing"), Checkpoint::default());
        write(dir.path(), &sample()).expect("write");
        assert_eq!(read(dir.path()).expect("read"), sample());
        let path = dir.path().join(STORE_CHECKPOINT_FILE);
        let bytes = std::fs::read(&path).expect("bytes");
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(Checkpoint::decode(&bad).is_err(), "a flip at {i} is caught");
        }
        for len in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..len]).is_err(), "a cut at {len} is caught");
        }
        let mut damaged = bytes;
        damaged[6] ^= 1;
        std::fs::write(&path, &damaged).expect("damage");
        assert_eq!(
            read(dir.path()).expect("damaged"),
            Checkpoint::default(),
            "a damaged checkpoint costs work, not data"
        );
    }

    #[test]
    fn a_summary_with_a_bad_topic_or_offsets_is_damage_even_with_a_good_crc() {
        for (topic, min, next) in [("a/b", 0, 1), ("", 0, 1), ("t", 5, 4), ("t", 0, u64::MAX)] {
            let mut bad = sample();
            bad.queues[0] = QueueSummary {
                topic: topic.into(),
                min_queue_offset: min,
                next_queue_offset: next,
                ..bad.queues[0].clone()
            };
            assert!(Checkpoint::decode(&bad.encode()).is_err(), "{topic:?} [{min}, {next})");
        }
    }

    #[test]
    fn a_version_1_checkpoint_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        VERSION_1.write(dir.path(), 777).expect("write");
        assert_eq!(read(dir.path()).expect("read"), Checkpoint { dispatched_up_to: 777, ..Checkpoint::default() });
    }

    #[test]
    fn abort_tells_an_unclean_last_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!mark_open(dir.path()).expect("first open"));
        assert!(mark_open(dir.path()).expect("no close in between"), "the last run did not close");
        mark_closed(dir.path()).expect("close");
        assert!(!mark_open(dir.path()).expect("after a clean close"));
    }
}
