//! Text for people: what each command prints without `--json`. Sizes are human-readable, times
//! ISO 8601, byte strings shown as text (with `\xNN` for bytes that are not UTF-8); no Rust
//! `Debug` output.

use std::io::{self, Write};
use std::path::Path;

use super::text::{human_bytes, iso_ms};
use super::{AdminReport, Offsets, ProduceSummary};
use crate::bench::BenchResult;
use strata_log::internals::inspect::{BatchInfo, Dump, Finding, IndexSanity, RecoverOutcome, Severity, VerifyReport};

/// `produce`'s closing summary.
pub fn produce_summary(out: &mut dyn Write, s: &ProduceSummary) -> io::Result<()> {
    let offsets = match (s.first_offset, s.last_offset) {
        (Some(first), Some(last)) if first == last => format!(" at offset {first}"),
        (Some(first), Some(last)) => format!(" at offsets {first}–{last}"),
        _ => String::new(),
    };
    let prefix = if s.interrupted { "interrupted; " } else { "" };
    writeln!(
        out,
        "{prefix}produced {} {} ({}){offsets} in {:.2} s: {:.0} records/s, {}/s",
        s.records,
        plural(s.records, "record", "records"),
        human_bytes(s.bytes),
        s.seconds,
        s.records_per_sec(),
        human_bytes(s.bytes_per_sec() as u64)
    )
}

/// What a `produce` that failed part-way had already stored (the records stay in the log).
pub fn produce_failed(out: &mut dyn Write, s: &ProduceSummary) -> io::Result<()> {
    let offsets = match (s.first_offset, s.last_offset) {
        (Some(first), Some(last)) if first == last => format!(" at offset {first}"),
        (Some(first), Some(last)) => format!(" at offsets {first}–{last}"),
        _ => String::new(),
    };
    writeln!(
        out,
        "stored {} {} ({}){offsets} before the error; they stay in the log",
        s.records,
        plural(s.records, "record", "records"),
        human_bytes(s.bytes)
    )
}

pub(crate) fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `offsets`: one fact per line.
pub fn offsets(out: &mut dyn Write, o: &Offsets) -> io::Result<()> {
    writeln!(out, "earliest        {}", o.earliest)?;
    writeln!(out, "latest          {}", o.latest)?;
    if o.closed_cleanly {
        writeln!(out, "durable         {}  (closed cleanly)", o.durable)?;
    } else if o.live == Some(true) {
        // Only the writer knows how far it has fsynced: the checkpoint is a lower bound.
        writeln!(
            out,
            "durable         at least {}  (open in a writer: the recovery point; all {} if it flushes always, the default)",
            o.durable, o.latest
        )?;
    } else if o.live == Some(false) {
        writeln!(
            out,
            "durable         {}  (not closed cleanly: the recovery point; the next open keeps the valid records after it)",
            o.durable
        )?;
    } else {
        writeln!(out, "durable         at least {}  (open, or not closed cleanly: the recovery point)", o.durable)?;
    }
    match o.recovery_point {
        Some(rp) => writeln!(out, "recovery point  {rp}")?,
        None => writeln!(out, "recovery point  none (no readable checkpoint)")?,
    }
    if o.records_exact {
        writeln!(out, "records         {}", o.records)?;
    } else {
        writeln!(out, "records         at most {}  (compacted: offsets compaction removed hold no record)", o.records)?;
    }
    writeln!(out, "segments        {}", o.segments)?;
    writeln!(out, "size            {}", human_bytes(o.bytes))?;
    if let Some(offset) = o.offset_for_time {
        writeln!(out, "offset for time {offset}")?;
    }
    for f in &o.foreign {
        writeln!(out, "foreign file    {}  (not part of the log, left out: see `strata verify`)", f.display())?;
    }
    Ok(())
}

/// `dump`: each file with its contents, then its damage.
pub fn dump(out: &mut dyn Write, dump: &Dump) -> io::Result<()> {
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
                batch(out, b)?;
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

fn batch(out: &mut dyn Write, b: &BatchInfo) -> io::Result<()> {
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
pub fn index_sanity(out: &mut dyn Write, checks: &[IndexSanity]) -> io::Result<()> {
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

pub(crate) fn finding(out: &mut dyn Write, f: &Finding) -> io::Result<()> {
    match f.severity {
        // A foreign file is not damage at a position: the whole file is not the log's.
        Severity::Error if f.foreign => writeln!(out, "error: {}: {}", f.file.display(), f.problem),
        Severity::Error => {
            writeln!(out, "error: {} at position {}: {}", f.file.display(), f.position, f.problem)
        }
        Severity::Note if f.position > 0 => {
            writeln!(out, "note: {} at position {}: {}", f.file.display(), f.position, f.problem)
        }
        Severity::Note => writeln!(out, "note: {}: {}", f.file.display(), f.problem),
    }
}

/// `verify`: the totals, every finding, and a verdict.
pub fn verify(out: &mut dyn Write, r: &VerifyReport) -> io::Result<()> {
    let recovery_point = r.recovery_point.map_or_else(|| "none".to_owned(), |rp| rp.to_string());
    writeln!(
        out,
        "{} {}, {} {}, {} {}, {}; offsets [{}, {}); recovery point {recovery_point}",
        r.segments,
        plural(r.segments, "segment", "segments"),
        r.batches,
        plural(r.batches, "batch", "batches"),
        r.records,
        plural(r.records, "record", "records"),
        human_bytes(r.bytes),
        r.start_offset,
        r.next_offset
    )?;
    for f in &r.findings {
        finding(out, f)?;
    }
    let (errors, notes) = (r.errors().count() as u64, r.notes().count() as u64);
    let notes_text = format!("{notes} {}", plural(notes, "note", "notes"));
    if errors == 0 {
        writeln!(out, "clean{}", if notes > 0 { format!(" ({notes_text})") } else { String::new() })
    } else {
        writeln!(out, "damage found: {errors} {}, {notes_text}", plural(errors, "error", "errors"))
    }
}

/// `recover`: what it did, would do, or refused to do, in sentences.
pub fn recover(out: &mut dyn Write, dir: &Path, o: &RecoverOutcome, force: bool) -> io::Result<()> {
    let b = &o.before;
    let shape = |start: u64, next: u64, records: u64, bytes: u64| {
        format!("offsets [{start}, {next}), {records} {}, {}", plural(records, "record", "records"), human_bytes(bytes))
    };
    let errors = || o.found.iter().filter(|f| f.severity == Severity::Error);
    let damage = errors().any(|f| f.data && !f.foreign);
    let foreign = errors().any(|f| f.foreign);
    if o.refused {
        let what = match (damage, foreign) {
            (true, true) => "has damage to acknowledged records and a foreign file",
            (false, true) => "holds a file that is not part of the log",
            _ => "has damage to acknowledged records",
        };
        writeln!(out, "refused: {} {what}; nothing was changed", dir.display())?;
        for f in errors() {
            finding(out, f)?;
        }
        let dir = dir.display();
        if damage {
            writeln!(
                out,
                "run `strata recover --force {dir}` to cut the log at the damage (the damaged segment is kept as .corrupt)"
            )?;
        }
        if foreign {
            writeln!(
                out,
                "run `strata recover --force {dir}` to set the foreign file aside as .foreign (it holds no record of \
                 the log: nothing is lost)"
            )?;
        }
        return Ok(());
    }
    if o.dry_run {
        writeln!(out, "dry run: nothing was changed")?;
        let rp = o.recovery_point.map_or_else(|| "none".to_owned(), |rp| rp.to_string());
        writeln!(out, "log: {} valid; recovery point {rp}", shape(b.start_offset, b.next_offset, b.records, b.bytes))?;
        let plan = plan(o, force);
        if plan.is_empty() {
            writeln!(out, "recovery would scan the log and find nothing to repair")?;
        }
        for line in plan {
            writeln!(out, "{line}")?;
        }
        return Ok(());
    }
    let a = o.after.unwrap_or_default();
    writeln!(
        out,
        "recovered {}: scanned {} {}; log now {}; recovery point {}",
        dir.display(),
        o.segments_scanned,
        plural(o.segments_scanned, "segment", "segments"),
        shape(a.start_offset, a.next_offset, a.records, a.bytes),
        o.recovery_point.unwrap_or(a.next_offset)
    )?;
    let mut changed = false;
    let damaged_bytes = o.damaged_bytes_removed.unwrap_or(0);
    if o.records_removed > 0 || o.bytes_removed > 0 || damaged_bytes > 0 || o.offsets_removed.is_some() {
        changed = true;
        writeln!(out, "removed {} from the end", removed(o))?;
    }
    if o.indexes_rebuilt > 0 {
        changed = true;
        // The library counts a segment twice when a missing index is rebuilt at load and again
        // after the scan: a person is told about segments.
        let segments = o.indexes_rebuilt.min(a.segments.max(1));
        writeln!(out, "rebuilt the indexes of {segments} {}", plural(segments, "segment", "segments"))?;
    }
    for f in &o.files_deleted {
        changed = true;
        writeln!(out, "deleted {}", f.display())?;
    }
    for f in &o.files_kept_corrupt {
        changed = true;
        writeln!(out, "kept the damaged segment as {}", f.display())?;
    }
    for f in &o.files_kept_removed {
        changed = true;
        writeln!(out, "kept {} (a healthy segment after the damage; its records left the log)", f.display())?;
    }
    for f in &o.files_kept_foreign {
        changed = true;
        writeln!(out, "set aside {} (not part of the log; nothing of the log was in it)", f.display())?;
    }
    if o.acknowledged_records_lost > 0 {
        let n = o.acknowledged_records_lost;
        // Records in damaged batches count as lost, but could not be counted as valid ones removed.
        let damaged = match n.saturating_sub(o.records_removed) {
            0 => String::new(),
            d if d == n => " in the damaged data".to_owned(),
            d => format!(", {d} of them in the damaged data"),
        };
        writeln!(out, "lost {n} acknowledged {} (below the recovery point){damaged}", plural(n, "record", "records"))?;
    }
    if !changed {
        writeln!(out, "nothing to repair")?;
    }
    Ok(())
}

/// What a cut removes: `offsets 84–199 (29 valid records, 720 B, and 2.1 KiB of torn or damaged
/// data)`, or `59 B of torn or damaged data (no whole record)`.
fn removed(o: &RecoverOutcome) -> String {
    let mut parts = Vec::new();
    if o.records_removed > 0 || o.bytes_removed > 0 {
        let n = o.records_removed;
        parts.push(format!("{n} valid {}, {}", plural(n, "record", "records"), human_bytes(o.bytes_removed)));
    }
    match o.damaged_bytes_removed {
        Some(0) => {}
        Some(bytes) => parts.push(format!("{} of torn or damaged data", human_bytes(bytes))),
        None => parts.push("the torn or damaged data".to_owned()),
    }
    let details = parts.join(", and ");
    match o.offsets_removed {
        Some([first, last]) if first == last => format!("offset {first} ({details})"),
        Some([first, last]) => format!("offsets {first}–{last} ({details})"),
        None if o.records_removed == 0 => format!("{details} (no whole record)"),
        None => details,
    }
}

/// What recovery would do, from what the read-only check found, a sentence per line.
fn plan(o: &RecoverOutcome, force: bool) -> Vec<String> {
    let mut lines = Vec::new();
    let (mut loss, mut refused) = (false, false);
    for f in &o.found {
        let file = f.file.display();
        let position = f.position;
        let line = match (f.severity, f.data) {
            (Severity::Error, _) if f.foreign => {
                // "foreign: <why>; `strata recover --force` sets it aside as .foreign"
                let why = f.problem.split_once(';').map_or(f.problem.as_str(), |(why, _)| why);
                if force {
                    format!("set aside {file} as .foreign ({why}): it holds no record of the log, nothing is lost")
                } else {
                    format!(
                        "refuse: {file} is not part of the log ({why}); --force would set it aside as .foreign, losing nothing"
                    )
                }
            }
            (Severity::Error, true) if force => {
                loss = true;
                format!("cut the log at {file} position {position} ({}), keeping the segment as .corrupt", f.problem)
            }
            (Severity::Error, true) => {
                refused = true;
                format!("refuse: {file} is damaged at position {position} ({}); --force would cut it there", f.problem)
            }
            (Severity::Error, false) => format!("rebuild or replace {file} ({})", f.problem),
            (Severity::Note, _) if f.problem.starts_with("torn tail") => {
                loss = true;
                format!("cut the torn tail of {file} at position {position}: {}", f.problem)
            }
            (Severity::Note, _) if f.problem.starts_with("missing: the next open rebuilds") => {
                format!("rebuild {file}")
            }
            (Severity::Note, _) if f.problem.starts_with("orphan") => format!("delete {file} (an orphan index)"),
            (Severity::Note, _) if f.problem.starts_with("left by") => {
                format!("resolve {file} (left by an interrupted operation)")
            }
            (Severity::Note, _) => continue,
        };
        lines.push(format!("would {line}"));
    }
    let lost = match o.acknowledged_records_lost {
        0 => String::new(),
        n => format!(", losing about {n} acknowledged {}", plural(n, "record", "records")),
    };
    if loss {
        lines.push(format!("would remove {} from the end{lost}", removed(o)));
    } else if refused {
        lines.push(format!("--force would remove {} from the end{lost}", removed(o)));
    }
    lines
}

/// `truncate`, `delete-before`, `compact`: a confirmation of what changed.
pub fn admin(out: &mut dyn Write, dir: &Path, r: &AdminReport) -> io::Result<()> {
    let dir = dir.display();
    match r.command {
        "truncate" if r.next_after < r.next_before => writeln!(
            out,
            "truncated {dir}: offsets {}–{} removed; the log now ends at {}",
            r.next_after,
            r.next_before - 1,
            r.next_after
        ),
        "truncate" => writeln!(out, "nothing removed: the log ends at {}", r.next_after),
        "delete-before" if r.start_after > r.start_before => {
            let segments = match r.segments_before.saturating_sub(r.segments_after) {
                0 => "no segment was wholly below it".to_owned(),
                1 => "1 whole segment removed".to_owned(),
                n => format!("{n} whole segments removed"),
            };
            writeln!(
                out,
                "deleted offsets {}–{} in {dir}: the log now starts at {}; {segments}",
                r.start_before,
                r.start_after - 1,
                r.start_after,
            )
        }
        "delete-before" => writeln!(out, "nothing deleted: the log starts at {}", r.start_after),
        _ => match &r.compaction {
            Some(c) => writeln!(
                out,
                "compacted {dir}: removed {} of {} records in {} {} ({} → {}); clean up to offset {}",
                c.records_removed,
                c.records_removed + c.records_kept,
                c.segments_cleaned,
                plural(c.segments_cleaned, "segment", "segments"),
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after),
                c.cleaned_up_to
            ),
            None => writeln!(out, "nothing to compact in {dir}: no sealed segment has records to remove"),
        },
    }
}

/// `bench`: an aligned table, a legend, and notes numbered next to their phase.
pub fn bench_table(out: &mut dyn Write, results: &[BenchResult]) -> io::Result<()> {
    let width = results.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    writeln!(
        out,
        "{:<width$}  {:>12}  {:>11}  {:>9}  {:>9}  {:>9}  {:>9}  vs baseline",
        "phase", "records/s", "ops/s", "MB/s", "p50 µs", "p99 µs", "p99.9 µs"
    )?;
    let mut notes = Vec::new();
    for r in results {
        let mut extra = match (&r.baseline, r.ratio) {
            (Some(base), Some(ratio)) => format!("{:.0}% of {base}", ratio * 100.0),
            _ => String::new(),
        };
        if let Some(a) = r.appends_per_fsync {
            extra.push_str(&format!("{}{a:.1} appends/fsync", if extra.is_empty() { "" } else { "; " }));
        }
        if let Some(ms) = r.max_dispatch_lag_ms {
            let offsets = r.max_dispatch_lag_offsets.map_or(String::new(), |o| format!(", {o} messages"));
            extra.push_str(&format!("{}dispatch lag ≤ {ms} ms{offsets}", if extra.is_empty() { "" } else { "; " }));
        }
        if let Some(note) = &r.note {
            notes.push(note.clone());
            extra.push_str(&format!("{}[{}]", if extra.is_empty() { "" } else { " " }, notes.len()));
        }
        let row = format!(
            "{:<width$}  {:>12.0}  {:>11.0}  {:>9.1}  {:>9.1}  {:>9.1}  {:>9.1}  {extra}",
            r.name, r.records_per_sec, r.ops_per_sec, r.mb_per_sec, r.p50_us, r.p99_us, r.p999_us
        );
        writeln!(out, "{}", row.trim_end())?;
    }
    for (i, note) in notes.iter().enumerate() {
        writeln!(out, "[{}] {note}", i + 1)?;
    }
    writeln!(out)?;
    writeln!(out, "records/s, ops/s: records and calls (appends, reads, fsyncs, sends) per second")?;
    writeln!(out, "MB/s: payload (values) in 10^6 bytes per second")?;
    writeln!(out, "p50/p99/p99.9 µs: latency of one call in microseconds (median, 99th, 99.9th percentile)")?;
    writeln!(out, "vs baseline: throughput as a share of the raw disk figure the phase should be judged against")?;
    writeln!(out, "phases: raw_* the disk without strata; append_* no fsync; read_* CRC-checked reads;")?;
    writeln!(out, "  durable_<T>t_<size>_x<batch> FlushPolicy::Always from T threads; producer_*; recovery_scan;")?;
    writeln!(out, "  compaction; append_keyed_* appends beside background deletion or compaction;")?;
    writeln!(out, "  store_put_<T>t_<policy> MessageStore::put vs store_append_* (Log::append, same records);")?;
    writeln!(out, "  store_dispatch_lag_*; store_get_x<max>; store_query_by_key; store_recovery_* (unclean open)")?;
    writeln!(
        out,
        "  channel_put/take_<T>t Channel transactions of 100 x 100 B events under Always from T threads vs \
         channel_append_<T>t (Log::append of the same 100 records); channel_replay_<T>t: reopening it"
    )
}
