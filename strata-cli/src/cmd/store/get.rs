//! `strata store get`: messages of one queue on stdout ([`store_tools::get`]), read-only (beside a
//! running store); `--follow` looks at the queue's end again every `--poll-ms` until Ctrl-C (or
//! `--max` messages). `--commit` opens the store read-write: a running store owns its consumer
//! offsets, so beside one it is refused, saying so.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::{Notes, closing, open_reading, open_to_commit};
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
    /// At the end, commit the next queue offset for the group (and write offsets.json). Opens the
    /// store read-write: not beside a process that has it open (commit from that process).
    #[arg(long, requires = "group")]
    commit: bool,
    /// Only messages with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// At the queue's end, wait for new messages (what another process puts) until Ctrl-C or
    /// --max.
    #[arg(short, long)]
    follow: bool,
    /// With --follow, how often the queue's end is looked at again, in ms.
    #[arg(long, default_value_t = 200, requires = "follow", value_parser = clap::value_parser!(u64).range(1..))]
    poll_ms: u64,
    /// One JSON object per line (the body in base64 with body_encoding when not UTF-8).
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: GetArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    let GetArgs { root, topic, queue, from, max, group, commit, tag, follow, poll_ms, json } = args;
    let store = if commit { open_to_commit(&root, notes)? } else { open_reading(&root)? };
    let poll = Duration::from_millis(poll_ms);
    let options = GetOptions { topic, queue_id: queue, from, max, group, commit, tag, follow, poll, json };
    let stop = stop_flag()?;
    let summary = closing(&root, store, |store| store_tools::get(store, &options, out, &stop))?;
    // Under the binary's name, as the command's own lines have always been (`RUST_LOG=strata=info`).
    tracing::info!(target: "strata", messages = summary.messages, next = summary.next_queue_offset, "got");
    Ok(finished(summary.interrupted))
}
