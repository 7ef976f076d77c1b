//! Removing a prefix (DESIGN.md §9): `delete_records_before`, and retention by size and by age.
//! The new log start offset is written to the checkpoint first; whole segments below it are then
//! renamed `.deleted` (directory fsynced) and unlinked after `file_delete_delay_ms`, once their last
//! reader is done. The active segment is never deleted.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::format::DELETED_SUFFIX;
use crate::log::metrics::Counters;
use crate::log::segment::{LogSegment, SegmentPaths};
use crate::log::shared::Shared;
use crate::storage;

impl Shared {
    /// Moves the log start offset to `offset` (at most the next offset) and deletes every sealed
    /// segment wholly below it. Returns the log start offset.
    pub(crate) fn delete_records_before(&self, offset: u64) -> Result<u64> {
        self.check_writable()?;
        // Segments rolled away from but not yet sealed by the syncer are sealed now, so they can go.
        // Sealing fsyncs, so it never runs under the append lock; neither does anything below.
        self.seal_rolled()?;
        let app = self.appender.lock();
        self.check_writable()?;
        let _structure = self.structure.lock();
        let active = app.active.base_offset();
        let start = offset.min(self.next_offset());
        drop(app);
        if start <= self.start_offset() {
            return Ok(self.start_offset());
        }
        // The checkpoint first: from here on no crash brings the records below `start` back.
        self.start_offset.store(start, Ordering::SeqCst);
        self.write_checkpoint()?;
        let doomed: Vec<Arc<LogSegment>> = self
            .segments
            .iter()
            .map(|e| Arc::clone(e.value()))
            .take_while(|s| s.base_offset() < active && s.next_offset() <= start && s.is_sealed())
            .collect();
        let n = doomed.len() as u64;
        self.remove_whole(doomed)?;
        Counters::add(&self.counters.segments_deleted, n);
        Ok(start)
    }

    /// Applies `retention_ms` and `retention_bytes`: the oldest sealed segments whose newest record
    /// is too old, or while the log is too large, are deleted. Returns how many were.
    pub(crate) fn enforce_retention(&self) -> Result<u64> {
        self.seal_rolled()?;
        let sealed: Vec<Arc<LogSegment>> = {
            let app = self.appender.lock();
            let active = app.active.base_offset();
            self.segments
                .iter()
                .map(|e| Arc::clone(e.value()))
                .take_while(|s| s.base_offset() < active && s.is_sealed())
                .collect()
        };
        let mut total: u64 = self.segments.iter().map(|e| e.value().size()).sum();
        let now = self.config.clock.now_ms();
        let mut start = None;
        for segment in &sealed {
            let too_old = match self.config.retention_ms {
                Some(ms) => segment.max_timestamp()? < now.saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)),
                None => false,
            };
            let too_big = self.config.retention_bytes.is_some_and(|limit| total - segment.size() >= limit);
            if !too_old && !too_big {
                break;
            }
            total -= segment.size();
            start = Some(segment.next_offset());
        }
        let Some(start) = start else { return Ok(0) };
        let before = self.segments.len();
        self.delete_records_before(start)?;
        let deleted = before.saturating_sub(self.segments.len()) as u64;
        tracing::info!(dir = %self.dir.display(), deleted, start, "retention deleted segments");
        Ok(deleted)
    }

    /// Takes whole segments out of the log (DESIGN.md §9): renames their files `.deleted`, newest
    /// first so a crash part-way leaves a prefix of the log, fsyncs the directory, removes them from
    /// the map and schedules the unlink. Their bytes never change, so readers in them finish.
    pub(crate) fn remove_whole(&self, mut doomed: Vec<Arc<LogSegment>>) -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        doomed.sort_by_key(|s| std::cmp::Reverse(s.base_offset()));
        for segment in &doomed {
            segment.rename_with_suffix(DELETED_SUFFIX)?;
        }
        storage::sync_dir(&self.dir)?;
        self.rolled.lock().retain(|r| doomed.iter().all(|d| !Arc::ptr_eq(r, d)));
        for segment in doomed {
            self.segments.remove(&segment.base_offset());
            self.schedule_unlink(segment);
        }
        Ok(())
    }

    /// Unlinks a removed segment's `.deleted` files after `file_delete_delay_ms`, once no reader
    /// holds it — unless a later removal of a segment with the same base renamed another file to
    /// the same name meanwhile (the inode tells them apart).
    pub(crate) fn schedule_unlink(&self, segment: Arc<LogSegment>) {
        let paths = SegmentPaths::new(&self.dir, segment.base_offset());
        let files: Vec<(PathBuf, u64)> = [paths.log, paths.index, paths.time_index]
            .into_iter()
            .filter_map(|path| {
                let mut name = path.into_os_string();
                name.push(DELETED_SUFFIX);
                let path = PathBuf::from(name);
                let inode = std::fs::metadata(&path).ok()?.ino();
                Some((path, inode))
            })
            .collect();
        let unlink = move || {
            segment.retire();
            for (path, inode) in &files {
                if std::fs::metadata(path).is_ok_and(|m| m.ino() == *inode) {
                    storage::remove_if_exists(path)?;
                }
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
