//! What a live writer changes under a `verify`, listed at one moment: two listings that agree
//! around a check say the log settled while it ran.

use std::path::Path;

use super::dirs::vanished;
use crate::error::Result;
use crate::format::SWAP_SUFFIX;
use crate::log::Checkpoint;

/// A segment's base offset, identity, and the lengths of its `.log`, `.index` and `.timeindex`
/// (`None` for the last segment, and for a missing file).
type ListedSegment = (u64, Option<crate::storage::FileId>, Option<[Option<u64>; 3]>);

/// What a live writer changes under a check, as listed at one moment.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Listing {
    /// Every `.log` with its identity, and the lengths of the files of all but the last. The
    /// indexes count: a seal trims the `.log` first and its indexes after, so a check may read an
    /// index being trimmed of a segment whose `.log` no longer changes.
    pub(super) segments: Vec<ListedSegment>,
    /// The last segment's length: appends grow it (no change for a check), a truncation cuts it.
    last_len: Option<u64>,
    /// Appends move it up; a truncation lowers it before it cuts anything.
    pub(super) recovery_point: Option<u64>,
    /// A `.swap` file is there (compaction is swapping segments, which leaves a moment with
    /// neither the originals nor their replacements under their names, docs/DESIGN.md §10), or a file
    /// went while the directory was listed: either way, not a listing to trust.
    moving: bool,
}

impl Listing {
    pub(super) fn of(dir: &Path) -> Result<Listing> {
        let names = crate::log::open::files::dir_names(dir)?;
        let files = match crate::log::open::files::segment_files(dir, &names) {
            Err(e) if vanished(&e) => {
                return Ok(Listing { segments: Vec::new(), last_len: None, recovery_point: None, moving: true });
            }
            files => files?,
        };
        let count = files.len();
        let len_of = |path: &Path| crate::storage::stat(path).ok().map(|meta| meta.len());
        let lengths = |base: u64, len: u64| {
            let paths = crate::log::segment::SegmentPaths::new(dir, base);
            [Some(len), len_of(&paths.index), len_of(&paths.time_index)]
        };
        let segments = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.base, f.id, (i + 1 < count).then(|| lengths(f.base, f.len))))
            .collect();
        // An unreadable checkpoint (a slot being written) says nothing: `None` is below any value.
        let recovery_point =
            Checkpoint::read(dir).ok().flatten().and_then(Result::ok).map(|c| c.checkpoint.recovery_point);
        Ok(Listing {
            segments,
            last_len: files.last().map(|f| f.len),
            recovery_point,
            moving: names.iter().any(|n| n.ends_with(SWAP_SUFFIX)),
        })
    }

    /// Whether nothing a check depends on changed from `before` to `self`.
    pub(super) fn settled_since(&self, before: &Listing) -> bool {
        self.segments == before.segments
            && self.last_len >= before.last_len
            && self.recovery_point >= before.recovery_point
            && !self.moving
            && !before.moving
    }
}
