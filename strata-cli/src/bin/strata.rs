//! `strata`: benchmark, inspect and drive a strata log from the command line. Thin: parses the
//! arguments, sets up logging, runs the command the library's `cmd` names and exits with its code.

use std::io::{self, IsTerminal, Write};

use strata_cli::cmd::{self, Cli, Exit};

fn main() -> std::process::ExitCode {
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let cli = Cli::parse_args();
    init_logging(cli.quiet, cli.verbose);
    let mut out = io::stdout().lock();
    let exit = Exit::of(cmd::run(cli, &mut out));
    if let Some(message) = &exit.message {
        // A closed stderr is not worth a panic: the line is dropped.
        let _ = writeln!(io::stderr(), "{message}");
    }
    exit.code
}

/// One line per error by default: the library's own log lines (which would repeat an error the
/// command reports, or narrate a repair its summary states) are shown from `-v` on, timestamped;
/// without `-v` only this command's warnings are, plainly.
fn init_logging(quiet: bool, verbose: u8) {
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
