//! `strata bench`: the benchmark ([`bench::run`]) with a progress bar on a terminal, and its table.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use super::{parse_policy, print, verdict};
use crate::bench::{self, BenchOptions, BenchResult, Sections};
use crate::tools::ToolError;
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
    verdict(ExitCode::SUCCESS, print(out, args.json, &results, |out, results| render(out, results)))
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

/// `bench`: an aligned table, a legend, and notes numbered next to their phase.
fn render(out: &mut dyn Write, results: &[BenchResult]) -> io::Result<()> {
    let width = results.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    writeln!(
        out,
        "{:<width$}  {:>12}  {:>11}  {:>9}  {:>9}  {:>9}  {:>9}  vs baseline",
        "phase", "records/s", "ops/s", "MB/s", "p50 µs", "p99 µs", "p99.9 µs"
    )?;
    let mut notes = Vec::new();
    for r in results {
        let mut extra = match (&r.baseline, r.ratio) {
            (Some(base), Some(ratio)) => format!("{:.0}% of {base}", ratio * 100.0),
            _ => String::new(),
        };
        if let (Some(peer), Some(ratio)) = (&r.peer, r.peer_ratio) {
            extra.push_str(&format!("{}{ratio:.2}× {peer}", if extra.is_empty() { "" } else { "; " }));
        }
        if let Some(a) = r.appends_per_fsync {
            extra.push_str(&format!("{}{a:.1} appends/fsync", if extra.is_empty() { "" } else { "; " }));
        }
        if let Some(ms) = r.max_dispatch_lag_ms {
            let offsets = r.max_dispatch_lag_offsets.map_or(String::new(), |o| format!(", {o} messages"));
            extra.push_str(&format!("{}dispatch lag ≤ {ms} ms{offsets}", if extra.is_empty() { "" } else { "; " }));
        }
        if let Some(note) = &r.note {
            notes.push(note.clone());
            extra.push_str(&format!("{}[{}]", if extra.is_empty() { "" } else { " " }, notes.len()));
        }
        let row = format!(
            "{:<width$}  {:>12.0}  {:>11.0}  {:>9.1}  {:>9.1}  {:>9.1}  {:>9.1}  {extra}",
            r.name, r.records_per_sec, r.ops_per_sec, r.mb_per_sec, r.p50_us, r.p99_us, r.p999_us
        );
        writeln!(out, "{}", row.trim_end())?;
    }
    for (i, note) in notes.iter().enumerate() {
        writeln!(out, "[{}] {note}", i + 1)?;
    }
    writeln!(out)?;
    writeln!(out, "records/s, ops/s: records and calls (appends, reads, fsyncs, sends) per second")?;
    writeln!(out, "MB/s: payload (values) in 10^6 bytes per second")?;
    writeln!(out, "p50/p99/p99.9 µs: latency of one call in microseconds (median, 99th, 99.9th percentile)")?;
    writeln!(out, "vs baseline: throughput as a share of the raw disk figure the phase should be judged against,")?;
    writeln!(out, "  and records/s as a multiple of the peer's (the commitlog crate) on the same workload")?;
    writeln!(out, "phases: raw_* the disk without strata; append_* no fsync; read_* CRC-checked reads, one pass over")?;
    writeln!(out, "  a freshly opened log; commitlog_* the commitlog crate on the 100-byte append and read")?;
    writeln!(out, "  (it reads with pread, as read_*_pread; read_* and read_*_in_place read through a map);")?;
    writeln!(out, "  durable_<T>t_<size>_x<batch> FlushPolicy::Always from T threads; producer_*; recovery_scan;")?;
    writeln!(out, "  compaction; append_keyed_* appends beside background deletion or compaction;")?;
    writeln!(out, "  store_put_<T>t_<policy> MessageStore::put vs store_append_* (Log::append, same records);")?;
    writeln!(out, "  store_dispatch_lag_*; store_get_x<max>; store_query_by_key; store_recovery_* (unclean open)")?;
    writeln!(
        out,
        "  channel_put/take_<T>t Channel transactions of 100 x 100 B events under Always from T threads vs \
         channel_append_<T>t (Log::append of the same 100 records); channel_replay_<T>t: reopening it"
    )
}
