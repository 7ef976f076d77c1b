//! The command line, one module per command of the tree: each holds its clap argument struct, its
//! `run` (arguments to options, the work in [`crate::tools`], [`crate::bench`] or the library's
//! inspection, then the output as text or JSON, with the exit code it decided on) and the text it
//! prints. The store's commands are under `store/`. This file holds the tree itself ([`Cli`]),
//! the dispatch ([`run`]) and how a run ends ([`Exit`]); the binary parses, sets up logging,
//! calls these and exits.

use std::fmt::Display;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde::Serialize;

use crate::tools::{self, ToolError};
use strata_log::{Corruption, Error, FlushPolicy};

/// A line on stderr. A closed stderr (`strata … 2>&1 | head -1`) is not worth a panic: the line is
/// dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod admin;
mod bench;
mod consume;
mod dump;
mod offsets;
mod produce;
mod recover;
mod store;
mod verify;

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

/// The `strata` command line: the global flags and the command.
#[derive(Parser)]
#[command(name = "strata", version, about = "Durable, segmented, append-only logs", after_help = FOOTER)]
pub struct Cli {
    /// Print errors only (no summaries, no warnings).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also print the library's log lines: -v warnings and info, -vv debug, -vvv trace.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// Parses the process's arguments, every command's `--help` ending with the exit codes; a bad
    /// argument, `--help` and `--version` print clap's text and exit (2 for a bad one).
    pub fn parse_args() -> Cli {
        let command = Cli::command().mut_subcommands(|c| c.after_help(FOOTER));
        Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
    }
}

#[derive(Subcommand)]
enum Command {
    /// Append records from stdin: one per line by default (kcat -P, kafka-console-producer).
    Produce(produce::ProduceArgs),
    /// Print records (read-only: safe on a live log); exits at the end unless --follow.
    Consume(consume::ConsumeArgs),
    /// Print where the log starts and ends (kafka-get-offsets), read-only.
    Offsets(offsets::OffsetsArgs),
    /// Print the contents of a log file or of every file in a log directory (read-only; a
    /// `.corrupt` copy is decoded as the segment it was). Exit 1 if a file is damaged.
    Dump(dump::DumpArgs),
    /// Check every segment, index and the checkpoint, read-only (safe on a live log); for a
    /// message store root, also every queue and index entry against its message, and the
    /// consumer offsets. Exit 0: clean (notes are not damage); 1: damage found.
    Verify(verify::VerifyArgs),
    /// Recover the log offline and say what was repaired. Without --force, damage to acknowledged
    /// records is refused (exit 1) and nothing changes.
    Recover(recover::RecoverArgs),
    /// Remove every record at or after an offset, on a closed log (a batch goes whole).
    Truncate(admin::TruncateArgs),
    /// Make records before an offset unreadable and delete the segments wholly below it, on a
    /// closed log (kafka-delete-records).
    DeleteBefore(admin::DeleteBeforeArgs),
    /// Run one compaction pass on a closed log: the latest record per key is kept in sealed
    /// segments.
    Compact(admin::CompactArgs),
    /// Put, get, query and inspect a message store (topics, queues, consumer groups) in a store
    /// root directory; get, query and stats read it beside a process that has it open, put and
    /// get --commit open it (so not beside one).
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// Measure writes, durable writes, reads, the producer and recovery against the disk's own
    /// baselines (no arguments needed; about a minute).
    Bench(bench::BenchArgs),
    /// Print a shell completion script: `strata completions bash > /etc/bash_completion.d/strata`.
    Completions {
        /// bash, zsh, fish, powershell or elvish.
        shell: clap_complete::Shell,
    },
}

/// Runs the command `cli` names, writing its output to `out` (flushed at the end), and returns the
/// exit code it decided on. Summaries and notes go to stderr unless `-q`.
pub fn run(cli: Cli, out: &mut dyn Write) -> Result<ExitCode, ToolError> {
    let notes = Notes { quiet: cli.quiet };
    let code = match cli.command {
        Command::Produce(args) => produce::run(args, out, notes),
        Command::Consume(args) => consume::run(args, out),
        Command::Offsets(args) => offsets::run(args, out),
        Command::Dump(args) => dump::run(args, out),
        Command::Verify(args) => verify::run(args, out),
        Command::Recover(args) => recover::run(args, out),
        Command::Truncate(args) => admin::truncate(args, out, notes),
        Command::DeleteBefore(args) => admin::delete_before(args, out, notes),
        Command::Compact(args) => admin::compact(args, out, notes),
        Command::Store(command) => store::run(command, out, notes),
        Command::Bench(args) => bench::run(args, out),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "strata", out);
            Ok(ExitCode::SUCCESS)
        }
    }?;
    verdict(code, out.flush().map_err(ToolError::from))
}

/// How the process ends after a command: its exit code, and the line for stderr if it failed.
#[derive(Debug)]
pub struct Exit {
    /// The exit code.
    pub code: ExitCode,
    /// The error, in one line (with what to run next for damage); `None` if there is nothing to say.
    pub message: Option<String>,
}

impl Exit {
    /// The end of a [`run`]: its own code if it succeeded, 0 for a closed pipe (the reader's choice,
    /// `strata consume … | head`), 1 for damage found (a corrupt file), else 2.
    pub fn of(result: Result<ExitCode, ToolError>) -> Exit {
        match result {
            Ok(code) => Exit { code, message: None },
            Err(ToolError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                Exit { code: ExitCode::SUCCESS, message: None }
            }
            Err(error) => match &error {
                ToolError::Log(Error::Corrupt { path, reason, .. }) => {
                    Exit { code: ExitCode::from(1), message: Some(corrupt_message(&error, path, reason)) }
                }
                _ => Exit { code: ExitCode::from(2), message: Some(format!("strata: {error}")) },
            },
        }
    }
}

/// A corruption error with what to run next, by what is wrong with the file.
fn corrupt_message(error: &ToolError, path: &Path, reason: &Corruption) -> String {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = dir.display();
    if path.file_name().is_some_and(|n| n == strata_log::internals::format::META_FILE) {
        format!("strata: {error} (it holds no record: delete it, and the next writer open writes it again)")
    } else if path.file_name().is_some_and(|n| n == strata_log::internals::format::STORE_META_FILE) {
        format!(
            "strata: {error} (it holds no message: delete it, and the next writer open infers the store's \
             parameters from its newest .cq and .idx files and writes it again)"
        )
    } else if matches!(reason, Corruption::ForeignFile(_)) {
        format!(
            "strata: {error} (`strata verify {dir}` names it; `strata recover --force {dir}` sets \
                 it aside as .foreign: it holds no record of the log, nothing is lost)"
        )
    } else {
        format!(
            "strata: {error} (`strata verify {dir}` lists the damage; `strata recover --force {dir}` \
                 cuts the log there, keeping the damaged segment as .corrupt)"
        )
    }
}

/// Summaries and notes on stderr, which `-q` turns off (errors are printed whatever it says).
#[derive(Debug, Clone, Copy)]
struct Notes {
    quiet: bool,
}

impl Notes {
    /// Whether summaries and notes go to stderr.
    fn on(self) -> bool {
        !self.quiet
    }

    /// `strata: <note>` on stderr, unless `-q`.
    fn say(self, note: impl Display) {
        if self.on() {
            say!("strata: {note}");
        }
    }

    /// A writer's open that repaired the log says so in one line (the repair is otherwise visible
    /// only from `-v` on): a torn tail cut after a crash is never silent.
    fn recovery(self, dir: &Path, report: &strata_log::RecoveryReport) {
        if let Some(note) = tools::recovery_note(dir, report) {
            self.say(note);
        }
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

/// Writes `value` as pretty JSON with `--json`, else as text through `text`.
fn print<T: Serialize + ?Sized>(
    out: &mut dyn Write,
    as_json: bool,
    value: &T,
    text: impl FnOnce(&mut dyn Write, &T) -> io::Result<()>,
) -> Result<(), ToolError> {
    if !as_json {
        return Ok(text(out, value)?);
    }
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// 0 if nothing was found wrong, else 1.
fn clean(ok: bool) -> ExitCode {
    if ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// 130 if a signal stopped the command, else 0.
fn finished(interrupted: bool) -> ExitCode {
    if interrupted { ExitCode::from(130) } else { ExitCode::SUCCESS }
}

/// Set by SIGINT or SIGTERM; a second signal exits at once with 130. Installed by the commands
/// that stop cleanly, when they start: any other command ends at the first signal.
fn stop_flag() -> Result<Arc<AtomicBool>, ToolError> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    Ok(flag)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt(file: &str, reason: Corruption) -> ToolError {
        ToolError::Log(Error::Corrupt { path: Path::new("logs/a").join(file), position: 51, reason })
    }

    #[test]
    fn how_a_run_ends() {
        let closed = Exit::of(Err(ToolError::Output(io::ErrorKind::BrokenPipe.into())));
        assert!(closed.code == ExitCode::SUCCESS && closed.message.is_none(), "a closed pipe is no error");
        let usage = Exit::of(Err(ToolError::Usage("no".to_owned())));
        assert!(usage.code == ExitCode::from(2) && usage.message.as_deref() == Some("strata: no"));
        let crc = Corruption::CrcMismatch { stored: 1, computed: 2 };
        let damage = Exit::of(Err(corrupt("00000000000000000000.log", crc)));
        let message = damage.message.unwrap_or_default();
        assert!(
            damage.code == ExitCode::from(1) && message.contains("`strata recover --force logs/a` cuts"),
            "{message}"
        );
        let foreign = Exit::of(Err(corrupt("x.log", Corruption::ForeignFile("not ours")))).message.unwrap_or_default();
        assert!(foreign.contains("sets it aside as .foreign"), "{foreign}");
        let meta = Exit::of(Err(corrupt("store.meta", Corruption::BadFile("x")))).message.unwrap_or_default();
        assert!(meta.contains("holds no message: delete it") && !meta.contains("recover --force"), "{meta}");
    }

    #[test]
    fn runs_in_process() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let missing = dir.path().join("missing");
        let cli = Cli::try_parse_from(["strata".as_ref(), "offsets".as_ref(), missing.as_os_str()]).expect("parses");
        let mut out = Vec::new();
        let refused = run(cli, &mut out).expect_err("no log there").to_string();
        assert!(refused.ends_with("missing: no such directory") && out.is_empty(), "{refused}");
        let cli = Cli::try_parse_from(["strata", "completions", "bash"]).expect("parses");
        assert!(run(cli, &mut out).is_ok_and(|code| code == ExitCode::SUCCESS) && !out.is_empty());
    }
}
