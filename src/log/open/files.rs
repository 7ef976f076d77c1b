//! The files of a log directory as a load finds them: names, `.log` files with their lengths,
//! kept copies (`.corrupt`, `.removed`, `.foreign`), and logged deletion.

use std::path::Path;

use crate::error::{Corruption, Error, Result};
use crate::format::{CORRUPT_SUFFIX, LOG_SUFFIX, MAX_SEGMENT_BYTES, parse_file_name};
use crate::log::open::report::RecoveryReport;
use crate::storage::{self, FileId};

/// A `.log` file found in the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentFile {
    pub base: u64,
    pub len: u64,
    /// The file the name stood for when listed (read-only views check it at each read).
    pub id: Option<FileId>,
}

/// `<name>.corrupt` or `<name>.corrupt.N`.
pub(crate) fn is_corrupt_copy(name: &str) -> bool {
    has_kept_suffix(name, CORRUPT_SUFFIX)
}

/// `<name><suffix>` or `<name><suffix>.N` (a kept file: `.corrupt`, `.removed`, `.foreign`).
pub(crate) fn has_kept_suffix(name: &str, suffix: &str) -> bool {
    name.ends_with(suffix)
        || name.rsplit_once('.').is_some_and(|(head, n)| head.ends_with(suffix) && n.parse::<u32>().is_ok())
}

/// Deletes `dir/name` if it exists, logging why and recording it in the report.
pub(crate) fn remove_logged(dir: &Path, name: &str, why: &str, report: &mut RecoveryReport) -> Result<()> {
    let path = dir.join(name);
    if storage::remove_if_exists(&path)? {
        tracing::info!(file = %path.display(), why, "deleted");
        report.files_deleted.push(path);
    }
    Ok(())
}

pub(crate) fn dir_names(dir: &Path) -> Result<Vec<String>> {
    storage::list_dir(dir)
}

/// The `.log` files, ascending by base offset.
pub(crate) fn list_segments(dir: &Path) -> Result<Vec<SegmentFile>> {
    segment_files(dir, &dir_names(dir)?)
}

/// The `.log` files among `names`, ascending by base offset (one stat each, for the length).
pub(crate) fn segment_files(dir: &Path, names: &[String]) -> Result<Vec<SegmentFile>> {
    let mut files = Vec::new();
    for name in names {
        if let Some((base, LOG_SUFFIX)) = parse_file_name(name) {
            let path = dir.join(name);
            let meta = storage::stat(&path)?;
            let len = meta.len();
            if len > MAX_SEGMENT_BYTES {
                let reason = Corruption::BadLength { length: len, available: MAX_SEGMENT_BYTES };
                return Err(Error::corrupt(path, MAX_SEGMENT_BYTES, reason));
            }
            files.push(SegmentFile { base, len, id: Some(FileId::of(&meta)) });
        }
    }
    files.sort_by_key(|f| f.base);
    Ok(files)
}
