//! `strata offsets`: where a log starts and ends ([`tools::offsets`]), read-only.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::{print, verdict};
use crate::tools::text::human_bytes;
use crate::tools::{self, Offsets, ToolError};

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
    verdict(ExitCode::SUCCESS, print(out, args.json, &offsets, render))
}

/// `offsets`: one fact per line.
fn render(out: &mut dyn Write, o: &Offsets) -> io::Result<()> {
    writeln!(out, "earliest        {}", o.earliest)?;
    writeln!(out, "latest          {}", o.latest)?;
    if o.closed_cleanly {
        writeln!(out, "durable         {}  (closed cleanly)", o.durable)?;
    } else if o.live == Some(true) {
        // Only the writer knows how far it has fsynced: the checkpoint is a lower bound.
        writeln!(
            out,
            "durable         at least {}  (open in a writer: the recovery point; all {} if it flushes always, the default)",
            o.durable, o.latest
        )?;
    } else if o.live == Some(false) {
        writeln!(
            out,
            "durable         {}  (not closed cleanly: the recovery point; the next open keeps the valid records after it)",
            o.durable
        )?;
    } else {
        writeln!(out, "durable         at least {}  (open, or not closed cleanly: the recovery point)", o.durable)?;
    }
    match o.recovery_point {
        Some(rp) => writeln!(out, "recovery point  {rp}")?,
        None => writeln!(out, "recovery point  none (no readable checkpoint)")?,
    }
    if o.records_exact {
        writeln!(out, "records         {}", o.records)?;
    } else {
        writeln!(out, "records         at most {}  (compacted: offsets compaction removed hold no record)", o.records)?;
    }
    writeln!(out, "segments        {}", o.segments)?;
    writeln!(out, "size            {}", human_bytes(o.bytes))?;
    if let Some(offset) = o.offset_for_time {
        writeln!(out, "offset for time {offset}")?;
    }
    for f in &o.foreign {
        writeln!(out, "foreign file    {}  (not part of the log, left out: see `strata verify`)", f.display())?;
    }
    Ok(())
}
