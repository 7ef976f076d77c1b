//! `strata recover`: offline recovery of a log ([`inspect::recover`]), refused without `--force`
//! where it would lose acknowledged records; `--dry-run` says what it would do.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{clean, print, verdict};
use crate::tools::{ToolError, render};
use strata_log::internals::inspect::{self, RecoverOptions};

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
    let written = print(out, json, &outcome, |out, outcome| render::recover(out, &dir, outcome, force));
    verdict(clean(!(outcome.refused || would_refuse)), written)
}
