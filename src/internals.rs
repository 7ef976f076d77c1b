//! Not part of the API (feature `internals`, hidden from the docs): what the `strata` command
//! (the `strata-cli` package) and this package's tests need beyond it. The on-disk format's
//! constants and file structs, the read-only inspection behind `strata dump`, `verify` and
//! `recover`, the crash points' exit status, and a few directory helpers of the log. Nothing here
//! is stable; a library user never enables the feature.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::log::Record;

pub use crate::failpoint::CRASH_EXIT_CODE;
pub use crate::log::meta::LogMeta;
pub use crate::log::{BatchHeader, Checkpoint, CleanShutdown, OffsetEntry, TimeEntry};
pub use crate::store::meta::{StoreMeta, StoreParameters};

/// Every constant of the on-disk format (field positions, magics, versions, sizes, suffixes) and
/// the file-name helpers.
pub mod format {
    pub use crate::format::*;
}

/// `strata dump`, `verify` and `recover` as functions returning values (read-only inspection of
/// every file kind; offline recovery), and the log-directory checks of the tools.
pub mod inspect {
    pub use crate::inspect::*;
}

/// A `.log` file of a log directory as listed (its bytes are not read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    /// The offset its name says it starts at.
    pub base_offset: u64,
    /// Its length in bytes (preallocated zeros included).
    pub len: u64,
    /// Its path.
    pub path: PathBuf,
}

/// The `.log` files of `dir`, ascending by base offset.
pub fn segment_files(dir: &Path) -> Result<Vec<SegmentFile>> {
    let files = crate::log::open::files::list_segments(dir)?;
    let path = |base| crate::log::segment::SegmentPaths::new(dir, base).log;
    Ok(files.iter().map(|f| SegmentFile { base_offset: f.base, len: f.len, path: path(f.base) }).collect())
}

/// The names of the files in `dir` (names that are not UTF-8 left out: no log file has one).
pub fn file_names(dir: &Path) -> Result<Vec<String>> {
    crate::log::open::files::dir_names(dir)
}

/// Takes the lock of the log directory `dir` as a writer does (held while the file is open):
/// `Error::Locked` if another writer holds it.
pub fn lock_dir(dir: &Path) -> Result<File> {
    crate::storage::lock_dir(dir)
}

/// The recovery point of the checkpoint in `dir`; `None` if there is none or it is unreadable.
pub fn checkpoint_recovery_point(dir: &Path) -> Result<Option<u64>> {
    Ok(crate::log::Checkpoint::read(dir)?.and_then(std::result::Result::ok).map(|c| c.checkpoint.recovery_point))
}

/// The most bytes `record` can take in a batch, whatever its timestamp and offset deltas (their
/// varints at their largest): a bound to check it against `max_batch_bytes` before appending.
pub fn max_record_len(record: &Record<'_>) -> usize {
    crate::log::batch::record_len(record, i64::MIN, 1_000_000)
}

/// Wraps an `io::Error` with the operation and path it came from, as the library does: running
/// out of space or quota is `Error::DiskFull`.
pub fn io_error(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> crate::Error {
    crate::Error::io(op, path)
}
