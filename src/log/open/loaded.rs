//! What opening a log produces (the loaded segments and offsets, the recovery report) and the
//! pieces both the load and the recovery scan use: scanning a file, opening the segments.

use std::path::{Path, PathBuf};

use crate::config::{LogConfig, ReadPath};
use crate::error::{Error, Result};
use crate::log::checkpoint::Checkpoint;
use crate::log::open::files::SegmentFile;
pub(crate) use crate::log::open::report::RecoveryReport;
use crate::log::segment::{LogSegment, SegmentPaths};
use crate::log::walk;
use crate::storage::MappedFile;

/// The state of a loaded directory, ready to become a `Log`.
pub(crate) struct Loaded {
    /// Ascending by base offset; the last is the active segment (none only for an empty read-only
    /// open).
    pub segments: Vec<LogSegment>,
    pub next_offset: u64,
    pub log_start_offset: u64,
    pub report: RecoveryReport,
    /// A read-only open: where the last segment's valid data ended when it was scanned.
    pub live_tail: Option<LiveTail>,
    /// The open could not write its checkpoint (a full disk): the one on disk is older.
    pub checkpoint_stale: bool,
}

/// Where the valid data of a read-only log's last segment ended at open. Damage from there on may
/// be a live writer's batch in progress (or a tail a truncation is cutting): it is the end of the
/// log unless the recovery point, read again when a read reaches it, is past it
/// (docs/DESIGN.md §3, §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveTail {
    pub path: PathBuf,
    pub valid_len: u64,
    pub end_offset: u64,
}

impl LiveTail {
    /// Whether `error` is damage at or past this tail that the checkpoint, read now, does not
    /// claim durable: the end of the data, not corruption.
    pub(crate) fn is_end(&self, dir: &Path, error: &Error) -> bool {
        let Error::Corrupt { path, position, .. } = error else { return false };
        if *path != self.path || *position < self.valid_len {
            return false;
        }
        recovery_point_now(dir) <= self.end_offset
    }
}

/// The recovery point as the checkpoint says now (0 if it cannot be read).
pub(crate) fn recovery_point_now(dir: &Path) -> u64 {
    Checkpoint::read(dir).ok().flatten().and_then(Result::ok).map_or(0, |s| s.checkpoint.recovery_point)
}

/// How a scan reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Through a temporary read-only map: the writer, which holds the lock, at open.
    Mapped,
    /// With `pread`: a read-only open, possibly of a log another process is writing.
    Pread,
}

/// Validates a segment file batch by batch from its start.
pub(crate) fn scan_file(dir: &Path, file: SegmentFile, config: &LogConfig, access: Access) -> Result<walk::Scan> {
    scan_file_from(dir, file, config, access, 0)
}

/// [`scan_file`], validating in full only the batches holding an offset at or after `check_from`.
pub(crate) fn scan_file_from(
    dir: &Path,
    file: SegmentFile,
    config: &LogConfig,
    access: Access,
    check_from: u64,
) -> Result<walk::Scan> {
    let path = SegmentPaths::new(dir, file.base).log;
    let reader = match access {
        Access::Mapped => MappedFile::open_sealed(&path, file.len, config.read_path),
        Access::Pread => MappedFile::open_sealed(&path, file.len, ReadPath::Pread),
    };
    let scan = walk::scan_checking_from(&reader, file.len, file.base, config.index_interval_bytes, check_from)?;
    reader.retire();
    scan.ok_or_else(|| Error::io("scan", &path)(std::io::ErrorKind::NotFound.into()))
}

/// Opens the loaded segments: all but the last sealed (trusted up to their file length), the last
/// active, ending at `next_offset`.
pub(crate) fn open_segments(dir: &Path, files: &[SegmentFile], next_offset: u64, config: &LogConfig) -> Result<Loaded> {
    let mut segments = Vec::with_capacity(files.len());
    for pair in files.windows(2) {
        segments.push(LogSegment::open_sealed(dir, pair[0].base, pair[0].len, pair[1].base, config));
    }
    let Some(last) = files.last() else {
        return Err(Error::io("open", dir)(std::io::ErrorKind::NotFound.into()));
    };
    segments.push(LogSegment::open_active(dir, last.base, last.len, next_offset, config)?);
    Ok(Loaded {
        segments,
        next_offset,
        log_start_offset: files[0].base,
        report: RecoveryReport::default(),
        live_tail: None,
        checkpoint_stale: false,
    })
}
