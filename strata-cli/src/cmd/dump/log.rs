//! The text of `dump` for a log's files.

use std::io::{self, Write};
use std::path::Path;

use crate::tools::text::{human_bytes, iso_ms, plural};
use strata_log::internals::inspect::{BatchInfo, Damage, Dump, IndexSanity};
use strata_log::internals::{Checkpoint, CleanShutdown, LogMeta, OffsetEntry, TimeEntry};

/// `dump`: each file with its contents, then its damage.
pub(super) fn render(out: &mut dyn Write, dump: &Dump) -> io::Result<()> {
    let path = match dump {
        Dump::Log { path, batches, valid_len, file_len, .. } => {
            render_segment(out, path, batches, *valid_len, *file_len)?;
            path
        }
        Dump::Index { path, entries, .. } => {
            render_offset_index(out, path, entries)?;
            path
        }
        Dump::TimeIndex { path, entries, .. } => {
            render_time_index(out, path, entries)?;
            path
        }
        Dump::Checkpoint { path, checkpoint, .. } => {
            writeln!(out, "{}: {}", path.display(), checkpoint_text(checkpoint.as_ref()))?;
            path
        }
        Dump::CleanerCheckpoint { path, cleaned_up_to, .. } => {
            writeln!(out, "{}: {}", path.display(), cleaner_checkpoint_text(*cleaned_up_to))?;
            path
        }
        Dump::CleanShutdown { path, marker, .. } => {
            writeln!(out, "{}: {}", path.display(), clean_shutdown_text(marker.as_ref()))?;
            path
        }
        Dump::Meta { path, meta, .. } => {
            writeln!(out, "{}: {}", path.display(), meta_text(meta.as_ref()))?;
            path
        }
        Dump::Other { path, len } => {
            return writeln!(out, "{}: {} (not a log file)", path.display(), human_bytes(*len));
        }
    };
    dump.damage().map_or(Ok(()), |damage| render_damage(out, path, damage))
}

/// The damage found in a file (of a log or a store), on a line of its own.
pub(super) fn render_damage(out: &mut dyn Write, path: &Path, damage: &Damage) -> io::Result<()> {
    writeln!(out, "  DAMAGE in {} at position {}: {}", path.display(), damage.position, damage.reason)
}

/// A `.log` segment: its size, then a line per batch.
fn render_segment(
    out: &mut dyn Write,
    path: &Path,
    batches: &[BatchInfo],
    valid_len: u64,
    file_len: u64,
) -> io::Result<()> {
    writeln!(
        out,
        "{}: segment, {} {}, {} of data in a {} file",
        path.display(),
        batches.len(),
        plural(batches.len() as u64, "batch", "batches"),
        human_bytes(valid_len),
        human_bytes(file_len)
    )?;
    for b in batches {
        render_batch(out, b)?;
    }
    Ok(())
}

/// A `.index` file: a line per entry.
fn render_offset_index(out: &mut dyn Write, path: &Path, entries: &[OffsetEntry]) -> io::Result<()> {
    let n = entries.len() as u64;
    writeln!(out, "{}: offset index, {n} {}", path.display(), plural(n, "entry", "entries"))?;
    for e in entries {
        writeln!(out, "  relative offset {:>10}  position {}", e.relative_offset, e.position)?;
    }
    Ok(())
}

/// A `.timeindex` file: a line per entry.
fn render_time_index(out: &mut dyn Write, path: &Path, entries: &[TimeEntry]) -> io::Result<()> {
    let n = entries.len() as u64;
    writeln!(out, "{}: time index, {n} {}", path.display(), plural(n, "entry", "entries"))?;
    for e in entries {
        writeln!(out, "  {}  relative offset {}", iso_ms(e.timestamp_ms), e.relative_offset)?;
    }
    Ok(())
}

/// The `checkpoint` file, after its path.
fn checkpoint_text(checkpoint: Option<&Checkpoint>) -> String {
    match checkpoint {
        Some(c) => {
            format!("checkpoint: log start offset {}, recovery point {}", c.log_start_offset, c.recovery_point)
        }
        None => "checkpoint, unreadable".to_owned(),
    }
}

/// The `cleaner-checkpoint` file, after its path.
fn cleaner_checkpoint_text(cleaned_up_to: Option<u64>) -> String {
    match cleaned_up_to {
        Some(offset) => format!("cleaner checkpoint: cleaned up to offset {offset}"),
        None => "cleaner checkpoint, unreadable".to_owned(),
    }
}

/// The `.clean-shutdown` marker, after its path.
fn clean_shutdown_text(marker: Option<&CleanShutdown>) -> String {
    match marker {
        Some(m) => format!(
            "clean-shutdown marker: next offset {}, active segment {} with {} of data",
            m.next_offset,
            m.active_base,
            human_bytes(u64::from(m.active_len))
        ),
        None => "clean-shutdown marker, unreadable".to_owned(),
    }
}

/// The `log.meta` file, after its path (only the version of one newer than this build).
fn meta_text(meta: Option<&LogMeta>) -> String {
    match meta {
        Some(m) if m.version > strata_log::internals::format::META_VERSION => format!(
            "log metadata of format version {}, newer than this build reads (its fields are not shown)",
            m.version
        ),
        Some(m) => format!(
            "log metadata: format version {}, features {:#x}, segment_bytes {}, index_bytes {}, index_interval_bytes {}",
            m.version, m.features, m.segment_bytes, m.index_bytes, m.index_interval_bytes
        ),
        None => "log metadata, unreadable".to_owned(),
    }
}

fn render_batch(out: &mut dyn Write, b: &BatchInfo) -> io::Result<()> {
    let offsets = if b.base_offset == b.last_offset {
        format!("offset {}", b.base_offset)
    } else {
        format!("offsets {}–{}", b.base_offset, b.last_offset)
    };
    let attributes = if b.attributes & 0x0010 != 0 {
        format!("  attributes {:#06x} (written by the cleaner)", b.attributes)
    } else if b.attributes != 0 {
        format!("  attributes {:#06x}", b.attributes)
    } else {
        String::new()
    };
    let times = if b.base_timestamp == b.max_timestamp {
        iso_ms(b.base_timestamp)
    } else {
        format!("{} – {}", iso_ms(b.base_timestamp), iso_ms(b.max_timestamp))
    };
    writeln!(
        out,
        "  batch {offsets}  position {}  {}  {} {}  {times}{attributes}  {}",
        b.position,
        human_bytes(b.size),
        b.record_count,
        plural(u64::from(b.record_count), "record", "records"),
        b.status
    )?;
    for r in b.records.iter().flatten() {
        let key = r.key.as_ref().map(|k| format!("  key {k}")).unwrap_or_default();
        let value = r.value.as_ref().map_or_else(|| "null (tombstone)".to_owned(), Clone::clone);
        let headers = match r.headers {
            0 => String::new(),
            n => format!("  ({n} {})", plural(u64::from(n), "header", "headers")),
        };
        writeln!(out, "    {}  {}{key}  value {value}{headers}", r.offset, iso_ms(r.timestamp_ms))?;
    }
    Ok(())
}

/// `dump --index-sanity-check`: one verdict per index.
pub(super) fn render_index_sanity(out: &mut dyn Write, checks: &[IndexSanity]) -> io::Result<()> {
    for c in checks {
        match &c.problem {
            None => {
                writeln!(out, "{}: ok ({} {})", c.path.display(), c.entries, plural(c.entries, "entry", "entries"))?
            }
            Some(problem) => writeln!(out, "{}: FAILED: {problem}", c.path.display())?,
        }
    }
    if checks.is_empty() {
        writeln!(out, "no index files")?;
    }
    Ok(())
}
