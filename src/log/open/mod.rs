//! Opening a log directory: the load procedure of docs/DESIGN.md §7 (Kafka's `LogLoader`). Each
//! step is a small function and logs what it changed; the unclean-shutdown scan is in `recover.rs`,
//! the completion or undoing of compaction swaps in `swap.rs`. Dependencies point one way: this
//! file uses `recover` and `swap`, which use only `files` and `loaded`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::{
    CLEAN_SHUTDOWN_FILE, CLEANED_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, PREALLOC_SUFFIX, SWAP_SUFFIX,
    TIME_INDEX_SUFFIX, TMP_SUFFIX, parse_file_name,
};
use crate::log::checkpoint::{Checkpoint, CleanShutdown, Stored};
use crate::log::index_plan::write_index_files;
use crate::log::segment::{LogSegment, SegmentPaths};
use crate::storage;

pub(crate) mod files;
pub(crate) mod loaded;
pub(crate) mod recover;
pub(crate) mod report;
mod swap;

use files::{SegmentFile, dir_names, has_kept_suffix, is_corrupt_copy, list_segments, remove_logged, segment_files};
use loaded::{Access, LiveTail, Loaded, RecoveryReport, open_segments, recovery_point_now, scan_file};

/// Runs docs/DESIGN.md §7 (steps 1–6) on a locked directory. An open refused for damage or a
/// foreign file (`Error::Corrupt`, decided before any segment changed), or for a batch of a newer
/// format (`Error::UnsupportedFormat`), puts the clean-shutdown marker back: a failed open changes
/// nothing a later one relies on.
pub(crate) fn load(dir: &Path, config: &LogConfig) -> Result<Loaded> {
    let marker_path = dir.join(CLEAN_SHUTDOWN_FILE);
    let marker_bytes = storage::read_if_exists(&marker_path)?;
    let loaded = load_marked(dir, config);
    if let (Err(Error::Corrupt { .. } | Error::UnsupportedFormat { .. }), Some(bytes)) = (&loaded, marker_bytes)
        && !marker_path.exists()
        && let Err(error) = storage::write_atomically(dir, CLEAN_SHUTDOWN_FILE, &bytes)
    {
        tracing::warn!(%error, "could not put the clean-shutdown marker back; the next open scans");
    }
    loaded
}

fn load_marked(dir: &Path, config: &LogConfig) -> Result<Loaded> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let stored = read_stored_checkpoint(dir)?;
    let checkpoint = stored.map(|s| s.checkpoint);
    let marker = take_clean_marker(dir)?;
    crash_point!("after_marker_delete");
    // The directory is listed once; only the rare repairs below list it again.
    let mut names = dir_names(dir)?;
    note_corrupt_copies(dir, &names, &mut report);
    if remove_leftovers(dir, &names, &mut report)? | swap::complete_swaps(dir, &names, config, &mut report)? {
        names = dir_names(dir)?;
    }
    if let Some(offset) = stored.and_then(|s| s.pending_reset) {
        complete_reset(dir, &names, offset, &mut report)?;
        names = dir_names(dir)?;
    }
    let files = set_aside_empty_foreign(dir, segment_files(dir, &names)?, config, &mut report)?;
    let recovery_point = checkpoint.map_or(0, |c| c.recovery_point);
    let start = checkpoint.map_or(0, |c| c.log_start_offset);
    // Missing indexes are rebuilt once the log's segments are known (a strict open that fails
    // has changed no segment file): the clean path needs the active segment's indexes (it treats
    // the shutdown as unclean without them), recovery rebuilds those of every segment it scans.
    let (mut loaded, unchanged_names) = match files.last() {
        None => (empty_dir(dir, start, recovery_point, config, &mut report)?, None),
        Some(last) => match clean_end(dir, *last, marker, config, &mut report)? {
            Some(next_offset) => (open_segments(dir, &files, next_offset, config)?, Some(names)),
            None => (recover::recover(dir, files, recovery_point, start, config, &mut report)?, None),
        },
    };
    let names = match unchanged_names {
        Some(names) => names,
        None => dir_names(dir)?,
    };
    let kept: Vec<SegmentFile> =
        loaded.segments.iter().map(|s| SegmentFile { base: s.base_offset(), len: s.size(), id: None }).collect();
    rebuild_missing_indexes(dir, &kept, &names, config, &mut report)?;
    loaded.log_start_offset = start.max(loaded.segments[0].base_offset());
    if loaded.log_start_offset > loaded.next_offset {
        tracing::warn!(
            start = loaded.log_start_offset,
            end = loaded.next_offset,
            "log start offset is past the recovered end; starting an empty log there"
        );
        loaded = restart_empty_at(dir, loaded, config, &mut report)?;
    }
    report.segments_loaded = loaded.segments.len() as u64;
    report.recovery_point = loaded.next_offset;
    let checkpoint = Checkpoint { log_start_offset: loaded.log_start_offset, recovery_point: loaded.next_offset };
    match checkpoint.write(dir) {
        // Replacing a missing or version-1 checkpoint needs a block. The one on disk (or none)
        // stays valid, only older: a crash before the next flush writes one scans more. A full
        // disk must not stop the open that lets the user delete records to make room.
        Err(error @ Error::DiskFull { .. }) => {
            tracing::warn!(%error, "could not write the checkpoint at open; the next flush tries again");
            loaded.checkpoint_stale = true;
        }
        result => result?,
    }
    report.duration_us = started.elapsed().as_micros() as u64;
    loaded.report = report;
    Ok(loaded)
}

/// A read-only open (docs/DESIGN.md §3): no lock, nothing changed, files read with `pread`; the end
/// of the valid data in the last segment is the end of the log (on a live log, a torn tail is a
/// batch still being written).
///
/// The last segment's valid data ends the log, unless the recovery point says records past it were
/// durable: then the log ends at the recovery point, and a read reaching the damage gets
/// `Error::Corrupt` (damage to acknowledged records is never hidden). The checkpoint is read again
/// after the scan, since a live writer's truncation lowers it before cutting.
pub(crate) fn load_read_only(dir: &Path, config: &LogConfig) -> Result<Loaded> {
    // A live writer renames, deletes and trims files while they are listed and scanned: a file
    // gone or shorter in between means "look again", a few times, before it is an error.
    let mut attempt = 0;
    loop {
        match load_read_only_once(dir, config) {
            Err(error) if changed_under_us(&error) && attempt < READ_ONLY_LOAD_RETRIES => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// How often a read-only load looks at the files again after a writer changed them under it.
const READ_ONLY_LOAD_RETRIES: u32 = 10;

/// An error a writer changing a file between its listing and its reading causes.
fn changed_under_us(error: &Error) -> bool {
    match error {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Corrupt { reason: Corruption::ShortFile { .. }, .. } => true,
        _ => false,
    }
}

fn load_read_only_once(dir: &Path, config: &LogConfig) -> Result<Loaded> {
    let started = Instant::now();
    let stored = read_stored_checkpoint(dir)?;
    if let Some(offset) = stored.and_then(|s| s.pending_reset) {
        // A reset to `offset` is under way (or a crash interrupted it): its segments are of the
        // old log, and the log is empty at `offset` (the next open completes the reset).
        let empty = LogSegment::open_read_only(dir, offset, 0, offset, None, config);
        let report = RecoveryReport { segments_loaded: 1, recovery_point: offset, ..RecoveryReport::default() };
        let live_tail = None;
        return Ok(Loaded {
            segments: vec![empty],
            next_offset: offset,
            log_start_offset: offset,
            report,
            live_tail,
            checkpoint_stale: false,
        });
    }
    let checkpoint = stored.map(|s| s.checkpoint);
    let mut files = list_segments(dir)?;
    // A foreign empty `.log` (not the last, or the last but not continuing the one before it)
    // holds nothing: read around it.
    let last = files.last().map(|f| f.base);
    files.retain(|f| f.len > 0 || Some(f.base) == last);
    if let [.., previous, last] = files[..]
        && last.len == 0
        && recover::segment_end(dir, previous)? != last.base
    {
        files.pop();
    }
    let Some(last) = files.last() else {
        return Err(Error::io("open read-only", dir)(std::io::ErrorKind::NotFound.into()));
    };
    let mut segments = Vec::with_capacity(files.len());
    for pair in files.windows(2) {
        segments.push(LogSegment::open_read_only(dir, pair[0].base, pair[0].len, pair[1].base, pair[0].id, config));
    }
    let scan = scan_file(dir, *last, config, Access::Pread)?;
    let before = checkpoint.map_or(0, |c| c.recovery_point);
    let recovery_point = before.min(recovery_point_now(dir));
    let damaged = scan.next_offset < recovery_point && (scan.invalid.is_some() || scan.valid_len < last.len);
    let (len, next_offset) = if damaged {
        // Debug only: a view is taken again after errors; the first read that reaches the damage
        // reports it (once).
        tracing::debug!(
            file = %SegmentPaths::new(dir, last.base).log.display(),
            position = scan.valid_len,
            end = scan.next_offset,
            recovery_point,
            "damage below the recovery point: reads reaching it fail"
        );
        (last.len, recovery_point)
    } else {
        (scan.valid_len, scan.next_offset)
    };
    segments.push(LogSegment::open_read_only(dir, last.base, len, next_offset, last.id, config));
    let live_tail = LiveTail {
        path: SegmentPaths::new(dir, last.base).log,
        valid_len: scan.valid_len,
        end_offset: scan.next_offset,
    };
    let report = RecoveryReport {
        segments_loaded: segments.len() as u64,
        segments_scanned: 1,
        bytes_scanned: scan.valid_len,
        recovery_point,
        duration_us: started.elapsed().as_micros() as u64,
        ..RecoveryReport::default()
    };
    let log_start_offset = checkpoint.map_or(0, |c| c.log_start_offset).max(files[0].base);
    Ok(Loaded { segments, next_offset, log_start_offset, report, live_tail: Some(live_tail), checkpoint_stale: false })
}

/// Step 1: the checkpoint, with what the file says besides it (a reset in progress). A missing or
/// damaged one means "scan everything" (logged).
fn read_stored_checkpoint(dir: &Path) -> Result<Option<Stored>> {
    match Checkpoint::read(dir)? {
        Some(Ok(stored)) => Ok(Some(stored)),
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

/// Step 2: deletes the leftovers of interrupted operations (`.deleted`, `.cleaned`, `.prealloc`,
/// `.tmp`, stale `.swap`) and indexes without a `.log`. Returns whether anything was deleted.
fn remove_leftovers(dir: &Path, names: &[String], report: &mut RecoveryReport) -> Result<bool> {
    let stale_swaps = swap::stale_swaps(names);
    let logs: HashSet<u64> =
        names.iter().filter_map(|n| parse_file_name(n)).filter(|(_, s)| *s == LOG_SUFFIX).map(|(b, _)| b).collect();
    let is_log = |base: u64| logs.contains(&base);
    let before = report.files_deleted.len();
    for name in names {
        let leftover = [DELETED_SUFFIX, CLEANED_SUFFIX, PREALLOC_SUFFIX, TMP_SUFFIX].iter().any(|s| name.ends_with(s));
        let orphan = match parse_file_name(name) {
            Some((base, INDEX_SUFFIX | TIME_INDEX_SUFFIX)) => !is_log(base),
            // Index swaps whose log swap was already renamed into place (a crash between renames).
            Some((base, suffix)) if suffix.ends_with(SWAP_SUFFIX) && !suffix.starts_with(LOG_SUFFIX) => {
                !names.contains(&format!("{}{SWAP_SUFFIX}", crate::format::file_name(base, LOG_SUFFIX)))
            }
            _ => false,
        };
        if leftover || orphan || stale_swaps.contains(&name) {
            remove_logged(dir, name, "leftover file", report)?;
        }
    }
    let deleted = report.files_deleted.len() > before;
    if deleted {
        storage::sync_dir(dir)?;
    }
    Ok(deleted)
}

/// An empty `.log` that is not the last segment is foreign (docs/DESIGN.md §4): a roll never leaves
/// an empty segment behind another. `Strict`: the open fails naming it; `TruncateCorrupt`: it is
/// set aside as `.foreign`. (One whose base falls inside the previous segment's offsets is found by
/// the recovery scan.)
fn set_aside_empty_foreign(
    dir: &Path,
    files: Vec<SegmentFile>,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Vec<SegmentFile>> {
    let last = files.last().map(|f| f.base);
    let (foreign, files): (Vec<SegmentFile>, Vec<SegmentFile>) =
        files.into_iter().partition(|f| f.len == 0 && Some(f.base) != last);
    for file in foreign {
        recover::foreign_found(dir, file, "empty, and not the last segment", config)?;
        recover::set_aside_foreign(dir, file.base, report)?;
    }
    Ok(files)
}

/// Step 2: a `reset_at(offset)` wrote its checkpoint (start = recovery point = `offset`, the reset
/// pending) and then crashed before it finished: every segment is of the old log. Completing it
/// (deleting them; the log restarts empty at `offset`) gives the new state, never a mix of old
/// records above the new start (docs/DESIGN.md §9).
fn complete_reset(dir: &Path, names: &[String], offset: u64, report: &mut RecoveryReport) -> Result<()> {
    tracing::warn!(dir = %dir.display(), offset, "completing a reset a crash interrupted");
    for name in names {
        if matches!(parse_file_name(name), Some((_, LOG_SUFFIX | INDEX_SUFFIX | TIME_INDEX_SUFFIX))) {
            remove_logged(dir, name, "segment of the log before an interrupted reset", report)?;
        }
    }
    storage::sync_dir(dir)
}

/// Records (and logs) the `.corrupt` copies an earlier `recover --force` kept: the log was damaged.
fn note_corrupt_copies(dir: &Path, names: &[String], report: &mut RecoveryReport) {
    let damaged = |n: &&String| is_corrupt_copy(n) || has_kept_suffix(n, crate::format::REMOVED_SUFFIX);
    let copies: Vec<PathBuf> = names.iter().filter(damaged).map(|n| dir.join(n)).collect();
    if !copies.is_empty() {
        let names: Vec<String> = copies.iter().map(|p| p.display().to_string()).collect();
        let copies_text = names.join(", ");
        tracing::warn!(dir = %dir.display(), copies = %copies_text, "this log was damaged before: kept copies of damaged segments are in it");
    }
    report.corrupt_copies = copies;
}

/// Step 3, cheap part: a segment without one of its index files gets both rebuilt now. (Whether an
/// existing index is a whole number of entries is checked when the segment is first read, with the
/// full check: stat'ing 20,000 index files would dominate a clean open of 10,000 segments.)
fn rebuild_missing_indexes(
    dir: &Path,
    files: &[SegmentFile],
    names: &[String],
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    let present: HashSet<&str> = names.iter().map(String::as_str).collect();
    for file in files {
        let has = |suffix| present.contains(crate::format::file_name(file.base, suffix).as_str());
        if has(INDEX_SUFFIX) && has(TIME_INDEX_SUFFIX) {
            continue;
        }
        tracing::warn!(segment = file.base, "index missing; rebuilding");
        let mut scan = scan_file(dir, *file, config, Access::Mapped)?;
        scan.plan.finish(file.base);
        write_index_files(dir, file.base, &scan.plan)?;
        report.indexes_rebuilt += 1;
    }
    Ok(())
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
        tracing::warn!(
            marker.active_base,
            marker.active_len,
            last.base,
            last.len,
            "clean-shutdown marker does not match the active segment"
        );
        return Ok(None);
    }
    // The active segment is at or past the recovery point: its indexes get the full check now.
    let segment = LogSegment::open_sealed(dir, last.base, last.len, marker.next_offset, config);
    if let Err(reason) = segment.check_sealed_indexes() {
        tracing::warn!(segment = %segment.log_path().display(), %reason, "active segment index failed its check");
        segment.retire();
        return Ok(None);
    }
    let end = segment.walk_to_end();
    segment.retire();
    match end {
        // A whole batch of a newer format: no recovery may take it for a torn tail.
        Err(error @ Error::UnsupportedFormat { .. }) => Err(error),
        Ok(Some((position, next))) if position == last.len && next == marker.next_offset => {
            report.clean_shutdown = true;
            Ok(Some(next))
        }
        _ => {
            tracing::warn!(
                marker.next_offset,
                marker.active_len,
                "the active segment does not end where the clean-shutdown marker says"
            );
            Ok(None)
        }
    }
}

/// A directory with no segments: an empty log at the log start offset, unless the checkpoint says
/// records up to a higher recovery point were durable, which is acknowledged data lost.
fn empty_dir(
    dir: &Path,
    start: u64,
    recovery_point: u64,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Loaded> {
    if recovery_point > start {
        let reason = Corruption::EndsBeforeRecoveryPoint { end: start, recovery_point };
        recover::accept_loss(dir, 0, config, reason)?;
        report.acknowledged_records_lost += recovery_point - start;
    }
    fresh(dir, start, config)
}

fn fresh(dir: &Path, start: u64, config: &LogConfig) -> Result<Loaded> {
    let segment = LogSegment::create(dir, start, config, 0)?;
    storage::sync_dir(dir)?;
    Ok(Loaded {
        segments: vec![segment],
        next_offset: start,
        log_start_offset: start,
        report: RecoveryReport::default(),
        live_tail: None,
        checkpoint_stale: false,
    })
}

/// Step 5: the log start offset is past everything recovered: drop it all and start there.
fn restart_empty_at(dir: &Path, loaded: Loaded, config: &LogConfig, report: &mut RecoveryReport) -> Result<Loaded> {
    let start = loaded.log_start_offset;
    for segment in loaded.segments {
        let paths = SegmentPaths::new(dir, segment.base_offset());
        segment.retire();
        for path in [paths.log, paths.index, paths.time_index] {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            remove_logged(dir, &name, "segment below the log start offset", report)?;
        }
    }
    storage::sync_dir(dir)?;
    fresh(dir, start, config)
}
