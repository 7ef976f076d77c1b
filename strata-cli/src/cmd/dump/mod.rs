//! `strata dump`: the contents of a log's files, a message store's, or one file of either, read-only;
//! exit 1 if a file is damaged.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{clean, print, verdict};
use crate::tools::{self, DirState, ToolError};
use strata_log::internals::inspect::{self, DumpOptions, store as store_files};

mod log;
mod store;

#[derive(clap::Args)]
pub(crate) struct DumpArgs {
    /// A `.log` (or `.corrupt`), `.index`, `.timeindex`, `checkpoint`, `cleaner-checkpoint` or
    /// `.clean-shutdown` file, or a directory.
    path: PathBuf,
    /// Also print the records of each batch.
    #[arg(long)]
    records: bool,
    /// Only batches with offsets at or after this.
    #[arg(long)]
    from: Option<u64>,
    /// Only batches with offsets before this.
    #[arg(long)]
    to: Option<u64>,
    /// Print at most this many records (implies --records).
    #[arg(long)]
    max_records: Option<u64>,
    /// Only check the indexes (structure, and each entry against its segment), printing no entries.
    #[arg(long)]
    index_sanity_check: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: DumpArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    if !args.path.exists() {
        return Err(ToolError::Usage(format!("{}: no such file or directory", args.path.display())));
    }
    if let Some(code) = dump_store(&args.path, args.json, out)? {
        return Ok(code);
    }
    if args.path.is_dir() && tools::dir_state(&args.path)? == DirState::Empty {
        return Err(ToolError::Usage(format!("{}: empty directory, it holds no log", args.path.display())));
    }
    if args.index_sanity_check {
        let checks = inspect::index_sanity(&args.path)?;
        let ok = checks.iter().all(|c| c.problem.is_none());
        return verdict(clean(ok), print(out, args.json, &checks, |out, checks| log::render_index_sanity(out, checks)));
    }
    let options = DumpOptions {
        records: args.records || args.max_records.is_some(),
        from: args.from,
        to: args.to,
        max_records: args.max_records,
    };
    let dumps = if args.path.is_dir() {
        inspect::dump_dir_with(&args.path, &options)?
    } else {
        vec![inspect::dump_file_with(&args.path, &options)?]
    };
    let ok = dumps.iter().all(|d| d.damage().is_none());
    verdict(clean(ok), print(out, args.json, &dumps, |out, dumps| dumps.iter().try_for_each(|d| log::render(out, d))))
}

/// `dump` of a store root, a store file, or a directory of store files (a queue's, `index/`);
/// `None` if the path is none of these.
fn dump_store(path: &Path, as_json: bool, out: &mut dyn Write) -> Result<Option<ExitCode>, ToolError> {
    if store_files::is_store_root(path) {
        let dump = store_files::dump_store(path)?;
        return verdict(clean(!dump.is_damaged()), print(out, as_json, &dump, store::render_root)).map(Some);
    }
    let dumps = if path.is_dir() {
        store_files::dump_store_files_in(path)?
    } else if store_files::is_store_file(path) {
        store_files::dump_store_file(path)?.into_iter().collect()
    } else {
        Vec::new()
    };
    if dumps.is_empty() {
        return Ok(None);
    }
    let ok = dumps.iter().all(|d| d.problems().is_empty());
    let written = print(out, as_json, &dumps, |out, dumps| dumps.iter().try_for_each(|d| store::render(out, d)));
    verdict(clean(ok), written).map(Some)
}
