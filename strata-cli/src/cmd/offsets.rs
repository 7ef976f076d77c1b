//! `strata offsets`: where a log starts and ends ([`tools::offsets`]), read-only.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{print, verdict};
use crate::tools::{self, ToolError, render};

#[derive(clap::Args)]
pub(crate) struct OffsetsArgs {
    /// The log directory.
    dir: PathBuf,
    /// Also the first offset whose timestamp is at or after this time (ISO 8601 or ms).
    #[arg(long, value_parser = tools::text::parse_time_ms)]
    time: Option<i64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: OffsetsArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let offsets = tools::offsets(&args.dir, args.time)?;
    verdict(ExitCode::SUCCESS, print(out, args.json, &offsets, render::offsets))
}
