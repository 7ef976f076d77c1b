//! `strata dump` and `strata verify` as library functions returning values: read-only inspection of
//! every file kind. Files are read with `pread`, never mapped, so inspecting a live log is safe.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{LogConfig, ReadPath};
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CLEANED_SUFFIX, CLEANER_CHECKPOINT_FILE, DELETED_SUFFIX, INDEX_SUFFIX,
    LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, TMP_SUFFIX, parse_file_name,
};
use crate::log::index::{IndexEntry, check_entries};
use crate::log::walk::{BatchPos, Stop, walk_file};
use crate::log::{BatchHeader, Checkpoint, CleanShutdown, OffsetEntry, TimeEntry};
use crate::log::{Log, batch};
use crate::storage::MappedFile;

/// One batch as `dump` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchInfo {
    /// Byte position in the `.log`.
    pub position: u64,
    /// Bytes the batch takes.
    pub size: u64,
    /// First and last offset it covers.
    pub base_offset: u64,
    /// Last offset it covers.
    pub last_offset: u64,
    /// Number of records.
    pub record_count: u32,
    /// Timestamps from the header.
    pub base_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Attribute bits.
    pub attributes: u16,
    /// `"ok"` or why the batch is invalid (then it is the damage, and the last batch shown).
    pub status: String,
    /// The records, with `--records`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<RecordInfo>>,
}

/// One record as `dump --records` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordInfo {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp.
    pub timestamp_ms: i64,
    /// Key as UTF-8 (invalid bytes replaced).
    pub key: Option<String>,
    /// Value as UTF-8 (invalid bytes replaced).
    pub value: Option<String>,
    /// Header count.
    pub headers: u32,
}

/// Where a file stops making sense.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    /// Byte position of the damage.
    pub position: u64,
    /// What is wrong there.
    pub reason: String,
}

/// The contents of one file, by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Dump {
    /// A `.log` segment: its batches up to the damage, then the damage.
    Log {
        /// The file.
        path: PathBuf,
        /// Valid batches (and the damaged one, with its status).
        batches: Vec<BatchInfo>,
        /// Where the valid data ends.
        valid_len: u64,
        /// The file length (zeros after `valid_len` are preallocated space).
        file_len: u64,
        /// The damage, if the data does not end cleanly.
        damage: Option<Damage>,
    },
    /// A `.index` file.
    Index {
        /// The file.
        path: PathBuf,
        /// Its entries, up to the first unused (zero) entry.
        entries: Vec<OffsetEntry>,
        /// A structural problem.
        damage: Option<Damage>,
    },
    /// A `.timeindex` file.
    TimeIndex {
        /// The file.
        path: PathBuf,
        /// Its entries, up to the first unused (zero) entry.
        entries: Vec<TimeEntry>,
        /// A structural problem.
        damage: Option<Damage>,
    },
    /// The `cleaner-checkpoint` file.
    CleanerCheckpoint {
        /// The file.
        path: PathBuf,
        /// Everything below this offset was compacted by the last pass, if the file is valid.
        cleaned_up_to: Option<u64>,
        /// Why it is not.
        damage: Option<Damage>,
    },
    /// The `checkpoint` file.
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// Its contents, if valid.
        checkpoint: Option<Checkpoint>,
        /// Why it is not.
        damage: Option<Damage>,
    },
    /// The `.clean-shutdown` marker.
    CleanShutdown {
        /// The file.
        path: PathBuf,
        /// Its contents, if valid.
        marker: Option<CleanShutdown>,
        /// Why it is not.
        damage: Option<Damage>,
    },
    /// Any other file: its length only.
    Other {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
}

/// Dumps one file, choosing how by its name.
pub fn dump_file(path: &Path, with_records: bool) -> Result<Dump> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let len = std::fs::metadata(path).map_err(Error::io("stat", path))?.len();
    let path_buf = path.to_path_buf();
    Ok(match (name, parse_file_name(name)) {
        (_, Some((base, LOG_SUFFIX))) => dump_log(path, base, len, with_records)?,
        (_, Some((_, INDEX_SUFFIX))) => {
            let (entries, damage) = read_index::<OffsetEntry>(path)?;
            Dump::Index { path: path_buf, entries, damage }
        }
        (_, Some((_, TIME_INDEX_SUFFIX))) => {
            let (entries, damage) = read_index::<TimeEntry>(path)?;
            Dump::TimeIndex { path: path_buf, entries, damage }
        }
        (CHECKPOINT_FILE, _) => {
            let (checkpoint, damage) =
                decoded(std::fs::read(path).map_err(Error::io("read", path))?, Checkpoint::decode);
            Dump::Checkpoint { path: path_buf, checkpoint, damage }
        }
        (CLEANER_CHECKPOINT_FILE, _) => {
            let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
            let (cleaned_up_to, damage) = decoded(bytes, crate::log::cleaner_checkpoint_decode);
            Dump::CleanerCheckpoint { path: path_buf, cleaned_up_to, damage }
        }
        (CLEAN_SHUTDOWN_FILE, _) => {
            let (marker, damage) =
                decoded(std::fs::read(path).map_err(Error::io("read", path))?, CleanShutdown::decode);
            Dump::CleanShutdown { path: path_buf, marker, damage }
        }
        _ => Dump::Other { path: path_buf, len },
    })
}

/// Dumps every file of a directory, in name order.
pub fn dump_dir(dir: &Path, with_records: bool) -> Result<Vec<Dump>> {
    let mut names = crate::log::load::dir_names(dir)?;
    names.sort();
    names.iter().map(|name| dump_file(&dir.join(name), with_records)).collect()
}

fn decoded<T>(bytes: Vec<u8>, decode: impl Fn(&[u8]) -> Result<T, Corruption>) -> (Option<T>, Option<Damage>) {
    match decode(&bytes) {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(Damage { position: 0, reason: e.to_string() })),
    }
}

fn dump_log(path: &Path, base: u64, len: u64, with_records: bool) -> Result<Dump> {
    let walked = walk_batches(path, base, len, with_records)?;
    Ok(Dump::Log {
        path: path.to_path_buf(),
        batches: walked.batches,
        valid_len: walked.valid_len,
        file_len: len,
        damage: walked.damage,
    })
}

/// The batches of a `.log` file, validated one by one until the first invalid one.
struct Walked {
    batches: Vec<BatchInfo>,
    valid_len: u64,
    next_offset: u64,
    damage: Option<Damage>,
}

fn walk_batches(path: &Path, base: u64, len: u64, with_records: bool) -> Result<Walked> {
    let file = MappedFile::open_sealed(path, len, ReadPath::Pread);
    let mut batches = Vec::new();
    let start = BatchPos { position: 0, expected: base };
    let end = walk_file(&file, len, start, |at, header, bytes| {
        let valid = batch::validate(bytes, Some(at.expected));
        let records = match (&valid, with_records) {
            (Ok(_), true) => Some(records_of(bytes, header)),
            _ => None,
        };
        let status = valid.as_ref().map_or_else(|e| e.to_string(), |_| "ok".to_owned());
        batches.push(batch_info(at.position, header, status, records));
        match valid {
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    })?;
    let end = end.ok_or_else(|| Error::io("read", path)(std::io::ErrorKind::NotFound.into()))?;
    let damage = match end.stop {
        Stop::End => None,
        Stop::Break(reason) | Stop::Invalid(reason) => {
            Some(Damage { position: end.at.position, reason: reason.to_string() })
        }
    };
    Ok(Walked { batches, valid_len: end.at.position, next_offset: end.at.expected, damage })
}

fn batch_info(position: u64, h: &BatchHeader, status: String, records: Option<Vec<RecordInfo>>) -> BatchInfo {
    BatchInfo {
        position,
        size: h.size(),
        base_offset: h.base_offset,
        last_offset: h.last_offset(),
        record_count: h.record_count,
        base_timestamp: h.base_timestamp,
        max_timestamp: h.max_timestamp,
        attributes: h.attributes,
        status,
        records,
    }
}

fn records_of(bytes: &[u8], header: &BatchHeader) -> Vec<RecordInfo> {
    let text = |span: batch::Span| span.get(bytes).map(|b| String::from_utf8_lossy(b).into_owned());
    batch::RecordIter::new(bytes, header)
        .map_while(|r| r.ok())
        .map(|r| RecordInfo {
            offset: header.base_offset + u64::from(r.offset_delta),
            timestamp_ms: r.timestamp_ms,
            key: text(r.key),
            value: text(r.value),
            headers: r.header_count,
        })
        .collect()
}

/// An index file's entries up to the first unused one, and a structural problem if any.
fn read_index<E: IndexEntry>(path: &Path) -> Result<(Vec<E>, Option<Damage>)> {
    let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
    let whole = bytes.len() / E::LEN * E::LEN;
    let entries: Vec<E> = bytes[..whole].chunks_exact(E::LEN).map(E::decode_from).collect();
    let damage = if whole != bytes.len() {
        Some(Damage {
            position: whole as u64,
            reason: format!("length {} is not a multiple of {}", bytes.len(), E::LEN),
        })
    } else {
        check_entries(&entries).err().map(|reason| Damage { position: 0, reason })
    };
    let used = entries.iter().position(E::is_zero).unwrap_or(entries.len());
    Ok((entries[..used].to_vec(), damage))
}

/// A problem `verify` found: corruption of data that should be there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The file.
    pub file: PathBuf,
    /// Byte position in it.
    pub position: u64,
    /// What is wrong.
    pub problem: String,
}

/// What `verify` checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Segments checked.
    pub segments: u64,
    /// Valid batches and records.
    pub batches: u64,
    /// Valid records.
    pub records: u64,
    /// Bytes of valid batches.
    pub bytes: u64,
    /// First and next offset of the valid log.
    pub start_offset: u64,
    /// The offset after the last valid batch.
    pub next_offset: u64,
    /// The recovery point in the checkpoint, if it is readable.
    pub recovery_point: Option<u64>,
    /// Corruption found, each with file and position. Empty means clean.
    pub findings: Vec<Finding>,
    /// Things worth knowing that are not corruption (a torn tail past the recovery point, leftover
    /// files of interrupted operations, untrimmed segments).
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// Whether nothing is corrupt.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Checks every segment, index and the checkpoint of the log in `dir`, read-only (through
/// [`Log::open_read_only`]; safe on a live log, where a torn tail is the batch being written).
pub fn verify(dir: &Path, config: &LogConfig) -> Result<VerifyReport> {
    let log = Log::open_read_only(dir, config.clone())?;
    let mut report = VerifyReport { start_offset: log.start_offset(), ..VerifyReport::default() };
    drop(log);
    let checkpoint = verify_checkpoint(dir, &mut report)?;
    report.recovery_point = checkpoint.map(|c| c.recovery_point);
    let files = crate::log::load::list_segments(dir)?;
    let mut expected = files.first().map_or(0, |f| f.base);
    for (i, file) in files.iter().enumerate() {
        let path = crate::log::segment::SegmentPaths::new(dir, file.base);
        if file.base != expected {
            let problem = Corruption::SegmentGap { expected, found: file.base }.to_string();
            report.findings.push(Finding { file: path.log.clone(), position: 0, problem });
        }
        let walked = walk_batches(&path.log, file.base, file.len, false)?;
        report.segments += 1;
        report.batches += walked.batches.iter().filter(|b| b.status == "ok").count() as u64;
        report.records +=
            walked.batches.iter().filter(|b| b.status == "ok").map(|b| u64::from(b.record_count)).sum::<u64>();
        report.bytes += walked.valid_len;
        let last = i + 1 == files.len();
        judge_end(&path.log, &walked, file.len, last, report.recovery_point, &mut report);
        verify_indexes(&path.index, &path.time_index, file.base, &walked, last, &mut report)?;
        expected = walked.next_offset;
    }
    report.next_offset = expected;
    if let Some(rp) = report.recovery_point.filter(|&rp| rp > expected) {
        let file = dir.join(CHECKPOINT_FILE);
        let problem = Corruption::EndsBeforeRecoveryPoint { end: expected, recovery_point: rp }.to_string();
        report.findings.push(Finding { file, position: 0, problem });
    }
    note_leftovers(dir, &mut report)?;
    Ok(report)
}

/// `strata recover`: opens the log offline with a forced scan from the recovery point (the
/// clean-shutdown marker is removed first, so damage in the active segment is found too), closes it
/// cleanly, and returns what recovery did. With `force`, damage below the recovery point is cut
/// (`RecoveryMode::TruncateCorrupt`); without it, it is an error and no data is changed.
pub fn recover(dir: &Path, force: bool) -> Result<crate::RecoveryReport> {
    if !dir.is_dir() {
        return Err(Error::NotADirectory { path: dir.to_path_buf() });
    }
    let recovery = if force { crate::RecoveryMode::TruncateCorrupt } else { crate::RecoveryMode::Strict };
    // Reopening re-extends the active segment to `segment_bytes`: use the largest size the log
    // already has, not the 1 GiB default, so an offline recovery needs no new disk space.
    let largest = crate::log::load::list_segments(dir)?.iter().map(|f| f.len).max().unwrap_or(0);
    let segment_bytes = largest.clamp(crate::format::MIN_SEGMENT_BYTES, LogConfig::default().segment_bytes);
    let config = LogConfig { recovery, segment_bytes, ..LogConfig::default() };
    // Take the lock before touching the marker: never under a live writer.
    let lock = crate::log::lock_dir(dir)?;
    if crate::storage::remove_if_exists(&dir.join(CLEAN_SHUTDOWN_FILE))? {
        crate::storage::sync_dir(dir)?;
    }
    drop(lock);
    let log = Log::open(dir, config)?;
    let report = log.recovery_report().clone();
    log.close()?;
    Ok(report)
}

fn verify_checkpoint(dir: &Path, report: &mut VerifyReport) -> Result<Option<Checkpoint>> {
    match Checkpoint::read(dir)? {
        Some(Ok(stored)) => Ok(Some(stored.checkpoint)),
        Some(Err(reason)) => {
            report.findings.push(Finding { file: dir.join(CHECKPOINT_FILE), position: 0, problem: reason.to_string() });
            Ok(None)
        }
        None => {
            report.notes.push("no checkpoint: the next open scans from the first segment".to_owned());
            Ok(None)
        }
    }
}

/// Whether the end of a segment's valid data is corruption, a torn tail, or just its end.
fn judge_end(
    path: &Path,
    walked: &Walked,
    file_len: u64,
    last: bool,
    recovery_point: Option<u64>,
    report: &mut VerifyReport,
) {
    let Some(damage) = &walked.damage else {
        if !last && walked.valid_len < file_len {
            report.notes.push(format!(
                "{}: untrimmed ({} zero bytes after the data)",
                path.display(),
                file_len - walked.valid_len
            ));
        }
        return;
    };
    let acknowledged = recovery_point.is_none_or(|rp| walked.next_offset < rp);
    if last && !acknowledged {
        report.notes.push(format!(
            "{}: torn tail at position {} past the recovery point ({}): the end of a live log, or removed by recovery",
            path.display(),
            damage.position,
            damage.reason
        ));
    } else {
        report.findings.push(Finding {
            file: path.to_path_buf(),
            position: damage.position,
            problem: damage.reason.clone(),
        });
    }
}

/// Index checks: structure, every offset entry at a batch with that base, time entries inside the
/// segment, and the final time entry of a sealed segment (KAFKA-10207).
fn verify_indexes(
    index: &Path,
    time_index: &Path,
    base: u64,
    walked: &Walked,
    last: bool,
    report: &mut VerifyReport,
) -> Result<()> {
    let starts: Vec<(u64, u64)> =
        walked.batches.iter().filter(|b| b.status == "ok").map(|b| (b.position, b.base_offset)).collect();
    let mut finding = |file: &Path, position: u64, problem: String| {
        report.findings.push(Finding { file: file.to_path_buf(), position, problem });
    };
    if !index.exists() || !time_index.exists() {
        finding(index, 0, "index file missing (open rebuilds it)".to_owned());
        return Ok(());
    }
    let (offsets, damage) = read_index::<OffsetEntry>(index)?;
    if let Some(d) = damage {
        finding(index, d.position, d.reason);
    }
    // Entries past damage in the data are its consequence, not a second finding.
    for (i, e) in offsets.iter().enumerate().filter(|(_, e)| u64::from(e.position) < walked.valid_len) {
        let at = starts.binary_search_by_key(&u64::from(e.position), |&(p, _)| p);
        if at.map_or(true, |j| starts[j].1 != base.saturating_add(u64::from(e.relative_offset))) {
            finding(
                index,
                (i * OffsetEntry::LEN) as u64,
                format!("entry {e:?} does not point at a batch with that offset"),
            );
        }
    }
    let (times, damage) = read_index::<TimeEntry>(time_index)?;
    if let Some(d) = damage {
        finding(time_index, d.position, d.reason);
    }
    let past_end =
        |e: &&TimeEntry| base.saturating_add(u64::from(e.relative_offset)) >= walked.next_offset.max(base + 1);
    if let Some(e) = times.iter().find(past_end).filter(|_| walked.damage.is_none()) {
        finding(time_index, 0, format!("entry {e:?} points past the segment's last offset"));
    }
    let max = walked.batches.iter().filter(|b| b.status == "ok").map(|b| b.max_timestamp).max().unwrap_or(0);
    if !last && max > 0 && walked.damage.is_none() && times.last().is_none_or(|e| e.timestamp_ms != max) {
        finding(time_index, 0, format!("sealed segment lacks the final time entry for its max timestamp {max}"));
    }
    Ok(())
}

fn note_leftovers(dir: &Path, report: &mut VerifyReport) -> Result<()> {
    for name in crate::log::load::dir_names(dir)? {
        if [SWAP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX, TMP_SUFFIX].iter().any(|s| name.ends_with(s)) {
            report.notes.push(format!("{name}: left by an interrupted operation; the next open resolves it"));
        }
    }
    Ok(())
}
