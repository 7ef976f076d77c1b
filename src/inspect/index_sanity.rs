//! `strata dump --index-sanity-check`: index files checked as `verify` checks them, one outcome a
//! file, without printing their entries.

use std::path::{Path, PathBuf};

use super::verify_log::{VerifyReport, verify_indexes};
use super::walk::{read_index, walk_batches};
use crate::error::Result;
use crate::format::{INDEX_SUFFIX, TIME_INDEX_SUFFIX, parse_file_name};
use crate::log::{OffsetEntry, TimeEntry};

/// The outcome of `dump --index-sanity-check` for one index file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IndexSanity {
    /// The index file.
    pub path: PathBuf,
    /// Entries in use.
    pub entries: u64,
    /// What is wrong, if anything (then the next open rebuilds the index).
    pub problem: Option<String>,
}

/// Kafka's `--index-sanity-check`: every `.index` and `.timeindex` in `paths` (files, or the files
/// of a directory) checked for structure and against its segment, without printing entries.
pub fn index_sanity(path: &Path) -> Result<Vec<IndexSanity>> {
    let (dir, names) = if path.is_dir() {
        let mut names = crate::log::open::files::dir_names(path)?;
        names.sort();
        (path.to_path_buf(), names)
    } else {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        (path.parent().map(Path::to_path_buf).unwrap_or_default(), vec![name])
    };
    let mut out = Vec::new();
    for name in names {
        let Some((base, suffix)) = parse_file_name(&name) else { continue };
        if suffix != INDEX_SUFFIX && suffix != TIME_INDEX_SUFFIX {
            continue;
        }
        let paths = crate::log::segment::SegmentPaths::new(&dir, base);
        let mut report = VerifyReport::default();
        let entries = if suffix == INDEX_SUFFIX {
            read_index::<OffsetEntry>(&paths.index)?.0.len()
        } else {
            read_index::<TimeEntry>(&paths.time_index)?.0.len()
        } as u64;
        let problem = match std::fs::metadata(&paths.log) {
            Err(_) => Some("no segment for this index (the next open deletes it)".to_owned()),
            Ok(meta) => {
                let walked = walk_batches(&paths.log, base, meta.len(), false)?;
                let files = crate::log::open::files::list_segments(&dir)?;
                let last = files.last().is_some_and(|f| f.base == base);
                let sealed = !last
                    && files
                        .iter()
                        .find(|f| f.base == base)
                        .is_some_and(|f| crate::log::open::recover::was_sealed(&dir, *f));
                verify_indexes(&paths.index, &paths.time_index, base, &walked, (last, sealed), &mut report)?;
                let path = dir.join(&name);
                report
                    .findings
                    .iter()
                    .find(|f| f.file == path)
                    .map(|f| format!("position {}: {}", f.position, f.problem))
            }
        };
        out.push(IndexSanity { path: dir.join(&name), entries, problem });
    }
    Ok(out)
}
