//! `strata store stats`: the store's topics, queues, index files and consumer groups
//! ([`store_tools::stats`]).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cmd::{print, verdict};
use crate::tools::ToolError;
use crate::tools::store::{self as store_tools, StoreFiles, StoreStats};
use crate::tools::text::{iso_ms, plural};

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
    verdict(ExitCode::SUCCESS, print(out, args.json, &stats, render))
}

/// `store stats`: the log, queues, index files and consumer groups.
fn render(out: &mut dyn Write, s: &StoreStats) -> io::Result<()> {
    writeln!(out, "commit log  offsets [{}, {})", s.log_start_offset, s.log_next_offset)?;
    let f = &s.files;
    writeln!(
        out,
        "file sizes  queue files {} entries ({} bytes), index files {} slots, {} entries ({} bytes)",
        f.queue_entries_per_file, f.queue_file_bytes, f.index_slots, f.index_entries, f.index_file_bytes
    )?;
    writeln!(out, "queues ({})", s.queues.len())?;
    for q in &s.queues {
        let n = q.max_offset - q.min_offset;
        writeln!(
            out,
            "  {} queue {}  offsets [{}, {})  {n} {}",
            q.topic,
            q.queue_id,
            q.min_offset,
            q.max_offset,
            plural(n, "message", "messages")
        )?;
    }
    writeln!(out, "index files ({})", s.index_files.len())?;
    for f in &s.index_files {
        let h = &f.header;
        let name = f.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        writeln!(
            out,
            "  {name}  log offsets [{}, {}]  {} of {} entries  {} to {}",
            h.begin_log_offset,
            h.end_log_offset,
            h.index_count,
            f.capacity.saturating_sub(1),
            iso_ms(h.begin_timestamp_ms),
            iso_ms(h.end_timestamp_ms)
        )?;
    }
    writeln!(out, "consumer groups ({})", s.groups.len())?;
    for g in &s.groups {
        writeln!(
            out,
            "  {}  {} queue {}  committed {}  max {}  lag {}",
            g.group, g.topic, g.queue_id, g.committed, g.max_offset, g.lag
        )?;
    }
    Ok(())
}
