//! `strata store put`: a message per line of stdin ([`store_tools::put`]), into a store it creates
//! if needed.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::{Notes, closing, open_noted};
use crate::cmd::{finished, print, stop_flag, verdict};
use crate::tools::store::{self as store_tools, PutOptions, PutSummary, StoreFiles};
use crate::tools::text::plural;
use crate::tools::{self, DirState, ToolError};
use strata_log::internals::inspect::store as store_files;

#[derive(clap::Args)]
pub(crate) struct PutArgs {
    /// The store root.
    root: PathBuf,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// The queue id.
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// The tag of every message.
    #[arg(long)]
    tag: Option<String>,
    /// A key of every message (indexed for `store query`); repeatable.
    #[arg(long = "key", value_name = "KEY")]
    keys: Vec<String>,
    #[command(flatten)]
    files: StoreFileArgs,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// The geometry of a new store's files (an existing store's files keep theirs).
#[derive(clap::Args)]
pub(crate) struct StoreFileArgs {
    /// Commit-log segment size [default: the size the segments show, else 128 MiB or less if the
    /// disk has no room for it].
    #[arg(long)]
    segment_bytes: Option<u64>,
    /// Entries per consume-queue file, 20 bytes each, of a new store [default: 10000, 200 KB
    /// files]. An existing store keeps its own.
    #[arg(long)]
    queue_entries_per_file: Option<u64>,
    /// Hash slots per index file, 4 bytes each, of a new store [default: 50000]. An existing
    /// store keeps its own.
    #[arg(long)]
    index_slots: Option<u32>,
    /// Entries per index file, 20 bytes each, of a new store [default: 200000; with the default
    /// slots, 4.2 MB files]. An existing store keeps its own.
    #[arg(long)]
    index_entries: Option<u32>,
}

pub(super) fn run(args: PutArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    let PutArgs { root, topic, queue, tag, keys, files, json } = args;
    let files = StoreFiles {
        segment_bytes: files.segment_bytes,
        queue_entries_per_file: files.queue_entries_per_file,
        index_slots: files.index_slots,
        index_entries: files.index_entries,
    };
    if root.exists() && !store_files::is_store_root(&root) && tools::dir_state(&root)? != DirState::Empty {
        return Err(ToolError::Usage(format!(
            "{}: not a message store and not empty; refusing to create one in it",
            root.display()
        )));
    }
    let config = store_tools::store_config(&root, &files)?;
    let stop = stop_flag()?;
    let store = open_noted(&root, config, notes)?;
    note_kept_sizes(&files, store.config(), notes);
    let options = PutOptions { topic, queue_id: queue, tag, keys };
    let summary = closing(&root, store, |store| store_tools::put(store, &options, io::stdin(), &stop))?;
    verdict(finished(summary.interrupted), print(out, json, &summary, render))
}

/// `store put`: what was stored.
fn render(out: &mut dyn Write, s: &PutSummary) -> io::Result<()> {
    let prefix = if s.interrupted { "interrupted; " } else { "" };
    let what = plural(s.messages, "message", "messages");
    match (s.first_log_offset, s.last_log_offset, s.first_queue_offset, s.last_queue_offset) {
        (Some(lf), Some(ll), Some(qf), Some(ql)) => writeln!(
            out,
            "{prefix}stored {} {what} in {} queue {}: queue offsets {qf}–{ql}, log offsets {lf}–{ll}",
            s.messages, s.topic, s.queue_id
        ),
        _ => writeln!(out, "{prefix}stored no message (no input)"),
    }
}

/// A size asked for that the store does not have: an existing store keeps its own, said in one line.
fn note_kept_sizes(asked: &StoreFiles, store: &strata_log::StoreConfig, notes: Notes) {
    let sizes = [
        ("--queue-entries-per-file", asked.queue_entries_per_file, store.queue_entries_per_file),
        ("--index-slots", asked.index_slots.map(u64::from), u64::from(store.index_slots)),
        ("--index-entries", asked.index_entries.map(u64::from), u64::from(store.index_entries)),
    ];
    for (flag, asked, kept) in sizes {
        if let Some(asked) = asked.filter(|&a| a != kept) {
            notes.say(format!("{flag} {asked} ignored: the store's files are made with {kept} (store.meta)"));
        }
    }
}
