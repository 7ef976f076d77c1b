//! `strata`: benchmark, inspect and drive a strata log from the command line. Thin: parses
//! arguments, calls library code that returns values, prints them.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use strata_log::bench::{self, BenchOptions, BenchResult};
use strata_log::inspect::{self, Dump, VerifyReport};
use strata_log::tools::{self, ProduceOptions};
use strata_log::{FlushPolicy, Log, LogConfig};

#[derive(Parser)]
#[command(name = "strata", version, about = "Durable, segmented, append-only logs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure throughput and latency of writes, durable writes, reads, the producer and recovery
    /// against the disk's own baselines (no arguments needed; about a minute).
    Bench {
        /// Median of 5 runs with bigger phases (several minutes).
        #[arg(long)]
        full: bool,
        /// Records per no-fsync phase of 100-byte values (the 1 KiB phases use a quarter).
        #[arg(long)]
        records: Option<u64>,
        /// Records per append call in the batched phases.
        #[arg(long)]
        batch: Option<usize>,
        /// Value size of the large-record phases, bytes.
        #[arg(long)]
        value_size: Option<usize>,
        /// Threads of the multi-threaded durable phase.
        #[arg(long)]
        threads: Option<usize>,
        /// Threads of the producer phase.
        #[arg(long)]
        producer_threads: Option<usize>,
        /// Flush policy of the append and read phases: never, always, or interval:MS.
        #[arg(long, default_value = "never", value_parser = parse_policy)]
        durability: FlushPolicy,
        /// Operations per durable phase (each also stops after a few seconds).
        #[arg(long)]
        durable_ops: Option<u64>,
        /// Runs of each phase; the median is reported.
        #[arg(long)]
        runs: Option<usize>,
        /// Directory to create the temporary logs in (default: the system temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Append each line of stdin as one record.
    Produce {
        /// The log directory (created if missing).
        dir: PathBuf,
        /// Flush each batch and print each record's offset once it is durable.
        #[arg(long)]
        sync: bool,
        /// Lines per append.
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Print each record's offset once its append returns: durable under the default flush
        /// policy (`Always`), whether or not `--sync` also flushes.
        #[arg(long)]
        print_offsets: bool,
        /// Segment size for a new log or new segments (default: `LogConfig`'s 1 GiB).
        #[arg(long)]
        segment_bytes: Option<u64>,
        /// Bytes between sparse index entries (default: `LogConfig`'s 4096).
        #[arg(long)]
        index_interval_bytes: Option<u64>,
    },
    /// Print the contents of a log file or of every file in a log directory.
    Dump {
        /// A `.log`, `.index`, `.timeindex`, `checkpoint` or `.clean-shutdown` file, or a directory.
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also print every record of every batch.
        #[arg(long)]
        records: bool,
    },
    /// Check every segment, index and the checkpoint, read-only (safe on a live log).
    /// Exit 0: clean; 1: corruption found; 2: usage or I/O error.
    Verify {
        /// The log directory.
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open the log offline, recover it if needed, and print what recovery did.
    Recover {
        /// The log directory.
        dir: PathBuf,
        /// Accept losing acknowledged records below damage: keep the damaged segment as `.corrupt`
        /// and cut the log there (without it, such damage is an error and nothing changes).
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print records as `offset<TAB>value` lines (read-only: works on a live log).
    Consume {
        /// The log directory.
        dir: PathBuf,
        /// First offset to print (default: the log start).
        #[arg(long)]
        from: Option<u64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(io::stderr)
        .init();
    let mut out = io::stdout().lock();
    match run(Cli::parse().command, &mut out) {
        Ok(code) => code,
        // A closed pipe (`strata dump ... | head`) is the reader's choice, not an error.
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("strata: writing output: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Strata(error)) => {
            eprintln!("strata: {error}");
            ExitCode::from(2)
        }
    }
}

/// Why a command failed: the log, or writing its output.
enum Failure {
    Strata(strata_log::Error),
    Output(io::Error),
}

impl From<strata_log::Error> for Failure {
    fn from(e: strata_log::Error) -> Failure {
        Failure::Strata(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Output(e)
    }
}

fn run(command: Command, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    match command {
        Command::Bench {
            full,
            records,
            batch,
            value_size,
            threads,
            producer_threads,
            durability,
            durable_ops,
            runs,
            dir,
            json,
        } => {
            let defaults = if full { BenchOptions::full() } else { BenchOptions::default() };
            let options = BenchOptions {
                dir,
                records: records.unwrap_or(defaults.records),
                batch: batch.unwrap_or(defaults.batch),
                large_value_bytes: value_size.unwrap_or(defaults.large_value_bytes),
                threads: threads.unwrap_or(defaults.threads),
                producer_threads: producer_threads.unwrap_or(defaults.producer_threads),
                flush_policy: durability,
                durable_ops: durable_ops.unwrap_or(defaults.durable_ops),
                runs: runs.unwrap_or(defaults.runs),
                ..defaults
            };
            let results = run_bench(&options)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&results).unwrap_or_default())?;
            } else {
                print_table(out, &results)?;
            }
        }
        Command::Produce { dir, sync, batch, print_offsets, segment_bytes, index_interval_bytes } => {
            let defaults = LogConfig::default();
            let config = LogConfig {
                segment_bytes: segment_bytes.unwrap_or(defaults.segment_bytes),
                index_interval_bytes: index_interval_bytes.unwrap_or(defaults.index_interval_bytes),
                ..defaults
            };
            let log = Log::open(&dir, config)?;
            tools::produce(&log, io::stdin().lock(), out, ProduceOptions { sync, batch, print_offsets })?;
            log.close()?;
        }
        Command::Dump { path, json, records } => {
            let dumps = if path.is_dir() {
                inspect::dump_dir(&path, records)?
            } else {
                vec![inspect::dump_file(&path, records)?]
            };
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&dumps).unwrap_or_default())?;
            } else {
                for dump in &dumps {
                    print_dump(out, dump)?;
                }
            }
        }
        Command::Verify { dir, json } => {
            let report = inspect::verify(&dir, &LogConfig::default())?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report).unwrap_or_default())?;
            } else {
                print_verify(out, &report)?;
            }
            return Ok(if report.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(1) });
        }
        Command::Recover { dir, force, json } => {
            let report = inspect::recover(&dir, force)?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&report).unwrap_or_default())?;
            } else {
                writeln!(out, "{report:#?}")?;
            }
        }
        Command::Consume { dir, from, json } => {
            let log = Log::open_read_only(&dir, LogConfig::default())?;
            tools::consume(&log, from, json, out)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_dump(out: &mut dyn Write, dump: &Dump) -> io::Result<()> {
    let (path, damage) = match dump {
        Dump::Log { path, batches, valid_len, file_len, damage } => {
            writeln!(out, "{} (log: {valid_len} bytes of batches, file {file_len} bytes)", path.display())?;
            for b in batches {
                writeln!(
                    out,
                    "  offsets {}..={} position {} size {} records {} timestamps {}..{} attributes {:#06x}: {}",
                    b.base_offset,
                    b.last_offset,
                    b.position,
                    b.size,
                    b.record_count,
                    b.base_timestamp,
                    b.max_timestamp,
                    b.attributes,
                    b.status
                )?;
                for r in b.records.iter().flatten() {
                    writeln!(out, "    {}\t{}\tkey={:?}\t{:?}", r.offset, r.timestamp_ms, r.key, r.value)?;
                }
            }
            (path, damage)
        }
        Dump::Index { path, entries, damage } => {
            writeln!(out, "{} (offset index: {} entries)", path.display(), entries.len())?;
            for e in entries {
                writeln!(out, "  relative_offset {} position {}", e.relative_offset, e.position)?;
            }
            (path, damage)
        }
        Dump::TimeIndex { path, entries, damage } => {
            writeln!(out, "{} (time index: {} entries)", path.display(), entries.len())?;
            for e in entries {
                writeln!(out, "  timestamp {} relative_offset {}", e.timestamp_ms, e.relative_offset)?;
            }
            (path, damage)
        }
        Dump::Checkpoint { path, checkpoint, damage } => {
            writeln!(out, "{} (checkpoint) {checkpoint:?}", path.display())?;
            (path, damage)
        }
        Dump::CleanerCheckpoint { path, cleaned_up_to, damage } => {
            writeln!(out, "{} (cleaner checkpoint) cleaned_up_to {cleaned_up_to:?}", path.display())?;
            (path, damage)
        }
        Dump::CleanShutdown { path, marker, damage } => {
            writeln!(out, "{} (clean-shutdown marker) {marker:?}", path.display())?;
            (path, damage)
        }
        Dump::Other { path, len } => return writeln!(out, "{} ({len} bytes)", path.display()),
    };
    match damage {
        Some(d) => writeln!(out, "  DAMAGE in {} at position {}: {}", path.display(), d.position, d.reason),
        None => Ok(()),
    }
}

fn print_verify(out: &mut dyn Write, report: &VerifyReport) -> io::Result<()> {
    writeln!(
        out,
        "{} segments, {} batches, {} records, {} bytes; offsets [{}, {}), recovery point {:?}",
        report.segments,
        report.batches,
        report.records,
        report.bytes,
        report.start_offset,
        report.next_offset,
        report.recovery_point
    )?;
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    for f in &report.findings {
        writeln!(out, "CORRUPT {} at position {}: {}", f.file.display(), f.position, f.problem)?;
    }
    writeln!(out, "{}", if report.is_clean() { "clean" } else { "corruption found" })
}

fn run_bench(options: &BenchOptions) -> strata_log::Result<Vec<BenchResult>> {
    let bar = if io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    let style = ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len}");
    bar.set_style(style.unwrap_or_else(|_| ProgressStyle::default_bar()));
    let results = bench::run(options, &mut |phase, done, total| {
        bar.set_message(phase.to_owned());
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    results
}

fn print_table(out: &mut dyn Write, results: &[BenchResult]) -> io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9}  vs baseline",
        "phase", "records/s", "ops/s", "MB/s", "p50 µs", "p99 µs", "p99.9 µs"
    )?;
    for r in results {
        let ratio = match (&r.baseline, r.ratio) {
            (Some(base), Some(ratio)) => format!("{:.0}% of {base}", ratio * 100.0),
            _ => String::new(),
        };
        let group = r.appends_per_fsync.map(|a| format!(" ({a:.1} appends/fsync)")).unwrap_or_default();
        writeln!(
            out,
            "{:<24} {:>12.0} {:>12.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1}  {ratio}{group}",
            r.name, r.records_per_sec, r.ops_per_sec, r.mb_per_sec, r.p50_us, r.p99_us, r.p999_us
        )?;
    }
    for note in results.iter().filter_map(|r| r.note.as_ref()) {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

/// `never`, `always` or `interval:MS`.
fn parse_policy(text: &str) -> Result<FlushPolicy, String> {
    match text {
        "never" => Ok(FlushPolicy::Never),
        "always" => Ok(FlushPolicy::Always),
        _ => match text.strip_prefix("interval:").and_then(|ms| ms.parse().ok()) {
            Some(ms) => Ok(FlushPolicy::EveryInterval { ms, messages: u64::MAX }),
            None => Err(format!("expected never, always or interval:MS, got {text:?}")),
        },
    }
}
