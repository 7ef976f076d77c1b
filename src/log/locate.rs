//! Finding where a read starts, and the continuity check a segment passes at its first read
//! (docs/DESIGN.md §4). Both retry when the segment map changed under them (`segments.rs`).

use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::log::segment::{Located, LogSegment};
use crate::log::state::LogState;
use crate::log::walk::BatchPos;

/// How often a read looks for the segment holding an offset again when the segments changed under
/// it (deleted by retention, replaced by a truncation or compaction) before giving up with
/// `Error::Unsettled`.
pub(crate) const LOCATE_ATTEMPTS: usize = 16;

impl LogState {
    /// The segment and batch where a read of `offset` starts, below `upper`. The segment holding
    /// `offset` must have a batch at or after it: if its data ends first, records below `upper` are
    /// missing and that is `Error::Corrupt`, never a silent skip to the next segment.
    /// `epoch` is the caller's truncation count: data ending early because a truncation cut it is
    /// `Error::Truncated`, not damage.
    pub(crate) fn locate(&self, offset: u64, upper: u64, epoch: u64) -> Result<Option<(Arc<LogSegment>, BatchPos)>> {
        // A segment deleted under us by retention is retried once the map no longer holds it.
        for _ in 0..LOCATE_ATTEMPTS {
            let version = self.segments.settled_version();
            let start = self.offsets.start();
            let segment = self.segments.floor(offset).filter(|_| offset >= start);
            let located = segment.as_ref().map(|s| s.locate(offset));
            // Anything but a found batch may be an artefact of an edit of the segments (a swap
            // replacing the segment that holds `offset`): look again once it is done.
            if !matches!(located, Some(Ok(Located::At(_)))) && self.segments.changed_since(version) {
                continue;
            }
            let (Some(segment), Some(located)) = (segment, located) else {
                return Err(Error::OffsetOutOfRange { requested: offset, start, next: upper });
            };
            self.check_continuity(&segment)?;
            match located? {
                Located::At(at) => return Ok(Some((segment, at))),
                // Deleted by retention, or being replaced by a truncation (which holds the append
                // lock until the map holds the new segment): wait for it, then look again.
                Located::Retired => drop(self.appender.lock()),
                Located::End(end) if end.expected >= upper => return Ok(None),
                Located::End(end) => {
                    // A truncation may be under way (it holds the append lock until it is noted).
                    drop(self.appender.lock());
                    if self.durability.truncations() != epoch {
                        return Err(Error::Truncated { next_offset: self.offsets.next() });
                    }
                    let reason = Corruption::DataEndsEarly { end: end.expected, upper };
                    return Err(segment.corrupt(end.position, reason));
                }
            }
        }
        Err(Error::Unsettled { attempts: LOCATE_ATTEMPTS })
    }

    /// At a segment's first read: it must begin where the segment before it ends. One that begins
    /// inside it is a foreign file (docs/DESIGN.md §4: copied in from elsewhere) and reading it
    /// would return another log's records: `Error::Corrupt` naming it (`strata recover --force`
    /// sets it aside). A clean open does not check this (it would cost a read of every segment);
    /// the unclean open's scan, `verify` and `recover` do.
    ///
    /// An overlap of deleted records only (the segment before ends at or below the log start) is
    /// no part of the log. One reaching the start is refused whichever file is foreign (the
    /// earlier one, a stray copied in below the log, or this one, copied in inside a segment):
    /// both hold records there, and returning either could return another log's records.
    /// Operations that trust a segment's end (prefix deletion, truncation) check it too.
    pub(crate) fn check_continuity(&self, segment: &Arc<LogSegment>) -> Result<()> {
        if segment.continuity_checked() {
            return Ok(());
        }
        let base = segment.base_offset();
        // One consistent view of the map: a segment a compaction swap merged into a new one
        // overlaps that new one, and is no longer the log's segment, not foreign.
        let overlaps = self.segments.stable(|| -> Result<Option<bool>> {
            if !self.segments.holds(segment) {
                return Ok(None);
            }
            let previous = base.checked_sub(1).and_then(|before| self.segments.floor(before));
            let Some(previous) = previous.filter(|p| !p.is_retired()) else { return Ok(Some(false)) };
            previous.ensure_indexes_checked()?;
            let end = previous.data_end()?;
            Ok(Some(end.is_some_and(|end| end > base && end > self.offsets.start())))
        })?;
        match overlaps {
            Some(true) => {
                let why = "its base offset falls inside the previous segment's offsets";
                Err(Error::corrupt(segment.log_path(), 0, Corruption::ForeignFile(why)))
            }
            Some(false) => {
                segment.mark_continuity_checked();
                Ok(())
            }
            // Replaced or removed meanwhile: whoever reads it sees it retired and looks again.
            None => Ok(()),
        }
    }
}
