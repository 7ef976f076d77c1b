//! The admin commands on a closed log, `truncate`, `delete-before` and `compact`
//! ([`tools::truncate`], [`tools::delete_before`], [`tools::compact`]): each says what its open
//! repaired first, then what changed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Notes, print, verdict};
use crate::tools::{self, AdminReport, ToolError, render};

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
    verdict(ExitCode::SUCCESS, print(out, as_json, &report, |out, report| render::admin(out, dir, report)))
}
