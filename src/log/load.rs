//! Opening a log directory: the load and recovery procedure of DESIGN.md §7 (Kafka's `LogLoader`).
//! Each step is a small function; each logs what it changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CLEAN_SHUTDOWN_FILE, CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, MAX_SEGMENT_BYTES,
    OFFSET_INDEX_ENTRY_LEN, PREALLOC_SUFFIX, TIME_INDEX_ENTRY_LEN, TIME_INDEX_SUFFIX, TMP_SUFFIX, parse_file_name,
};
use crate::log::checkpoint::{Checkpoint, CleanShutdown};
use crate::log::segment::{self, LogSegment, SegmentPaths};
use crate::storage::{self, MappedFile};

/// What opening a log found and changed. Also logged at open.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
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
    /// Bytes of invalid data removed from the end of the log.
    pub bytes_truncated: u64,
    /// Records removed with them (whole valid batches in removed later segments).
    pub records_truncated: u64,
    /// Files deleted: leftovers of interrupted operations, orphan indexes, removed segments.
    pub files_deleted: Vec<PathBuf>,
    /// Records below the recovery point (acknowledged as durable) that were lost. Normally 0.
    pub acknowledged_records_lost: u64,
    /// The recovery point after opening: every offset below it is durable.
    pub recovery_point: u64,
    /// Time the open took, in microseconds.
    pub duration_us: u64,
}

/// The state of a loaded directory, ready to become a `Log`.
pub(crate) struct Loaded {
    /// Ascending by base offset; the last is the active segment.
    pub segments: Vec<LogSegment>,
    pub next_offset: u64,
    pub log_start_offset: u64,
    pub report: RecoveryReport,
}

/// A `.log` file found in the directory.
#[derive(Debug, Clone, Copy)]
struct SegmentFile {
    base: u64,
    len: u64,
}

/// Runs DESIGN.md §7 steps 1–5 on a locked directory.
pub(crate) fn load(dir: &Path, config: &LogConfig) -> Result<Loaded> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let checkpoint = read_checkpoint(dir)?;
    let marker = take_clean_marker(dir)?;
    remove_leftovers(dir, &mut report)?;
    let files = list_segments(dir)?;
    check_cheap_indexes(dir, &files, config, &mut report)?;
    let mut loaded = match files.last() {
        None => fresh(dir, checkpoint.map_or(0, |c| c.log_start_offset), config)?,
        Some(last) => match clean_end(dir, *last, marker, config, &mut report)? {
            Some(next_offset) => open_segments(dir, &files, next_offset, config)?,
            None => recover(dir, files, checkpoint.map_or(0, |c| c.recovery_point), config, &mut report)?,
        },
    };
    let start = checkpoint.map_or(0, |c| c.log_start_offset).max(loaded.segments[0].base_offset());
    loaded.log_start_offset = start;
    if start > loaded.next_offset {
        tracing::warn!(
            start,
            end = loaded.next_offset,
            "log start offset is past the recovered end; starting an empty log there"
        );
        loaded = restart_empty_at(dir, loaded, start, config, &mut report)?;
    }
    report.segments_loaded = loaded.segments.len() as u64;
    report.recovery_point = loaded.next_offset;
    report.duration_us = started.elapsed().as_micros() as u64;
    Checkpoint { log_start_offset: loaded.log_start_offset, recovery_point: loaded.next_offset }.write(dir)?;
    loaded.report = report;
    Ok(loaded)
}

/// Step 1: the checkpoint. A missing or damaged one means "scan everything" (logged).
fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>> {
    match Checkpoint::read(dir)? {
        Some(Ok(checkpoint)) => Ok(Some(checkpoint)),
        Some(Err(reason)) => {
            tracing::warn!(dir = %dir.display(), %reason, "checkpoint is unreadable; recovering from the first segment");
            Ok(None)
        }
        None => Ok(None),
    }
}

/// Step 1: reads and deletes the clean-shutdown marker (the directory is fsynced), so a crash from
/// here on is never mistaken for a clean shutdown.
fn take_clean_marker(dir: &Path) -> Result<Option<CleanShutdown>> {
    let Some(marker) = CleanShutdown::read(dir)? else { return Ok(None) };
    storage::remove_if_exists(&dir.join(CLEAN_SHUTDOWN_FILE))?;
    storage::sync_dir(dir)?;
    match marker {
        Ok(marker) => Ok(Some(marker)),
        Err(reason) => {
            tracing::warn!(dir = %dir.display(), %reason, "clean-shutdown marker is damaged; treating the shutdown as unclean");
            Ok(None)
        }
    }
}

/// Step 2: deletes the leftovers of interrupted operations and indexes without a `.log`.
fn remove_leftovers(dir: &Path, report: &mut RecoveryReport) -> Result<()> {
    let names = dir_names(dir)?;
    let is_log = |base: u64| names.iter().any(|n| parse_file_name(n) == Some((base, LOG_SUFFIX)));
    let mut removed = Vec::new();
    for name in &names {
        let leftover = [DELETED_SUFFIX, CLEANED_SUFFIX, PREALLOC_SUFFIX, TMP_SUFFIX].iter().any(|s| name.ends_with(s));
        let orphan = match parse_file_name(name) {
            Some((base, INDEX_SUFFIX | TIME_INDEX_SUFFIX)) => !is_log(base),
            _ => false,
        };
        if leftover || orphan {
            let path = dir.join(name);
            tracing::info!(file = %path.display(), "deleting leftover file");
            storage::remove_if_exists(&path)?;
            removed.push(path);
        }
    }
    if !removed.is_empty() {
        storage::sync_dir(dir)?;
        report.files_deleted.extend(removed);
    }
    Ok(())
}

fn dir_names(dir: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(Error::io("list", dir))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("list", dir))?;
        names.extend(entry.file_name().to_str().map(str::to_owned));
    }
    Ok(names)
}

/// The `.log` files, ascending by base offset.
fn list_segments(dir: &Path) -> Result<Vec<SegmentFile>> {
    let mut files = Vec::new();
    for name in dir_names(dir)? {
        if let Some((base, LOG_SUFFIX)) = parse_file_name(&name) {
            let path = dir.join(&name);
            let len = fs::metadata(&path).map_err(Error::io("stat", &path))?.len();
            if len > MAX_SEGMENT_BYTES {
                return Err(Error::corrupt(
                    path,
                    MAX_SEGMENT_BYTES,
                    Corruption::BadLength { length: len, available: MAX_SEGMENT_BYTES },
                ));
            }
            files.push(SegmentFile { base, len });
        }
    }
    files.sort_by_key(|f| f.base);
    Ok(files)
}

/// Step 3, cheap part: every segment has both indexes, each a whole number of entries; otherwise
/// they are rebuilt now (the full check of sealed segments runs at their first read).
fn check_cheap_indexes(
    dir: &Path,
    files: &[SegmentFile],
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    for file in files {
        let paths = SegmentPaths::new(dir, file.base);
        let whole = |path: &Path, entry: usize| fs::metadata(path).is_ok_and(|m| m.len() % entry as u64 == 0);
        if whole(&paths.index, OFFSET_INDEX_ENTRY_LEN) && whole(&paths.time_index, TIME_INDEX_ENTRY_LEN) {
            continue;
        }
        tracing::warn!(segment = %paths.log.display(), "index missing or not a whole number of entries; rebuilding");
        rebuild_indexes(dir, *file, config)?;
        report.indexes_rebuilt += 1;
    }
    Ok(())
}

/// Rebuilds a segment's indexes from its `.log` (valid prefix only; recovery decides about the rest).
fn rebuild_indexes(dir: &Path, file: SegmentFile, config: &LogConfig) -> Result<segment::Scan> {
    let mut scan = scan_file(dir, file, config)?;
    scan.plan.finish(file.base);
    segment::write_index_files(dir, file.base, &scan.plan)?;
    Ok(scan)
}

/// Validates a segment file batch by batch from its start.
fn scan_file(dir: &Path, file: SegmentFile, config: &LogConfig) -> Result<segment::Scan> {
    let path = SegmentPaths::new(dir, file.base).log;
    let mapped = MappedFile::open_sealed(&path, file.len);
    let scan = mapped.read_with(0, file.len as usize, |bytes| {
        let mut scan = segment::scan(bytes, file.base, config.index_interval_bytes);
        if scan.invalid.is_some() {
            // Report what was really cut, not the preallocated zeros after it.
            let tail = &bytes[scan.valid_len as usize..];
            scan.garbage_bytes = tail.iter().rposition(|&b| b != 0).map_or(0, |p| p as u64 + 1);
        }
        scan
    })?;
    mapped.retire();
    scan.ok_or_else(|| Error::io("scan", &path)(std::io::ErrorKind::NotFound.into()))
}

/// Step 4, clean case: the marker is valid and matches the active segment exactly. Returns the
/// next offset, or `None` if the shutdown must be treated as unclean.
fn clean_end(
    dir: &Path,
    last: SegmentFile,
    marker: Option<CleanShutdown>,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Option<u64>> {
    let Some(marker) = marker else { return Ok(None) };
    if marker.active_base != last.base || u64::from(marker.active_len) != last.len {
        tracing::warn!(?marker, last.base, last.len, "clean-shutdown marker does not match the active segment");
        return Ok(None);
    }
    // The active segment is at or past the recovery point: its indexes get the full check now.
    let segment = LogSegment::open_sealed(dir, last.base, last.len, marker.next_offset, config)?;
    if let Err(reason) = segment.check_indexes() {
        tracing::warn!(segment = %segment.log_path().display(), %reason, "active segment index failed its check");
        segment.retire();
        return Ok(None);
    }
    let end = segment.walk_to_end();
    segment.retire();
    match end {
        Ok(Some((position, next))) if position == last.len && next == marker.next_offset => {
            report.clean_shutdown = true;
            Ok(Some(next))
        }
        _ => {
            tracing::warn!(?marker, "the active segment does not end where the clean-shutdown marker says");
            Ok(None)
        }
    }
}

/// Opens the loaded segments: all but the last sealed (trusted up to their file length), the last
/// active, ending at `next_offset`.
fn open_segments(dir: &Path, files: &[SegmentFile], next_offset: u64, config: &LogConfig) -> Result<Loaded> {
    let mut segments = Vec::with_capacity(files.len());
    for pair in files.windows(2) {
        segments.push(LogSegment::open_sealed(dir, pair[0].base, pair[0].len, pair[1].base, config)?);
    }
    let Some(last) = files.last() else {
        return Err(Error::io("open", dir)(std::io::ErrorKind::NotFound.into()));
    };
    segments.push(LogSegment::open_active(dir, last.base, last.len, next_offset, config)?);
    Ok(Loaded { segments, next_offset, log_start_offset: files[0].base, report: RecoveryReport::default() })
}

/// A directory with no segments: an empty log starting at `start`.
fn fresh(dir: &Path, start: u64, config: &LogConfig) -> Result<Loaded> {
    let segment = LogSegment::create(dir, start, config, 0)?;
    storage::sync_dir(dir)?;
    Ok(Loaded {
        segments: vec![segment],
        next_offset: start,
        log_start_offset: start,
        report: RecoveryReport::default(),
    })
}

/// Step 4, unclean case: validate from the segment holding the recovery point; cut the log at the
/// first invalid batch at or past it; fail on damage below it.
fn recover(
    dir: &Path,
    mut files: Vec<SegmentFile>,
    recovery_point: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Loaded> {
    let first = files.iter().rposition(|f| f.base <= recovery_point).unwrap_or(0);
    tracing::info!(dir = %dir.display(), recovery_point, from_segment = files[first].base, "unclean shutdown: scanning");
    let mut expected = files[first].base;
    let mut keep = files.len();
    for i in first..files.len() {
        let file = files[i];
        if file.base != expected {
            tracing::warn!(expected, found = file.base, "segment does not continue the log; the log ends before it");
            let previous = SegmentFile { base: files[i - 1].base, len: files[i - 1].len };
            check_not_acknowledged(
                dir,
                previous,
                expected,
                recovery_point,
                Corruption::SegmentGap { expected, found: file.base },
            )?;
            keep = i;
            break;
        }
        let mut scan = scan_file(dir, file, config)?;
        report.segments_scanned += 1;
        report.bytes_scanned += scan.valid_len;
        let torn = scan.invalid.clone();
        if let Some(reason) = &torn {
            let damaged = SegmentFile { base: file.base, len: scan.valid_len };
            check_not_acknowledged(dir, damaged, scan.next_offset, recovery_point, reason.clone())?;
            tracing::warn!(segment = file.base, position = scan.valid_len, %reason, "torn tail: removing the log from here");
            report.bytes_truncated += scan.garbage_bytes;
            keep = i + 1;
        }
        if torn.is_none() && i + 1 < files.len() {
            scan.plan.finish(file.base);
        }
        segment::write_index_files(dir, file.base, &scan.plan)?;
        report.indexes_rebuilt += 1;
        if scan.valid_len != file.len {
            // A torn tail, the zero tail of the active segment, or a sealed segment left untrimmed
            // by a crash during a roll.
            truncate_file(dir, file.base, scan.valid_len)?;
        }
        files[i].len = scan.valid_len;
        expected = scan.next_offset;
        if torn.is_some() {
            break;
        }
    }
    let removed: Vec<SegmentFile> = files.drain(keep..).collect();
    for file in &removed {
        report.records_truncated += remove_segment(dir, *file, config, report)?;
    }
    if !removed.is_empty() {
        storage::sync_dir(dir)?;
    }
    open_segments(dir, &files, expected, config)
}

/// Damage that ends the log at `end` is acceptable only at or past the recovery point.
fn check_not_acknowledged(
    dir: &Path,
    file: SegmentFile,
    end: u64,
    recovery_point: u64,
    reason: Corruption,
) -> Result<()> {
    if end >= recovery_point {
        return Ok(());
    }
    let path = SegmentPaths::new(dir, file.base).log;
    tracing::error!(file = %path.display(), position = file.len, %reason, end, recovery_point, "damage below the recovery point");
    Err(Error::corrupt(path, file.len, reason))
}

/// The recovery form of suffix removal (DESIGN.md §9): nothing is mapped yet, so cut the file and
/// fsync it. The active segment is re-extended when it is mapped.
fn truncate_file(dir: &Path, base: u64, len: u64) -> Result<()> {
    let path = SegmentPaths::new(dir, base).log;
    let file = fs::OpenOptions::new().write(true).open(&path).map_err(Error::io("open", &path))?;
    file.set_len(len).map_err(Error::io("truncate", &path))?;
    file.sync_all().map_err(Error::io("fsync", &path))
}

/// Deletes a segment that lies after the end of the recovered log; returns the valid records it held.
fn remove_segment(dir: &Path, file: SegmentFile, config: &LogConfig, report: &mut RecoveryReport) -> Result<u64> {
    let records = scan_file(dir, file, config).map_or(0, |s| s.records);
    let paths = SegmentPaths::new(dir, file.base);
    for path in [paths.log, paths.index, paths.time_index] {
        if storage::remove_if_exists(&path)? {
            tracing::warn!(file = %path.display(), "removed a segment past the end of the recovered log");
            report.files_deleted.push(path);
        }
    }
    Ok(records)
}

/// Step 5: the log start offset is past everything recovered: drop it all and start there.
fn restart_empty_at(
    dir: &Path,
    loaded: Loaded,
    start: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Loaded> {
    for segment in loaded.segments {
        let file = SegmentFile { base: segment.base_offset(), len: segment.size() };
        segment.retire();
        remove_segment(dir, file, config, report)?;
    }
    let mut fresh = fresh(dir, start, config)?;
    fresh.log_start_offset = start;
    Ok(fresh)
}
