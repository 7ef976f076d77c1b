//! The index read by a process that does not own it: [`ReadOnlyIndex`], for
//! `MessageStore::open_read_only` (docs/DESIGN.md §11, "Inspecting a live store"). No lock, no file
//! changed; the files are listed at each query and read with `pread` (never mapped: their owner
//! deletes them at retention), through the layout's codecs (`layout.rs`).
//!
//! What it sees of a live owner: the owner keeps the active file's slot table and its newest
//! entries in memory and writes them at its flushes (every `flush_interval_ms`, the store's
//! checkpoint): entries first, then the slots, then the header counting them. So a query here
//! finds what the owner's last flush wrote; a message dispatched since is found once the next
//! flush has run. A slot may point past the header's count (the flush between its slots and its
//! header): the entry it points at was written before the slot, so the walk follows it. The
//! newest file's header may be behind its entries: its `end_timestamp` does not bound a query
//! (a sealed file's final header does).
//!
//! A walk takes at most as many steps as the file has entries, each to a lower entry, and stops at
//! an all-zero entry (a slot written but not its entry: never by the owner, so damage) or a link
//! that does not point back: no damaged chain loops. Every candidate is re-checked against its
//! message by the caller, as the owner's queries are, so a torn or damaged entry can only miss
//! a message, never return a wrong one.

use std::path::{Path, PathBuf};

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Error, Result};
use crate::format::{INDEX_FILE_ENTRY_LEN, INDEX_FILE_HEADER_LEN, INDEX_FILE_SLOT_LEN, INDEX_FILE_SUFFIX, file_name};
use crate::storage::MappedFile;
use crate::store::index::files::list_bases;
use crate::store::index::layout::{IndexFileEntry, IndexHeader, entry_position, read_header, slot_of, slot_position};

/// How many times a header that fails its check is read again (the owner may be writing it).
const HEADER_ATTEMPTS: u32 = 3;

/// The index of a store opened read-only (see the module documentation). Holds nothing but its
/// directory: `Send + Sync`.
#[derive(Debug)]
pub(crate) struct ReadOnlyIndex {
    dir: PathBuf,
}

/// One file as a query reads it.
struct Viewed {
    file: MappedFile,
    header: IndexHeader,
    /// Entries the file has room for, entry 0 included.
    capacity: u32,
}

impl ReadOnlyIndex {
    /// The index in `dir` (a store's `index/`; it need not exist).
    pub(crate) fn new(dir: &Path) -> ReadOnlyIndex {
        ReadOnlyIndex { dir: dir.to_path_buf() }
    }

    /// How many index files there are now.
    pub(crate) fn file_count(&self) -> Result<usize> {
        Ok(self.bases()?.len())
    }

    /// The log offsets indexed under `key_hash` whose time may be in `[begin_ms, end_ms]`, in
    /// ascending order, each once: the newest `max` of them, as `IndexFiles::query` gives them
    /// (whole seconds; the caller re-checks key and time on each message).
    pub(crate) fn query(&self, key_hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        let bases = self.bases()?;
        for (i, &base) in bases.iter().enumerate().rev() {
            if found.len() >= max || begin_ms > end_ms {
                break;
            }
            let path = self.dir.join(file_name(base, INDEX_FILE_SUFFIX));
            let newest = i + 1 == bases.len();
            if newest && header_not_written(&path)? {
                // Created at full size, its header not written yet (or a crash in between, which
                // the owner's next open removes): no entry to find.
                continue;
            }
            let Some(viewed) = view(&path)? else { continue };
            let h = &viewed.header;
            // A sealed file's header is final; the newest one's may be behind its entries.
            if h.begin_timestamp_ms > end_ms || (!newest && (h.index_count == 0 || h.end_timestamp_ms < begin_ms)) {
                continue;
            }
            match viewed.walk(key_hash, (begin_ms, end_ms), max, &mut found) {
                Err(error) if gone(&error) => continue, // deleted by retention meanwhile
                other => other?,
            }
        }
        found.reverse();
        Ok(found)
    }

    /// The begin offsets of the `.idx` files, ascending (none without a directory).
    fn bases(&self) -> Result<Vec<u64>> {
        match list_bases(&self.dir) {
            Err(error) if gone(&error) => Ok(Vec::new()),
            listed => listed,
        }
    }
}

/// Whether the file's header is all zeros: a file `IndexFile::create` made at full size and has
/// not written the header of yet. Gone counts as not.
fn header_not_written(path: &Path) -> Result<bool> {
    use std::os::unix::fs::FileExt as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(Error::io("open an index file", path)(error)),
    };
    let mut header = [0u8; INDEX_FILE_HEADER_LEN];
    match file.read_exact_at(&mut header, 0) {
        Ok(()) => Ok(header.iter().all(|&b| b == 0)),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(error) => Err(Error::io("read an index file's header", path)(error)),
    }
}

/// The file at `path` with its header checked (read again a few times while it fails: the owner
/// may be writing it); `None` if it is gone.
fn view(path: &Path) -> Result<Option<Viewed>> {
    let mut attempt = 0;
    loop {
        match read_header(path) {
            Ok((header, file_len, capacity)) => {
                let file = MappedFile::open_viewed(path, file_len, None);
                return Ok(Some(Viewed { file, header, capacity }));
            }
            Err(error) if gone(&error) => return Ok(None),
            Err(error @ Error::Corrupt { .. }) if attempt + 1 < HEADER_ATTEMPTS => {
                attempt += 1;
                tracing::debug!(%error, "an index file's header fails its check; reading it again");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(error) => return Err(error),
        }
    }
}

impl Viewed {
    /// Walks the chain of `key_hash`'s slot (see the module documentation), pushing what matches
    /// onto `found`, newest first, until it holds `max`; an offset equal to `found`'s last is not
    /// pushed again.
    fn walk(&self, key_hash: u32, (begin_ms, end_ms): (i64, i64), max: usize, found: &mut Vec<u64>) -> Result<()> {
        let slot = slot_of(key_hash, self.header.slot_count);
        let Some(mut n) = self.file.read_with(slot_position(slot.into()), INDEX_FILE_SLOT_LEN, BigEndian::read_u32)?
        else {
            return Ok(());
        };
        let mut steps = 0;
        while n != 0 && n < self.capacity && steps < self.capacity && found.len() < max {
            steps += 1;
            let position = entry_position(self.header.slot_count, n.into());
            let Some(entry) = self.file.read_with(position, INDEX_FILE_ENTRY_LEN, IndexFileEntry::decode)? else {
                return Ok(());
            };
            if entry.is_zero() {
                break;
            }
            let from_ms = self.header.begin_timestamp_ms.saturating_add(i64::from(entry.time_diff_s) * 1000);
            if from_ms.saturating_add(999) < begin_ms {
                break; // every older entry is older still
            }
            if entry.key_hash == key_hash && from_ms <= end_ms && found.last() != Some(&entry.log_offset) {
                found.push(entry.log_offset);
            }
            if entry.prev_entry >= n {
                break; // a chain only points back
            }
            n = entry.prev_entry;
        }
        Ok(())
    }
}

/// Whether `error` is a file or directory not found: removed since it was listed.
fn gone(error: &Error) -> bool {
    matches!(error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::index::{IndexFiles, key_hash};

    #[test]
    fn finds_what_the_owner_flushed_and_more_after_its_next_flush() {
        let dir = tempfile::tempdir().unwrap();
        let owner = IndexFiles::open(dir.path(), 8, 4).unwrap();
        let (a, b) = (key_hash("t", "a"), key_hash("t", "b"));
        for (log_offset, key) in [(10, a), (11, b), (12, a), (13, a), (14, b)] {
            owner.put(key, log_offset, 1_000).unwrap();
        }
        owner.catch_up().unwrap();
        // Entries 10–12 are in a sealed file (3 entries each), 13–14 in the active one, unflushed.
        let reader = ReadOnlyIndex::new(dir.path());
        assert_eq!(reader.file_count().unwrap(), 2);
        assert_eq!(reader.query(a, 0, i64::MAX, 10).unwrap(), [10, 12], "the active file's slots are not written");
        owner.flush().unwrap();
        assert_eq!(reader.query(a, 0, i64::MAX, 10).unwrap(), [10, 12, 13]);
        assert_eq!(reader.query(a, 0, i64::MAX, 1).unwrap(), [13], "the newest");
        assert_eq!(reader.query(b, 0, i64::MAX, 10).unwrap(), [11, 14]);
        assert!(reader.query(a, 5_000, i64::MAX, 10).unwrap().is_empty(), "out of the time range");
        let missing = ReadOnlyIndex::new(&dir.path().join("none"));
        assert!(missing.query(a, 0, i64::MAX, 10).unwrap().is_empty());
    }

    #[test]
    fn a_header_count_behind_the_entries_is_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let owner = IndexFiles::open(dir.path(), 8, 16).unwrap();
        let a = key_hash("t", "a");
        for log_offset in 0..5 {
            owner.put(a, log_offset, 1_000).unwrap();
        }
        owner.flush().unwrap();
        drop(owner);
        // The header as an earlier flush left it: it counts 2 of the 5 entries.
        let path = dir.path().join(file_name(0, INDEX_FILE_SUFFIX));
        let mut bytes = std::fs::read(&path).unwrap();
        BigEndian::write_u32(&mut bytes[crate::format::INDEX_FILE_INDEX_COUNT_POS..], 2);
        std::fs::write(&path, &bytes).unwrap();
        let reader = ReadOnlyIndex::new(dir.path());
        assert_eq!(reader.query(a, 0, i64::MAX, 10).unwrap(), [0, 1, 2, 3, 4]);
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing was changed");
    }
}
