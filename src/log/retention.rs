//! Removing a prefix (docs/DESIGN.md §9): `delete_records_before`, and retention by size and by
//! age. The new log start offset is written to the checkpoint first; whole segments below it are
//! then renamed `.deleted` (directory fsynced) and unlinked after `file_delete_delay_ms`, once
//! their last reader is done. The active segment is never deleted.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::DELETED_SUFFIX;
use crate::log::metrics::Counters;
use crate::log::segment::LogSegment;
use crate::log::segments::StructureGuard;
use crate::log::state::LogState;
use crate::storage;

impl LogState {
    /// Moves the log start offset to `offset` (at most the next offset) and deletes every sealed
    /// segment wholly below it. Returns the log start offset.
    pub(crate) fn delete_records_before(&self, offset: u64) -> Result<u64> {
        Ok(self.remove_prefix(|_, _| Ok(Some(offset)))?.0)
    }

    /// Applies `retention_ms` and `retention_bytes`: the oldest sealed segments whose newest record
    /// is too old, or while the log is too large, are deleted. Returns how many were.
    pub(crate) fn enforce_retention(&self) -> Result<u64> {
        let now = self.config.clock.now_ms();
        let (start, deleted) = self.remove_prefix(|sealed, mut total| {
            let mut start = None;
            for segment in sealed {
                let too_old = match self.config.retention_ms {
                    Some(ms) => segment.max_timestamp()? < now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)),
                    None => false,
                };
                let too_big =
                    self.config.retention_bytes.is_some_and(|limit| total.saturating_sub(segment.size()) >= limit);
                if !too_old && !too_big {
                    break;
                }
                total = total.saturating_sub(segment.size());
                start = Some(segment.next_offset());
            }
            Ok(start)
        })?;
        if deleted > 0 {
            tracing::info!(dir = %self.dir.display(), deleted, start, "retention deleted segments");
        }
        Ok(deleted)
    }

    /// The prefix removal both share. `decide(sealed segments, bytes of all segments)` picks the
    /// new start offset; it runs under the structure lock, on the segments as they are then, so no
    /// truncation, reset or compaction can change them between the decision and the deletion.
    /// Returns the log start offset and the segments deleted.
    fn remove_prefix(&self, decide: impl FnOnce(&[Arc<LogSegment>], u64) -> Result<Option<u64>>) -> Result<(u64, u64)> {
        self.check_writable()?;
        // Segments rolled away from but not yet sealed by the syncer are sealed now, so they can go.
        // Sealing fsyncs, so it never runs under the append lock; neither does anything below.
        self.seal_rolled()?;
        let app = self.appender.lock();
        self.check_writable()?;
        let structure = self.segments.lock();
        let active = app.active.base_offset();
        let next = self.offsets.next();
        drop(app);
        let sealed: Vec<Arc<LogSegment>> =
            self.segments.all().into_iter().take_while(|s| s.base_offset() < active && s.is_sealed()).collect();
        let total = self.bytes_on_disk();
        let Some(start) = decide(&sealed, total)?.map(|s| s.min(next)) else { return Ok((self.offsets.start(), 0)) };
        if start <= self.offsets.start() {
            return Ok((self.offsets.start(), 0));
        }
        // A segment's end is taken from the next one's base: a foreign file there
        // (docs/DESIGN.md §4) would make a segment holding records at or past `start` look wholly
        // below it.
        for segment in self.segments.all().iter().skip(1).take_while(|s| s.base_offset() <= start) {
            self.check_continuity(segment)?;
        }
        // The checkpoint first: from here on no crash brings the records below `start` back. A
        // failure (a full disk, say) changes nothing.
        self.checkpoint.write_new_start(&self.checkpoint_parts(), start)?;
        let doomed: Vec<Arc<LogSegment>> = sealed.into_iter().take_while(|s| s.next_offset() <= start).collect();
        let deleted = doomed.len() as u64;
        self.remove_whole(&structure, doomed)?;
        Counters::add(&self.counters.segments_deleted, deleted);
        Ok((start, deleted))
    }

    /// Takes whole segments out of the log (docs/DESIGN.md §9): renames their files `.deleted`,
    /// from the end the log keeps (newest first for a suffix, oldest first for a prefix) so what is
    /// left under segment names never has a hole, whether a crash stops the renames or a read-only
    /// check lists them meanwhile; fsyncs the directory, removes them from the map and schedules
    /// the unlink. Their bytes never change, so readers in them finish.
    pub(crate) fn remove_whole(&self, structure: &StructureGuard<'_>, mut doomed: Vec<Arc<LogSegment>>) -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        // No seal of a doomed rolled segment may run meanwhile: it would write the final index
        // entries into files being renamed away and retired, and its failure would poison the log
        // (seen as a prefix deletion racing a reset). One running finishes first.
        let _sealing = self.segments.lock_sealing();
        doomed.sort_by_key(|s| s.base_offset());
        let prefix = self.segments.all().first().map(|s| s.base_offset()) == doomed.first().map(|s| s.base_offset());
        if !prefix {
            doomed.reverse();
        }
        let mut renamed = Vec::with_capacity(doomed.len());
        for segment in &doomed {
            renamed.push(segment.rename_deleted()?);
            // Only space: a failure must not stop the removal half-way (renamed, not fsynced).
            if let Err(error) = segment.release_preallocation() {
                tracing::warn!(%error, "could not give back a removed segment's preallocated space");
            }
        }
        storage::sync_dir(&self.dir)?;
        self.segments.remove(structure, &doomed);
        for (segment, files) in doomed.into_iter().zip(renamed) {
            self.schedule_unlink(segment, files);
        }
        Ok(())
    }

    /// At close, once no reader is left: unlinks every segment file still waiting as `.deleted`
    /// (the delayed unlinks did not run yet), so a closed log leaves none behind. Best effort: the
    /// next open deletes what is left.
    pub(crate) fn unlink_deleted_now(&self) {
        let names = match crate::log::open::files::dir_names(&self.dir) {
            Ok(names) => names,
            Err(error) => {
                tracing::warn!(%error, "listing the log at close failed; .deleted files stay for the next open");
                return;
            }
        };
        let mut removed = 0;
        for name in names.iter().filter(|n| n.ends_with(DELETED_SUFFIX)) {
            match storage::remove_if_exists(&self.dir.join(name)) {
                Ok(existed) => removed += usize::from(existed),
                Err(error) => tracing::warn!(%error, "a .deleted file stays for the next open"),
            }
        }
        if removed > 0
            && let Err(error) = storage::sync_dir(&self.dir)
        {
            tracing::warn!(%error, "fsyncing the log directory at close failed");
        }
    }

    /// Unlinks a removed segment's `.deleted` files after `file_delete_delay_ms`, once no reader
    /// holds it.
    ///
    /// The segment is retired even if the event never runs (the log closing drops queued events, or
    /// refuses one put while it shuts down): the skip map may hold it for a long while yet, and its
    /// maps would stay, counted by the map budget, until then.
    pub(crate) fn schedule_unlink(&self, segment: Arc<LogSegment>, files: Vec<PathBuf>) {
        let segment = RetireOnDrop(segment);
        let unlink = move || {
            segment.0.retire();
            for path in &files {
                storage::remove_if_exists(path)?;
            }
            Ok::<(), Error>(())
        };
        let delay = Duration::from_millis(self.config.file_delete_delay_ms);
        match &self.events {
            Some(events) => {
                if let Err(error) = events.put_after(delay, "delete segment", unlink) {
                    // Shutting down: the `.deleted` files are removed at the next open.
                    tracing::debug!(%error, "segment left as .deleted for the next open");
                }
            }
            None => {
                if let Err(error) = unlink() {
                    tracing::warn!(%error, "deleting a segment failed; the next open removes it");
                }
            }
        }
    }
}

/// A removed segment, retired when dropped (an unlink event dropped without running).
struct RetireOnDrop(Arc<LogSegment>);

impl Drop for RetireOnDrop {
    fn drop(&mut self) {
        self.0.retire();
    }
}
