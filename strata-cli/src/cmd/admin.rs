//! The admin commands on a closed log, `truncate`, `delete-before` and `compact`
//! ([`tools::truncate`], [`tools::delete_before`], [`tools::compact`]): each says what its open
//! repaired first, then what changed.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Notes, print, verdict};
use crate::tools::text::{human_bytes, plural};
use crate::tools::{self, AdminReport, ToolError};

#[derive(clap::Args)]
pub(crate) struct TruncateArgs {
    /// The log directory.
    dir: PathBuf,
    /// The first offset to remove.
    #[arg(long)]
    to: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub(crate) struct DeleteBeforeArgs {
    /// The log directory.
    dir: PathBuf,
    /// The new log start offset (at most the log's next offset).
    offset: u64,
    /// Lower an offset past the end of the log to the end (deleting every record) instead of
    /// refusing it.
    #[arg(long)]
    clamp: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub(crate) struct CompactArgs {
    /// The log directory.
    dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn truncate(args: TruncateArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    report(out, &args.dir, args.json, notes, tools::truncate(&args.dir, args.to)?)
}

pub(super) fn delete_before(args: DeleteBeforeArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    report(out, &args.dir, args.json, notes, tools::delete_before(&args.dir, args.offset, args.clamp)?)
}

pub(super) fn compact(args: CompactArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    report(out, &args.dir, args.json, notes, tools::compact(&args.dir)?)
}

/// What the open repaired (a note on stderr), then what the command changed.
fn report(
    out: &mut dyn Write,
    dir: &Path,
    as_json: bool,
    notes: Notes,
    report: AdminReport,
) -> Result<ExitCode, ToolError> {
    if let Some(note) = &report.repaired {
        notes.say(note);
    }
    verdict(ExitCode::SUCCESS, print(out, as_json, &report, |out, report| render(out, dir, report)))
}

/// `truncate`, `delete-before`, `compact`: a confirmation of what changed.
fn render(out: &mut dyn Write, dir: &Path, r: &AdminReport) -> io::Result<()> {
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
