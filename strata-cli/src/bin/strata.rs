//! `strata`: benchmark, inspect and drive a strata log from the command line. Thin: parses
//! arguments, calls library code that returns values (`tools`, `inspect`, `bench`), prints them.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use strata_cli::bench::{self, BenchOptions, BenchResult, Sections};
use strata_cli::tools::render_store;
use strata_cli::tools::store::{self as store_tools, GetOptions, PutOptions, StoreFiles};
use strata_cli::tools::{
    self, ConsumeOptions, DirState, Framing, Output, ProduceOptions, Start, Template, ToolError, render,
};
use strata_log::internals::inspect::store as store_files;
use strata_log::internals::inspect::{self, DumpOptions, RecoverOptions};
use strata_log::{Corruption, Error, FlushPolicy, LogConfig};

/// A line on stderr. A closed stderr (`strata … 2>&1 | head -1`) is not worth a panic: the line is
/// dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stderr(), $($arg)*);
    }};
}

/// Printed under every command's `--help`.
const FOOTER: &str = "\
Exit codes:
  0    ok
  1    damage found (verify, dump, recover without --force, a corrupt record while consuming)
  2    usage or I/O error
  130  interrupted (Ctrl-C, SIGTERM); produce first appends what it read and closes the log cleanly

An error is one line on stderr. By default stderr also gets summaries and the command's own
warnings (e.g. a followed log was truncated); -q: errors only; -v: the library's log lines too,
timestamped (warnings and info), -vv debug, -vvv trace; RUST_LOG (e.g. RUST_LOG=strata_log=debug)
overrides the levels. Colour only when stderr is a terminal and NO_COLOR is not set. A closed
pipe ends the output, never changes the exit code.";

#[derive(Parser)]
#[command(name = "strata", version, about = "Durable, segmented, append-only logs", after_help = FOOTER)]
struct Cli {
    /// Print errors only (no summaries, no warnings).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Also print the library's log lines: -v warnings and info, -vv debug, -vvv trace.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Append records from stdin: one per line by default (kcat -P, kafka-console-producer).
    Produce(ProduceArgs),
    /// Print records (read-only: safe on a live log); exits at the end unless --follow.
    Consume(ConsumeArgs),
    /// Print where the log starts and ends (kafka-get-offsets), read-only.
    Offsets {
        /// The log directory.
        dir: PathBuf,
        /// Also the first offset whose timestamp is at or after this time (ISO 8601 or ms).
        #[arg(long, value_parser = tools::text::parse_time_ms)]
        time: Option<i64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the contents of a log file or of every file in a log directory (read-only; a
    /// `.corrupt` copy is decoded as the segment it was). Exit 1 if a file is damaged.
    Dump(DumpArgs),
    /// Check every segment, index and the checkpoint, read-only (safe on a live log); for a
    /// message store root, also every queue and index entry against its message, and the
    /// consumer offsets. Exit 0: clean (notes are not damage); 1: damage found.
    Verify {
        /// The log directory, or a message store's root.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Recover the log offline and say what was repaired. Without --force, damage to acknowledged
    /// records is refused (exit 1) and nothing changes.
    Recover {
        /// The log directory.
        dir: PathBuf,
        /// Accept losing acknowledged records below damage: keep the damaged segment as `.corrupt`
        /// and cut the log there.
        #[arg(long)]
        force: bool,
        /// Change nothing; say what recovery would do (from a read-only check).
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove every record at or after an offset, on a closed log (a batch goes whole).
    Truncate {
        /// The log directory.
        dir: PathBuf,
        /// The first offset to remove.
        #[arg(long)]
        to: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make records before an offset unreadable and delete the segments wholly below it, on a
    /// closed log (kafka-delete-records).
    DeleteBefore {
        /// The log directory.
        dir: PathBuf,
        /// The new log start offset (at most the log's next offset).
        offset: u64,
        /// Lower an offset past the end of the log to the end (deleting every record) instead of
        /// refusing it.
        #[arg(long)]
        clamp: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one compaction pass on a closed log: the latest record per key is kept in sealed
    /// segments.
    Compact {
        /// The log directory.
        dir: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Put, get, query and inspect a message store (topics, queues, consumer groups) in a store
    /// root directory; each opens the store, so not beside another process that has it open.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Measure writes, durable writes, reads, the producer and recovery against the disk's own
    /// baselines (no arguments needed; about a minute).
    Bench(BenchArgs),
    /// Print a shell completion script: `strata completions bash > /etc/bash_completion.d/strata`.
    Completions {
        /// bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Put one message per line of stdin (the line is the body) into a topic's queue; prints
    /// what was stored. Creates the store if needed.
    Put {
        /// The store root.
        root: PathBuf,
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The queue id.
        #[arg(long, default_value_t = 0)]
        queue: u32,
        /// The tag of every message.
        #[arg(long)]
        tag: Option<String>,
        /// A key of every message (indexed for `store query`); repeatable.
        #[arg(long = "key", value_name = "KEY")]
        keys: Vec<String>,
        #[command(flatten)]
        files: StoreFileArgs,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print messages of one queue: queue offset, log offset, time, tag, keys, body.
    Get {
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
    },
    /// Find a topic's messages by key (the index), newest `--max`, in log order.
    Query {
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
    },
    /// Print the topics and queues with their offsets, the index files, and each consumer
    /// group's committed offset and lag per queue.
    Stats {
        /// The store root.
        root: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The geometry of a new store's files (an existing store's files keep theirs).
#[derive(clap::Args)]
struct StoreFileArgs {
    /// Commit-log segment size [default: the size the segments show, else 128 MiB or less if the
    /// disk has no room for it].
    #[arg(long)]
    segment_bytes: Option<u64>,
    /// Entries per consume-queue file [default: 300000].
    #[arg(long)]
    queue_entries_per_file: Option<u64>,
    /// Hash slots per index file [default: the newest index file's, else 5000000].
    #[arg(long)]
    index_slots: Option<u32>,
    /// Entries per index file [default: the newest index file's, else 20000000].
    #[arg(long)]
    index_entries: Option<u32>,
}

#[derive(clap::Args)]
struct ProduceArgs {
    /// The log directory (created if missing; a directory of other files is refused).
    dir: PathBuf,
    /// Split each record at the first SEP into key and value (kcat -K); a record without SEP has
    /// no key. SEP must not be empty.
    #[arg(short = 'K', long, value_name = "SEP")]
    key_separator: Option<String>,
    /// A header on every record, `key=value` (`key` alone: no value; the key must not be empty);
    /// repeatable.
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// The timestamp of every record: ISO 8601 (2026-11-30T05:20:00Z) or ms since the epoch, from
    /// 1970 to 9999 [default: the time of the append].
    #[arg(long, value_parser = tools::text::parse_record_time_ms, conflicts_with = "timestamp_separator", allow_hyphen_values = true)]
    timestamp: Option<i64>,
    /// Each record starts with its timestamp (ISO 8601 or ms), ended by SEP.
    #[arg(long, value_name = "SEP")]
    timestamp_separator: Option<String>,
    /// The record delimiter; escapes \n \t \0 \xNN work.
    #[arg(short = 'D', long, default_value = "\\n", conflicts_with_all = ["null", "length_prefixed"])]
    delimiter: String,
    /// Records are NUL-separated (find -print0, xargs -0).
    #[arg(short = '0', long, conflicts_with = "length_prefixed")]
    null: bool,
    /// Binary records: each is a 4-byte big-endian length and then that many bytes.
    #[arg(long)]
    length_prefixed: bool,
    /// Store an empty key or value as absent (an empty value is a tombstone), kcat -Z.
    #[arg(short = 'Z', long)]
    empty_as_null: bool,
    /// Refuse input that is not UTF-8, naming the line [default: store the bytes as they are].
    #[arg(long)]
    require_utf8: bool,
    /// Records per append.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    batch: u64,
    /// The largest batch an append may store, in bytes (a record larger than this, with its
    /// framing, is refused); at most 67108864 (64 MiB).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(44..=64 << 20))]
    max_batch_bytes: u64,
    /// When records are durable: always (fsync before each append returns), never, or interval:MS.
    #[arg(long, default_value = "always", value_parser = parse_policy)]
    flush_policy: FlushPolicy,
    /// Flush each batch and print each record's offset once it is durable.
    #[arg(long)]
    sync: bool,
    /// Print each record's offset once its append returns (durable under --flush-policy always).
    #[arg(long)]
    print_offsets: bool,
    /// Segment size for a new log or new segments [default: for an existing log, the size its
    /// segments show; else 128 MiB, or less if the disk has no room for it].
    #[arg(long)]
    segment_bytes: Option<u64>,
    /// Bytes between sparse index entries [default: 4096].
    #[arg(long)]
    index_interval_bytes: Option<u64>,
    /// Print the closing summary as JSON (on stderr, like the text one).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ConsumeArgs {
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

#[derive(clap::Args)]
struct DumpArgs {
    /// A `.log` (or `.corrupt`), `.index`, `.timeindex`, `checkpoint`, `cleaner-checkpoint` or
    /// `.clean-shutdown` file, or a directory.
    path: PathBuf,
    /// Also print the records of each batch.
    #[arg(long)]
    records: bool,
    /// Only batches with offsets at or after this.
    #[arg(long)]
    from: Option<u64>,
    /// Only batches with offsets before this.
    #[arg(long)]
    to: Option<u64>,
    /// Print at most this many records (implies --records).
    #[arg(long)]
    max_records: Option<u64>,
    /// Only check the indexes (structure, and each entry against its segment), printing no entries.
    #[arg(long)]
    index_sanity_check: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct BenchArgs {
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

fn main() -> ExitCode {
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let command = Cli::command().mut_subcommands(|c| c.after_help(FOOTER));
    let cli = Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit());
    init_logging(cli.quiet, cli.verbose);
    let mut out = io::stdout().lock();
    let result = run(cli.command, &mut out).and_then(|code| verdict(code, out.flush().map_err(ToolError::from)));
    match result {
        Ok(code) => code,
        // A closed pipe (`strata consume ... | head`) is the reader's choice, not an error.
        Err(ToolError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => match &error {
            ToolError::Log(Error::Corrupt { path, reason, .. }) => {
                let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                let dir = dir.display();
                if path.file_name().is_some_and(|n| n == strata_log::internals::format::META_FILE) {
                    say!("strata: {error} (it holds no record: delete it, and the next writer open writes it again)");
                } else if matches!(reason, Corruption::ForeignFile(_)) {
                    say!(
                        "strata: {error} (`strata verify {dir}` names it; `strata recover --force {dir}` sets \
                             it aside as .foreign: it holds no record of the log, nothing is lost)"
                    );
                } else {
                    say!(
                        "strata: {error} (`strata verify {dir}` lists the damage; `strata recover --force {dir}` \
                             cuts the log there, keeping the damaged segment as .corrupt)"
                    );
                }
                ExitCode::from(1)
            }
            _ => {
                say!("strata: {error}");
                ExitCode::from(2)
            }
        },
    }
}

/// The exit code a command decided on, whatever happened to its output: a closed pipe
/// (`strata verify … | head -1`) ends the output early but never changes the verdict.
fn verdict(code: ExitCode, written: Result<(), ToolError>) -> Result<ExitCode, ToolError> {
    match written {
        Err(ToolError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(code),
        other => other.map(|()| code),
    }
}

/// Set by `-q`: summaries and notes are not printed (errors still are).
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether summaries and notes go to stderr (not under `-q`).
fn chatty() -> bool {
    !QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// One line per error by default: the library's own log lines (which would repeat an error the
/// command reports, or narrate a repair its summary states) are shown from `-v` on, timestamped;
/// without `-v` only this command's warnings are, plainly.
fn init_logging(quiet: bool, verbose: u8) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
    let level = match (quiet, verbose) {
        (true, _) => "off",
        // The store's repairs at open (queues and index rebuilt or cut) are narrated only there.
        (false, 0) => "strata_cli=warn,strata_log::store=warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    // https://no-color.org: a NO_COLOR that is set and not empty turns colour off.
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal() && !no_color)
        // A closed stderr is the reader's choice: the subscriber's own report of the failed write
        // would go through `eprintln!`, which panics on it.
        .log_internal_errors(false);
    if verbose == 0 && std::env::var_os("RUST_LOG").is_none() {
        builder.without_time().with_target(false).init();
    } else {
        builder.init();
    }
}

/// A writer's open that repaired the log says so in one line (the repair is otherwise visible only
/// from `-v` on): a torn tail cut after a crash is never silent.
fn note_recovery(dir: &Path, report: &strata_log::RecoveryReport) {
    if let Some(note) = tools::recovery_note(dir, report)
        && chatty()
    {
        say!("strata: {note}");
    }
}

/// Set by SIGINT or SIGTERM; a second signal exits at once with 130.
fn stop_flag() -> Result<Arc<AtomicBool>, ToolError> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    Ok(flag)
}

fn json(out: &mut dyn Write, value: &impl serde::Serialize) -> Result<(), ToolError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

fn code(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn run(command: Command, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    match command {
        Command::Produce(args) => produce(args, out),
        Command::Consume(args) => consume(args, out),
        Command::Offsets { dir, time, json: as_json } => {
            let offsets = tools::offsets(&dir, time)?;
            let written =
                if as_json { json(out, &offsets) } else { render::offsets(out, &offsets).map_err(Into::into) };
            verdict(ExitCode::SUCCESS, written)
        }
        Command::Dump(args) => dump(args, out),
        Command::Verify { dir, json: as_json } if store_files::is_store_root(&dir) => {
            let report = store_files::verify_store(&dir)?;
            let written =
                if as_json { json(out, &report) } else { render_store::verify(out, &report).map_err(Into::into) };
            verdict(code(report.is_clean()), written)
        }
        Command::Verify { dir, json: as_json } => {
            tools::require_log(&dir)?;
            let report = inspect::verify(&dir, &LogConfig::default())?;
            let written = if as_json { json(out, &report) } else { render::verify(out, &report).map_err(Into::into) };
            verdict(code(report.is_clean()), written)
        }
        Command::Recover { dir, force, dry_run, json: as_json } => {
            let outcome = inspect::recover(&dir, RecoverOptions { force, dry_run })?;
            // A dry run that finds damage --force would cut (or a foreign file it would set aside)
            // reports it as a refusal would.
            let damage = outcome.found.iter().any(|f| f.data && f.severity == inspect::Severity::Error);
            let would_refuse = dry_run && damage && !force;
            let written = if as_json {
                json(out, &outcome)
            } else {
                render::recover(out, &dir, &outcome, force).map_err(Into::into)
            };
            verdict(code(!(outcome.refused || would_refuse)), written)
        }
        Command::Truncate { dir, to, json: as_json } => admin(out, &dir, as_json, tools::truncate(&dir, to)?),
        Command::DeleteBefore { dir, offset, clamp, json: as_json } => {
            admin(out, &dir, as_json, tools::delete_before(&dir, offset, clamp)?)
        }
        Command::Compact { dir, json: as_json } => admin(out, &dir, as_json, tools::compact(&dir)?),
        Command::Store(command) => store(command, out),
        Command::Bench(args) => bench(args, out),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "strata", out);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn admin(out: &mut dyn Write, dir: &Path, as_json: bool, report: tools::AdminReport) -> Result<ExitCode, ToolError> {
    if let Some(note) = report.repaired.as_ref().filter(|_| chatty()) {
        say!("strata: {note}");
    }
    let written = if as_json { json(out, &report) } else { render::admin(out, dir, &report).map_err(Into::into) };
    verdict(ExitCode::SUCCESS, written)
}

fn produce(args: ProduceArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let usage = |e: String| ToolError::Usage(e);
    let framing = if args.length_prefixed {
        Framing::LengthPrefixed
    } else if args.null {
        Framing::Delimited(vec![0])
    } else {
        Framing::Delimited(tools::text::unescape(&args.delimiter).map_err(usage)?)
    };
    let separator = |s: Option<String>| s.map(|s| tools::text::unescape(&s)).transpose().map_err(usage);
    let headers = args
        .headers
        .iter()
        .map(|h| match h.split_once('=') {
            Some((k, v)) => (k.to_owned(), Some(v.as_bytes().to_vec())),
            None => (h.clone(), None),
        })
        .collect();
    let defaults = LogConfig::default();
    let options = ProduceOptions {
        sync: args.sync,
        batch: args.batch as usize,
        print_offsets: args.print_offsets,
        framing,
        key_separator: separator(args.key_separator)?,
        timestamp_separator: separator(args.timestamp_separator)?,
        timestamp_ms: args.timestamp,
        headers,
        empty_as_null: args.empty_as_null,
        require_utf8: args.require_utf8,
        max_batch_bytes: args.max_batch_bytes,
    };
    // Everything that can be refused is refused before the log is looked at.
    options.validate()?;
    let explicit_times = options.timestamp_ms.is_some() || options.timestamp_separator.is_some();
    // An existing log keeps the index parameters it records.
    let recorded = match tools::dir_state(&args.dir)? {
        DirState::Log => defaults.clone().with_recorded_parameters(&args.dir)?,
        _ => defaults.clone(),
    };
    let config = LogConfig {
        segment_bytes: defaults.segment_bytes,
        index_bytes: recorded.index_bytes,
        index_interval_bytes: args.index_interval_bytes.unwrap_or(recorded.index_interval_bytes),
        flush_policy: args.flush_policy,
        max_batch_bytes: args.max_batch_bytes,
        // Timestamps the user gives are taken as given (replaying old data is the usual reason);
        // each was checked to be in range when it was parsed.
        max_timestamp_skew_ms: if explicit_times { i64::MAX as u64 } else { defaults.max_timestamp_skew_ms },
        ..defaults
    };
    if let Some(bytes) = args.segment_bytes {
        LogConfig { segment_bytes: bytes, ..config.clone() }.validate()?;
    }
    config.validate()?;
    tools::require_log_or_new(&args.dir)?;
    // The log opens once the first record is ready: say at once that a writer holds it.
    if inspect::held_by_a_writer(&args.dir) == Some(true) {
        return Err(Error::Locked { path: args.dir.join(strata_log::internals::format::LOCK_FILE) }.into());
    }
    let was = tools::dir_state(&args.dir)?;
    let segment_bytes = match args.segment_bytes {
        Some(bytes) => bytes,
        None => tools::produce_segment_bytes(&args.dir)?,
    };
    let config = LogConfig { segment_bytes, ..config };
    let stop = stop_flag()?;
    let dir = args.dir.clone();
    let open = move || {
        let log = inspect::open_or_undo(&dir, config)?;
        note_recovery(&dir, log.recovery_report());
        Ok(log)
    };
    let (summary, produced) = tools::produce(open, io::stdin(), out, &options, &stop);
    if let Err(error) = produced {
        if summary.records == 0 {
            // Nothing stored: a log this produce made is taken back (not one another process
            // holds: it made that one, and may still be writing it).
            if !matches!(error, ToolError::Log(Error::Locked { .. })) {
                tools::remove_new_log(&args.dir, was);
            }
        } else if args.json {
            say!("{}", serde_json::to_string(&summary).map_err(io::Error::from)?);
        } else {
            let _ = render::produce_failed(&mut io::stderr(), &summary);
        }
        return Err(error);
    }
    if args.json {
        say!("{}", serde_json::to_string(&summary).map_err(io::Error::from)?);
    } else if chatty() {
        let _ = render::produce_summary(&mut io::stderr(), &summary);
    }
    Ok(if summary.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

fn consume(args: ConsumeArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
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
    tracing::info!(records = summary.records, next_offset = summary.next_offset, "consumed");
    Ok(if summary.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
}

fn dump(args: DumpArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    if !args.path.exists() {
        return Err(ToolError::Usage(format!("{}: no such file or directory", args.path.display())));
    }
    if let Some(code) = dump_store(&args.path, args.json, out)? {
        return Ok(code);
    }
    if args.path.is_dir() && tools::dir_state(&args.path)? == DirState::Empty {
        return Err(ToolError::Usage(format!("{}: empty directory, it holds no log", args.path.display())));
    }
    if args.index_sanity_check {
        let checks = inspect::index_sanity(&args.path)?;
        let written =
            if args.json { json(out, &checks) } else { render::index_sanity(out, &checks).map_err(Into::into) };
        return verdict(code(checks.iter().all(|c| c.problem.is_none())), written);
    }
    let options = DumpOptions {
        records: args.records || args.max_records.is_some(),
        from: args.from,
        to: args.to,
        max_records: args.max_records,
    };
    let dumps = if args.path.is_dir() {
        inspect::dump_dir_with(&args.path, &options)?
    } else {
        vec![inspect::dump_file_with(&args.path, &options)?]
    };
    let written = if args.json {
        json(out, &dumps)
    } else {
        dumps.iter().try_for_each(|dump| render::dump(out, dump)).map_err(Into::into)
    };
    verdict(code(dumps.iter().all(|d| d.damage().is_none())), written)
}

/// `dump` of a store root, a store file, or a directory of store files (a queue's, `index/`);
/// `None` if the path is none of these.
fn dump_store(path: &Path, as_json: bool, out: &mut dyn Write) -> Result<Option<ExitCode>, ToolError> {
    if store_files::is_store_root(path) {
        let dump = store_files::dump_store(path)?;
        let written = if as_json { json(out, &dump) } else { render_store::dump_root(out, &dump).map_err(Into::into) };
        return verdict(code(!dump.is_damaged()), written).map(Some);
    }
    let dumps = if path.is_dir() {
        store_files::dump_store_files_in(path)?
    } else if store_files::is_store_file(path) {
        store_files::dump_store_file(path)?.into_iter().collect()
    } else {
        Vec::new()
    };
    if dumps.is_empty() {
        return Ok(None);
    }
    let written = if as_json {
        json(out, &dumps)
    } else {
        dumps.iter().try_for_each(|d| render_store::dump(out, d)).map_err(Into::into)
    };
    verdict(code(dumps.iter().all(|d| d.problems().is_empty())), written).map(Some)
}

fn store(command: StoreCommand, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    match command {
        StoreCommand::Put { root, topic, queue, tag, keys, files, json: as_json } => {
            let files = StoreFiles {
                segment_bytes: files.segment_bytes,
                queue_entries_per_file: files.queue_entries_per_file,
                index_slots: files.index_slots,
                index_entries: files.index_entries,
            };
            if root.exists() && !store_files::is_store_root(&root) && tools::dir_state(&root)? != DirState::Empty {
                return Err(ToolError::Usage(format!(
                    "{}: not a message store and not empty; refusing to create one in it",
                    root.display()
                )));
            }
            let config = store_tools::store_config(&root, &files)?;
            let stop = stop_flag()?;
            let store = open_store_noted(&root, config)?;
            let options = PutOptions { topic, queue_id: queue, tag, keys };
            let put = store_tools::put(&store, &options, io::stdin(), &stop);
            store.close().map_err(|e| store_tools::store_error(&root, e))?;
            let summary = put?;
            let written =
                if as_json { json(out, &summary) } else { render_store::put(out, &summary).map_err(Into::into) };
            verdict(if summary.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS }, written)
        }
        StoreCommand::Get { root, topic, queue, from, max, group, commit, tag, follow, json: as_json } => {
            let store = open_existing(&root)?;
            let options = GetOptions { topic, queue_id: queue, from, max, group, commit, tag, follow, json: as_json };
            let stop = stop_flag()?;
            let got = store_tools::get(&store, &options, out, &stop);
            store.close().map_err(|e| store_tools::store_error(&root, e))?;
            let summary = got?;
            tracing::info!(messages = summary.messages, next = summary.next_queue_offset, "got");
            Ok(if summary.interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS })
        }
        StoreCommand::Query { root, topic, key, begin, end, max, json: as_json } => {
            let store = open_existing(&root)?;
            let found = store_tools::query(&store, &topic, &key, (begin.unwrap_or(0), end.unwrap_or(i64::MAX)), max);
            store.close().map_err(|e| store_tools::store_error(&root, e))?;
            let written = found?.iter().try_for_each(|m| store_tools::write_message(out, m, as_json, true));
            verdict(ExitCode::SUCCESS, written)
        }
        StoreCommand::Stats { root, json: as_json } => {
            store_tools::require_store(&root)?;
            let stats = store_tools::stats(&root, store_tools::store_config(&root, &StoreFiles::default())?)?;
            let written =
                if as_json { json(out, &stats) } else { render_store::stats(out, &stats).map_err(Into::into) };
            verdict(ExitCode::SUCCESS, written)
        }
    }
}

/// Opens an existing store (reading commands never create one).
fn open_existing(root: &Path) -> Result<strata_log::MessageStore, ToolError> {
    store_tools::require_store(root)?;
    open_store_noted(root, store_tools::store_config(root, &StoreFiles::default())?)
}

/// Opens the store, saying in one line what the open repaired in its commit log.
fn open_store_noted(root: &Path, config: strata_log::StoreConfig) -> Result<strata_log::MessageStore, ToolError> {
    let store = store_tools::open_store(root, config)?;
    let commit_log = root.join(strata_log::internals::format::STORE_COMMIT_LOG_DIR);
    note_recovery(&commit_log, &store.metrics().log.recovery);
    Ok(store)
}

fn bench(args: BenchArgs, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
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
    let written = if args.json { json(out, &results) } else { render::bench_table(out, &results).map_err(Into::into) };
    verdict(ExitCode::SUCCESS, written)
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

/// `never`, `always` or `interval:MS`.
fn parse_policy(text: &str) -> Result<FlushPolicy, String> {
    match text {
        "never" => Ok(FlushPolicy::Never),
        "always" => Ok(FlushPolicy::Always),
        _ => match text.strip_prefix("interval:").and_then(|ms| ms.parse().ok()).filter(|&ms| ms > 0) {
            Some(ms) => Ok(FlushPolicy::EveryInterval { ms, messages: u64::MAX }),
            None => Err(format!("expected never, always or interval:MS (MS ≥ 1), got {text:?}")),
        },
    }
}
