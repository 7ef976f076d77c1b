//! Compaction leftovers at open (docs/DESIGN.md §7 step 2, §10). `.cleaned` files are incomplete
//! cleaner output; `.swap` files are complete output waiting to replace the segments they cover.
//! Swap groups are renamed from `.cleaned` to `.swap` in descending offset order, so a `.swap`
//! at or above the smallest `.cleaned` base belongs to an interrupted rename pass and is discarded
//! with the `.cleaned` files; every other `.swap` is completed.

use std::path::Path;

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::failpoint::crash_point;
use crate::format::{CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, parse_file_name};
use crate::log::open::files::{dir_names, remove_logged};
use crate::log::open::loaded::RecoveryReport;
use crate::log::walk;
use crate::storage::{self, MappedFile};

/// The `.swap` files that must be discarded: those at or above the smallest `.cleaned` base.
pub(crate) fn stale_swaps(names: &[String]) -> Vec<&String> {
    let cleaned = names.iter().filter_map(|n| parse_file_name(n).filter(|(_, s)| s.ends_with(CLEANED_SUFFIX)));
    let Some(min_cleaned) = cleaned.map(|(base, _)| base).min() else { return Vec::new() };
    names
        .iter()
        .filter(|n| parse_file_name(n).is_some_and(|(base, s)| s.ends_with(SWAP_SUFFIX) && base >= min_cleaned))
        .collect()
}

/// Completes every remaining swap among `names` (listed before `remove_leftovers` ran): deletes the
/// segments its data replaces, then renames its files into place. Returns whether there was any.
pub(crate) fn complete_swaps(
    dir: &Path,
    names: &[String],
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<bool> {
    // Stale swaps were just deleted: list again only if there is a swap at all.
    if !names.iter().any(|n| n.ends_with(SWAP_SUFFIX)) {
        return Ok(false);
    }
    let names = dir_names(dir)?;
    let mut swaps: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .filter(|(_, suffix)| *suffix == format!("{LOG_SUFFIX}{SWAP_SUFFIX}"))
        .map(|(base, _)| base)
        .collect();
    swaps.sort_unstable();
    let any = !swaps.is_empty();
    for base in swaps {
        complete_swap(dir, base, &names, config, report)?;
    }
    Ok(any)
}

fn complete_swap(
    dir: &Path,
    base: u64,
    names: &[String],
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<()> {
    let swap_log = dir.join(format!("{}{SWAP_SUFFIX}", crate::format::file_name(base, LOG_SUFFIX)));
    let end = swap_end(&swap_log, base, config)?;
    tracing::info!(swap = %swap_log.display(), end, "completing an interrupted compaction swap");
    // Segments the swap replaces: every .log whose base is in [base, end). Delete them (the one at
    // `base` is replaced by the rename below) before the swap is renamed, so there is never a moment
    // where the new segment and an old one overlap.
    let replaced = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .filter(|&(b, s)| (base..end).contains(&b) && (s == LOG_SUFFIX || s == INDEX_SUFFIX || s == TIME_INDEX_SUFFIX));
    for (b, suffix) in replaced {
        remove_logged(dir, &crate::format::file_name(b, suffix), "segment replaced by a compaction swap", report)?;
        crash_point!("mid_delete");
    }
    storage::sync_dir(dir)?;
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let target = dir.join(crate::format::file_name(base, suffix));
        let swap = dir.join(format!("{}{SWAP_SUFFIX}", crate::format::file_name(base, suffix)));
        if swap.exists() {
            storage::rename(&swap, &target)?;
            crash_point!("swap_renamed");
        }
    }
    storage::sync_dir(dir)
}

/// The offset after the last batch of a complete swap file. A damaged swap is an error: it was
/// fsynced before it was renamed to `.swap`, and the segments it replaces may already be gone.
fn swap_end(path: &Path, base: u64, config: &LogConfig) -> Result<u64> {
    let len = storage::stat(path)?.len();
    let file = MappedFile::open_sealed(path, len, config.read_path);
    let scan = walk::scan(&file, len, base, config.index_interval_bytes)?;
    file.retire();
    let scan = scan.ok_or_else(|| Error::io("scan", path)(std::io::ErrorKind::NotFound.into()))?;
    match scan.invalid {
        Some(reason) => Err(Error::corrupt(path, scan.valid_len, reason)),
        // The cleaner always keeps a segment's last batch: an empty swap would replace data with
        // nothing.
        None if scan.batches == 0 => {
            Err(Error::corrupt(path, 0, Corruption::BadFile("compaction swap has no batches")))
        }
        None => Ok(scan.next_offset),
    }
}
