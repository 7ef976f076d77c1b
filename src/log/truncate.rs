//! Removing a suffix (`truncate_to`) or everything (`reset_at`), docs/DESIGN.md §9. Both run under
//! the append lock with sync rounds held off, lower the recovery point in the checkpoint before any
//! file changes, and leave nothing a later crash could bring back: later segments are renamed
//! `.deleted` (directory fsynced) and the cut segment is cut and re-preallocated, so its stale
//! bytes become unwritten blocks that read as zeros.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::failpoint::crash_point;
use crate::log::appender::Appender;
use crate::log::index_plan::{PlannedIndexes, write_index_files};
use crate::log::metrics::Counters;
use crate::log::segment::{Located, LogSegment, SegmentPaths};
use crate::log::segments::StructureGuard;
use crate::log::state::LogState;
use crate::storage;

/// Files (and descriptors) of an active segment: `.log`, `.index`, `.timeindex`.
const SEGMENT_FILES: u64 = 3;

impl LogState {
    /// Removes every record at or after `offset` (the whole batch holding it, if it is inside one)
    /// and returns the new next offset.
    pub(crate) fn truncate_to(&self, offset: u64) -> Result<u64> {
        let mut app = self.appender.lock();
        self.check_writable()?;
        if offset >= self.offsets.next() {
            return Ok(self.offsets.next());
        }
        let out_of_range =
            || Error::OffsetOutOfRange { requested: offset, start: self.offsets.start(), next: self.offsets.next() };
        if offset < self.offsets.start() {
            return Err(out_of_range());
        }
        // Everything stored becomes durable first (and every rolled segment sealed), so the durable
        // offset can honestly become the cut; then no round may run until offsets and files agree.
        self.run_round()?;
        let structure = self.segments.lock();
        let rounds = self.durability.hold_rounds()?;
        debug_assert!(self.segments.rolled_count() == 0, "a round seals every rolled segment");
        let segment = self.segments.floor(offset).ok_or_else(out_of_range)?;
        // The cut segment and the one after it must be the log's (docs/DESIGN.md §4): a foreign
        // file would be cut, or taken for where the cut segment ends.
        self.check_continuity(&segment)?;
        if let Some(after) = self.segments.from(segment.base_offset() + 1).first() {
            self.check_continuity(after)?;
        }
        let at = match segment.locate(offset)? {
            Located::At(at) | Located::End(at) => at,
            Located::Retired => return Err(out_of_range()),
        };
        // The new end follows the last batch kept: the batch holding `offset` goes whole, and after
        // compaction a gap before it goes too (its offsets hold no records, and a normal batch
        // may only follow the previous batch's end).
        let cut = segment.end_before(at)?;
        if cut < self.offsets.start() {
            // That batch starts below the log start offset: nothing readable is left; restart empty
            // at the start offset rather than end the log below its start.
            let start = self.offsets.start();
            self.reset_locked(&structure, &mut app, start)?;
            drop(rounds);
            self.cleaner.lower_to(&self.dir, start);
            Counters::add(&self.counters.truncations, 1);
            tracing::info!(dir = %self.dir.display(), requested = offset, next = start, "log truncated to its start");
            return Ok(start);
        }
        let kept = segment.indexes_before(at.position, cut)?;
        // The reopened segment takes three descriptors; removed segments keep theirs until their
        // delayed unlink, and only the cut segment, if active, gives its own back: refuse now,
        // before the checkpoint, rather than poison the log after it.
        if let Some(budget) = &self.config.map_budget {
            budget.check_open_room(if segment.is_sealed() { SEGMENT_FILES } else { 0 })?;
        }
        // The recovery point comes down first, so no crash can claim the removed records durable,
        // and the offsets with it. A failure here changes nothing (the log is not poisoned).
        let saved = self.checkpoint.write_capped(&self.checkpoint_parts(), cut, || self.offsets.move_end(cut))?;
        crash_point!("truncate_after_checkpoint");
        // Readers of the cut segment finish before any byte of it changes; later segments only
        // change names, so their readers carry on.
        let waited = Instant::now();
        if !segment.retire_within(Duration::from_millis(self.config.truncate_wait_ms)) {
            self.offsets.restore_end(saved);
            tracing::warn!(dir = %self.dir.display(), offset, waited_ms = waited.elapsed().as_millis() as u64, "truncation gave up: readers busy");
            return Err(Error::Busy { waited: waited.elapsed() });
        }
        let active =
            self.cut_suffix(&structure, &segment, at.position, cut, &kept).map_err(|e| self.durability.poison(e))?;
        app.active = active;
        drop(rounds);
        self.cleaner.lower_to(&self.dir, cut);
        self.note_truncation(cut);
        tracing::info!(dir = %self.dir.display(), requested = offset, next = cut, "log truncated");
        Ok(cut)
    }

    /// Steps 5–7 of docs/DESIGN.md §9 once the checkpoint is lowered and the cut segment retired:
    /// later segments renamed `.deleted`, the cut segment cut and reopened as the active segment
    /// (the caller lowers the cleaner checkpoint and records the truncation).
    fn cut_suffix(
        &self,
        structure: &StructureGuard<'_>,
        segment: &Arc<LogSegment>,
        position: u64,
        cut: u64,
        kept: &PlannedIndexes,
    ) -> Result<Arc<LogSegment>> {
        let base = segment.base_offset();
        let later = self.segments.from(base + 1);
        self.remove_whole(structure, later)?;
        crash_point!("truncate_after_rename");
        let path = SegmentPaths::new(&self.dir, base).log;
        storage::cut_file(&path, position, self.config.segment_bytes.max(position))?;
        crash_point!("truncate_after_cut");
        write_index_files(&self.dir, base, kept)?;
        let active = Arc::new(LogSegment::open_active(&self.dir, base, position, cut, &self.config)?);
        self.segments.edit(structure, |map| map.insert(Arc::clone(&active)));
        Ok(active)
    }

    /// Drops every record and restarts the log empty at `offset` (any offset, past the end too).
    /// No byte of an existing file changes (they are only renamed), so readers carry on.
    pub(crate) fn reset_at(&self, offset: u64) -> Result<()> {
        let mut app = self.appender.lock();
        self.check_writable()?;
        let structure = self.segments.lock();
        let rounds = self.durability.hold_rounds()?;
        self.reset_locked(&structure, &mut app, offset)?;
        drop(rounds);
        self.cleaner.lower_to(&self.dir, offset);
        Counters::add(&self.counters.truncations, 1);
        tracing::info!(dir = %self.dir.display(), offset, "log reset");
        Ok(())
    }

    /// The reset itself, with the append lock (`app`), the structure lock and the rounds held. A
    /// failure poisons the log.
    fn reset_locked(&self, structure: &StructureGuard<'_>, app: &mut Appender, offset: u64) -> Result<()> {
        // The checkpoint first (log start = recovery point = `offset`, the reset marked in
        // progress, so an open after a crash from here on completes it: old state or new, never
        // old records above the new start); a failure there changes nothing. Any failure after it
        // poisons the log (reopening completes the reset).
        // Every record is gone, also those below `offset`: waiters and readers of any of them are
        // told (a cut at `offset` alone would tell a waiter for a removed, never durable record
        // below it that it is durable).
        let cut = self.offsets.start().min(offset);
        // The new segment's three descriptors, while the old ones wait for their unlink.
        if let Some(budget) = &self.config.map_budget {
            budget.check_open_room(SEGMENT_FILES)?;
        }
        self.checkpoint.write_reset(&self.checkpoint_parts(), offset, cut)?;
        crash_point!("reset_after_checkpoint");
        let result = (|| {
            // The new segment may take the name of an old one: rename the old ones first.
            self.remove_whole(structure, self.segments.all())?;
            crash_point!("reset_after_rename");
            let active = Arc::new(LogSegment::create(&self.dir, offset, &self.config, 0)?);
            storage::sync_dir(&self.dir)?;
            self.segments.edit(structure, |map| map.insert(Arc::clone(&active)));
            // Before any append: a mark left in place would make an open after a crash delete
            // records appended after the reset.
            self.checkpoint.write_reset_done(&self.checkpoint_parts())?;
            Ok::<_, Error>(active)
        })();
        app.active = result.map_err(|e| self.durability.poison(e))?;
        Ok(())
    }

    /// Tells waiters and readers (their epoch is now stale) that offsets from `cut` on were cut.
    fn note_truncation(&self, cut: u64) {
        self.durability.note_truncation(cut);
        Counters::add(&self.counters.truncations, 1);
    }
}
