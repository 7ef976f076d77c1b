//! `strata store get`: messages of one queue on stdout ([`store_tools::get`]); `--follow`
//! long-polls at the end.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{Notes, closing, open_existing};
use crate::cmd::{finished, stop_flag};
use crate::tools::ToolError;
use crate::tools::store::{self as store_tools, GetOptions};

#[derive(clap::Args)]
pub(crate) struct GetArgs {
    /// The store root.
    root: PathBuf,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// The queue id.
    #[arg(long)]
    queue: u32,
    /// The first queue offset [default: the group's committed offset with --group, else the
    /// queue's first].
    #[arg(long)]
    from: Option<u64>,
    /// Print at most this many messages.
    #[arg(long)]
    max: Option<u64>,
    /// The consumer group (its committed offset is where the get starts).
    #[arg(long)]
    group: Option<String>,
    /// At the end, commit the next queue offset for the group (and write offsets.json).
    #[arg(long, requires = "group")]
    commit: bool,
    /// Only messages with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// At the queue's end, wait for new messages (a long poll) until Ctrl-C.
    #[arg(short, long)]
    follow: bool,
    /// One JSON object per line (the body in base64 with body_encoding when not UTF-8).
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: GetArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    let GetArgs { root, topic, queue, from, max, group, commit, tag, follow, json } = args;
    let store = open_existing(&root, notes)?;
    let options = GetOptions { topic, queue_id: queue, from, max, group, commit, tag, follow, json };
    let stop = stop_flag()?;
    let summary = closing(&root, store, |store| store_tools::get(store, &options, out, &stop))?;
    // Under the binary's name, as the command's own lines have always been (`RUST_LOG=strata=info`).
    tracing::info!(target: "strata", messages = summary.messages, next = summary.next_queue_offset, "got");
    Ok(finished(summary.interrupted))
}
