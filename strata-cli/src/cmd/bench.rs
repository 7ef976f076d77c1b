//! `strata bench`: the benchmark ([`bench::run`]) with a progress bar on a terminal, and its table.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use super::{parse_policy, print, verdict};
use crate::bench::{self, BenchOptions, BenchResult, Sections};
use crate::tools::{ToolError, render};
use strata_log::FlushPolicy;

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// Median of 5 runs with bigger phases (several minutes).
    #[arg(long)]
    full: bool,
    /// Records per no-fsync phase of 100-byte values; 1 KiB phases use a quarter [default: 2000000;
    /// --full: 5000000].
    #[arg(long)]
    records: Option<u64>,
    /// Records per append call in the batched phases [default: 100].
    #[arg(long)]
    batch: Option<usize>,
    /// Value size of the large-record phases, bytes [default: 1024].
    #[arg(long)]
    value_size: Option<usize>,
    /// Threads of the multi-threaded durable phase [default: 8].
    #[arg(long)]
    threads: Option<usize>,
    /// Threads of the producer phase [default: 4].
    #[arg(long)]
    producer_threads: Option<usize>,
    /// Flush policy of the append and read phases: never, always, or interval:MS.
    #[arg(long, default_value = "never", value_parser = parse_policy)]
    durability: FlushPolicy,
    /// Operations per durable phase; each also stops after a few seconds [default: 4000; --full:
    /// 20000].
    #[arg(long)]
    durable_ops: Option<u64>,
    /// Runs of each phase; the median is reported [default: 3; --full: 5].
    #[arg(long)]
    runs: Option<usize>,
    /// Which phases run: all, log, store (the message store's), channel or budget (the map budget's).
    #[arg(long, default_value = "all", value_parser = parse_sections)]
    section: Sections,
    /// Seconds each store throughput phase runs at most [default: 2; --full: 5].
    #[arg(long)]
    store_seconds: Option<f64>,
    /// Messages of the store the get, key-query and recovery phases use [default: 200000; --full:
    /// 1000000].
    #[arg(long)]
    store_messages: Option<u64>,
    /// Directory to create the temporary logs in [default: the system temp dir].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: BenchArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let defaults = if args.full { BenchOptions::full() } else { BenchOptions::default() };
    let options = BenchOptions {
        dir: args.dir,
        records: args.records.unwrap_or(defaults.records),
        batch: args.batch.unwrap_or(defaults.batch),
        large_value_bytes: args.value_size.unwrap_or(defaults.large_value_bytes),
        threads: args.threads.unwrap_or(defaults.threads),
        producer_threads: args.producer_threads.unwrap_or(defaults.producer_threads),
        flush_policy: args.durability,
        durable_ops: args.durable_ops.unwrap_or(defaults.durable_ops),
        runs: args.runs.unwrap_or(defaults.runs),
        sections: args.section,
        store_seconds: args.store_seconds.unwrap_or(defaults.store_seconds),
        store_messages: args.store_messages.unwrap_or(defaults.store_messages),
        ..defaults
    };
    options.validate().map_err(ToolError::Usage)?;
    let results = run_bench(&options)?;
    verdict(ExitCode::SUCCESS, print(out, args.json, &results, |out, results| render::bench_table(out, results)))
}

/// Runs the bench with a progress bar on a terminal, else one line per finished phase on stderr.
fn run_bench(options: &BenchOptions) -> strata_log::Result<Vec<BenchResult>> {
    let terminal = io::stderr().is_terminal();
    let bar = if terminal { ProgressBar::new(0) } else { ProgressBar::hidden() };
    let style = ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len}");
    bar.set_style(style.unwrap_or_else(|_| ProgressStyle::default_bar()));
    let mut current: Option<String> = None;
    let finished = |current: &mut Option<String>| {
        if let Some(phase) = current.take()
            && !terminal
        {
            say!("bench: finished {phase}");
        }
    };
    let results = bench::run(options, &mut |phase, done, total| {
        if current.as_deref() != Some(phase) {
            finished(&mut current);
            current = Some(phase.to_owned());
        }
        bar.set_message(phase.to_owned());
        bar.set_length(total);
        bar.set_position(done);
    });
    finished(&mut current);
    bar.finish_and_clear();
    results
}

/// `all`, `log`, `store` or `channel`.
fn parse_sections(text: &str) -> Result<Sections, String> {
    match text {
        "all" => Ok(Sections::All),
        "log" => Ok(Sections::Log),
        "store" => Ok(Sections::Store),
        "budget" => Ok(Sections::Budget),
        "channel" => Ok(Sections::Channel),
        _ => Err(format!("expected all, log, store, channel or budget, got {text:?}")),
    }
}
