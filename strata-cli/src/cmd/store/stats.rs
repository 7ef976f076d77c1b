//! `strata store stats`: the store's topics, queues, index files and consumer groups
//! ([`store_tools::stats`]).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::{print, verdict};
use crate::tools::store::{self as store_tools, StoreFiles};
use crate::tools::{ToolError, render_store};

#[derive(clap::Args)]
pub(crate) struct StatsArgs {
    /// The store root.
    root: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: StatsArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    store_tools::require_store(&args.root)?;
    let stats = store_tools::stats(&args.root, store_tools::store_config(&args.root, &StoreFiles::default())?)?;
    verdict(ExitCode::SUCCESS, print(out, args.json, &stats, render_store::stats))
}
