//! A consume queue read by a process that does not own it: [`ReadOnlyQueue`], for
//! `MessageStore::open_read_only` (docs/DESIGN.md §11, "Inspecting a live store"). It takes no
//! lock of the store's and changes no file (nothing created, cut or deleted); files are read with
//! `pread`, never mapped (their owner may delete them), and each only while its name stands for
//! the file listed. The owner may be appending in another process meanwhile, and its publication
//! of an entry (`MappedFile`'s length) is not seen here: where the queue ends is found from the
//! bytes, as an open finds it (the first all-zero slot of the last file, `file::count_entries`),
//! and found again at each [`ReadOnlyQueue::refresh`].
//!
//! What a reader beside a live appender can see, and how it reads it:
//! - The owner stores its entries through a writable map of the file (with `pwrite` where it
//!   cannot: see `MappedFile::with_mapped_appends`), in queue order; the bytes of one entry may
//!   land in any order (a `memcpy`). Once a slot is seen non-zero, every entry before it is whole
//!   (stores become visible in program order on x86-64, where this is tested), and a later read
//!   sees it whole: of the
//!   entries a refresh found, only the last (the tail) may be partly written. Reads come after the
//!   refresh that found the end, so below the tail they read whole entries.
//! - A tail entry breaking an entry rule (`Entry::check`: size 0, a log offset not above the one
//!   before it) is a write in progress, or what the next open cuts: the queue ends before it. A
//!   tail entry that keeps the rules may still be partly written (a tag hash half copied): the
//!   caller checks it against its message before trusting it (`store/read_only/get.rs`).
//! - A broken entry below the tail is damage: `Error::Corrupt`, as the owner's checked reads say.
//! - Files that do not continue the queue (a roll's new file not yet allocated, or files a crash
//!   left for the next open to delete) end the list: they hold no entry of the queue.
//! - A file retention removed since it was listed fails its read as not found: the files are
//!   listed again and the read retried.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::file::{QueueFile, count_entries};
use super::layout::{ENTRY_LEN, Entry, first_bad_entry, parse_file_name};
use crate::error::{Error, Result};
use crate::storage::{self, FileId, MappedFile};

/// How many times a read lists the files again when one it listed is gone.
const READ_ATTEMPTS: usize = 8;

/// One queue of a store opened read-only (see the module documentation). `Send + Sync`.
#[derive(Debug)]
pub(crate) struct ReadOnlyQueue {
    /// `<consumequeue>/<topic>/<queue_id>`.
    dir: PathBuf,
    /// The files as last listed, and where their entries ended then. Replaced whole by a refresh;
    /// readers take a copy of the `Arc`.
    view: RwLock<Arc<View>>,
}

/// The files of a queue as listed once, and where their entries ended.
#[derive(Debug, Default)]
struct View {
    /// Contiguous, each beginning where the one before it ends.
    files: Vec<Arc<QueueFile>>,
    /// The queue offset of the first all-zero slot of the last file (0 without files).
    end: u64,
}

impl View {
    fn min(&self) -> u64 {
        self.files.first().map_or(self.end, |file| file.first)
    }

    /// The file whose slots hold `queue_offset`.
    fn file_for(&self, queue_offset: u64) -> Option<&Arc<QueueFile>> {
        let i = self.files.partition_point(|f| f.first <= queue_offset).checked_sub(1)?;
        self.files.get(i).filter(|f| queue_offset < f.end())
    }
}

/// Entries read from a queue, and where it ends as the read saw it.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// The entries with their queue offsets, in order.
    pub(crate) entries: Vec<(u64, Entry)>,
    /// The queue's end: past the last entry of the view read, or at its tail if the tail breaks
    /// an entry rule. An entry at `end - 1` is the tail, possibly partly written.
    pub(crate) end: u64,
}

impl ReadOnlyQueue {
    /// The queue of `topic` and `queue_id` under `dir` (a store's `consumequeue/`), its files
    /// listed and its end found. A queue without a directory is empty.
    pub(crate) fn open(dir: &Path, topic: &str, queue_id: u32) -> Result<ReadOnlyQueue> {
        debug_assert!(!topic.is_empty() && !topic.contains(['/', '\\', '\0']) && topic != "..", "{topic:?}");
        let queue = ReadOnlyQueue { dir: dir.join(topic).join(queue_id.to_string()), view: RwLock::default() };
        queue.refresh()?;
        Ok(queue)
    }

    /// `[min, end)` as the last refresh found them.
    pub(crate) fn bounds(&self) -> (u64, u64) {
        let view = self.view.read();
        (view.min(), view.end)
    }

    /// Lists the files again and finds where the entries end now; returns `[min, end)`.
    pub(crate) fn refresh(&self) -> Result<(u64, u64)> {
        let view = retrying(|| {
            let files = list(&self.dir)?;
            let end = match files.last() {
                Some(last) => last.first + count_entries(&last.file, last.capacity)?,
                None => 0,
            };
            Ok(View { files, end })
        })?;
        let bounds = (view.min(), view.end);
        *self.view.write() = Arc::new(view);
        Ok(bounds)
    }

    /// Up to `max_count` entries from `from` (from the first if `from` is below it) to the end the
    /// last refresh found, with their queue offsets; fewer at the end. Checked as the owner's
    /// reads check them, but a tail breaking a rule ends the run instead (see the module
    /// documentation).
    pub(crate) fn entries(&self, from: u64, max_count: usize) -> Result<Run> {
        let mut attempts = 0;
        loop {
            let view = Arc::clone(&self.view.read());
            match read_entries(&view, from, max_count) {
                Err(error) if gone(&error) && attempts < READ_ATTEMPTS => {
                    attempts += 1;
                    self.refresh()?;
                }
                other => return other,
            }
        }
    }

    /// The first queue offset in `[min, end)` whose entry's log offset is at least `log_offset`,
    /// or `end` if there is none: the owner's `ConsumeQueue::queue_offset_for_log_offset`, on
    /// these files. A binary search, one entry read per step; an unreadable or zero entry counts
    /// as not below.
    pub(crate) fn queue_offset_for_log_offset(&self, log_offset: u64) -> Result<u64> {
        let bounds = self.refresh()?;
        self.search(log_offset, bounds)
    }

    /// [`ReadOnlyQueue::queue_offset_for_log_offset`] within `[min, end)` as last refreshed.
    pub(crate) fn search(&self, log_offset: u64, (min, end): (u64, u64)) -> Result<u64> {
        let (mut low, mut high) = (min, end);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.entries(middle, 1)?.entries.first() {
                Some(&(at, entry)) if at == middle && !entry.is_zero() && entry.log_offset < log_offset => {
                    low = middle + 1;
                }
                _ => high = middle,
            }
        }
        Ok(low.clamp(min, end.max(min)))
    }
}

/// Reads entries of `view` (see [`ReadOnlyQueue::entries`]).
fn read_entries(view: &View, from: u64, max_count: usize) -> Result<Run> {
    let mut run = Run { entries: Vec::new(), end: view.end };
    let mut queue_offset = from.max(view.min());
    while run.entries.len() < max_count && queue_offset < view.end {
        let Some(file) = view.file_for(queue_offset) else { break };
        let count = (max_count - run.entries.len()) as u64;
        let count = count.min(view.end - queue_offset).min(file.end() - queue_offset);
        let Some(entries) = file.read(queue_offset, count)? else { break };
        if let Some((at, reason)) = first_bad_entry(queue_offset, None, &entries, None) {
            if at + 1 != view.end {
                return Err(Error::corrupt(file.path(), file.position(at), reason));
            }
            // The tail, being written (or torn by a crash: the next open cuts it).
            tracing::debug!(queue_offset = at, %reason, file = %file.path().display(), "a queue's tail entry is not whole yet");
            run.end = at;
        }
        let kept = entries.into_iter().zip(queue_offset..run.end.max(queue_offset));
        run.entries.extend(kept.map(|(entry, at)| (at, entry)));
        queue_offset += count;
    }
    Ok(run)
}

/// The `.cq` files of a queue's directory that form one queue from its first (none if the
/// directory does not exist), each read through its name only while the name stands for the file
/// listed. Other names are not read.
fn list(dir: &Path) -> Result<Vec<Arc<QueueFile>>> {
    let names = match storage::list_dir(dir) {
        Ok(names) => names,
        Err(error) if gone(&error) => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut found: Vec<(u64, PathBuf)> =
        names.iter().filter_map(|name| Some((parse_file_name(name)?, dir.join(name)))).collect();
    found.sort_by_key(|(first, _)| *first);
    let mut files: Vec<Arc<QueueFile>> = Vec::with_capacity(found.len());
    for (first, path) in found {
        let meta = storage::stat(&path)?;
        let capacity = meta.len() / ENTRY_LEN;
        let continues = files.last().is_none_or(|f| f.end() == first);
        if capacity == 0 || first.checked_add(capacity).is_none() || !continues {
            // A roll's new file not yet allocated, or what a crash left for the next open.
            tracing::debug!(file = %path.display(), "does not continue the queue; not read");
            break;
        }
        let file = MappedFile::open_viewed(&path, capacity * ENTRY_LEN, Some(FileId::of(&meta)));
        files.push(Arc::new(QueueFile { first, capacity, file }));
    }
    Ok(files)
}

/// Runs `f` again while it fails because a file it listed is gone (retention), a few times.
fn retrying<T>(mut f: impl FnMut() -> Result<T>) -> Result<T> {
    let mut attempts = 0;
    loop {
        match f() {
            Err(error) if gone(&error) && attempts < READ_ATTEMPTS => attempts += 1,
            other => return other,
        }
    }
}

/// Whether `error` is a file or directory not found: removed (or replaced) since it was listed.
fn gone(error: &Error) -> bool {
    matches!(error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::ReadPath;
    use crate::store::consume_queue::ConsumeQueue;

    fn queue_with(dir: &Path, log_offsets: std::ops::Range<u64>) -> ConsumeQueue {
        let queue = ConsumeQueue::open(dir, "t", 0, 4, ReadPath::Mmap).unwrap();
        for (queue_offset, log_offset) in log_offsets.enumerate() {
            queue.append(queue_offset as u64, log_offset * 10, 7, 0).unwrap();
        }
        queue.flush().unwrap();
        queue
    }

    #[test]
    fn reads_what_the_owner_appended_and_sees_more_after_a_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let owner = queue_with(dir.path(), 0..6);
        let reader = ReadOnlyQueue::open(dir.path(), "t", 0).unwrap();
        assert_eq!(reader.bounds(), (0, 6));
        let run = reader.entries(0, 100).unwrap();
        let log_offsets: Vec<u64> = run.entries.iter().map(|(_, e)| e.log_offset).collect();
        assert_eq!(log_offsets, [0, 10, 20, 30, 40, 50], "across two files");
        assert_eq!(run.end, 6);
        for queue_offset in 6..9 {
            owner.append(queue_offset, queue_offset * 10, 7, 0).unwrap();
        }
        assert_eq!(reader.bounds(), (0, 6), "the view is the last refresh's");
        assert_eq!(reader.refresh().unwrap(), (0, 9), "a third file, listed again");
        assert_eq!(reader.entries(7, 100).unwrap().entries.len(), 2);
        assert_eq!(reader.queue_offset_for_log_offset(35).unwrap(), 4);
        assert_eq!(reader.queue_offset_for_log_offset(1_000).unwrap(), 9);
    }

    #[test]
    fn a_tail_that_breaks_a_rule_ends_the_queue_and_below_it_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        drop(queue_with(dir.path(), 0..3));
        let path = dir.path().join("t/0/00000000000000000000.cq");
        let before = std::fs::read(&path).unwrap();
        // The tail half written: its log offset there, its size not yet.
        let mut torn = before.clone();
        torn[2 * CQ + 8..3 * CQ].fill(0);
        std::fs::write(&path, &torn).unwrap();
        let reader = ReadOnlyQueue::open(dir.path(), "t", 0).unwrap();
        let run = reader.entries(0, 10).unwrap();
        assert_eq!((run.entries.len(), run.end), (2, 2), "a partly written tail is the end, not an error");
        // The same bytes below the tail are damage.
        torn[3 * CQ..4 * CQ].copy_from_slice(&before[..CQ]);
        torn[3 * CQ..3 * CQ + 8].copy_from_slice(&99u64.to_be_bytes());
        std::fs::write(&path, &torn).unwrap();
        reader.refresh().unwrap();
        assert!(matches!(reader.entries(0, 10), Err(Error::Corrupt { .. })));
        assert_eq!(std::fs::read(&path).unwrap(), torn, "nothing was changed");
    }

    #[test]
    fn files_that_do_not_continue_the_queue_are_not_read_nor_deleted() {
        let dir = tempfile::tempdir().unwrap();
        drop(queue_with(dir.path(), 0..5));
        let stray = dir.path().join("t/0/00000000000000000100.cq");
        std::fs::write(&stray, [1u8; 40]).unwrap();
        let reader = ReadOnlyQueue::open(dir.path(), "t", 0).unwrap();
        assert_eq!(reader.bounds(), (0, 5));
        assert!(stray.exists());
        let missing = ReadOnlyQueue::open(dir.path(), "t", 9).unwrap();
        assert_eq!(missing.bounds(), (0, 0), "a queue without a directory is empty");
    }

    const CQ: usize = ENTRY_LEN as usize;
}
