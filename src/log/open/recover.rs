//! Recovery after an unclean shutdown (docs/DESIGN.md §7 step 5): validate batch by batch from the
//! segment holding the recovery point (under `TruncateCorrupt`, the log start), decide where the
//! log ends, and only then change anything: cut the log there (§9, recovery form: `set_len`,
//! fsync) and rebuild the scanned indexes.

use std::ops::ControlFlow;

use std::path::Path;

use crate::config::{LogConfig, RecoveryMode};
use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::{CORRUPT_SUFFIX, FOREIGN_SUFFIX, REMOVED_SUFFIX};
use crate::log::checkpoint::Checkpoint;
use crate::log::index::IndexEntry;
use crate::log::index_plan::write_index_files;
use crate::log::offset_index::OffsetEntry;
use crate::log::open::files::SegmentFile;
use crate::log::open::loaded::{Access, Loaded, RecoveryReport, open_segments, scan_file, scan_file_from};
use crate::log::segment::SegmentPaths;
use crate::log::time_index::TimeEntry;
use crate::log::walk::{self, BatchPos, Scan, Stop};
use crate::storage::{self, MappedFile};

/// Where the scan found the end of the log.
struct End {
    /// The segments kept, each with its scan; the last one holds the end.
    kept: Vec<(SegmentFile, Scan)>,
    /// Foreign files found among them (docs/DESIGN.md §4), to be set aside (only under
    /// `TruncateCorrupt`).
    foreign: Vec<SegmentFile>,
    /// Files looked at: the kept ones and the foreign ones.
    consumed: usize,
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
    // A normal open scans from the segment holding the recovery point (older ones were sealed,
    // hence durable, and are checked at first read: Kafka's KAFKA-7283). `strata recover --force`
    // scans from the segment holding the log start offset: damage anywhere in the log is cut there.
    let mut first = match config.recovery {
        // Records below the log start offset are deleted anyway: from the segment holding it.
        RecoveryMode::TruncateCorrupt => files.iter().rposition(|f| f.base <= log_start).unwrap_or(0),
        RecoveryMode::Strict => files.iter().rposition(|f| f.base <= recovery_point).unwrap_or(0),
    };
    // The first segment scanned must continue the one before it; if it does not (a foreign file,
    // or data missing), scan that one too, so the scan can tell which (docs/DESIGN.md §4). Below
    // the segment holding the log start offset, only if the one before holds records at or past the
    // start (two files overlapping there: one is foreign); an overlap of deleted records alone is
    // no part of the log.
    let start_segment = files.iter().rposition(|f| f.base <= log_start).unwrap_or(0);
    if first > 0 {
        let previous_end = segment_end(dir, files[first - 1])?;
        if previous_end != files[first].base && (first > start_segment || previous_end > log_start) {
            first -= 1;
        }
    }
    tracing::info!(dir = %dir.display(), recovery_point, from_segment = files[first].base, "unclean shutdown: scanning");
    let end = scan_from(dir, &files[first..], log_start, config, report)?;
    let cut = &end.kept[end.kept.len() - 1];
    let path = SegmentPaths::new(dir, cut.0.base).log;
    let rest = &files[first + end.consumed..];
    let after = rest.first().map(|f| f.base);
    let sealed = end.reason.is_some() && after.is_some() && was_sealed(dir, cut.0);
    // Records below the log start offset are deleted anyway: only [start, recovery point) must
    // survive (after a `reset_at` past the end, start = recovery point and nothing must).
    if end.next_offset.max(log_start) < recovery_point || sealed {
        let reason =
            end.reason.clone().unwrap_or(Corruption::EndsBeforeRecoveryPoint { end: end.next_offset, recovery_point });
        // An error for a strict open (it fails); what `recover --force` was asked to repair
        // otherwise (it says so itself, just below).
        if config.recovery == RecoveryMode::Strict {
            tracing::error!(file = %path.display(), position = cut.1.valid_len, %reason, end = end.next_offset, recovery_point, sealed, "damage to acknowledged data");
        }
        accept_loss(&path, cut.1.valid_len, config, reason)?;
        // Every record of a sealed segment was durable (it was fsynced before it was trimmed): the
        // loss runs to the end of the last sealed one (the last segment's base), or to the
        // recovery point if that is further.
        let last_sealed_end = if after.is_some() { files.last().map_or(0, |f| f.base) } else { 0 };
        let lost_up_to = recovery_point.max(last_sealed_end);
        report.acknowledged_records_lost += lost_up_to.saturating_sub(end.next_offset);
        // A copy of the segment only if the damage is in it (not if data is missing after it).
        if !matches!(end.reason, Some(Corruption::SegmentGap { .. })) {
            keep_corrupt(dir, &path, report)?;
        }
        // The segments after the damage are set aside (`.removed`) while the checkpoint still
        // claims their records: a crash until then makes the next open refuse again, never take
        // them for a torn tail and delete them.
        remove_segments(dir, rest, config, report)?;
        // Lower the recovery point before the cut, so a crash during it cannot resurrect the claim.
        let start = Checkpoint::read(dir)?.and_then(Result::ok).map_or(0, |c| c.checkpoint.log_start_offset);
        Checkpoint { log_start_offset: start, recovery_point: end.next_offset }.write(dir)?;
        for file in &end.foreign {
            set_aside_foreign(dir, file.base, report)?;
        }
        return apply(dir, &files[..first], end, &[], config, report);
    } else if let Some(reason) = &end.reason {
        tracing::warn!(file = %path.display(), position = cut.1.valid_len, %reason, "torn tail: the log ends here");
    }
    for file in &end.foreign {
        set_aside_foreign(dir, file.base, report)?;
    }
    apply(dir, &files[..first], end, rest, config, report)
}

/// Removes the segments after the end of the recovered log (kept as `.removed` under
/// `TruncateCorrupt`), then fsyncs the directory.
fn remove_segments(dir: &Path, removed: &[SegmentFile], config: &LogConfig, report: &mut RecoveryReport) -> Result<()> {
    for &file in removed {
        remove_segment(dir, file, config, report)?;
    }
    if !removed.is_empty() {
        storage::sync_dir(dir)?;
    }
    Ok(())
}

/// A foreign `.log` (docs/DESIGN.md §4): in `Strict` mode the open fails naming it, and nothing
/// changes; under `TruncateCorrupt` the caller sets it aside. A healthy segment is never blamed for
/// it.
pub(crate) fn foreign_found(dir: &Path, file: SegmentFile, why: &'static str, config: &LogConfig) -> Result<()> {
    let path = SegmentPaths::new(dir, file.base).log;
    tracing::warn!(file = %path.display(), why, "foreign segment file");
    match config.recovery {
        RecoveryMode::Strict => Err(Error::corrupt(path, 0, Corruption::ForeignFile(why))),
        RecoveryMode::TruncateCorrupt => Ok(()),
    }
}

/// Renames a foreign `.log` (and index files of its name) to `<name>.foreign`: kept for a human,
/// never read, never deleted.
pub(crate) fn set_aside_foreign(dir: &Path, base: u64, report: &mut RecoveryReport) -> Result<()> {
    let paths = SegmentPaths::new(dir, base);
    for path in [paths.log, paths.index, paths.time_index] {
        if !path.exists() {
            continue;
        }
        let kept = unique_name(&path, FOREIGN_SUFFIX);
        storage::rename(&path, &kept)?;
        tracing::warn!(file = %kept.display(), "set aside a foreign file");
        report.files_kept_foreign.push(kept);
    }
    storage::sync_dir(dir)
}

/// Whether a segment that is not the last one was sealed (fsynced, then trimmed) before the crash:
/// then an invalid batch in it, or a gap after it, cannot be a torn write, whatever the recovery
/// point says (a missing or old checkpoint must not turn damage into a silent cut of every later
/// segment). Judged from the files alone (the configured segment size may have changed since):
/// sealing trims the indexes, while an unsealed segment's are still preallocated, their unused
/// tail zero entries. (Not from the `.log`: a batch may well end in zero bytes.) An index exactly
/// full, or no index at all, reads as sealed: the misjudgment refuses, it never cuts silently.
pub(crate) fn was_sealed(dir: &Path, file: SegmentFile) -> bool {
    let paths = SegmentPaths::new(dir, file.base);
    let preallocated = index_has_zero_tail(&paths.index, OffsetEntry::LEN)
        .or_else(|| index_has_zero_tail(&paths.time_index, TimeEntry::LEN));
    preallocated != Some(true)
}

/// Whether an index file ends in an all-zero entry of `entry` bytes (the unused tail of a
/// preallocated index); `None` if it cannot be read. Only a file of two entries or more can tell:
/// a real entry may be all zeros only as the first one (relative offset 0 at position 0, or at
/// timestamp 0), as later entries' relative offsets grow.
fn index_has_zero_tail(path: &Path, entry: usize) -> Option<bool> {
    use std::os::unix::fs::FileExt as _;
    let file = storage::open_read(path).ok()?;
    let len = file.metadata().ok()?.len();
    if len < 2 * entry as u64 {
        return Some(false);
    }
    let mut last = vec![0u8; entry];
    file.read_exact_at(&mut last, len - entry as u64).ok()?;
    Some(last.iter().all(|&b| b == 0))
}

/// Phase 1, read only: scans segment after segment until one ends early.
fn scan_from(
    dir: &Path,
    files: &[SegmentFile],
    log_start: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<End> {
    let mut end = End { kept: Vec::new(), foreign: Vec::new(), consumed: 0, next_offset: files[0].base, reason: None };
    for &file in files {
        let expected = end.next_offset;
        if file.base != expected && !end.kept.is_empty() {
            let why = match (file.base < expected, file.len) {
                (true, _) => Some("its base offset falls inside the previous segment's offsets"),
                (false, 0) => Some("empty, and its base offset does not continue the previous segment"),
                (false, _) => None,
            };
            if let Some(why) = why {
                foreign_found(dir, file, why, config)?;
                end.foreign.push(file);
                end.consumed += 1;
                continue;
            }
            tracing::warn!(expected, found = file.base, "segment does not continue the log; the log ends before it");
            end.reason = Some(Corruption::SegmentGap { expected, found: file.base });
            return Ok(end);
        }
        let scan = scan_file_from(dir, file, config, Access::Mapped, log_start)?;
        report.segments_scanned += 1;
        report.bytes_scanned += scan.valid_len;
        end.next_offset = scan.next_offset;
        end.reason = scan.invalid.clone();
        end.kept.push((file, scan));
        end.consumed += 1;
        if end.reason.is_some() {
            return Ok(end);
        }
    }
    Ok(end)
}

/// Where a segment's data ends (the offset after its last batch), from its last index entry (a
/// short walk), or from its start if the index is missing or does not lead to a batch. Reads only.
pub(crate) fn segment_end(dir: &Path, file: SegmentFile) -> Result<u64> {
    let paths = SegmentPaths::new(dir, file.base);
    let indexed = last_index_entry(&paths.index).filter(|e| u64::from(e.position) < file.len);
    let from_start = BatchPos { position: 0, expected: file.base };
    let start = indexed.map_or(from_start, |e| BatchPos {
        position: u64::from(e.position),
        expected: file.base.saturating_add(u64::from(e.relative_offset)),
    });
    let log = MappedFile::open_sealed(&paths.log, file.len, crate::config::ReadPath::Pread);
    let walk = |start| walk::walk_file(&log, file.len, start, |_, _, _| ControlFlow::<()>::Continue(()));
    let mut end = walk(start)?;
    if start != from_start && end.as_ref().is_some_and(|e| e.at == start && e.stop != Stop::End) {
        end = walk(from_start)?;
    }
    log.retire();
    Ok(end.map_or(file.base, |e| e.at.expected))
}

/// The last entry of an `.index` file, if it has one that is not zero.
fn last_index_entry(path: &Path) -> Option<OffsetEntry> {
    let bytes = storage::read_if_exists(path).ok()??;
    bytes.chunks_exact(OffsetEntry::LEN).map(OffsetEntry::decode_from).rfind(|e| !e.is_zero())
}

/// Damage to acknowledged data: an error in `Strict` mode, accepted (and logged) otherwise.
pub(crate) fn accept_loss(path: &Path, position: u64, config: &LogConfig, reason: Corruption) -> Result<()> {
    match config.recovery {
        RecoveryMode::Strict => Err(Error::corrupt(path, position, reason)),
        RecoveryMode::TruncateCorrupt => {
            tracing::warn!(file = %path.display(), position, %reason, "damage to acknowledged data: cutting the log there (TruncateCorrupt)");
            Ok(())
        }
    }
}

/// Keeps a copy of a damaged segment as `<name>.corrupt`, never read, for a human to inspect.
fn keep_corrupt(dir: &Path, path: &Path, report: &mut RecoveryReport) -> Result<()> {
    let copy = corrupt_name(path);
    storage::copy_synced(path, &copy)?;
    storage::sync_dir(dir)?;
    tracing::warn!(file = %copy.display(), "kept a copy of the damaged segment");
    report.files_kept_corrupt.push(copy);
    Ok(())
}

/// `<path>.corrupt`, or `<path>.corrupt.N` if earlier recoveries kept copies already.
fn corrupt_name(path: &Path) -> std::path::PathBuf {
    unique_name(path, CORRUPT_SUFFIX)
}

/// `<path><suffix>`, or `<path><suffix>.N` for the first N that is free (kept files are never
/// overwritten).
fn unique_name(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
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
    // The segments after the end go first (before the last kept one is cut and re-extended).
    remove_segments(dir, removed, config, report)?;
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
            // zeros (docs/DESIGN.md §9, recovery form), so even after a crash right here it still
            // looks like an active segment and never like a sealed one that lost data.
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
        files.push(SegmentFile { base: file.base, len: scan.valid_len, id: None });
    }
    crash_point!("after_truncate");
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
        let window = SegmentFile { len: file.len.min(from + WINDOW), ..file };
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
    let file = storage::open_read(&path)?;
    file.sync_data().map_err(Error::io("fdatasync", &path))
}

/// Deletes a segment after the end of the recovered log, counting the valid records and the bytes it
/// held. Under `TruncateCorrupt` a segment holding data is kept, renamed `.removed`, instead.
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
        // Healthy, but after the damage: its records leave the log; the file is kept.
        let kept = unique_name(&paths.log, REMOVED_SUFFIX);
        storage::rename(&paths.log, &kept)?;
        tracing::warn!(file = %kept.display(), "kept a segment removed after the damage");
        report.files_kept_removed.push(kept);
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
