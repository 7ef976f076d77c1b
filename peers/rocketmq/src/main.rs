//! strata's message store against rocketmq-store's `LocalFileMessageStore`: the same workload
//! on both, in alternating rounds (strata, rocketmq, strata, ...) on fresh stores in one
//! filesystem, then a markdown table of per-phase medians and the median per-round ratio.
//! README.md says what each phase does and how each store is configured.

mod args;
mod measure;
mod report;
mod rocketmq_side;
mod strata_side;
mod workload;

use std::error::Error;
use std::process::ExitCode;

use args::Args;
use rocketmq_side::Peer;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn Error>> {
    let work = &args.work;
    let load_before = load_average();
    let peer = Peer::new(args.commit_log_file_bytes, args.peer_micro_batch);
    let mut rounds = Vec::with_capacity(args.rounds);
    for round in 1..=args.rounds {
        let dir = tempfile::Builder::new().prefix("strata-peer-").tempdir_in(&args.dir)?;
        eprintln!("round {round}/{}: strata", args.rounds);
        let strata = strata_side::run_round(&dir.path().join("strata"), work)?;
        eprintln!("round {round}/{}: rocketmq-store", args.rounds);
        let rocketmq = peer.run_round(&dir.path().join("rocketmq"), work)?;
        rounds.push((strata, rocketmq));
    }

    println!("## strata vs rocketmq-store 1.0.0 (`LocalFileMessageStore`)\n");
    println!(
        "{} rounds, alternating (strata first), fresh stores in `{}`. One topic, {} queues \
         round-robin, {}-byte bodies, one key (`key-<i>`) and one tag a message; each producer \
         waits for every put. Query keys: {} drawn with seed {}. Async flush: strata \
         `EveryInterval {{ ms: 500, messages: u64::MAX }}` vs `ASYNC_FLUSH` (500 ms flush \
         interval); sync flush: `Always` vs `SYNC_FLUSH`. rocketmq-store's commit-log file: {} bytes (its default is 1 GiB; see README.md); \
         its commit-log micro-batching: {}.\n",
        args.rounds,
        args.dir.display(),
        workload::QUEUES,
        workload::BODY_LEN,
        work.queries,
        work.seed,
        args.commit_log_file_bytes,
        if args.peer_micro_batch {
            "on (its default)"
        } else {
            "off (its default is on: each lone put then waits ~1 ms for its 50 µs batch window, a Tokio timer)"
        },
    );
    println!(
        "Load average (1, 5, 15 min) before: {load_before}; after: {}. The figures are only as \
         steady as the machine was.\n",
        load_average()
    );
    println!("{}", report::table(&rounds, work));
    println!("### Per round\n");
    println!("{}", report::per_round(&rounds, work));
    Ok(())
}

/// The machine's load averages (`/proc/loadavg`), to read the figures by.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown".into())
}
