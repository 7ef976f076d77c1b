//! Recovery after an unclean shutdown: of one file ([`IndexFile::recover`]: its entries checked
//! one by one against [`EntryRules`], cut at the first that breaks one, its slots rebuilt) and of
//! the set ([`IndexFiles::recover`]: files past the log's recovered end deleted, the newest one
//! recovered).

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::storage::{self, U32Table};
use crate::store::index::active::ActiveState;
use crate::store::index::file::IndexFile;
use crate::store::index::files::{IndexFiles, delete, last_end};
use crate::store::index::layout::{EntryRules, IndexFileEntry, slot_position};

/// Entries a recovery scan decodes at once.
const SCAN_WINDOW_ENTRIES: u32 = 4096;

/// What recovering one file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileRecovery {
    /// Entries kept (numbered 1 to `kept`).
    pub kept: u32,
    /// Entries the header on disk counted.
    pub counted: u32,
    /// The first entry not kept and why, unless the scan simply reached the unused entries.
    pub cut_at: Option<(u32, &'static str)>,
}

/// What [`IndexFiles::recover`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct IndexRecovery {
    /// Files removed whole: they began at or past the recovered end.
    pub removed: Vec<PathBuf>,
    /// The newest file's recovery, if there is a file.
    pub newest: Option<FileRecovery>,
}

impl IndexFile {
    /// After an unclean shutdown: validates the entries from the first on and keeps them up to the
    /// first that is not valid: a log offset at or past `log_next_offset` (the caller passes the
    /// offset its dispatch restarts from, at most the log's next offset, so everything cut is
    /// dispatched again), a log offset or time below the previous entry's, or a `prev_entry` other
    /// than its slot's latest kept entry. Past the header's count (entries a flush had not
    /// covered), an all-zero entry ends the entries. The slots are rebuilt from the kept entries,
    /// the entries past them zeroed, and the header written, all durably.
    pub(crate) fn recover(&self, log_next_offset: u64) -> Result<FileRecovery> {
        let _flushing = self.flushing.lock();
        self.check_not_poisoned()?;
        let mut active = self.active.write();
        let Some(state) = active.as_mut() else {
            return Err(self.misuse("recover a sealed index file"));
        };
        self.write_pending(state)?;
        let counted = self.index_count.load(Ordering::Relaxed);
        let mut heads = U32Table::zeroed(self.slot_count as usize)?;
        let mut last: Option<IndexFileEntry> = None;
        let mut kept = 0;
        let mut cut_at = None;
        let rules =
            EntryRules { begin_log_offset: self.begin_log_offset, end_log_offset: Bound::Excluded(log_next_offset) };
        'scan: for first in (1..self.entry_capacity).step_by(SCAN_WINDOW_ENTRIES as usize) {
            for entry in self.read_entries(first, SCAN_WINDOW_ENTRIES.min(self.entry_capacity - first))? {
                let n = kept + 1;
                if n > counted && entry.is_zero() {
                    break 'scan;
                }
                if let Err(reason) = self.check_next(n, &entry, last.as_ref(), &heads, &rules) {
                    cut_at = Some((n, reason));
                    break 'scan;
                }
                heads[self.slot_of(entry.key_hash)] = n;
                last = Some(entry);
                kept = n;
            }
        }
        *state = ActiveState::new(heads, kept, last.map_or(0, |l| l.time_diff_s));
        self.rewrite(state, (kept, counted), last)?;
        let recovery = FileRecovery { kept, counted, cut_at };
        if let Some((entry, reason)) = cut_at {
            tracing::warn!(file = %self.path().display(), kept, counted, entry, reason, "index file cut after an unclean shutdown");
        } else if kept != counted {
            tracing::info!(file = %self.path().display(), kept, counted, "index file recovered entries its header did not count");
        }
        Ok(recovery)
    }

    /// Why entry `n`, `entry`, cannot follow `last` (the previous kept entry) with the slot heads
    /// `heads`: the first rule it breaks, in the order recovery has always judged them.
    fn check_next(
        &self,
        n: u32,
        entry: &IndexFileEntry,
        last: Option<&IndexFileEntry>,
        heads: &[u32],
        rules: &EntryRules,
    ) -> Result<(), &'static str> {
        let faults = rules.check(n, entry, last);
        if faults.past_end {
            return Err("log offset at or past the recovered end");
        }
        if faults.below_begin || faults.log_offset_goes_back {
            return Err("log offset goes back");
        }
        if faults.time_goes_back {
            return Err("time goes back");
        }
        // A link that does not point back is never its slot's previous entry: the heads are kept
        // entries, all below `n`.
        if faults.link_not_back || entry.prev_entry != heads[self.slot_of(entry.key_hash)] {
            return Err("chain link is not its slot's previous entry");
        }
        Ok(())
    }

    /// Writes what recovery kept (`kept` of the `counted` entries): the rebuilt slots of `state`,
    /// zeros over every entry past those kept, then the header, each durable before the next.
    fn rewrite(&self, state: &ActiveState, (kept, counted): (u32, u32), last: Option<IndexFileEntry>) -> Result<()> {
        self.file.write_at(slot_position(0), &state.slot_bytes(0..state.slots.len()))?;
        let stale = self.entry_position(kept + 1);
        self.file.zero_range(stale, self.file.len() - stale)?;
        let counted_end_ms = self.end_timestamp_ms.load(Ordering::Relaxed);
        let end_timestamp_ms = match last {
            // The end of the last entry's second bounds every time kept; so does the header's end
            // when no entry past its count was kept.
            Some(last) if kept <= counted => self.second_of(last.time_diff_s).1.min(counted_end_ms),
            Some(last) => self.second_of(last.time_diff_s).1,
            None => self.begin_timestamp_ms,
        };
        self.end_timestamp_ms.store(end_timestamp_ms, Ordering::Release);
        self.end_log_offset.store(last.map_or(self.begin_log_offset, |l| l.log_offset), Ordering::Release);
        self.index_count.store(kept, Ordering::Release);
        self.sync()?;
        self.file.write_at(0, &self.header().encode())?;
        self.sync()
    }
}

impl IndexFiles {
    /// After an unclean shutdown, before the first put: files beginning at or past
    /// `log_next_offset` are deleted (the log lost their messages), and the newest remaining one
    /// is validated entry by entry and cut ([`IndexFile::recover`]), its slots rebuilt. The
    /// caller then dispatches from `log_next_offset` on, which it passes as at most the log's next
    /// offset and at most where its checkpoint says the index is complete.
    pub(crate) fn recover(&self, log_next_offset: u64) -> Result<IndexRecovery> {
        let mut writer = self.writer.lock();
        let mut files = self.files.write();
        let mut recovery = IndexRecovery::default();
        while let Some(file) = files.pop_if(|f| f.begin_log_offset() >= log_next_offset) {
            delete(&file)?;
            tracing::warn!(file = %file.path().display(), log_next_offset, "index file past the recovered end deleted");
            recovery.removed.push(file.path());
        }
        if !recovery.removed.is_empty() {
            storage::sync_dir(&self.dir)?;
        }
        if let Some(newest) = files.last_mut() {
            if newest.is_sealed() {
                // It was opened sealed because a newer file existed; it is the active one now.
                newest.retire();
                *newest = Arc::new(IndexFile::open(&newest.path())?.under(self.budget.as_ref())?);
            }
            recovery.newest = Some(newest.recover(log_next_offset)?);
        }
        // Puts taken ahead (none before the first put) are past what the files now hold: dispatch
        // redoes them from the end set here.
        writer.taken.clear();
        writer.active = files.last().cloned();
        writer.failed = false;
        writer.end_log_offset = last_end(&files);
        Ok(recovery)
    }
}
