//! `strata verify`: every file of a log, or of a message store, checked read-only (safe beside a
//! writer); exit 1 if damage is found.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::{clean, print, verdict};
use crate::tools::text::{human_bytes, plural};
use crate::tools::{self, ToolError};
use strata_log::LogConfig;
use strata_log::internals::inspect::store::{self as store_files, StoreVerifyReport};
use strata_log::internals::inspect::{self, Finding, Severity, VerifyReport};

#[derive(clap::Args)]
pub(crate) struct VerifyArgs {
    /// The log directory, or a message store's root.
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: VerifyArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    if store_files::is_store_root(&args.dir) {
        let report = store_files::verify_store(&args.dir)?;
        return verdict(clean(report.is_clean()), print(out, args.json, &report, render_store));
    }
    tools::require_log(&args.dir)?;
    let report = inspect::verify(&args.dir, &LogConfig::default())?;
    verdict(clean(report.is_clean()), print(out, args.json, &report, render_log))
}

pub(super) fn finding(out: &mut dyn Write, f: &Finding) -> io::Result<()> {
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
fn render_log(out: &mut dyn Write, r: &VerifyReport) -> io::Result<()> {
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

/// `verify` of a store root: the commit log's totals, the store's, every finding, a verdict.
fn render_store(out: &mut dyn Write, r: &StoreVerifyReport) -> io::Result<()> {
    let log = &r.commit_log;
    writeln!(
        out,
        "commit log: {} {}, {} {}; offsets [{}, {})",
        log.segments,
        plural(log.segments, "segment", "segments"),
        log.records,
        plural(log.records, "record", "records"),
        log.start_offset,
        log.next_offset
    )?;
    let checkpoint = r.dispatched_up_to.map_or_else(|| "none".to_owned(), |x| x.to_string());
    writeln!(
        out,
        "store: {} {} with {} {}, {} index {} with {} {}, {} messages read, {} consumer {}; dispatched up to {checkpoint}",
        r.queues,
        plural(r.queues, "queue", "queues"),
        r.queue_entries,
        plural(r.queue_entries, "entry", "entries"),
        r.index_files,
        plural(r.index_files, "file", "files"),
        r.index_entries,
        plural(r.index_entries, "entry", "entries"),
        r.messages_checked,
        r.consumer_offsets,
        plural(r.consumer_offsets, "offset", "offsets"),
    )?;
    let all: Vec<_> = log.findings.iter().chain(&r.findings).collect();
    for f in &all {
        finding(out, f)?;
    }
    let errors = all.iter().filter(|f| f.severity == strata_log::internals::inspect::Severity::Error).count() as u64;
    let notes = all.len() as u64 - errors;
    let notes_text = format!("{notes} {}", plural(notes, "note", "notes"));
    if errors == 0 {
        writeln!(out, "clean{}", if notes > 0 { format!(" ({notes_text})") } else { String::new() })
    } else {
        writeln!(out, "damage found: {errors} {}, {notes_text}", plural(errors, "error", "errors"))
    }
}
