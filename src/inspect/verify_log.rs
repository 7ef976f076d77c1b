//! `strata verify`: every segment, index, the checkpoint and `log.meta` of a log checked
//! read-only, as findings with a file, a position and a severity. Beside a live writer a problem
//! counts once the log settled around it (`listing.rs`).

use std::path::{Path, PathBuf};

use super::dirs::{held_by_a_writer, is_set_aside, vanished};
use super::listing::Listing;
use super::walk::{Walked, read_index, walk_batches};
use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHECKPOINT_FILE, CLEANED_SUFFIX, CORRUPT_SUFFIX, DELETED_SUFFIX, FOREIGN_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX,
    META_FILE, REMOVED_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TMP_SUFFIX, parse_file_name,
};
use crate::log::index::IndexEntry;
use crate::log::open::files::SegmentFile;
use crate::log::{Checkpoint, Log, OffsetEntry, TimeEntry};

/// How much a `verify` finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Severity {
    /// Damage to data that should be there: `verify` exits 1.
    Error,
    /// Worth knowing, not damage: something the next open repairs by itself (a missing or orphan
    /// index, leftovers of an interrupted operation), a torn tail past the recovery point.
    Note,
}

impl Severity {
    /// `error` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Note => "note",
        }
    }
}

/// Something `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// The file.
    pub file: PathBuf,
    /// Byte position in it (0 for a note about the whole file).
    pub position: u64,
    /// What is wrong.
    pub problem: String,
    /// A `.log` that does not belong to the log (docs/DESIGN.md §4: an empty one that is not the last,
    /// or one whose base falls inside the previous segment's offsets). It holds no record of the
    /// log: `strata recover --force` sets it aside as `.foreign` and loses nothing.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "std::ops::Not::not"))]
    pub foreign: bool,
    /// Damage to the records themselves (a segment, or the log ending before its recovery point),
    /// which strict recovery refuses to cut; index damage is only rebuilt.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub data: bool,
    /// For damage to the records: the offset where the valid data ends, where `--force` cuts.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub end_offset: Option<u64>,
}

impl Finding {
    pub(super) fn error(file: &Path, position: u64, problem: impl Into<String>) -> Finding {
        let data = file.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(LOG_SUFFIX));
        Finding {
            severity: Severity::Error,
            file: file.to_path_buf(),
            position,
            problem: problem.into(),
            foreign: false,
            data,
            end_offset: None,
        }
    }

    /// A note about the whole file.
    pub(super) fn note(file: &Path, problem: impl Into<String>) -> Finding {
        Finding::note_at(file, 0, problem)
    }

    /// A note about a byte position in the file.
    pub(super) fn note_at(file: &Path, position: u64, problem: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Note,
            file: file.to_path_buf(),
            position,
            problem: problem.into(),
            foreign: false,
            data: false,
            end_offset: None,
        }
    }
}

/// One segment as `verify` walked it (for the estimates of `recover --dry-run`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentCheck {
    /// Its base offset.
    pub base: u64,
    /// Valid records in it.
    pub records: u64,
    /// Bytes of its valid batches.
    pub bytes: u64,
}

/// What `verify` checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VerifyReport {
    /// Segments checked.
    pub segments: u64,
    /// Valid batches.
    pub batches: u64,
    /// Valid records.
    pub records: u64,
    /// Bytes of valid batches.
    pub bytes: u64,
    /// First offset of the valid log.
    pub start_offset: u64,
    /// The offset after the last valid batch.
    pub next_offset: u64,
    /// The recovery point in the checkpoint, if it is readable.
    pub recovery_point: Option<u64>,
    /// What was found: errors first, then notes, each by file and position. No errors means
    /// clean.
    pub findings: Vec<Finding>,
    /// Each segment walked (foreign files are not segments of the log).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub segment_checks: Vec<SegmentCheck>,
}

impl VerifyReport {
    /// Whether nothing is damaged (notes do not count).
    pub fn is_clean(&self) -> bool {
        self.errors().next().is_none()
    }

    /// The findings that are damage.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.severity == Severity::Error)
    }

    /// The findings that are notes.
    pub fn notes(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.severity == Severity::Note)
    }
}

/// Checks every segment, index and the checkpoint of the log in `dir`, read-only (through
/// [`Log::open_read_only`]; safe on a live log, where a torn tail is the batch being written).
/// A problem that follows from one already found (a gap after a damaged segment, the log ending
/// before its recovery point because of it) is not reported twice.
///
/// Beside a live writer, files change under the check: a segment rolled, sealed (trimmed),
/// deleted by retention, cut by a truncation, swapped by compaction. A problem found there counts
/// only once a second check finds the same one with the log settled around it (the segments,
/// the last one no shorter, the recovery point no lower than the check used), or a third finds
/// it whatever the writer did meanwhile; otherwise the check is done again, up to 20 times, then
/// the answer is `Error::Unsettled` (nothing is known to be wrong: check again, or with the
/// writer stopped). A log no writer holds cannot change: its first check is the answer.
pub fn verify(dir: &Path, config: &LogConfig) -> Result<VerifyReport> {
    const ATTEMPTS: u32 = 20;
    let mut previous: Option<String> = None;
    let mut seen = 0;
    for attempt in 1..=ATTEMPTS {
        let before = Listing::of(dir)?;
        let result = verify_once(dir, config);
        let Some(problems) = problems_of(&result) else { return result };
        if held_by_a_writer(dir) == Some(false) {
            return result;
        }
        seen = if previous.as_ref() == Some(&problems) { seen + 1 } else { 1 };
        // A file gone or shorter than listed: a writer changed it under the check.
        let changed_under = match &result {
            Err(e) => vanished(e) || matches!(e, Error::Corrupt { reason: Corruption::ShortFile { .. }, .. }),
            Ok(_) => false,
        };
        let used = result.as_ref().ok().and_then(|report| report.recovery_point);
        let settled = !changed_under && {
            let after = Listing::of(dir)?;
            after.settled_since(&before) && after.recovery_point >= used
        };
        if (settled && seen >= 2) || seen >= 3 {
            return result;
        }
        previous = Some(problems);
        tracing::debug!(attempt, "the log changed during the check; checking again");
        std::thread::sleep(std::time::Duration::from_millis(5 * u64::from(attempt)));
    }
    Err(Error::Unsettled { attempts: ATTEMPTS as usize })
}

/// What a check found wrong, to tell whether the next finds the same: `None` if nothing (a clean
/// report, or an error that is no finding, such as a permission denied).
fn problems_of(result: &Result<VerifyReport>) -> Option<String> {
    match result {
        Ok(report) if report.is_clean() => None,
        Ok(report) => {
            Some(report.errors().map(|f| format!("{}@{}: {}\n", f.file.display(), f.position, f.problem)).collect())
        }
        Err(e) if matches!(e, Error::Corrupt { .. }) || vanished(e) => Some(e.to_string()),
        Err(_) => None,
    }
}

/// One check of the log in `dir`, as [`verify`] repeats it beside a live writer.
fn verify_once(dir: &Path, config: &LogConfig) -> Result<VerifyReport> {
    let log = Log::open_read_only(dir, config.clone())?;
    let mut report = VerifyReport { start_offset: log.start_offset(), ..VerifyReport::default() };
    drop(log);
    if let Some(Ok(stored)) = Checkpoint::read(dir)?
        && let Some(offset) = stored.pending_reset
    {
        note_pending_reset(dir, offset, &mut report);
        return Ok(report);
    }
    verify_meta(dir, &mut report)?;
    let checkpoint = verify_checkpoint(dir, &mut report)?;
    report.recovery_point = checkpoint.map(|c| c.recovery_point);
    let walk = verify_segments(dir, &mut report)?;
    report.next_offset = walk.expected;
    check_end_reaches_recovery_point(dir, &walk, &mut report);
    note_leftovers(dir, &mut report)?;
    report.findings.sort_by(|a, b| {
        (a.severity, &a.file, a.position, &a.problem).cmp(&(b.severity, &b.file, b.position, &b.problem))
    });
    Ok(report)
}

/// A reset in progress (or interrupted) is the whole answer: nothing else of the log counts.
fn note_pending_reset(dir: &Path, offset: u64, report: &mut VerifyReport) {
    // The segments are of the log before the reset; the log is empty at `offset`.
    let note = format!(
        "a reset to offset {offset} is in progress (or was interrupted): the log is empty there, and the next open deletes the old segments"
    );
    report.findings.push(Finding::note(&dir.join(CHECKPOINT_FILE), note));
    report.start_offset = offset;
    report.next_offset = offset;
    report.recovery_point = Some(offset);
}

/// How far the walk over the segments got.
struct SegmentWalk {
    /// Where the next segment should start: the offset after the last valid batch walked (the
    /// first segment's base before any).
    expected: u64,
    /// Damage was found in a segment walked.
    damaged: bool,
    /// A segment was walked (a foreign file is not walked).
    walked_any: bool,
}

impl SegmentWalk {
    /// Where the data of the segments walked ends, if that says where the next one should start:
    /// after damage it says nothing.
    fn previous_end(&self) -> Option<u64> {
        (self.walked_any && !self.damaged).then_some(self.expected)
    }
}

/// Walks every segment of the log in order, each judged against where the one before it ended.
fn verify_segments(dir: &Path, report: &mut VerifyReport) -> Result<SegmentWalk> {
    let files = crate::log::open::files::list_segments(dir)?;
    let mut walk = SegmentWalk { expected: files.first().map_or(0, |f| f.base), damaged: false, walked_any: false };
    for (i, file) in files.iter().enumerate() {
        verify_segment(dir, *file, i + 1 == files.len(), &mut walk, report)?;
    }
    Ok(walk)
}

/// One segment: whether it belongs to the log, where it starts, its batches, where they end, and
/// its indexes.
fn verify_segment(
    dir: &Path,
    file: SegmentFile,
    last: bool,
    walk: &mut SegmentWalk,
    report: &mut VerifyReport,
) -> Result<()> {
    let path = crate::log::segment::SegmentPaths::new(dir, file.base);
    // A foreign file (docs/DESIGN.md §4) is named once, and the segments around it are judged as
    // if it were not there: a healthy neighbour is never blamed for it.
    // After damage the data's end says nothing about where the next segment should start.
    if let Some(why) = foreign(file.base, file.len, last, walk.previous_end()) {
        let problem = format!("foreign: {why}; `strata recover --force` sets it aside as .foreign");
        let mut finding = Finding::error(&path.log, 0, problem);
        finding.foreign = true;
        report.findings.push(finding);
        return Ok(());
    }
    if file.base != walk.expected && !walk.damaged {
        judge_start(&path.log, file.base, walk.expected, report);
    }
    let walked = walk_batches(&path.log, file.base, file.len, false)?;
    walk.walked_any = true;
    count_segment(file.base, &walked, report);
    let sealed = !last && crate::log::open::recover::was_sealed(dir, file);
    walk.damaged |= judge_end(&path.log, &walked, file.len, (last, sealed), report.recovery_point, report);
    verify_indexes(&path.index, &path.time_index, file.base, &walked, (last, sealed), report)?;
    walk.expected = walked.next_offset;
    Ok(())
}

/// A segment that does not start at `expected`, where the one before it ended: a gap in the
/// data, unless it lies at or below the log start offset.
fn judge_start(log: &Path, base: u64, expected: u64, report: &mut VerifyReport) {
    if base <= report.start_offset {
        // Nothing the log holds is missing: the segments before lie wholly below its start.
        let note = format!(
            "segments before this one end at {expected}, below the log start offset {}: left by an interrupted deletion, which the next deletion finishes",
            report.start_offset
        );
        report.findings.push(Finding::note(log, note));
    } else {
        let problem = Corruption::SegmentGap { expected, found: base }.to_string();
        let mut finding = Finding::error(log, 0, problem);
        finding.data = report.recovery_point.is_none_or(|rp| expected < rp);
        finding.end_offset = Some(expected);
        report.findings.push(finding);
    }
}

/// Adds a walked segment's valid batches, records and bytes to the report.
fn count_segment(base: u64, walked: &Walked, report: &mut VerifyReport) {
    let check = SegmentCheck {
        base,
        records: walked.valid_batches().map(|b| u64::from(b.record_count)).sum(),
        bytes: walked.valid_len,
    };
    report.segment_checks.push(check);
    report.segments += 1;
    report.batches += walked.valid_batches().count() as u64;
    report.records += check.records;
    report.bytes += walked.valid_len;
}

/// The log ending before its recovery point, unless damage was found (which already says where
/// the data ends): acknowledged records are missing.
fn check_end_reaches_recovery_point(dir: &Path, walk: &SegmentWalk, report: &mut VerifyReport) {
    let end = walk.expected;
    let Some(rp) = report.recovery_point.filter(|&rp| rp > end && !walk.damaged) else { return };
    let problem = Corruption::EndsBeforeRecoveryPoint { end, recovery_point: rp }.to_string();
    let mut finding = Finding::error(&dir.join(CHECKPOINT_FILE), 0, problem);
    finding.data = true;
    finding.end_offset = Some(end);
    report.findings.push(finding);
}

/// `log.meta`: missing is a note (the next writer open writes it); damaged is an error (every open
/// refuses it until it is deleted, which loses no record); a version or feature this build does
/// not know was refused by the read-only open already.
fn verify_meta(dir: &Path, report: &mut VerifyReport) -> Result<()> {
    let path = dir.join(META_FILE);
    match crate::log::meta::read(dir)? {
        Some(Ok(_)) => {}
        Some(Err(reason)) => report.findings.push(Finding::error(
            &path,
            0,
            format!("{reason}: every open refuses the log until it is deleted (it holds no record)"),
        )),
        None => report.findings.push(Finding::note(&path, "missing: the next writer open writes it")),
    }
    Ok(())
}

fn verify_checkpoint(dir: &Path, report: &mut VerifyReport) -> Result<Option<Checkpoint>> {
    match Checkpoint::read(dir)? {
        Some(Ok(stored)) => Ok(Some(stored.checkpoint)),
        Some(Err(reason)) => {
            report.findings.push(Finding::error(&dir.join(CHECKPOINT_FILE), 0, reason.to_string()));
            Ok(None)
        }
        None => {
            report
                .findings
                .push(Finding::note(&dir.join(CHECKPOINT_FILE), "missing: the next open scans from the first segment"));
            Ok(None)
        }
    }
}

/// Whether the end of a segment's valid data is corruption, a torn tail, or just its end; true if
/// it is corruption. Corruption is acknowledged data (what strict recovery refuses to cut) when it
/// is below the recovery point or in a segment that was sealed.
fn judge_end(
    path: &Path,
    walked: &Walked,
    file_len: u64,
    (last, sealed): (bool, bool),
    recovery_point: Option<u64>,
    report: &mut VerifyReport,
) -> bool {
    let Some(damage) = &walked.damage else {
        if !last && walked.valid_len < file_len {
            let zeros = file_len - walked.valid_len;
            report.findings.push(Finding::note_at(
                path,
                walked.valid_len,
                format!("untrimmed: {zeros} zero bytes after the data"),
            ));
        }
        return false;
    };
    let acknowledged = recovery_point.is_none_or(|rp| walked.next_offset < rp);
    if last && !acknowledged {
        let mut note = Finding::note_at(
            path,
            damage.position,
            format!(
                "torn tail past the recovery point ({}): the end of a live log, or cut by the next recovery",
                damage.reason
            ),
        );
        note.end_offset = Some(walked.next_offset);
        report.findings.push(note);
        false
    } else {
        let mut finding = Finding::error(path, damage.position, damage.reason.clone());
        finding.data = acknowledged || sealed;
        finding.end_offset = Some(walked.next_offset);
        report.findings.push(finding);
        true
    }
}

/// Index checks: structure, every offset entry at a batch with that base, time entries inside the
/// segment, and the final time entry of a sealed segment (KAFKA-10207). A segment rolled away from
/// is not sealed until the syncer gets to it: its time index may lack the final entry still.
pub(super) fn verify_indexes(
    index: &Path,
    time_index: &Path,
    base: u64,
    walked: &Walked,
    (last, sealed): (bool, bool),
    report: &mut VerifyReport,
) -> Result<()> {
    let starts: Vec<(u64, u64)> = walked.valid_batches().map(|b| (b.position, b.base_offset)).collect();
    let mut finding = |file: &Path, position: u64, problem: String| {
        report.findings.push(Finding::error(file, position, problem));
    };
    let missing: Vec<&Path> = [index, time_index].into_iter().filter(|p| !p.exists()).collect();
    if !missing.is_empty() {
        for path in missing {
            report.findings.push(Finding::note(path, "missing: the next open rebuilds it"));
        }
        return Ok(());
    }
    let (offsets, damage) = read_index::<OffsetEntry>(index)?;
    if let Some(d) = damage {
        finding(index, d.position, d.reason);
    }
    // Entries past damage in the data are its consequence, not a second finding.
    for (i, e) in offsets.iter().enumerate().filter(|(_, e)| u64::from(e.position) < walked.valid_len) {
        let (offset, position) = (base.saturating_add(u64::from(e.relative_offset)), u64::from(e.position));
        let at = starts.binary_search_by_key(&position, |&(p, _)| p);
        if at.map_or(true, |j| starts[j].1 != offset) {
            // A batch with another base offset starts there, or none does (inside a batch).
            let found =
                at.ok().map(|j| Box::new(Corruption::UnexpectedOffset { expected: offset, found: starts[j].1 }));
            let reason = Corruption::IndexEntryNotAtBatch { offset, position, reason: found };
            finding(index, (i * OffsetEntry::LEN) as u64, reason.to_string());
        }
    }
    let (times, damage) = read_index::<TimeEntry>(time_index)?;
    if let Some(d) = damage {
        finding(time_index, d.position, d.reason);
    }
    let end = walked.next_offset.max(base + 1);
    let offset_of = |e: &TimeEntry| base.saturating_add(u64::from(e.relative_offset));
    // On a live log the last segment's time index may be ahead of the data read a moment before.
    if let Some(i) = times.iter().position(|e| offset_of(e) >= end).filter(|_| walked.damage.is_none() && !last) {
        let e = &times[i];
        let reason = Corruption::TimeEntryPastEnd { timestamp_ms: e.timestamp_ms, offset: offset_of(e), end };
        finding(time_index, (i * TimeEntry::LEN) as u64, reason.to_string());
    }
    let max = walked.valid_batches().map(|b| b.max_timestamp).max().unwrap_or(0);
    if sealed && max > 0 && walked.damage.is_none() && times.last().is_none_or(|e| e.timestamp_ms != max) {
        finding(time_index, 0, Corruption::MissingFinalTimeEntry { max_timestamp: max }.to_string());
    }
    Ok(())
}

/// The empty foreign `.log` files of the log in `dir` (docs/DESIGN.md §4: empty and not the last, or the
/// last and not continuing the segment before it), and, if the last one is foreign, where the log
/// really ends (the data of the segment before it). Reads only the segment before the last.
pub fn empty_foreign_files(dir: &Path) -> Result<(Vec<PathBuf>, Option<u64>)> {
    let files = crate::log::open::files::list_segments(dir)?;
    let path = |base| crate::log::segment::SegmentPaths::new(dir, base).log;
    let mut foreign: Vec<PathBuf> =
        files.iter().rev().skip(1).filter(|f| f.len == 0).map(|f| path(f.base)).rev().collect();
    let kept: Vec<_> = files.iter().filter(|f| f.len > 0).collect();
    let mut end = None;
    if let (Some(last), Some(previous)) = (files.last().filter(|f| f.len == 0), kept.last()) {
        let walked = walk_batches(&path(previous.base), previous.base, previous.len, false)?;
        if walked.damage.is_none() && last.base != walked.next_offset {
            foreign.push(path(last.base));
            end = Some(walked.next_offset);
        }
    }
    Ok((foreign, end))
}

/// Why a `.log` is foreign (docs/DESIGN.md §4), if it is: an empty one that is not the last, one whose
/// base falls inside the previous segment's offsets (`previous_end`: where the data of the last
/// segment walked ends), or an empty last one whose base does not continue the previous segment.
fn foreign(base: u64, len: u64, last: bool, previous_end: Option<u64>) -> Option<&'static str> {
    if len == 0 && !last {
        return Some("empty, and not the last segment");
    }
    let previous_end = previous_end?;
    if base < previous_end {
        Some("its base offset falls inside the previous segment's offsets")
    } else if len == 0 && base != previous_end {
        Some("empty, and its base offset does not continue the previous segment")
    } else {
        None
    }
}

fn note_leftovers(dir: &Path, report: &mut VerifyReport) -> Result<()> {
    let names = crate::log::open::files::dir_names(dir)?;
    for name in &names {
        let path = dir.join(name);
        if [SWAP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX, TMP_SUFFIX].iter().any(|s| name.ends_with(s)) {
            report.findings.push(Finding::note(&path, "left by an interrupted operation; the next open resolves it"));
        }
        if is_set_aside(name, CORRUPT_SUFFIX) {
            report.findings.push(Finding::note(
                &path,
                "a copy of a damaged segment kept by `strata recover --force`, never read; delete it once inspected",
            ));
        }
        if is_set_aside(name, REMOVED_SUFFIX) {
            report.findings.push(Finding::note(
                &path,
                "a healthy segment that followed damage, removed from the log by `strata recover --force` and \
                 kept, never read; its records are not in the log",
            ));
        }
        if is_set_aside(name, FOREIGN_SUFFIX) {
            report.findings.push(Finding::note(
                &path,
                "a file that did not belong to the log, set aside by `strata recover --force`, never read; \
                 delete it once inspected",
            ));
        }
        let orphan = match parse_file_name(name) {
            Some((base, INDEX_SUFFIX | TIME_INDEX_SUFFIX)) => {
                !names.contains(&crate::format::file_name(base, LOG_SUFFIX))
            }
            _ => false,
        };
        if orphan {
            report.findings.push(Finding::note(&path, "orphan index (no segment); the next open deletes it"));
        }
    }
    Ok(())
}
