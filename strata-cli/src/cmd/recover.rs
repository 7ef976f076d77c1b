//! `strata recover`: offline recovery of a log ([`inspect::recover`]), refused without `--force`
//! where it would lose acknowledged records; `--dry-run` says what it would do.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::verify::finding;
use super::{clean, print, verdict};
use crate::tools::ToolError;
use crate::tools::text::{human_bytes, plural};
use strata_log::internals::inspect::{self, RecoverOptions, RecoverOutcome, Severity};

#[derive(clap::Args)]
pub(crate) struct RecoverArgs {
    /// The log directory.
    dir: PathBuf,
    /// Accept losing acknowledged records below damage: keep the damaged segment as `.corrupt`
    /// and cut the log there.
    #[arg(long)]
    force: bool,
    /// Change nothing; say what recovery would do (from a read-only check).
    #[arg(long)]
    dry_run: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: RecoverArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let RecoverArgs { dir, force, dry_run, json } = args;
    let outcome = inspect::recover(&dir, RecoverOptions { force, dry_run })?;
    // A dry run that finds damage --force would cut (or a foreign file it would set aside)
    // reports it as a refusal would.
    let damage = outcome.found.iter().any(|f| f.data && f.severity == inspect::Severity::Error);
    let would_refuse = dry_run && damage && !force;
    let written = print(out, json, &outcome, |out, outcome| render(out, &dir, outcome, force));
    verdict(clean(!(outcome.refused || would_refuse)), written)
}

/// `recover`: what it did, would do, or refused to do, in sentences.
fn render(out: &mut dyn Write, dir: &Path, o: &RecoverOutcome, force: bool) -> io::Result<()> {
    if o.refused {
        render_refusal(out, dir, o)
    } else if o.dry_run {
        render_plan(out, o, force)
    } else {
        render_repairs(out, dir, o)
    }
}

/// A log's extent: `offsets [0, 8), 8 records, 400 B`.
fn shape(start: u64, next: u64, records: u64, bytes: u64) -> String {
    format!("offsets [{start}, {next}), {records} {}, {}", plural(records, "record", "records"), human_bytes(bytes))
}

/// A refusal: why, the findings behind it, and the command that would go ahead.
fn render_refusal(out: &mut dyn Write, dir: &Path, o: &RecoverOutcome) -> io::Result<()> {
    let errors = || o.found.iter().filter(|f| f.severity == Severity::Error);
    let damage = errors().any(|f| f.data && !f.foreign);
    let foreign = errors().any(|f| f.foreign);
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
    Ok(())
}

/// A dry run: the log as it is, then what recovery would do.
fn render_plan(out: &mut dyn Write, o: &RecoverOutcome, force: bool) -> io::Result<()> {
    let b = &o.before;
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
    Ok(())
}

/// A recovery that ran: the log now, every change it made (or that there was none), and the
/// acknowledged records it lost.
fn render_repairs(out: &mut dyn Write, dir: &Path, o: &RecoverOutcome) -> io::Result<()> {
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
    let files = [
        (&o.files_deleted, "deleted ", ""),
        (&o.files_kept_corrupt, "kept the damaged segment as ", ""),
        (&o.files_kept_removed, "kept ", " (a healthy segment after the damage; its records left the log)"),
        (&o.files_kept_foreign, "set aside ", " (not part of the log; nothing of the log was in it)"),
    ];
    for (files, done, why) in files {
        for f in files {
            changed = true;
            writeln!(out, "{done}{}{why}", f.display())?;
        }
    }
    if o.acknowledged_records_lost > 0 {
        writeln!(out, "{}", lost(o))?;
    }
    if !changed {
        writeln!(out, "nothing to repair")?;
    }
    Ok(())
}

/// `lost 12 acknowledged records (below the recovery point), 3 of them in the damaged data`.
fn lost(o: &RecoverOutcome) -> String {
    let n = o.acknowledged_records_lost;
    // Records in damaged batches count as lost, but could not be counted as valid ones removed.
    let damaged = match n.saturating_sub(o.records_removed) {
        0 => String::new(),
        d if d == n => " in the damaged data".to_owned(),
        d => format!(", {d} of them in the damaged data"),
    };
    format!("lost {n} acknowledged {} (below the recovery point){damaged}", plural(n, "record", "records"))
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
