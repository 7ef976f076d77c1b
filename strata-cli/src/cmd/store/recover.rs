//! `strata store recover`: offline repair of a message store ([`inspect::recover_store`]): the
//! commit log recovered (refused without `--force` where that would lose acknowledged messages),
//! then every consume queue and index file rebuilt from it; `--dry-run` says what it would do.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cmd::verify::finding;
use crate::cmd::{clean, print, verdict};
use crate::tools::ToolError;
use crate::tools::store::{self as store_tools, StoreFiles};
use crate::tools::text::plural;
use strata_log::internals::inspect::{self, RecoverOptions, StoreRecoverOutcome};

#[derive(clap::Args)]
pub(crate) struct RecoverArgs {
    /// The store root.
    root: PathBuf,
    /// Accept losing acknowledged messages below damage in the commit log: cut it there (the
    /// damaged segment kept as `.corrupt`); the queue offsets cut are reported, and handed out
    /// again.
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
    let RecoverArgs { root, force, dry_run, json } = args;
    store_tools::require_store(&root)?;
    let config = store_tools::store_config(&root, &StoreFiles::default())?;
    let outcome = inspect::recover_store(&root, config, RecoverOptions { force, dry_run })
        .map_err(|e| store_tools::store_error(&root, e))?;
    let written = print(out, json, &outcome, |out, outcome| render(out, &root, outcome, force));
    verdict(clean(!outcome.refused), written)
}

/// What it did, would do, or refused to do, in sentences.
fn render(out: &mut dyn Write, root: &Path, o: &StoreRecoverOutcome, force: bool) -> io::Result<()> {
    let log = &o.commit_log;
    if o.refused {
        writeln!(
            out,
            "refused: {}'s commit log has damage to acknowledged messages; nothing was changed",
            root.display()
        )?;
        for f in log.found.iter().filter(|f| f.severity == inspect::Severity::Error) {
            finding(out, f)?;
        }
        return writeln!(
            out,
            "run `strata store recover --force {}` to cut the commit log at the damage and rebuild the rest",
            root.display()
        );
    }
    for f in log.found.iter().chain(&o.found).filter(|f| f.severity == inspect::Severity::Error) {
        finding(out, f)?;
    }
    let (queues, files) = (o.queues_before, o.index_files_before);
    let derived =
        format!("{queues} {} and {files} index {}", plural(queues, "queue", "queues"), plural(files, "file", "files"));
    if o.dry_run {
        if let Some([first, last]) = log.offsets_removed {
            let with = if force { "" } else { " (with --force, if the damage needs it)" };
            writeln!(out, "would cut the commit log at offset {first} (offsets {first} to {last}){with}")?;
        }
        return writeln!(
            out,
            "would rebuild every derived file from the commit log: {derived} now; nothing was changed"
        );
    }
    if let Some([first, last]) = log.offsets_removed {
        writeln!(out, "cut the commit log at offset {first} (offsets {first} to {last} removed)")?;
    }
    for cut in &o.queue_offsets_cut {
        let [first, last] = cut.offsets;
        writeln!(
            out,
            "  {} queue {}: queue offsets {first} to {last} removed (they are handed out again)",
            cut.topic, cut.queue_id
        )?;
    }
    let (queues, files) = (o.queues_after.unwrap_or(0), o.index_files_after.unwrap_or(0));
    writeln!(
        out,
        "rebuilt every derived file from the commit log: {derived} before, {queues} {} and {files} index {} now",
        plural(queues, "queue", "queues"),
        plural(files, "file", "files")
    )
}
