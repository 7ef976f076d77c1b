//! `strata recover`: a read-only check first (so a refusal or a dry run changes nothing), then an
//! offline open with a forced scan, and what changed, counted.

use std::path::{Path, PathBuf};

use super::dirs::{DirState, dir_state, held_by_a_writer, offline_config, open_or_undo};
use super::verify_log::{Finding, VerifyReport, verify};
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::format::{CLEAN_SHUTDOWN_FILE, LOCK_FILE};

/// Options of [`recover`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoverOptions {
    /// Accept losing acknowledged records below damage (`RecoveryMode::TruncateCorrupt`).
    pub force: bool,
    /// Change nothing: say what recovery would do, from a read-only check.
    pub dry_run: bool,
}

/// The log as `verify` saw it, before or after recovery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LogShape {
    /// First offset.
    pub start_offset: u64,
    /// Next offset.
    pub next_offset: u64,
    /// Valid records.
    pub records: u64,
    /// Bytes of valid batches.
    pub bytes: u64,
    /// Segments.
    pub segments: u64,
}

impl From<&VerifyReport> for LogShape {
    fn from(r: &VerifyReport) -> LogShape {
        LogShape {
            start_offset: r.start_offset,
            next_offset: r.next_offset,
            records: r.records,
            bytes: r.bytes,
            segments: r.segments,
        }
    }
}

/// What `strata recover` did, would do (`dry_run`), or refused to do (`refused`). The counts add
/// up: `before.records − records_removed = after.records`, and the same for bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RecoverOutcome {
    /// Nothing was changed: this says what recovery would do.
    pub dry_run: bool,
    /// Nothing was changed: the log has damage below its recovery point and `force` was not given.
    pub refused: bool,
    /// The log before (from a read-only check; its next offset is at least the recovery point the
    /// log claimed; its records and bytes are those of the valid batches).
    pub before: LogShape,
    /// The log after (`None` for a dry run or a refusal).
    pub after: Option<LogShape>,
    /// Valid records removed (`before.records − after.records`); in a dry run, those the cut would
    /// remove (with `--force`, if the damage needs it). Records in damaged batches cannot be counted: they are in `offsets_removed` and
    /// `acknowledged_records_lost`.
    pub records_removed: u64,
    /// The first and last offset removed from the end, if any (damaged batches included).
    pub offsets_removed: Option<[u64; 2]>,
    /// Bytes of valid batches removed (`before.bytes − after.bytes`); in a dry run, those the cut
    /// would remove.
    pub bytes_removed: u64,
    /// Bytes of torn or damaged data cut (not valid batches, not preallocated zeros); `None` in a
    /// dry run: known only once cut.
    pub damaged_bytes_removed: Option<u64>,
    /// Records below the recovery point (acknowledged as durable) that were lost, those in damaged
    /// batches included; in a dry run, what the cut would lose (an estimate: the recovery scan
    /// decides).
    pub acknowledged_records_lost: u64,
    /// Segments validated batch by batch.
    pub segments_scanned: u64,
    /// Segments whose indexes were rebuilt.
    pub indexes_rebuilt: u64,
    /// Files deleted (leftovers, orphan indexes, segments after a cut).
    pub files_deleted: Vec<PathBuf>,
    /// Damaged segments kept as `.corrupt`.
    pub files_kept_corrupt: Vec<PathBuf>,
    /// Healthy segments after the damage, removed from the log and kept as `.removed`.
    pub files_kept_removed: Vec<PathBuf>,
    /// Files that did not belong to the log (docs/DESIGN.md §4), set aside as `.foreign`: nothing of the
    /// log was in them.
    pub files_kept_foreign: Vec<PathBuf>,
    /// The recovery point after.
    pub recovery_point: Option<u64>,
    /// What the read-only check found before: the damage and the notes recovery acts on.
    pub found: Vec<Finding>,
}

/// Where a recovery would cut the log, from what `verify` found, and what that would remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    /// The offset the log would end at.
    pub cut_at: u64,
    /// Valid records after it.
    pub records: u64,
    /// Bytes of valid batches after it.
    pub bytes: u64,
    /// Acknowledged records the cut would lose (an estimate).
    pub acknowledged_records_lost: u64,
    /// The offsets removed.
    pub offsets: Option<[u64; 2]>,
}

/// Where recovery (with `--force` if the damage needs it) would cut the log the report describes:
/// at the first place its valid data ends early, damage or torn tail. `None`: nowhere.
pub fn projection(report: &VerifyReport) -> Option<Projection> {
    let (cut_at, acknowledged) = report
        .findings
        .iter()
        .filter(|f| !f.foreign)
        .filter_map(|f| f.end_offset.map(|end| (end, f.data)))
        .min_by_key(|&(end, data)| (end, !data))?;
    let after = report.segment_checks.iter().filter(|c| c.base >= cut_at);
    let (records, bytes) = after.fold((0, 0), |(r, b), c| (r + c.records, b + c.bytes));
    let rp = report.recovery_point.unwrap_or(0);
    let end = report.next_offset.max(rp);
    // As recovery counts it: every record of a sealed segment was durable, so the loss runs to the
    // last segment's base when segments follow the cut, or to the recovery point if further.
    let last_base = report.segment_checks.last().map_or(0, |c| c.base);
    let sealed_end = if report.segment_checks.iter().any(|c| c.base > cut_at) { last_base } else { 0 };
    let acknowledged_records_lost = if acknowledged { rp.max(sealed_end).saturating_sub(cut_at) } else { 0 };
    Some(Projection {
        cut_at,
        records,
        bytes,
        acknowledged_records_lost,
        offsets: (end > cut_at).then(|| [cut_at, end - 1]),
    })
}

/// `strata recover`: checks the log read-only, then (unless `dry_run`) opens it offline with a
/// forced scan (the clean-shutdown marker is removed first, so damage in the active segment is
/// found too), closes it cleanly, and reports what changed. Damage below the recovery point is
/// refused without `force` before anything is touched; with `force` it is cut
/// (`RecoveryMode::TruncateCorrupt`) and the damaged segment kept as `.corrupt`; foreign files are
/// set aside as `.foreign`. A directory that holds no log is an error: recovery never creates
/// one; a log a writer holds is `Error::Locked`, a dry run included.
pub fn recover(dir: &Path, options: RecoverOptions) -> Result<RecoverOutcome> {
    ensure_a_log(dir)?;
    if held_by_a_writer(dir) == Some(true) {
        return Err(Error::Locked { path: dir.join(LOCK_FILE) });
    }
    let before = verify(dir, &LogConfig::default());
    if let Err(error @ Error::UnsupportedFormat { .. }) = before {
        // A newer build's log: recovery must not touch it (nor take its batches for damage).
        return Err(error);
    }
    let mut outcome = RecoverOutcome { dry_run: options.dry_run, ..RecoverOutcome::default() };
    if let Ok(report) = &before {
        record_before(report, &mut outcome);
        let damage = report.errors().any(|f| f.data);
        if (damage && !options.force) || options.dry_run {
            outcome.refused = damage && !options.force && !options.dry_run;
            // What recovery would remove (with --force, if the damage needs it).
            if options.dry_run
                && let Some(p) = projection(report)
            {
                outcome.records_removed = p.records;
                outcome.bytes_removed = p.bytes;
                outcome.offsets_removed = p.offsets;
                outcome.acknowledged_records_lost = p.acknowledged_records_lost;
            }
            return Ok(outcome);
        }
    }
    let report = recover_now(dir, options.force)?;
    let after = verify(dir, &LogConfig::default())?;
    record_changes(&mut outcome, before.is_ok(), report, LogShape::from(&after));
    Ok(outcome)
}

/// An error unless `dir` holds a log: recovery never creates one.
fn ensure_a_log(dir: &Path) -> Result<()> {
    match dir_state(dir)? {
        DirState::Log => Ok(()),
        DirState::Missing => {
            Err(Error::io("open", dir)(std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory")))
        }
        DirState::Empty | DirState::NotALog if dir.join(crate::format::STORE_COMMIT_LOG_DIR).is_dir() => {
            let reason = "a message store, not a log directory: recover it with `strata store recover`";
            Err(Error::io("recover", dir)(std::io::Error::other(reason)))
        }
        DirState::Empty | DirState::NotALog => {
            let reason = "not a log directory (no .log segment, checkpoint or log.meta found), nothing to recover";
            Err(Error::io("recover", dir)(std::io::Error::other(reason)))
        }
    }
}

/// The log as the read-only check saw it before recovery.
fn record_before(report: &VerifyReport, outcome: &mut RecoverOutcome) {
    outcome.before = LogShape::from(report);
    outcome.before.next_offset = report.next_offset.max(report.recovery_point.unwrap_or(0));
    outcome.recovery_point = report.recovery_point;
    outcome.found = report.findings.clone();
}

/// What the recovery changed: counted from the log before and `after` where the check before
/// could count (`counted_before`), else as the recovery's `report` says.
fn record_changes(outcome: &mut RecoverOutcome, counted_before: bool, report: crate::RecoveryReport, after: LogShape) {
    if counted_before {
        outcome.records_removed = outcome.before.records.saturating_sub(after.records);
        outcome.bytes_removed = outcome.before.bytes.saturating_sub(after.bytes);
    } else {
        // Nothing could be counted before: what the recovery says it removed.
        outcome.records_removed = report.records_truncated;
        outcome.bytes_removed = report.bytes_truncated;
    }
    outcome.damaged_bytes_removed = Some(report.bytes_truncated.saturating_sub(outcome.bytes_removed));
    // Records in damaged batches cannot be counted before the cut; the offsets say where the log
    // ended (at least the recovery point) and where it ends now.
    let end_before = outcome.before.next_offset;
    if end_before > after.next_offset {
        outcome.offsets_removed = Some([after.next_offset, end_before - 1]);
    }
    outcome.after = Some(after);
    outcome.acknowledged_records_lost = report.acknowledged_records_lost;
    outcome.segments_scanned = report.segments_scanned;
    outcome.indexes_rebuilt = report.indexes_rebuilt;
    outcome.files_deleted = report.files_deleted;
    outcome.files_kept_corrupt = report.files_kept_corrupt;
    outcome.files_kept_removed = report.files_kept_removed;
    outcome.files_kept_foreign = report.files_kept_foreign;
    outcome.recovery_point = Some(report.recovery_point);
}

/// The recovery itself. If the open fails, the clean-shutdown marker it removed is put back, so a
/// failed recovery leaves the directory as it found it.
fn recover_now(dir: &Path, force: bool) -> Result<crate::RecoveryReport> {
    let recovery = if force { crate::RecoveryMode::TruncateCorrupt } else { crate::RecoveryMode::Strict };
    let config = LogConfig { recovery, ..offline_config(dir)? };
    let marker_path = dir.join(CLEAN_SHUTDOWN_FILE);
    // Take the lock before touching the marker: never under a live writer.
    let lock = crate::storage::lock_dir(dir)?;
    let marker = std::fs::read(&marker_path).ok();
    if crate::storage::remove_if_exists(&marker_path)? {
        crate::storage::sync_dir(dir)?;
    }
    drop(lock);
    match open_or_undo(dir, config) {
        Ok(log) => {
            let mut report = log.recovery_report().clone();
            // Sealed segments' indexes are otherwise checked (and rebuilt) at their first read.
            report.indexes_rebuilt += log.check_all_indexes()?;
            log.close()?;
            Ok(report)
        }
        Err(e) => {
            if let Some(bytes) = marker.filter(|_| !marker_path.exists()) {
                std::fs::write(&marker_path, bytes).map_err(Error::io("restore", &marker_path))?;
                crate::storage::sync_dir(dir)?;
            }
            Err(e)
        }
    }
}
