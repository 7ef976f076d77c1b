//! Recovery after an unclean shutdown (DESIGN.md §7 step 4): validate batch by batch from the
//! segment holding the recovery point, decide where the log ends, and only then change anything:
//! cut the log there (§9, recovery form: `set_len`, fsync) and rebuild the scanned indexes.

use std::fs;

use std::path::Path;

use crate::config::{LogConfig, RecoveryMode};
use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::CORRUPT_SUFFIX;
use crate::log::checkpoint::Checkpoint;
use crate::log::index_plan::write_index_files;
use crate::log::load::{Access, Loaded, RecoveryReport, SegmentFile, open_segments, scan_file};
use crate::log::segment::SegmentPaths;
use crate::log::walk::{self, Scan};
use crate::storage::{self, MappedFile};

/// Where the scan found the end of the log.
struct End {
    /// The segments kept, each with its scan; the last one holds the end.
    kept: Vec<(SegmentFile, Scan)>,
    /// The offset after the last valid batch.
    next_offset: u64,
    /// Why the log ends before its files do, if it does.
    reason: Option<Corruption>,
}

/// Recovers `files` (ascending) after an unclean shutdown.
pub(crate) fn recover(
    dir: &Path,
    files: Vec<SegmentFile>,
    recovery_point: u64,
    log_start: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Loaded> {
    let first = files.iter().rposition(|f| f.base <= recovery_point).unwrap_or(0);
    tracing::info!(dir = %dir.display(), recovery_point, from_segment = files[first].base, "unclean shutdown: scanning");
    let end = scan_from(dir, &files[first..], config, report)?;
    let cut = &end.kept[end.kept.len() - 1];
    let path = SegmentPaths::new(dir, cut.0.base).log;
    let after = files.get(first + end.kept.len()).map(|f| f.base);
    let sealed = end.reason.is_some() && after.is_some() && was_sealed(dir, cut.0, cut.1.valid_len, config)?;
    // Records below the log start offset are deleted anyway: only [start, recovery point) must
    // survive (after a `reset_at` past the end, start = recovery point and nothing must).
    if end.next_offset.max(log_start) < recovery_point || sealed {
        let reason =
            end.reason.clone().unwrap_or(Corruption::EndsBeforeRecoveryPoint { end: end.next_offset, recovery_point });
        tracing::error!(file = %path.display(), position = cut.1.valid_len, %reason, end = end.next_offset, recovery_point, sealed, "damage to acknowledged data");
        accept_loss(&path, cut.1.valid_len, config, reason)?;
        let lost_up_to = recovery_point.max(after.unwrap_or(0));
        report.acknowledged_records_lost += lost_up_to.saturating_sub(end.next_offset);
        keep_corrupt(dir, &path, report)?;
        // Lower the recovery point first, so a crash during the cut cannot resurrect the claim.
        let start = Checkpoint::read(dir)?.and_then(Result::ok).map_or(0, |c| c.checkpoint.log_start_offset);
        Checkpoint { log_start_offset: start, recovery_point: end.next_offset }.write(dir)?;
    } else if let Some(reason) = &end.reason {
        tracing::warn!(file = %path.display(), position = cut.1.valid_len, %reason, "torn tail: the log ends here");
    }
    let removed = &files[first + end.kept.len()..];
    apply(dir, &files[..first], end, removed, config, report)
}

/// Whether a segment that is not the last one was sealed (fsynced, then trimmed) before the crash:
/// then an invalid batch in it, or a gap after it, cannot be a torn write, whatever the recovery
/// point says (a missing or old checkpoint must not turn damage into a silent cut of every later
/// segment). A segment still carrying its preallocated zero tail was not sealed.
fn was_sealed(dir: &Path, file: SegmentFile, valid_len: u64, config: &LogConfig) -> Result<bool> {
    Ok(file.len < config.segment_bytes || data_end(dir, file, valid_len)? == file.len)
}

/// Phase 1, read only: scans segment after segment until one ends early.
fn scan_from(dir: &Path, files: &[SegmentFile], config: &LogConfig, report: &mut RecoveryReport) -> Result<End> {
    let mut kept: Vec<(SegmentFile, Scan)> = Vec::new();
    let mut expected = files[0].base;
    for &file in files {
        if file.base != expected {
            tracing::warn!(expected, found = file.base, "segment does not continue the log; the log ends before it");
            let reason = Corruption::SegmentGap { expected, found: file.base };
            return Ok(End { kept, next_offset: expected, reason: Some(reason) });
        }
        let scan = scan_file(dir, file, config, Access::Mapped)?;
        report.segments_scanned += 1;
        report.bytes_scanned += scan.valid_len;
        expected = scan.next_offset;
        let reason = scan.invalid.clone();
        kept.push((file, scan));
        if reason.is_some() {
            return Ok(End { kept, next_offset: expected, reason });
        }
    }
    Ok(End { kept, next_offset: expected, reason: None })
}

/// Damage to acknowledged data: an error in `Strict` mode, accepted (and logged) otherwise.
pub(crate) fn accept_loss(path: &Path, position: u64, config: &LogConfig, reason: Corruption) -> Result<()> {
    match config.recovery {
        RecoveryMode::Strict => Err(Error::corrupt(path, position, reason)),
        RecoveryMode::TruncateCorrupt => {
            tracing::error!(file = %path.display(), position, %reason, "accepting the loss of acknowledged records (TruncateCorrupt)");
            Ok(())
        }
    }
}

/// Keeps a copy of a damaged segment as `<name>.corrupt`, never read, for a human to inspect.
fn keep_corrupt(dir: &Path, path: &Path, report: &mut RecoveryReport) -> Result<()> {
    let copy = corrupt_name(path);
    fs::copy(path, &copy).map_err(Error::io("copy", &copy))?;
    fs::File::open(&copy).and_then(|f| f.sync_all()).map_err(Error::io("fsync", &copy))?;
    storage::sync_dir(dir)?;
    tracing::warn!(file = %copy.display(), "kept a copy of the damaged segment");
    report.files_kept_corrupt.push(copy);
    Ok(())
}

/// `<path>.corrupt`, or `<path>.corrupt.N` if earlier recoveries kept copies already.
fn corrupt_name(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(CORRUPT_SUFFIX);
    let first = std::path::PathBuf::from(&name);
    (1..)
        .map(|n| if n == 1 { first.clone() } else { format!("{}.{n}", first.display()).into() })
        .find(|p: &std::path::PathBuf| !p.exists())
        .unwrap_or(first)
}

/// Phase 3: rebuild the scanned segments' indexes, cut the last one at its valid end, remove the
/// segments after it, fsync the directory. `older` are the segments below the scan, kept as they are.
fn apply(
    dir: &Path,
    older: &[SegmentFile],
    end: End,
    removed: &[SegmentFile],
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Loaded> {
    let count = end.kept.len();
    let mut files = older.to_vec();
    for (i, (file, mut scan)) in end.kept.into_iter().enumerate() {
        let is_last = i + 1 == count;
        // Every segment, the active one too, gets its final time entry: the appender resumes its
        // largest timestamp from the last entry, and time lookups skip a segment by it.
        scan.plan.finish(file.base);
        write_index_files(dir, file.base, &scan.plan)?;
        report.indexes_rebuilt += 1;
        crash_point!("after_index_rebuild");
        if is_last {
            // The segment the log continues in: cut it at its valid end and re-extend it with
            // zeros (DESIGN.md §9, recovery form), so even after a crash right here it still looks
            // like an active segment and never like a sealed one that lost data.
            if scan.valid_len != file.len {
                report.bytes_truncated += cut_data(dir, file, &scan)? - scan.valid_len;
            }
            storage::cut_file(
                &SegmentPaths::new(dir, file.base).log,
                scan.valid_len,
                config.segment_bytes.max(file.len),
            )?;
        } else if scan.valid_len != file.len {
            // A sealed segment left untrimmed by a crash during a roll: finish trimming it.
            storage::cut_file(&SegmentPaths::new(dir, file.base).log, scan.valid_len, scan.valid_len)?;
        } else {
            // Kept whole: its data may still be only in the page cache of a crashed process; the
            // recovery point is about to move past it.
            sync_file(dir, file.base)?;
        }
        files.push(SegmentFile { base: file.base, len: scan.valid_len });
    }
    crash_point!("after_truncate");
    for &file in removed {
        remove_segment(dir, file, config, report)?;
    }
    if !removed.is_empty() {
        storage::sync_dir(dir)?;
    }
    open_segments(dir, &files, end.next_offset, config)
}

/// Where the data that a cut at `scan.valid_len` removes ends, for the report: the last non-zero
/// byte before the first all-zero 64 KiB window. Bounded, so an unclean open never reads the
/// gigabyte of preallocated zeros after a torn tail; zeros followed by data further on are cut but
/// not counted.
fn cut_data(dir: &Path, file: SegmentFile, scan: &Scan) -> Result<u64> {
    const WINDOW: u64 = 64 << 10;
    let mut end = scan.valid_len;
    let mut from = scan.valid_len;
    while from < file.len {
        let window = SegmentFile { base: file.base, len: file.len.min(from + WINDOW) };
        let window_end = data_end(dir, window, from)?;
        if window_end == from {
            break;
        }
        end = window_end;
        from = window.len;
    }
    Ok(end)
}

/// The position after the last non-zero byte of a segment file from `from` on.
fn data_end(dir: &Path, file: SegmentFile, from: u64) -> Result<u64> {
    let path = SegmentPaths::new(dir, file.base).log;
    let reader = MappedFile::open_sealed(&path, file.len, crate::config::ReadPath::Pread);
    let end = walk::nonzero_end(&reader, from, file.len);
    reader.retire();
    end
}

fn sync_file(dir: &Path, base: u64) -> Result<()> {
    let path = SegmentPaths::new(dir, base).log;
    let file = fs::File::open(&path).map_err(Error::io("open", &path))?;
    file.sync_data().map_err(Error::io("fdatasync", &path))
}

/// Deletes a segment after the end of the recovered log, counting the valid records and the bytes it
/// held. Under `TruncateCorrupt` a segment holding data is kept as `.corrupt` instead.
pub(crate) fn remove_segment(
    dir: &Path,
    file: SegmentFile,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    let records = scan_file(dir, file, config, Access::Mapped).map_or(0, |s| s.records);
    let bytes = data_end(dir, file, 0)?;
    report.records_truncated += records;
    report.bytes_truncated += bytes;
    let paths = SegmentPaths::new(dir, file.base);
    if config.recovery == RecoveryMode::TruncateCorrupt && bytes > 0 {
        let kept = corrupt_name(&paths.log);
        fs::rename(&paths.log, &kept).map_err(Error::io("rename", &paths.log))?;
        report.files_kept_corrupt.push(kept);
    }
    for path in [paths.log, paths.index, paths.time_index] {
        if storage::remove_if_exists(&path)? {
            tracing::warn!(file = %path.display(), "removed a segment past the end of the recovered log");
            report.files_deleted.push(path);
        }
        crash_point!("mid_remove");
    }
    Ok(())
}
