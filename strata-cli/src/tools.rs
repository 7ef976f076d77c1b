//! The work of the `strata` commands that act on a log (`produce`, `consume`, `offsets` and the
//! admin commands `truncate`, `delete-before`, `compact`) or a message store (`store`) as library
//! functions over any reader and writer, returning values, so they are tested without a process;
//! `cmd` turns arguments into their options and prints what they return.

pub mod consume;
pub mod produce;
pub mod store;
pub mod text;

use std::fmt;
use std::path::Path;

use serde::Serialize;

use strata_log::Error;
use strata_log::LogConfig;
use strata_log::internals::format::{self, MAX_SEGMENT_BYTES, MIN_SEGMENT_BYTES};
use strata_log::internals::inspect;
pub use strata_log::internals::inspect::{DirState, dir_state};
use strata_log::internals::{self, CleanShutdown};
use strata_log::{CompactionReport, Log};

pub use consume::{ConsumeOptions, ConsumeSummary, Output, Start, Template, consume};
pub use produce::{Framing, ProduceOptions, ProduceSummary, produce};

/// Why a command failed, by what the user should look at.
#[derive(Debug)]
pub enum ToolError {
    /// The log (its files, a lock, a corruption).
    Log(Error),
    /// Writing the output (a closed pipe is the reader's choice, not an error).
    Output(std::io::Error),
    /// The input: a read error or a record that cannot be taken, naming its line.
    Input(String),
    /// The command line asks for something that cannot be done.
    Usage(String),
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::Log(e) => write!(f, "{e}"),
            ToolError::Output(e) => write!(f, "writing output: {e}"),
            ToolError::Input(e) => write!(f, "input: {e}"),
            ToolError::Usage(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> ToolError {
        ToolError::Output(e)
    }
}

/// Fails unless `dir` holds a log: what a command that only reads a log (`verify`, `consume`,
/// `offsets`) checks first, so a wrong path is one true line.
pub fn require_log(dir: &Path) -> Result<(), ToolError> {
    require(dir, false)
}

/// Fails unless `dir` holds a log: commands that change a log must never create one, nor write
/// into a directory of other files.
pub fn require_log_to_change(dir: &Path) -> Result<(), ToolError> {
    require(dir, true)
}

fn require(dir: &Path, writes: bool) -> Result<(), ToolError> {
    match dir_state(dir).map_err(ToolError::Log)? {
        DirState::Log => Ok(()),
        DirState::Missing => Err(ToolError::Usage(format!("{}: no such directory", dir.display()))),
        DirState::Empty => Err(ToolError::Usage(format!("{}: empty directory, no log here", dir.display()))),
        DirState::NotALog => Err(not_a_log(dir, writes)),
    }
}

/// A directory of other files: what it is not, and for a command that writes, that it will not.
fn not_a_log(dir: &Path, writes: bool) -> ToolError {
    let refusal = if writes { "; refusing to write into it" } else { "" };
    ToolError::Usage(format!(
        "{} is not a log directory (no .log segment, checkpoint or log.meta found; it holds other files){refusal}",
        dir.display()
    ))
}

/// Fails if `dir` is a directory of other files (a new log goes into a new or empty directory).
pub fn require_log_or_new(dir: &Path) -> Result<(), ToolError> {
    match dir_state(dir).map_err(ToolError::Log)? {
        DirState::NotALog => Err(not_a_log(dir, true)),
        _ => Ok(()),
    }
}

/// `strata offsets`: where a log starts and ends (kafka-get-offsets), read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offsets {
    /// The first readable offset.
    pub earliest: u64,
    /// The next offset (one past the last record).
    pub latest: u64,
    /// Every offset below this is durable for certain: `latest` after a clean close, else the
    /// checkpoint's recovery point (records past it may be durable too: see `live`).
    pub durable: u64,
    /// A writer holds the log open (`None`: this cannot be known here). Its records past `durable`
    /// are durable too under `FlushPolicy::Always` (the default, whose readers see only durable
    /// records); the checkpoint moves only at a roll, a flush, an interval or the close.
    pub live: Option<bool>,
    /// The recovery point in the checkpoint, if it is readable.
    pub recovery_point: Option<u64>,
    /// Whether the log was closed cleanly (a valid clean-shutdown marker that matches).
    pub closed_cleanly: bool,
    /// Records: `latest − earliest`, exact unless the log was compacted (then an upper bound, and
    /// `records_exact` is false: offsets compaction removed hold no record).
    pub records: u64,
    /// Whether `records` is exact.
    pub records_exact: bool,
    /// Segments.
    pub segments: u64,
    /// Bytes of batches in the segments.
    pub bytes: u64,
    /// With `--time`: the first offset whose timestamp is at or after it (`latest` if none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_for_time: Option<u64>,
    /// Foreign files (docs/DESIGN.md §4) left out: `.log` files that are not part of the log.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign: Vec<std::path::PathBuf>,
}

/// Reads the offsets of the log in `dir` without changing anything (safe on a live log); with
/// `time_ms`, also the first offset at or after that time.
pub fn offsets(dir: &Path, time_ms: Option<i64>) -> Result<Offsets, ToolError> {
    require_log(dir)?;
    let log = Log::open_read_only(dir, LogConfig::default())?;
    let metrics = log.metrics();
    let recovery_point = internals::checkpoint_recovery_point(dir)?;
    let (earliest, mut latest) = (log.start_offset(), log.visible_end());
    // An empty foreign `.log` last (a stray file) is not where the log ends.
    let (foreign, real_end) = inspect::empty_foreign_files(dir)?;
    if let Some(end) = real_end {
        latest = latest.min(end).max(earliest);
    }
    let marker = std::fs::read(dir.join(format::CLEAN_SHUTDOWN_FILE)).ok();
    let closed_cleanly = marker.and_then(|b| CleanShutdown::decode(&b).ok()).is_some_and(|m| m.next_offset == latest);
    let offset_for_time = match time_ms {
        Some(ms) => Some(log.offset_for_timestamp(ms)?.unwrap_or(latest).min(latest)),
        None => None,
    };
    let compacted = dir.join(format::CLEANER_CHECKPOINT_FILE).exists();
    Ok(Offsets {
        earliest,
        latest,
        durable: if closed_cleanly { latest } else { recovery_point.unwrap_or(0).min(latest) },
        live: inspect::held_by_a_writer(dir),
        recovery_point,
        closed_cleanly,
        records: latest - earliest,
        records_exact: !compacted,
        segments: metrics.segments.saturating_sub(foreign.len() as u64),
        bytes: metrics.bytes_on_disk,
        offset_for_time,
        foreign,
    })
}

/// The segment size `produce` uses for the log in `dir` when `--segment-bytes` is not given: for
/// an existing log, the size it records in `log.meta`, else (a log written before the file
/// existed) the size its segments show (as the admin commands infer it: a rolled log's
/// sealed segments are filled to within a batch of it, and an active segment not closed cleanly
/// is preallocated to it); for a new log, or one closed segment that tells nothing, the default,
/// or less when the disk has no room for it.
pub fn produce_segment_bytes(dir: &Path) -> Result<u64, ToolError> {
    let default = LogConfig::default().segment_bytes;
    let files = match dir_state(dir)? {
        DirState::Log => internals::segment_files(dir)?,
        _ => Vec::new(),
    };
    if !files.is_empty() || dir.join(format::META_FILE).exists() {
        let recorded = LogConfig { segment_bytes: 0, ..LogConfig::default() }.with_recorded_parameters(dir)?;
        if recorded.segment_bytes != 0 {
            return Ok(recorded.segment_bytes);
        }
    }
    let largest = files.iter().map(|f| f.len).max().unwrap_or(0);
    let untrimmed = match files.last() {
        Some(last) if last.len > 0 => !inspect::ends_in_data(&last.path, last.len)?,
        _ => false,
    };
    if files.len() > 1 || untrimmed {
        return Ok(largest.clamp(MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES));
    }
    let probe = if dir.exists() { dir } else { dir.parent().filter(|p| p.exists()).unwrap_or(Path::new(".")) };
    let available = rustix::fs::statvfs(probe).map(|s| s.f_bavail.saturating_mul(s.f_frsize)).unwrap_or(u64::MAX);
    if available >= default.saturating_mul(2) {
        return Ok(default);
    }
    // Half the free space (a segment is preallocated whole), never less than the data there is.
    let fits = (available / 2 / 4096 * 4096).max(largest).clamp(MIN_SEGMENT_BYTES, default);
    tracing::info!(
        segment_bytes = fits,
        available,
        "the disk has no room for the default segment size; give --segment-bytes to choose"
    );
    Ok(fits)
}

/// Takes back a log `produce` created and stored nothing in (`was`: the directory before), so a
/// failed produce leaves no log behind: only the files a new log has are removed, and the
/// directory only if it was made here and is then empty.
pub fn remove_new_log(dir: &Path, was: DirState) {
    if !matches!(was, DirState::Missing | DirState::Empty) {
        return;
    }
    // Only under the directory's lock: another process may have created a log there meanwhile
    // (two producers starting at once), and its files are not ours to remove.
    let Ok(_lock) = internals::lock_dir(dir) else { return };
    use format::{CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CLEANER_CHECKPOINT_FILE, LOCK_FILE, META_FILE, TMP_SUFFIX};
    for name in internals::file_names(dir).unwrap_or_default() {
        let ours = format::parse_file_name(&name).is_some()
            || [CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CLEANER_CHECKPOINT_FILE, LOCK_FILE, META_FILE]
                .contains(&name.as_str())
            || name.ends_with(TMP_SUFFIX);
        if ours {
            let _ = std::fs::remove_file(dir.join(&name));
        }
    }
    if was == DirState::Missing {
        let _ = std::fs::remove_dir(dir);
    }
}

/// One line saying what a writer's open of the log in `dir` repaired, if it repaired anything a
/// user should know of: a torn tail cut after a crash, acknowledged records lost, indexes rebuilt.
/// `None` after a clean shutdown or an unclean one that left nothing to repair.
pub fn recovery_note(dir: &Path, report: &strata_log::RecoveryReport) -> Option<String> {
    let mut parts = Vec::new();
    if report.bytes_truncated > 0 {
        parts.push(format!(
            "cut a torn tail of {} ({} {} never acknowledged as durable)",
            text::human_bytes(report.bytes_truncated),
            report.records_truncated,
            if report.records_truncated == 1 { "record" } else { "records" }
        ));
    }
    if report.acknowledged_records_lost > 0 {
        parts.push(format!("lost {} acknowledged records", report.acknowledged_records_lost));
    }
    if report.indexes_rebuilt > 0 {
        let n = report.indexes_rebuilt;
        parts.push(format!("rebuilt the indexes of {n} {}", if n == 1 { "segment" } else { "segments" }));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("{}: repaired at open: {}", dir.display(), parts.join("; ")))
}

/// What an admin command (`truncate`, `delete-before`, `compact`) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdminReport {
    /// The command.
    pub command: &'static str,
    /// Offsets before: log start and next offset.
    pub start_before: u64,
    /// The next offset before.
    pub next_before: u64,
    /// The log start offset after.
    pub start_after: u64,
    /// The next offset after.
    pub next_after: u64,
    /// Segments before and after.
    pub segments_before: u64,
    /// Segments after.
    pub segments_after: u64,
    /// For `compact`: what the pass did (`None`: nothing was dirty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<CompactionReport>,
    /// What opening the log repaired first ([`recovery_note`]), if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repaired: Option<String>,
}

/// Opens the closed log in `dir` for an admin command (never creating one), runs `op`, closes it
/// cleanly and reports the offsets before and after.
fn admin(
    dir: &Path,
    command: &'static str,
    op: impl FnOnce(&Log) -> Result<Option<CompactionReport>, ToolError>,
) -> Result<AdminReport, ToolError> {
    require_log_to_change(dir)?;
    let log = inspect::open_or_undo(dir, admin_config(dir)?)?;
    let repaired = recovery_note(dir, log.recovery_report());
    let (start_before, next_before, segments_before) = (log.start_offset(), log.next_offset(), log.segment_count());
    let compaction = op(&log)?;
    let (start_after, next_after, segments_after) = (log.start_offset(), log.next_offset(), log.segment_count());
    log.close()?;
    Ok(AdminReport {
        command,
        start_before,
        next_before,
        start_after,
        next_after,
        segments_before: segments_before as u64,
        segments_after: segments_after as u64,
        compaction,
        repaired,
    })
}

/// The config an offline command opens a log with: the parameters the log records
/// ([`inspect::offline_config`]), deletions unlinked at once.
fn admin_config(dir: &Path) -> Result<LogConfig, ToolError> {
    Ok(LogConfig { file_delete_delay_ms: 0, ..inspect::offline_config(dir)? })
}

/// `strata truncate`: removes every record at or after `offset` (a batch is removed whole).
pub fn truncate(dir: &Path, offset: u64) -> Result<AdminReport, ToolError> {
    admin(dir, "truncate", |log| Ok(log.truncate_to(offset).map(|_| None)?))
}

/// `strata delete-before`: moves the log start to `offset`, deleting whole segments below it. An
/// offset past the end of the log is refused (as `kafka-delete-records` refuses one past the
/// high-water mark): it would delete every record, which is rarely what a typo meant. With
/// `clamp` it is lowered to the end instead, and every record is deleted.
pub fn delete_before(dir: &Path, offset: u64, clamp: bool) -> Result<AdminReport, ToolError> {
    // Refused before the writer's open, which may repair the log: a refusal changes nothing. (The
    // writer's open decides again: its end is the authority.)
    require_log_to_change(dir)?;
    let end = Log::open_read_only(dir, LogConfig::default())?.next_offset();
    if offset > end && !clamp {
        return Err(past_the_end(offset, end));
    }
    admin(dir, "delete-before", |log| {
        let end = log.next_offset();
        if offset > end && !clamp {
            return Err(past_the_end(offset, end));
        }
        Ok(log.delete_records_before(offset.min(end)).map(|_| None)?)
    })
}

fn past_the_end(offset: u64, end: u64) -> ToolError {
    ToolError::Usage(format!(
        "offset {offset} is past the end of the log (next offset {end}); nothing was deleted. --clamp deletes \
         every record up to the end"
    ))
}

/// `strata compact`: one compaction pass (the latest record per key is kept in sealed segments).
pub fn compact(dir: &Path) -> Result<AdminReport, ToolError> {
    admin(dir, "compact", |log| Ok(log.compact()?))
}

impl From<Error> for ToolError {
    fn from(e: Error) -> ToolError {
        ToolError::Log(e)
    }
}
