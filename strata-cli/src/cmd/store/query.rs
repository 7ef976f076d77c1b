//! `strata store query`: a topic's messages by key ([`store_tools::query`]), read-only: a running
//! store's index as its last flush wrote it (every second by default).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{closing, open_reading};
use crate::cmd::verdict;
use crate::tools::store as store_tools;
use crate::tools::{self, ToolError};

#[derive(clap::Args)]
pub(crate) struct QueryArgs {
    /// The store root.
    root: PathBuf,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// The key.
    #[arg(long)]
    key: String,
    /// Only messages stored at or after this time: ISO 8601 or ms.
    #[arg(long, value_parser = tools::text::parse_time_ms, allow_hyphen_values = true)]
    begin: Option<i64>,
    /// Only messages stored at or before this time: ISO 8601 or ms.
    #[arg(long, value_parser = tools::text::parse_time_ms, allow_hyphen_values = true)]
    end: Option<i64>,
    /// At most this many messages.
    #[arg(long, default_value_t = 64)]
    max: usize,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: QueryArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let QueryArgs { root, topic, key, begin, end, max, json } = args;
    let store = open_reading(&root)?;
    let range = (begin.unwrap_or(0), end.unwrap_or(i64::MAX));
    let found = closing(&root, store, |store| store_tools::query(store, &topic, &key, range, max))?;
    let written = found.iter().try_for_each(|m| store_tools::write_message(out, m, json, true));
    verdict(ExitCode::SUCCESS, written)
}
