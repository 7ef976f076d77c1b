//! `strata consume`: a log's records on stdout ([`tools::consume`]), read-only.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::{finished, stop_flag};
use crate::tools::{self, ConsumeOptions, Output, Start, Template, ToolError};
use strata_log::LogConfig;

#[derive(clap::Args)]
pub(crate) struct ConsumeArgs {
    /// The log directory.
    dir: PathBuf,
    /// Where to start: an offset, beginning[+N], end[-N] or -N (N before the end).
    #[arg(short = 'o', long, default_value = "beginning", allow_hyphen_values = true)]
    from: Start,
    /// Start at the first record at or after this time: ISO 8601 (2026-11-30T05:20:00Z) or ms.
    #[arg(long, value_parser = tools::text::parse_time_ms, conflicts_with = "from")]
    from_time: Option<i64>,
    /// Stop before this offset.
    #[arg(long)]
    to: Option<u64>,
    /// Stop after this many records.
    #[arg(short = 'c', long)]
    max_messages: Option<u64>,
    /// At the end, keep printing what another process appends (until Ctrl-C).
    #[arg(short, long)]
    follow: bool,
    /// How often --follow looks for new records, ms.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    poll_ms: u64,
    /// Output template: %o offset, %k key, %v value, %T timestamp (ms), %t timestamp (ISO 8601),
    /// %h headers, %K/%S key/value length, %% a percent sign; \n \t escapes. A newline is added
    /// after each record unless the template ends with one.
    #[arg(long, default_value = "%o\\t%v\\n", conflicts_with = "json")]
    format: Template,
    /// Print an absent key or value (a tombstone) as NULL instead of nothing.
    #[arg(short = 'Z', long)]
    print_null: bool,
    /// One JSON object per line: offset, timestamp_ms, timestamp, key, value, headers; null for
    /// an absent key or value; base64 (with key_encoding / value_encoding) for bytes that are not
    /// UTF-8.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: ConsumeArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    tools::require_log(&args.dir)?;
    let output = if args.json {
        Output::Json
    } else {
        Output::Text { template: args.format, null_text: if args.print_null { b"NULL".to_vec() } else { Vec::new() } }
    };
    let options = ConsumeOptions {
        start: args.from_time.map_or(args.from, Start::Time),
        end: args.to,
        max_messages: args.max_messages,
        follow: args.follow,
        poll: Duration::from_millis(args.poll_ms),
        output,
    };
    let stop = stop_flag()?;
    let summary = tools::consume(&args.dir, &LogConfig::default(), &options, out, &stop)?;
    // Under the binary's name, as the command's own lines have always been (`RUST_LOG=strata=info`).
    tracing::info!(target: "strata", records = summary.records, next_offset = summary.next_offset, "consumed");
    Ok(finished(summary.interrupted))
}
