//! `strata verify`: every file of a log, or of a message store, checked read-only (safe beside a
//! writer); exit 1 if damage is found.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::{clean, print, verdict};
use crate::tools::text::{count, human_bytes, plural};
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
        "{}, {}, {}, {}; offsets [{}, {}); recovery point {recovery_point}",
        count(r.segments, "segment", "segments"),
        count(r.batches, "batch", "batches"),
        count(r.records, "record", "records"),
        human_bytes(r.bytes),
        r.start_offset,
        r.next_offset
    )?;
    render_findings(out, &r.findings)
}

/// `verify` of a store root: the commit log's totals, the store's, every finding, a verdict.
fn render_store(out: &mut dyn Write, r: &StoreVerifyReport) -> io::Result<()> {
    let log = &r.commit_log;
    writeln!(
        out,
        "commit log: {}, {}; offsets [{}, {})",
        count(log.segments, "segment", "segments"),
        count(log.records, "record", "records"),
        log.start_offset,
        log.next_offset
    )?;
    let checkpoint = r.dispatched_up_to.map_or_else(|| "none".to_owned(), |x| x.to_string());
    writeln!(
        out,
        "store: {} with {}, {} index {} with {}, {} messages read, {} consumer {}; dispatched up to {checkpoint}",
        count(r.queues, "queue", "queues"),
        count(r.queue_entries, "entry", "entries"),
        r.index_files,
        plural(r.index_files, "file", "files"),
        count(r.index_entries, "entry", "entries"),
        r.messages_checked,
        r.consumer_offsets,
        plural(r.consumer_offsets, "offset", "offsets"),
    )?;
    if let Some(p) = &r.parameters {
        writeln!(
            out,
            "store.meta: queue files of {} entries, index files of {} slots and {} entries",
            p.queue_entries_per_file, p.index_slots, p.index_entries
        )?;
    }
    render_findings(out, log.findings.iter().chain(&r.findings))
}

/// Every finding, then the verdict: `clean (2 notes)` or `damage found: 1 error, 0 notes`.
fn render_findings<'a>(out: &mut dyn Write, findings: impl IntoIterator<Item = &'a Finding>) -> io::Result<()> {
    let (mut errors, mut notes) = (0, 0);
    for f in findings {
        finding(out, f)?;
        match f.severity {
            Severity::Error => errors += 1,
            Severity::Note => notes += 1,
        }
    }
    let notes_text = count(notes, "note", "notes");
    if errors == 0 {
        writeln!(out, "clean{}", if notes > 0 { format!(" ({notes_text})") } else { String::new() })
    } else {
        writeln!(out, "damage found: {}, {notes_text}", count(errors, "error", "errors"))
    }
}
