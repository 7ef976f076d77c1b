//! `strata dump`: the contents of one file, or of every file of a directory, by kind, up to and
//! including the damage.

use std::path::{Path, PathBuf};

use super::Damage;
use super::dirs::{set_aside_original, vanished};
use super::walk::{BatchInfo, read_index, walk_batches};
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CLEANER_CHECKPOINT_FILE, INDEX_SUFFIX, LOG_SUFFIX, META_FILE,
    TIME_INDEX_SUFFIX, parse_file_name,
};
use crate::log::{Checkpoint, CleanShutdown, OffsetEntry, TimeEntry};

/// The contents of one file, by kind.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
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
    /// The `log.meta` file.
    Meta {
        /// The file.
        path: PathBuf,
        /// Its contents, if valid.
        meta: Option<crate::log::meta::LogMeta>,
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

impl Dump {
    /// The damage found in the file, if any.
    pub fn damage(&self) -> Option<&Damage> {
        match self {
            Dump::Log { damage, .. }
            | Dump::Index { damage, .. }
            | Dump::TimeIndex { damage, .. }
            | Dump::CleanerCheckpoint { damage, .. }
            | Dump::Checkpoint { damage, .. }
            | Dump::CleanShutdown { damage, .. }
            | Dump::Meta { damage, .. } => damage.as_ref(),
            Dump::Other { .. } => None,
        }
    }
}

/// What `dump` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Also every record of every batch shown.
    pub records: bool,
    /// Only batches holding offsets at or after this.
    pub from: Option<u64>,
    /// Only batches holding offsets before this.
    pub to: Option<u64>,
    /// At most this many records in all (with `records`).
    pub max_records: Option<u64>,
}

impl DumpOptions {
    fn wants(&self, first: u64, last: u64) -> bool {
        self.from.is_none_or(|from| last >= from) && self.to.is_none_or(|to| first < to)
    }
}

/// Dumps one file, choosing how by its name (a `.corrupt` or `.foreign` copy is read as the
/// segment it was).
pub fn dump_file(path: &Path, with_records: bool) -> Result<Dump> {
    dump_file_with(path, &DumpOptions { records: with_records, ..DumpOptions::default() })
}

/// [`dump_file`] with a range, a record limit.
pub fn dump_file_with(path: &Path, options: &DumpOptions) -> Result<Dump> {
    dump_file_counted(path, options, &mut 0)
}

/// Dumps every file of a directory, in name order.
pub fn dump_dir(dir: &Path, with_records: bool) -> Result<Vec<Dump>> {
    dump_dir_with(dir, &DumpOptions { records: with_records, ..DumpOptions::default() })
}

/// [`dump_dir`] with a range and a record limit (counted over all files). A file that vanishes
/// between the listing and its reading (on a live log: a preallocated file renamed at a roll, a
/// deleted segment) is left out, not an error.
pub fn dump_dir_with(dir: &Path, options: &DumpOptions) -> Result<Vec<Dump>> {
    let mut names = crate::log::open::files::dir_names(dir)?;
    names.sort();
    let mut shown = 0;
    let mut dumps = Vec::with_capacity(names.len());
    for name in &names {
        match dump_file_counted(&dir.join(name), options, &mut shown) {
            Ok(dump) => dumps.push(dump),
            Err(e) if vanished(&e) => tracing::debug!(file = name.as_str(), "gone before it was read; left out"),
            Err(e) => return Err(e),
        }
    }
    Ok(dumps)
}

/// How often `dump` reads a segment again whose length changed while it was read.
const DUMP_RETRIES: u32 = 5;

fn dump_file_counted(path: &Path, options: &DumpOptions, shown: &mut u64) -> Result<Dump> {
    // A live writer trims a segment when it seals it: damage seen in a file whose length changed
    // while it was read is that, not damage; read it again.
    let mut attempt = 0;
    loop {
        let before = *shown;
        let dump = dump_file_once(path, options, shown)?;
        let changed = match &dump {
            Dump::Log { file_len, damage: Some(_), .. } => {
                std::fs::metadata(path).map_or(true, |m| m.len() != *file_len)
            }
            _ => false,
        };
        if !changed || attempt == DUMP_RETRIES {
            return Ok(dump);
        }
        attempt += 1;
        *shown = before;
    }
}

fn dump_file_once(path: &Path, options: &DumpOptions, shown: &mut u64) -> Result<Dump> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let len = std::fs::metadata(path).map_err(Error::io("stat", path))?.len();
    let path_buf = path.to_path_buf();
    let kind = set_aside_original(name).and_then(parse_file_name).or_else(|| parse_file_name(name));
    Ok(match (name, kind) {
        (_, Some((base, LOG_SUFFIX))) => dump_log(path, base, len, options, shown)?,
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
        (META_FILE, _) => {
            let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
            let (meta, damage) = decoded(bytes, crate::log::meta::LogMeta::decode);
            Dump::Meta { path: path_buf, meta, damage }
        }
        (CLEAN_SHUTDOWN_FILE, _) => {
            let (marker, damage) =
                decoded(std::fs::read(path).map_err(Error::io("read", path))?, CleanShutdown::decode);
            Dump::CleanShutdown { path: path_buf, marker, damage }
        }
        _ => Dump::Other { path: path_buf, len },
    })
}

fn decoded<T>(bytes: Vec<u8>, decode: impl Fn(&[u8]) -> Result<T, Corruption>) -> (Option<T>, Option<Damage>) {
    match decode(&bytes) {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(Damage { position: 0, reason: e.to_string() })),
    }
}

fn dump_log(path: &Path, base: u64, len: u64, options: &DumpOptions, shown: &mut u64) -> Result<Dump> {
    let walked = walk_batches(path, base, len, options.records)?;
    let mut batches: Vec<BatchInfo> = walked
        .batches
        .into_iter()
        .filter(|b| b.status != "ok" || options.wants(b.base_offset, b.last_offset))
        .collect();
    for batch in &mut batches {
        if let Some(records) = batch.records.as_mut() {
            records.retain(|r| options.wants(r.offset, r.offset));
            let room = options.max_records.map_or(usize::MAX, |max| max.saturating_sub(*shown) as usize);
            records.truncate(room);
            *shown += records.len() as u64;
        }
    }
    Ok(Dump::Log {
        path: path.to_path_buf(),
        batches,
        valid_len: walked.valid_len,
        file_len: len,
        damage: walked.damage,
    })
}
