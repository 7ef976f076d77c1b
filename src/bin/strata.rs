//! `strata`: benchmark, inspect and drive a strata log from the command line. Thin: parses
//! arguments, calls library code that returns values, prints them.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use strata_log::bench::{self, BenchOptions, BenchResult};
use strata_log::tools::{self, ProduceOptions};
use strata_log::{Log, LogConfig};

#[derive(Parser)]
#[command(name = "strata", version, about = "Durable, segmented, append-only logs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure append and read throughput and latency (no arguments needed).
    Bench {
        /// Records appended per value size.
        #[arg(long, default_value_t = BenchOptions::default().records)]
        records: u64,
        /// Records per append call.
        #[arg(long, default_value_t = BenchOptions::default().batch)]
        batch: usize,
        /// Value sizes in bytes (comma separated).
        #[arg(long, value_delimiter = ',', default_values_t = BenchOptions::default().value_sizes)]
        value_sizes: Vec<usize>,
        /// Runs of each phase; the median is reported.
        #[arg(long, default_value_t = BenchOptions::default().runs)]
        runs: usize,
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
    },
    /// Print records as `offset<TAB>value` lines.
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
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(io::stderr)
        .init();
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("strata: {error}");
            ExitCode::from(2)
        }
    }
}

fn run(command: Command) -> strata_log::Result<()> {
    match command {
        Command::Bench { records, batch, value_sizes, runs, dir, json } => {
            let options = BenchOptions { dir, records, batch, value_sizes, runs };
            let results = run_bench(&options)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&results).unwrap_or_default());
            } else {
                print_table(&results);
            }
        }
        Command::Produce { dir, sync, batch } => {
            let log = Log::open(&dir, LogConfig::default())?;
            tools::produce(&log, io::stdin().lock(), &mut io::stdout().lock(), ProduceOptions { sync, batch })?;
            log.close()?;
        }
        Command::Consume { dir, from, json } => {
            let log = Log::open(&dir, LogConfig::default())?;
            tools::consume(&log, from, json, &mut io::stdout().lock())?;
        }
    }
    Ok(())
}

fn run_bench(options: &BenchOptions) -> strata_log::Result<Vec<BenchResult>> {
    let bar = if io::stderr().is_terminal() { ProgressBar::new(0) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let results = bench::run(options, &mut |phase, done, total| {
        bar.set_message(phase.to_owned());
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    results
}

fn print_table(results: &[BenchResult]) {
    println!(
        "{:<16} {:>12} {:>14} {:>10} {:>10} {:>10} {:>10}",
        "phase", "records", "records/s", "MB/s", "p50 µs", "p99 µs", "p99.9 µs"
    );
    for r in results {
        println!(
            "{:<16} {:>12} {:>14.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            r.name, r.records, r.records_per_sec, r.mb_per_sec, r.p50_us, r.p99_us, r.p999_us
        );
    }
}
