//! The text of `dump` for a log's files.

use std::io::{self, Write};

use crate::tools::text::{human_bytes, iso_ms, plural};
use strata_log::internals::inspect::{BatchInfo, Dump, IndexSanity};

/// `dump`: each file with its contents, then its damage.
pub(super) fn render(out: &mut dyn Write, dump: &Dump) -> io::Result<()> {
    let path = match dump {
        Dump::Log { path, batches, valid_len, file_len, .. } => {
            writeln!(
                out,
                "{}: segment, {} {}, {} of data in a {} file",
                path.display(),
                batches.len(),
                plural(batches.len() as u64, "batch", "batches"),
                human_bytes(*valid_len),
                human_bytes(*file_len)
            )?;
            for b in batches {
                render_batch(out, b)?;
            }
            path
        }
        Dump::Index { path, entries, .. } => {
            let n = entries.len() as u64;
            writeln!(out, "{}: offset index, {n} {}", path.display(), plural(n, "entry", "entries"))?;
            for e in entries {
                writeln!(out, "  relative offset {:>10}  position {}", e.relative_offset, e.position)?;
            }
            path
        }
        Dump::TimeIndex { path, entries, .. } => {
            let n = entries.len() as u64;
            writeln!(out, "{}: time index, {n} {}", path.display(), plural(n, "entry", "entries"))?;
            for e in entries {
                writeln!(out, "  {}  relative offset {}", iso_ms(e.timestamp_ms), e.relative_offset)?;
            }
            path
        }
        Dump::Checkpoint { path, checkpoint, .. } => {
            match checkpoint {
                Some(c) => writeln!(
                    out,
                    "{}: checkpoint: log start offset {}, recovery point {}",
                    path.display(),
                    c.log_start_offset,
                    c.recovery_point
                )?,
                None => writeln!(out, "{}: checkpoint, unreadable", path.display())?,
            }
            path
        }
        Dump::CleanerCheckpoint { path, cleaned_up_to, .. } => {
            match cleaned_up_to {
                Some(offset) => writeln!(out, "{}: cleaner checkpoint: cleaned up to offset {offset}", path.display())?,
                None => writeln!(out, "{}: cleaner checkpoint, unreadable", path.display())?,
            }
            path
        }
        Dump::CleanShutdown { path, marker, .. } => {
            match marker {
                Some(m) => writeln!(
                    out,
                    "{}: clean-shutdown marker: next offset {}, active segment {} with {} of data",
                    path.display(),
                    m.next_offset,
                    m.active_base,
                    human_bytes(u64::from(m.active_len))
                )?,
                None => writeln!(out, "{}: clean-shutdown marker, unreadable", path.display())?,
            }
            path
        }
        Dump::Meta { path, meta, .. } => {
            match meta {
                Some(m) if m.version > strata_log::internals::format::META_VERSION => writeln!(
                    out,
                    "{}: log metadata of format version {}, newer than this build reads (its fields are not shown)",
                    path.display(),
                    m.version
                )?,
                Some(m) => writeln!(
                    out,
                    "{}: log metadata: format version {}, features {:#x}, segment_bytes {}, index_bytes {}, index_interval_bytes {}",
                    path.display(),
                    m.version,
                    m.features,
                    m.segment_bytes,
                    m.index_bytes,
                    m.index_interval_bytes
                )?,
                None => writeln!(out, "{}: log metadata, unreadable", path.display())?,
            }
            path
        }
        Dump::Other { path, len } => {
            return writeln!(out, "{}: {} (not a log file)", path.display(), human_bytes(*len));
        }
    };
    match dump.damage() {
        Some(d) => writeln!(out, "  DAMAGE in {} at position {}: {}", path.display(), d.position, d.reason),
        None => Ok(()),
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
