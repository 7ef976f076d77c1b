//! `strata verify`: every file of a log, or of a message store, checked read-only (safe beside a
//! writer); exit 1 if damage is found.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{clean, print, verdict};
use crate::tools::{self, ToolError, render, render_store};
use strata_log::LogConfig;
use strata_log::internals::inspect::{self, store as store_files};

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
        return verdict(clean(report.is_clean()), print(out, args.json, &report, render_store::verify));
    }
    tools::require_log(&args.dir)?;
    let report = inspect::verify(&args.dir, &LogConfig::default())?;
    verdict(clean(report.is_clean()), print(out, args.json, &report, render::verify))
}
