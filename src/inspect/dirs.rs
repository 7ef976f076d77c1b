//! What is at a path given as a log directory, and the tools' ways in: whether it holds a log
//! (`dir_state`), whether a writer holds it (`held_by_a_writer`), the config an offline tool opens
//! it with (`offline_config`), an open that takes back what it added when it fails
//! (`open_or_undo`); and what the names and states of single files say (a copy `recover --force`
//! set aside, a segment that ends in data, a file gone under a live writer).

use std::path::Path;

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::format::{
    CHECKPOINT_FILE, CORRUPT_SUFFIX, FOREIGN_SUFFIX, INDEX_SUFFIX, LOCK_FILE, LOG_SUFFIX, META_FILE, REMOVED_SUFFIX,
    TIME_INDEX_SUFFIX, parse_file_name,
};
use crate::log::Log;

/// What is at a path given as a log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirState {
    /// Nothing there yet.
    Missing,
    /// A directory with no files (a lock file left alone does not count).
    Empty,
    /// A directory holding segments or a checkpoint.
    Log,
    /// A directory whose files are not a log's.
    NotALog,
}

/// Looks at `dir` without changing anything.
pub fn dir_state(dir: &Path) -> Result<DirState> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DirState::Missing),
        Err(_) if dir.exists() && !dir.is_dir() => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut any = false;
    for entry in entries {
        let name = entry.map_err(Error::io("list", dir))?.file_name();
        let name = name.to_string_lossy();
        let segment = parse_file_name(&name).is_some_and(|(_, suffix)| suffix == LOG_SUFFIX);
        if segment || name == CHECKPOINT_FILE || name == META_FILE {
            return Ok(DirState::Log);
        }
        any |= name != LOCK_FILE;
    }
    Ok(if any { DirState::NotALog } else { DirState::Empty })
}

/// Whether a process holds the lock of the log in `dir` (a live writer), read from `/proc/locks`
/// without taking the lock; `None` if that cannot be known. Matched on the inode number alone:
/// on overlayfs and btrfs subvolumes the device `/proc/locks` prints is not the one `stat` gives,
/// and a wrong "held" needs another locked file with the same inode number.
pub fn held_by_a_writer(dir: &Path) -> Option<bool> {
    let meta = match std::fs::metadata(dir.join(LOCK_FILE)) {
        Ok(meta) => meta,
        // A writer creates the lock file before it locks it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    use std::os::unix::fs::MetadataExt;
    let inode = meta.ino().to_string();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 21437 fe:00:10019332 0 EOF`; `->` lines are waiters.
    let held = |l: &str| l.split_whitespace().nth(5).and_then(|id| id.rsplit(':').next()) == Some(inode.as_str());
    Some(locks.lines().filter(|l| !l.contains("->")).any(held))
}

/// [`Log::open`], except that an open that fails takes back the files it added (a directory it
/// created, indexes it rebuilt, the lock file), so a failed command leaves the directory as it
/// found it. Files the open removed (leftovers of interrupted operations) stay removed: they were
/// to be removed by any open.
pub fn open_or_undo(dir: &Path, config: LogConfig) -> Result<Log> {
    let before = match dir_state(dir)? {
        DirState::Missing => None,
        _ => Some(crate::log::open::files::dir_names(dir)?),
    };
    let error = match Log::open(dir, config) {
        Ok(log) => return Ok(log),
        Err(e) => e,
    };
    // Undo only under the directory's lock: another process may have created the log meanwhile
    // (two producers starting at once), and its files are not ours to remove.
    let Ok(_lock) = crate::storage::lock_dir(dir) else { return Err(error) };
    if matches!(error, Error::Locked { .. }) {
        return Err(error);
    }
    match before {
        None => {
            let _ = std::fs::remove_dir_all(dir);
        }
        Some(before) => {
            for name in crate::log::open::files::dir_names(dir).unwrap_or_default() {
                let derived = matches!(parse_file_name(&name), Some((_, INDEX_SUFFIX | TIME_INDEX_SUFFIX)));
                if !before.contains(&name) && (derived || name == LOCK_FILE || name == META_FILE) {
                    let _ = crate::storage::remove_if_exists(&dir.join(&name));
                }
            }
            let _ = crate::storage::sync_dir(dir);
        }
    }
    Err(error)
}

/// The config a tool that reopens an existing log (a repair, an admin command) opens it with: the
/// parameters the log records in `log.meta` (segment size, index size and interval), so indexes
/// are rebuilt and segments re-extended as the log's writer would. A log that records none (last
/// written before `log.meta` existed) gets its segment size from its files (the largest segment:
/// a preallocated active segment has exactly the size, a rolled one nearly; reopening re-extends
/// the active segment to it, so a tool needs no new disk space) and the default index parameters.
pub fn offline_config(dir: &Path) -> Result<LogConfig> {
    if let Some(meta) = crate::log::meta::check(dir)? {
        return Ok(meta.apply(LogConfig::default()));
    }
    let largest = crate::log::open::files::list_segments(dir)?.iter().map(|f| f.len).max().unwrap_or(0);
    let segment_bytes = largest.clamp(crate::format::MIN_SEGMENT_BYTES, crate::format::MAX_SEGMENT_BYTES);
    Ok(LogConfig { segment_bytes, ..LogConfig::default() })
}

/// Whether a segment file ends in data rather than in preallocated zeros: then it was sealed
/// (trimmed) before the last shutdown, and damage in it cannot be a torn write.
pub fn ends_in_data(path: &Path, len: u64) -> Result<bool> {
    if len == 0 {
        return Ok(false);
    }
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).map_err(Error::io("open", path))?;
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1).map_err(Error::io("read", path))?;
    Ok(last[0] != 0)
}

/// The name a file set aside by `recover --force` had: a damaged segment kept as `X.log.corrupt`
/// (or `.corrupt.2`), a healthy one after the damage as `X.log.removed`, a foreign file as
/// `X.log.foreign` (or `.foreign.2`) → `X.log`.
pub(super) fn set_aside_original(name: &str) -> Option<&str> {
    let at = [CORRUPT_SUFFIX, REMOVED_SUFFIX, FOREIGN_SUFFIX].iter().find_map(|suffix| name.find(suffix))?;
    Some(&name[..at])
}

/// `<name><suffix>` or `<name><suffix>.N`: a copy `recover --force` set aside.
pub(super) fn is_set_aside(name: &str, suffix: &str) -> bool {
    name.ends_with(suffix)
        || name.rsplit_once('.').is_some_and(|(head, n)| head.ends_with(suffix) && n.parse::<u32>().is_ok())
}

/// Whether `error` says a file is not there (any more): on a live log, a writer renames and
/// deletes files between a listing and the reads.
pub(super) fn vanished(error: &Error) -> bool {
    matches!(error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}
