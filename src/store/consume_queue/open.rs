//! Opening a queue: its directory listed ([`list_files`]), the files that do not continue the
//! queue deleted ([`contiguous`]), the rest loaded: sealed files trusted whole, the active file's
//! end found by a binary search. Nothing is synced and no entry is checked: after an unclean
//! shutdown the store calls `recover` (`recover.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use super::file::{CQ_ADVICE, QueueFile, count_entries};
use super::layout::{ENTRY_LEN, parse_file_name};
use super::{ConsumeQueue, FlushedUpTo, Writer};
use crate::config::ReadPath;
use crate::error::{Error, Result};
use crate::storage::map_budget::MapBudget;
use crate::storage::{self, MappedFile};

/// A file found in a queue's directory.
#[derive(Debug)]
struct Listed {
    first: u64,
    path: PathBuf,
    len: u64,
}

impl Listed {
    /// Whole entry slots in the file.
    fn capacity(&self) -> u64 {
        self.len / ENTRY_LEN
    }
}

impl ConsumeQueue {
    /// Opens the queue of `topic` and `queue_id` under `dir` (the store's `consumequeue/`),
    /// loading its files; a queue without a directory is empty (its directory is created with
    /// its first file). New files get `entries_per_file` entries. Files whose name is not a
    /// queue file's are ignored (logged); files that cannot belong to the queue (empty, or after a
    /// gap in the queue offsets) are deleted (logged). Entries are trusted as found: after an
    /// unclean shutdown, call [`ConsumeQueue::recover`].
    #[cfg(test)]
    pub(crate) fn open(
        dir: &Path,
        topic: &str,
        queue_id: u32,
        entries_per_file: u64,
        reads: ReadPath,
    ) -> Result<ConsumeQueue> {
        ConsumeQueue::open_budgeted(dir, topic, queue_id, entries_per_file, reads, None)
    }

    /// [`ConsumeQueue::open`] with its files under `budget`: sealed files' maps are charged and
    /// reclaimable, the active file counts against `max_open_files`.
    pub(crate) fn open_budgeted(
        dir: &Path,
        topic: &str,
        queue_id: u32,
        entries_per_file: u64,
        reads: ReadPath,
        budget: Option<MapBudget>,
    ) -> Result<ConsumeQueue> {
        assert!(is_plain_name(topic), "topic {topic:?} reached the consume queue unvalidated");
        assert!(entries_per_file > 0, "a consume-queue file holds at least one entry");
        let dir = dir.join(topic).join(queue_id.to_string());
        let listed = contiguous(&dir, list_files(&dir)?)?;
        let queue = ConsumeQueue {
            dir,
            entries_per_file,
            reads,
            budget,
            writer: Mutex::new(Writer { last_log_offset: None, dirty_end: 0, flushed: FlushedUpTo::default() }),
            files: RwLock::new(Vec::new()),
            min: AtomicU64::new(0),
            max: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            first_seen: Mutex::new(None),
        };
        if let Some((last, sealed)) = listed.split_last() {
            queue.load(sealed, last)?;
        }
        Ok(queue)
    }

    /// Loads the sealed files (trusted whole, opened at first read) and the active one (its
    /// entries end at its first zero slot). Nothing is read whole and nothing is synced, so an
    /// open costs a few reads per queue however many there are: a crash's damage is found by
    /// `recover`, and what the last process left unsynced by the first `flush`.
    fn load(&self, sealed: &[Listed], last: &Listed) -> Result<()> {
        let mut files: Vec<Arc<QueueFile>> = sealed
            .iter()
            .map(|f| {
                let file = MappedFile::open_sealed(&f.path, f.capacity() * ENTRY_LEN, self.reads);
                let file = file.budgeted(self.budget.as_ref()).expect("a sealed file counts no descriptor");
                Arc::new(QueueFile { first: f.first, capacity: f.capacity(), file })
            })
            .collect();
        // Published whole while nobody else has the queue, to find where its entries end.
        let capacity = last.capacity() * ENTRY_LEN;
        let file = MappedFile::open_writable(&last.path, capacity, capacity, self.reads, CQ_ADVICE)?
            .with_mapped_appends()?
            .budgeted(self.budget.as_ref())?;
        let entries = count_entries(&file, last.capacity())?;
        file.limit_len(entries * ENTRY_LEN);
        files.push(Arc::new(QueueFile { first: last.first, capacity: last.capacity(), file }));
        let (min, max) = (files[0].first, last.first + entries);
        *self.files.write() = files;
        self.max.store(max, Ordering::Release);
        self.min.store(min, Ordering::Release);
        let log_offset_before = |q: u64| -> Result<Option<u64>> {
            Ok(self.stored_entry(q.checked_sub(1).filter(|&q| q >= min))?.map(|e| e.log_offset))
        };
        let mut writer = self.writer.lock();
        writer.last_log_offset = log_offset_before(max)?;
        writer.dirty_end = entries;
        // Sealed files were synced when they were sealed; the active one may hold entries the
        // last process wrote and never synced: the next flush syncs it.
        writer.flushed = FlushedUpTo { queue_offset: last.first, last_log_offset: log_offset_before(last.first)? };
        Ok(())
    }
}

impl ConsumeQueue {
    /// A queue with no file starts its numbering at `queue_offset` (its floor: its messages were
    /// removed by retention and its files lost): its first file is created there, empty, so the
    /// numbering is kept in the queue's own directory as well as in the store checkpoint; it
    /// holds `[queue_offset, queue_offset)` until its next message. No effect on a queue with a
    /// file. Errors are the file's creation's.
    pub(crate) fn start_empty_at(&self, queue_offset: u64) -> Result<()> {
        let mut writer = self.writer.lock();
        self.check_not_poisoned()?;
        if self.files.read().is_empty() {
            self.start_at(&mut writer, queue_offset)?;
        }
        Ok(())
    }
}

/// Whether `name` is one plain path component (the store validates topics; this only keeps a
/// path from leaving the queue's directory).
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The `.cq` files of a queue's directory, ascending by first queue offset (none if it does not
/// exist). Other names are logged and left alone.
fn list_files(dir: &Path) -> Result<Vec<Listed>> {
    let names = match storage::list_dir(dir) {
        Ok(names) => names,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut listed = Vec::new();
    for name in names {
        let path = dir.join(&name);
        match parse_file_name(&name) {
            Some(first) => listed.push(Listed { first, len: storage::file_len(&path)?, path }),
            None => tracing::warn!(file = %path.display(), "not a consume-queue file name; ignored"),
        }
    }
    listed.sort_by_key(|f| f.first);
    Ok(listed)
}

/// The files that form one run of queue offsets, each beginning where the one before it ends
/// (a file's capacity is its length in whole entries). From the first that does not (an empty
/// file, a gap or an overlap) on, files are deleted, logged: they cannot be part of the queue,
/// and a new file may need one of their names.
fn contiguous(dir: &Path, listed: Vec<Listed>) -> Result<Vec<Listed>> {
    let mut kept: Vec<Listed> = Vec::with_capacity(listed.len());
    let mut rest = listed.into_iter();
    let mut dropped = Vec::new();
    for file in rest.by_ref() {
        if file.len % ENTRY_LEN != 0 {
            let ignored = file.len % ENTRY_LEN;
            tracing::warn!(file = %file.path.display(), len = file.len, ignored, "not a whole number of entries: the partial one at the end is ignored");
        }
        let expected = kept.last().map(|f| f.first + f.capacity());
        let problem = if file.capacity() == 0 {
            Some("holds no entry (cut short, or created by a crash)".to_owned())
        } else if file.first.checked_add(file.capacity()).is_none() {
            Some("its queue offsets overflow".to_owned())
        } else {
            expected.filter(|&e| e != file.first).map(|e| format!("the file before it ends at queue offset {e}"))
        };
        if let Some(problem) = problem {
            tracing::warn!(file = %file.path.display(), %problem, "consume-queue file does not continue the queue: it and every later file are deleted");
            dropped.push(file);
            break;
        }
        kept.push(file);
    }
    dropped.extend(rest);
    for file in dropped.iter().rev() {
        storage::remove_if_exists(&file.path)?;
    }
    if !dropped.is_empty() {
        storage::sync_dir(dir)?;
    }
    Ok(kept)
}
