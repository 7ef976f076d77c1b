//! The account an open gives of what it found and changed.

use std::path::PathBuf;

/// What opening a log found and changed. Also logged at open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The last close was clean (a valid marker matching the files): nothing was scanned.
    pub clean_shutdown: bool,
    /// Segments in the log after opening.
    pub segments_loaded: u64,
    /// Segments validated batch by batch.
    pub segments_scanned: u64,
    /// Bytes validated batch by batch.
    pub bytes_scanned: u64,
    /// Segments whose `.index`/`.timeindex` were rebuilt.
    pub indexes_rebuilt: u64,
    /// Bytes removed from the end of the log: the torn or damaged data after the cut (not the
    /// preallocated zeros after it) and the data of the segments after it.
    pub bytes_truncated: u64,
    /// Valid records removed with them (in segments after the cut).
    pub records_truncated: u64,
    /// Files deleted: leftovers of interrupted operations, orphan indexes, removed segments.
    pub files_deleted: Vec<PathBuf>,
    /// Damaged segments kept for inspection as `.corrupt` (only with `RecoveryMode::TruncateCorrupt`).
    pub files_kept_corrupt: Vec<PathBuf>,
    /// `.corrupt` copies found in the directory at open: the log was damaged before (logged).
    pub corrupt_copies: Vec<PathBuf>,
    /// Segments after the damage that `RecoveryMode::TruncateCorrupt` removed from the log, kept as
    /// `.removed` (healthy files: their records are lost from the log, not damaged).
    pub files_kept_removed: Vec<PathBuf>,
    /// Foreign files set aside as `.foreign` (only with `RecoveryMode::TruncateCorrupt`): `.log`
    /// files that did not belong to the log (an empty one that is not the last, or one whose base
    /// falls inside the previous segment's offsets), with their index files.
    pub files_kept_foreign: Vec<PathBuf>,
    /// Records below the recovery point (acknowledged as durable) that were lost. Normally 0; only
    /// `RecoveryMode::TruncateCorrupt` accepts a loss.
    pub acknowledged_records_lost: u64,
    /// The recovery point after opening: every offset below it is durable.
    pub recovery_point: u64,
    /// Time the open took, in microseconds.
    pub duration_us: u64,
}
