//! [`IndexFiles`], the index files of a store (`<root>/index/`): RocketMQ's `IndexService`. Puts
//! go into the newest file, rolling to a new one when it is full; queries merge the files newest
//! first; retention deletes whole files below the log's start. Its recovery is in `recover.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::format::{INDEX_FILE_SUFFIX, file_name, parse_file_name};
use crate::storage;
use crate::storage::map_budget::MapBudget;
use crate::store::checkpoint::IndexFileSummary;
use crate::store::index::file::{IndexFile, IndexPut};
use crate::store::index::layout::check_sizes;

/// The index files of a store (`<root>/index/`), oldest first, the last one active: RocketMQ's
/// `IndexService`. See the module docs of `store::index`. The fields `recover.rs` needs are
/// `pub(super)`: recovery is an `impl IndexFiles` block of its own there.
#[derive(Debug)]
pub(crate) struct IndexFiles {
    pub(super) dir: PathBuf,
    /// Slots and entries of the files this set creates (existing files keep their own).
    slot_count: u32,
    entry_count: u32,
    /// The map budget its files are under (`StoreConfig::log.map_budget`).
    pub(super) budget: Option<MapBudget>,
    /// The writer's state: held by puts, rolls and recovery.
    pub(super) writer: Mutex<Writer>,
    /// Sorted by begin log offset; changed by a roll (push), retention (a prefix) and recovery.
    pub(super) files: RwLock<Vec<Arc<IndexFile>>>,
}

#[derive(Debug)]
pub(super) struct Writer {
    /// The largest log offset indexed, in any file or among the puts taken.
    pub(super) end_log_offset: Option<u64>,
    /// Puts taken but not yet in a file, oldest first: they go in together (one hold of the
    /// file's lock, their slots' cache misses overlapping), when `PUTS_TAKEN_AHEAD` are waiting,
    /// when the next would not fit in the file, and before anything reads the files (a query, a
    /// flush).
    pub(super) taken: Vec<IndexPut>,
    /// The newest file (the one puts go into), as of the last put into the files.
    pub(super) active: Option<Arc<IndexFile>>,
    /// The last attempt to put the taken puts in failed: every put tries at once (and gets the
    /// error), and queries answer from the taken puts instead of trying again.
    pub(super) failed: bool,
}

/// Puts taken before they go into the files together. A put then costs the index about half
/// of what going in one at a time did (measured on the store's put: the index's share of a put's
/// profile went from 16 % to 8 %, half of that the first touch of the slot table's pages); a
/// query after a put waits for at most this many to go in first.
const PUTS_TAKEN_AHEAD: usize = 64;

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<IndexFiles>();
};

impl IndexFiles {
    /// Opens `dir` (created if missing), loading every `<20 digits>.idx` in it: the newest as the
    /// active file, the others sealed (headers read now, mapped at their first query). New files
    /// get `slots` slots and room for `entries` entries. A file failing its header check is
    /// `Error::Corrupt` naming it: the index is derived, so the caller [`IndexFiles::discard`]s it
    /// and dispatches the commit log into an empty set again. After an unclean shutdown, call
    /// [`IndexFiles::recover`] before the first put.
    #[cfg(test)]
    pub(crate) fn open(dir: &Path, slots: u32, entries: u32) -> Result<IndexFiles> {
        IndexFiles::open_budgeted(dir, slots, entries, None)
    }

    /// [`IndexFiles::open`] with its files under `budget`.
    pub(crate) fn open_budgeted(dir: &Path, slots: u32, entries: u32, budget: Option<MapBudget>) -> Result<IndexFiles> {
        check_sizes(slots, entries)?;
        storage::prepare_dir(dir)?;
        let bases = list_bases(dir)?;
        let mut files = Vec::with_capacity(bases.len());
        for (i, &base) in bases.iter().enumerate() {
            let path = dir.join(file_name(base, INDEX_FILE_SUFFIX));
            let newest = i + 1 == bases.len();
            let file = if newest { IndexFile::open(&path)? } else { IndexFile::open_sealed(&path)? };
            files.push(Arc::new(file.under(budget.as_ref())?));
        }
        let end_log_offset = last_end(&files);
        Ok(IndexFiles {
            dir: dir.to_path_buf(),
            slot_count: slots,
            entry_count: entries,
            budget,
            writer: Mutex::new(Writer {
                end_log_offset,
                taken: Vec::with_capacity(PUTS_TAKEN_AHEAD),
                active: files.last().cloned(),
                failed: false,
            }),
            files: RwLock::new(files),
        })
    }

    /// Deletes every index file in `dir` (the directory fsynced), for a rebuild: after a file
    /// failed its check, or when the caller wants the index built again. Returns how many went. The
    /// caller opens the empty set and dispatches the commit log from its start into it.
    pub(crate) fn discard(dir: &Path) -> Result<usize> {
        let bases = match list_bases(dir) {
            Ok(bases) => bases,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(error),
        };
        for &base in &bases {
            storage::remove_if_exists(&dir.join(file_name(base, INDEX_FILE_SUFFIX)))?;
        }
        if !bases.is_empty() {
            storage::sync_dir(dir)?;
            tracing::warn!(dir = %dir.display(), files = bases.len(), "index files discarded: the index is rebuilt from the commit log");
        }
        Ok(bases.len())
    }

    /// The directory.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many files there are.
    pub(crate) fn file_count(&self) -> usize {
        self.files.read().len()
    }

    /// The largest log offset indexed (`None`: nothing is). Dispatch into the set resumes after it.
    pub(crate) fn end_log_offset(&self) -> Option<u64> {
        self.writer.lock().end_log_offset
    }

    /// Indexes the message at `log_offset` under `key_hash` in the newest file, rolling to a new
    /// file (`<log_offset>.idx`) when it is full. Idempotent, as dispatch must be: a message below
    /// the largest offset indexed is skipped (`false`: a redispatch after recovery, already
    /// indexed), and so is a key of the last message indexed that its file already holds (the keys
    /// of one message are separate puts: a crash between them leaves some to do). A message with
    /// more keys than a file holds entries is `Error::InvalidConfig` (its file would need its own
    /// name twice).
    ///
    /// The put is taken ahead (`Writer::taken`) and goes into the file with up to
    /// `PUTS_TAKEN_AHEAD - 1` others, before any query or flush reads the files; it goes in at once
    /// when the file has no room for it (it needs a new file), when it is a message's later key,
    /// and after a failure — so the put that needs a roll gets the roll's error (and its put is
    /// dropped), and while a file is poisoned every put gets that error.
    pub(crate) fn put(&self, key_hash: u32, log_offset: u64, timestamp_ms: i64) -> Result<bool> {
        let mut writer = self.writer.lock();
        if writer.end_log_offset.is_some_and(|end| log_offset < end) {
            return Ok(false);
        }
        let same_message = writer.end_log_offset == Some(log_offset);
        if same_message {
            // Another key of the last message, or a message again after a restart: whether the
            // files hold it is asked of them, with every put taken before it in.
            self.put_taken(&mut writer)?;
            let active = self.files.read().last().cloned();
            if self.held(active.as_deref(), key_hash, log_offset)? {
                return Ok(false);
            }
        }
        let put = IndexPut { key_hash, log_offset, timestamp_ms };
        let before = writer.end_log_offset.replace(log_offset);
        writer.taken.push(put);
        // A message's later keys go in at once, so that one with more keys than a file holds is
        // refused by its own put.
        // So does one that needs a new file (or finds the file poisoned, or follows a failure):
        // its own failure is its own, as when every put went in at once.
        let room = writer.active.as_ref().map_or(0, |file| file.room());
        let due = same_message || writer.failed || writer.taken.len() > room || writer.taken.len() >= PUTS_TAKEN_AHEAD;
        if due && let Err(error) = self.put_taken(&mut writer) {
            // A failed put changes nothing: its own put goes (those taken before it stay, for
            // the next try; queries answer them from memory meanwhile, and the checkpoint stops
            // below them).
            if writer.taken.last() == Some(&put) {
                writer.taken.pop();
                writer.end_log_offset = before;
            }
            return Err(error);
        }
        Ok(true)
    }

    /// Puts the taken puts into the files, oldest first, rolling to a new file whenever one is
    /// full. Those that went in are dropped from `taken` even if a later one fails (it stays, and
    /// so does every one after it, for the next try).
    fn put_taken(&self, writer: &mut Writer) -> Result<()> {
        let mut done = 0;
        let result = loop {
            let Some(rest) = writer.taken.get(done..).filter(|rest| !rest.is_empty()) else { break Ok(()) };
            let active = self.files.read().last().cloned();
            let (taken, result) = match &active {
                Some(file) if !file.is_sealed() => file.put_many(rest),
                _ => (0, Ok(())),
            };
            done += taken;
            if let Err(error) = result {
                break Err(error);
            }
            if taken < rest.len() {
                // Full (or none yet): the next put starts a new file.
                let first = rest[taken];
                if let Err(error) = self.roll(active.as_deref(), first.log_offset, first.timestamp_ms) {
                    break Err(error);
                }
            }
        };
        writer.taken.drain(..done);
        writer.active = self.files.read().last().cloned();
        writer.failed = result.is_err();
        result
    }

    /// Puts every taken put into the files ([`IndexFiles::put`] takes them ahead): before
    /// anything reads the files.
    pub(crate) fn catch_up(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        if writer.taken.is_empty() {
            return Ok(());
        }
        self.put_taken(&mut writer)
    }

    /// Whether the files the last message indexed went into hold (`key_hash`, `log_offset`): the
    /// active one, and the one before if the message's keys rolled into it.
    fn held(&self, active: Option<&IndexFile>, key_hash: u32, log_offset: u64) -> Result<bool> {
        let Some(active) = active else { return Ok(false) };
        if active.holds(key_hash, log_offset)? {
            return Ok(true);
        }
        if active.begin_log_offset() < log_offset {
            return Ok(false);
        }
        let files = self.files.read();
        let previous = files.len().checked_sub(2).map(|i| Arc::clone(&files[i]));
        drop(files);
        previous.map_or(Ok(false), |file| file.holds(key_hash, log_offset))
    }

    /// Seals `active` (if any) and creates the next file for a put at `log_offset`.
    fn roll(&self, active: Option<&IndexFile>, log_offset: u64, timestamp_ms: i64) -> Result<Arc<IndexFile>> {
        if let Some(active) = active {
            if active.begin_log_offset() >= log_offset {
                let reason = format!("a message at log offset {log_offset} has more keys than an index file holds");
                return Err(Error::InvalidConfig { field: "index_entries", reason });
            }
            active.seal()?;
        }
        let created = IndexFile::create(&self.dir, log_offset, timestamp_ms, self.slot_count, self.entry_count)?;
        let path = created.path();
        let file = match created.under(self.budget.as_ref()) {
            Ok(file) => Arc::new(file),
            Err(error) => {
                let _ = storage::remove_if_exists(&path);
                return Err(error);
            }
        };
        self.files.write().push(Arc::clone(&file));
        tracing::debug!(file = %file.path().display(), "new index file");
        Ok(file)
    }

    /// The log offsets indexed under `key_hash` whose time may be in `[begin_ms, end_ms]` (whole
    /// seconds: see the module docs of `store::index`), in ascending order, each once: the newest `max` of them.
    /// Files are searched newest first and only those whose time range overlaps. Hashes collide:
    /// the caller re-checks the key (and the exact time) on each message.
    pub(crate) fn query(&self, key_hash: u32, begin_ms: i64, end_ms: i64, max: usize) -> Result<Vec<u64>> {
        let mut writer = self.writer.lock();
        if !writer.taken.is_empty() && !writer.failed {
            // A failure is reported to the puts (dispatch retries) and the checkpoint, not here.
            let _ = self.put_taken(&mut writer);
        }
        let mut found = Vec::new();
        if writer.taken.is_empty() {
            drop(writer);
            self.query_files(key_hash, begin_ms, end_ms, max, &mut found)?;
        } else {
            // Taken puts that cannot go in now (a full disk at a roll, a poisoned file): they are
            // answered from memory, the lock held so that none moves into a file meanwhile.
            for put in writer.taken.iter().rev() {
                let in_range = (begin_ms..=end_ms).contains(&put.timestamp_ms);
                if found.len() < max && put.key_hash == key_hash && in_range && found.last() != Some(&put.log_offset) {
                    found.push(put.log_offset);
                }
            }
            self.query_files(key_hash, begin_ms, end_ms, max, &mut found)?;
        }
        found.reverse();
        Ok(found)
    }

    /// The files' part of [`IndexFiles::query`], newest first, appended to `found`.
    fn query_files(&self, key_hash: u32, begin_ms: i64, end_ms: i64, max: usize, found: &mut Vec<u64>) -> Result<()> {
        let files: Vec<Arc<IndexFile>> =
            self.files.read().iter().rev().filter(|f| f.overlaps(begin_ms, end_ms)).cloned().collect();
        for file in files {
            if found.len() >= max {
                break;
            }
            file.query_into(key_hash, begin_ms, end_ms, max, found)?;
        }
        Ok(())
    }

    /// Makes every put so far durable ([`IndexFile::flush`] of the active file; sealed files were
    /// flushed when sealed). Puts and queries go on meanwhile. Returns what every file holds
    /// durably now, for the store checkpoint's summary.
    #[cfg(test)]
    pub(crate) fn flush(&self) -> Result<Vec<IndexFileSummary>> {
        self.catch_up()?;
        self.flush_files()
    }

    /// [`IndexFiles::flush`] for the store checkpoint: when the taken puts cannot go in (a full
    /// disk at a roll, a poisoned file), the files are flushed all the same and the lowest log
    /// offset among the puts still taken is returned — every message below it is in the files
    /// flushed, and the checkpoint claims no more than that.
    pub(crate) fn flush_for_checkpoint(&self) -> Result<(Vec<IndexFileSummary>, Option<u64>)> {
        let behind = match self.catch_up() {
            Ok(()) => None,
            Err(error) => {
                let Some(first) = self.writer.lock().taken.first().map(|put| put.log_offset) else {
                    return Err(error);
                };
                tracing::warn!(%error, below = first, "index puts taken ahead cannot go in: the checkpoint stops below them");
                Some(first)
            }
        };
        Ok((self.flush_files()?, behind))
    }

    /// Flushes the newest file and summarises them all.
    fn flush_files(&self) -> Result<Vec<IndexFileSummary>> {
        let files: Vec<Arc<IndexFile>> = self.files.read().clone();
        let mut summaries = Vec::with_capacity(files.len());
        for (i, file) in files.iter().enumerate() {
            let header = if i + 1 == files.len() { file.flush()? } else { file.header() };
            summaries.push(IndexFileSummary {
                begin_log_offset: header.begin_log_offset,
                index_count: header.index_count,
                end_log_offset: header.end_log_offset,
            });
        }
        Ok(summaries)
    }

    /// Deletes the files whose every entry is below `log_start_offset` (their `end_log_offset` is),
    /// except the active one. Queries holding one finish without its entries. Returns how many.
    pub(crate) fn delete_files_below(&self, log_start_offset: u64) -> Result<usize> {
        let removed: Vec<Arc<IndexFile>> = {
            let mut files = self.files.write();
            let sealed = files.len().saturating_sub(1);
            let below = files[..sealed].iter().take_while(|f| f.end_log_offset() < log_start_offset).count();
            files.drain(..below).collect()
        };
        for file in &removed {
            delete(file)?;
        }
        if !removed.is_empty() {
            storage::sync_dir(&self.dir)?;
            tracing::info!(dir = %self.dir.display(), files = removed.len(), log_start_offset, "index files below the log start deleted");
        }
        Ok(removed.len())
    }
}

/// The begin offsets of the `.idx` files in `dir`, ascending.
pub(super) fn list_bases(dir: &Path) -> Result<Vec<u64>> {
    let mut bases: Vec<u64> = storage::list_dir(dir)?
        .iter()
        .filter_map(|name| parse_file_name(name))
        .filter(|(_, suffix)| *suffix == INDEX_FILE_SUFFIX)
        .map(|(base, _)| base)
        .collect();
    bases.sort_unstable();
    Ok(bases)
}

/// The largest log offset in `files` (`None` if they are empty).
pub(super) fn last_end(files: &[Arc<IndexFile>]) -> Option<u64> {
    files.iter().rev().find(|f| f.index_count() > 0).map(|f| f.end_log_offset())
}

/// Retires `file` (waiting for its readers) and unlinks it; the caller fsyncs the directory.
pub(super) fn delete(file: &IndexFile) -> Result<()> {
    file.retire();
    storage::remove_if_exists(&file.path()).map(|_| ())
}
