//! `strata produce`: records from stdin appended to a log ([`tools::produce`]). This picks the log's
//! configuration (what the log records, what the arguments say, the segment size the disk has room
//! for), refuses a directory of other files or a log a writer holds before anything is read, and
//! takes back a new log a failed produce stored nothing in.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{Notes, finished, parse_policy, stop_flag};
use crate::tools::text::{count, human_bytes};
use crate::tools::{self, DirState, Framing, ProduceOptions, ProduceSummary, ToolError};
use strata_log::internals::inspect;
use strata_log::{Error, FlushPolicy, LogConfig};

#[derive(clap::Args)]
pub(crate) struct ProduceArgs {
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

pub(super) fn run(args: ProduceArgs, out: &mut dyn Write, notes: Notes) -> Result<ExitCode, ToolError> {
    let options = options(&args)?;
    // Everything that can be refused is refused before the log is looked at.
    options.validate()?;
    let config = config(&args, &options)?;
    let was = check_target(&args.dir)?;
    let segment_bytes = match args.segment_bytes {
        Some(bytes) => bytes,
        None => tools::produce_segment_bytes(&args.dir)?,
    };
    let config = LogConfig { segment_bytes, ..config };
    let stop = stop_flag()?;
    let dir = args.dir.clone();
    let open = move || {
        let log = inspect::open_or_undo(&dir, config)?;
        notes.recovery(&dir, log.recovery_report());
        Ok(log)
    };
    let (summary, produced) = tools::produce(open, io::stdin(), out, &options, &stop);
    match produced {
        Err(error) if summary.records == 0 => {
            // Nothing stored: a log this produce made is taken back (not one another process
            // holds: it made that one, and may still be writing it).
            if !matches!(error, ToolError::Log(Error::Locked { .. })) {
                tools::remove_new_log(&args.dir, was);
            }
            Err(error)
        }
        Err(error) => {
            summarise(&args, &summary, notes, true)?;
            Err(error)
        }
        Ok(()) => {
            summarise(&args, &summary, notes, false)?;
            Ok(finished(summary.interrupted))
        }
    }
}

/// The options of [`tools::produce`] the arguments ask for (not yet validated).
fn options(args: &ProduceArgs) -> Result<ProduceOptions, ToolError> {
    let usage = |e: String| ToolError::Usage(e);
    let framing = if args.length_prefixed {
        Framing::LengthPrefixed
    } else if args.null {
        Framing::Delimited(vec![0])
    } else {
        Framing::Delimited(tools::text::unescape(&args.delimiter).map_err(usage)?)
    };
    let separator = |s: &Option<String>| s.as_ref().map(|s| tools::text::unescape(s)).transpose().map_err(usage);
    let headers = args
        .headers
        .iter()
        .map(|h| match h.split_once('=') {
            Some((k, v)) => (k.to_owned(), Some(v.as_bytes().to_vec())),
            None => (h.clone(), None),
        })
        .collect();
    Ok(ProduceOptions {
        sync: args.sync,
        batch: args.batch as usize,
        print_offsets: args.print_offsets,
        framing,
        key_separator: separator(&args.key_separator)?,
        timestamp_separator: separator(&args.timestamp_separator)?,
        timestamp_ms: args.timestamp,
        headers,
        empty_as_null: args.empty_as_null,
        require_utf8: args.require_utf8,
        max_batch_bytes: args.max_batch_bytes,
    })
}

/// The validated configuration of the log, but for its segment size (see
/// [`tools::produce_segment_bytes`]): an existing log keeps the index parameters it records.
fn config(args: &ProduceArgs, options: &ProduceOptions) -> Result<LogConfig, ToolError> {
    let defaults = LogConfig::default();
    let explicit_times = options.timestamp_ms.is_some() || options.timestamp_separator.is_some();
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
    Ok(config)
}

/// Refuses a directory of other files and a log a writer holds (the log opens only once the
/// first record is ready: this says at once that it cannot); returns what the directory is now.
fn check_target(dir: &Path) -> Result<DirState, ToolError> {
    tools::require_log_or_new(dir)?;
    if inspect::held_by_a_writer(dir) == Some(true) {
        return Err(Error::Locked { path: dir.join(strata_log::internals::format::LOCK_FILE) }.into());
    }
    Ok(tools::dir_state(dir)?)
}

/// The closing summary on stderr: JSON with `--json`; else what a failed produce had stored, or
/// (unless `-q`) what it produced.
fn summarise(args: &ProduceArgs, summary: &ProduceSummary, notes: Notes, failed: bool) -> Result<(), ToolError> {
    if args.json {
        say!("{}", serde_json::to_string(summary).map_err(io::Error::from)?);
    } else if failed {
        let _ = render_failed(&mut io::stderr(), summary);
    } else if notes.on() {
        let _ = render_summary(&mut io::stderr(), summary);
    }
    Ok(())
}

/// What was stored: `3 records (153 B) at offsets 0–2`.
fn stored(s: &ProduceSummary) -> String {
    let offsets = match (s.first_offset, s.last_offset) {
        (Some(first), Some(last)) if first == last => format!(" at offset {first}"),
        (Some(first), Some(last)) => format!(" at offsets {first}–{last}"),
        _ => String::new(),
    };
    format!("{} ({}){offsets}", count(s.records, "record", "records"), human_bytes(s.bytes))
}

/// `produce`'s closing summary.
fn render_summary(out: &mut dyn Write, s: &ProduceSummary) -> io::Result<()> {
    let prefix = if s.interrupted { "interrupted; " } else { "" };
    writeln!(
        out,
        "{prefix}produced {} in {:.2} s: {:.0} records/s, {}/s",
        stored(s),
        s.seconds,
        s.records_per_sec(),
        human_bytes(s.bytes_per_sec() as u64)
    )
}

/// What a `produce` that failed part-way had already stored (the records stay in the log).
fn render_failed(out: &mut dyn Write, s: &ProduceSummary) -> io::Result<()> {
    writeln!(out, "stored {} before the error; they stay in the log", stored(s))
}
