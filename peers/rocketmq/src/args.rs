//! The command line: a few `--name value` flags, all optional.

use std::path::PathBuf;

use crate::workload::Workload;

/// What to run.
#[derive(Debug, Clone)]
pub struct Args {
    /// Rounds; each runs strata, then rocketmq-store.
    pub rounds: usize,
    /// The workload of every round.
    pub work: Workload,
    /// Where each round's temporary stores go (both stores on this one filesystem).
    pub dir: PathBuf,
    /// rocketmq-store's commit-log file size (`mapped_file_size_commit_log`). 128 MiB unless
    /// asked for, strata's segment size, though the store's default is 1 GiB: its shutdown
    /// leaves the commit-log file mapped, so a removed store's file keeps its disk until the
    /// process exits, and after six 1 GiB stores the store's own disk guard (90% used, reserved
    /// blocks counted) refused every put on the machine this was written on (README.md).
    pub commit_log_file_bytes: usize,
    /// rocketmq-store's commit-log micro-batching (`commit_log_micro_batch_enabled`). Off unless
    /// asked for, though the store's default is on: its 50 µs batch window is a Tokio timer,
    /// which fires at millisecond granularity, so with one producer waiting for each put every
    /// put waits about a millisecond for a batch that never fills (README.md).
    pub peer_micro_batch: bool,
}

pub const USAGE: &str = "\
usage: strata-peer-rocketmq [--rounds N] [--messages N] [--sync-messages N] [--producers N]
                            [--queries N] [--seed N] [--dir PATH] [--commit-log-file-bytes N]
                            [--peer-micro-batch on|off]

  --rounds N                 alternating rounds, strata then rocketmq-store (default 3)
  --messages N               messages of the async put, consumed and queried (default 200000)
  --sync-messages N          messages of each sync put (default 20000)
  --producers N              producer threads of the second sync put (default 8)
  --queries N                random keys queried (default 1000)
  --seed N                   seed of the keys queried (default 20240611)
  --dir PATH                 where the temporary stores go (default the system temp dir)
  --commit-log-file-bytes N  rocketmq-store's commit-log file size (default 134217728, strata's
                             segment size; its own default is 1073741824: README.md)
  --peer-micro-batch on|off  rocketmq-store's commit-log micro-batching (default off; its own
                             default is on, which makes each lone put wait ~1 ms: README.md)";

impl Args {
    /// Parses `args` (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args {
            rounds: 3,
            work: Workload { messages: 200_000, sync_messages: 20_000, producers: 8, queries: 1_000, seed: 20_240_611 },
            dir: std::env::temp_dir(),
            commit_log_file_bytes: 128 << 20,
            peer_micro_batch: false,
        };
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                return Err(USAGE.to_owned());
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            let number = || value.parse::<u64>().map_err(|e| format!("{flag} {value}: {e}"));
            match flag.as_str() {
                "--rounds" => parsed.rounds = number()? as usize,
                "--messages" => parsed.work.messages = number()?,
                "--sync-messages" => parsed.work.sync_messages = number()?,
                "--producers" => parsed.work.producers = number()?,
                "--queries" => parsed.work.queries = number()? as usize,
                "--seed" => parsed.work.seed = number()?,
                "--dir" => parsed.dir = PathBuf::from(&value),
                "--commit-log-file-bytes" => parsed.commit_log_file_bytes = number()? as usize,
                "--peer-micro-batch" => {
                    parsed.peer_micro_batch = match value.as_str() {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("--peer-micro-batch takes on or off, not {value}")),
                    }
                }
                _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
            }
        }
        let work = &parsed.work;
        if parsed.rounds == 0 || work.messages == 0 || work.sync_messages == 0 || work.producers == 0 {
            return Err(format!("--rounds, --messages, --sync-messages and --producers must be at least 1\n{USAGE}"));
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        Args::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_override_the_defaults() {
        let args = parse(&["--rounds", "1", "--messages", "500", "--dir", "/x"]).expect("parse");
        assert_eq!((args.rounds, args.work.messages, args.work.sync_messages), (1, 500, 20_000));
        assert_eq!(args.dir, PathBuf::from("/x"));
        assert!(parse(&["--rounds"]).is_err());
        assert!(parse(&["--rounds", "0"]).is_err());
        assert!(parse(&["--what", "1"]).is_err());
        assert!(parse(&["--messages", "many"]).is_err());
        assert!(parse(&["--peer-micro-batch", "on"]).expect("parse").peer_micro_batch);
        assert!(parse(&["--peer-micro-batch", "maybe"]).is_err());
    }
}
