//! What a clean `MessageStore::open` of a large store costs: builds, once, a store of 1,000 queues
//! (10 topics of 100) and 1,000,000 messages (100-byte bodies, one key each, put in batches of
//! 100 per queue), closes it, then times `CYCLES` clean `open` + `close` cycles and prints the
//! minimum and median of each. A rerun on the same directory reuses the store it built.
//!
//! ```text
//! cargo run --release --example store_open_cost -- [DIR] [CYCLES]
//! ```
//! `DIR` defaults to a temporary directory (deleted at the end), `CYCLES` to 5. The store is
//! `DIR/store`; `DIR/store.built` marks a finished build.
//!
//! Configuration: `StoreConfig::default()` except
//! - `queue_entries_per_file` = 10,000 (200 KB files instead of 6 MB: each queue's file is
//!   preallocated whole, and 1,000 default files would take 6 GB for 20 MB of entries);
//! - the commit log's `flush_policy` = `Never` (durability comes from the close; an fsync per
//!   batch makes the build take many minutes, and a clean open does not depend on it).
//!
//! The store takes about 1 GB on disk (the commit log about 200 MB, the one index file 420 MB
//! preallocated, the queues 200 MB). The times are with a warm page cache.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use strata_log::{FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

const TOPICS: u32 = 10;
const QUEUES_PER_TOPIC: u32 = 100;
const MESSAGES: u64 = 1_000_000;
const BATCH: u64 = 100;
const BODY_BYTES: usize = 100;

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        queue_entries_per_file: 10_000,
        ..StoreConfig::default()
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let temporary;
    let dir = match args.next() {
        Some(dir) => PathBuf::from(dir),
        None => {
            temporary = tempfile::tempdir()?;
            temporary.path().to_path_buf()
        }
    };
    let cycles: usize = args.next().map(|c| c.parse()).transpose()?.unwrap_or(5);
    let root = dir.join("store");
    let built = dir.join("store.built");
    if built.exists() {
        println!("reusing the store built in {}", root.display());
    } else {
        build(&root)?;
        std::fs::write(&built, b"")?;
    }
    println!("store: {} queues, {} messages, {:.0} MiB on disk", TOPICS * QUEUES_PER_TOPIC, MESSAGES, mib(&root)?);
    let (mut opens, mut closes) = (Vec::new(), Vec::new());
    for cycle in 1..=cycles {
        let started = Instant::now();
        let store = MessageStore::open(&root, config())?;
        let opened = started.elapsed();
        let queues = store.queues().len();
        let started = Instant::now();
        store.close()?;
        let closed = started.elapsed();
        println!("cycle {cycle}: open {} ({queues} queues), close {}", ms(opened), ms(closed));
        opens.push(opened);
        closes.push(closed);
    }
    let (open_min, open_median) = min_median(&mut opens);
    let (close_min, close_median) = min_median(&mut closes);
    println!("clean open:  min {}, median {} ({cycles} cycles)", ms(open_min), ms(open_median));
    println!("clean close: min {}, median {}", ms(close_min), ms(close_median));
    Ok(())
}

/// Builds the store in `root`: rounds of one batch per queue, until [`MESSAGES`].
fn build(root: &Path) -> Result<(), Box<dyn Error>> {
    if root.exists() {
        // A build that did not finish: start over.
        std::fs::remove_dir_all(root)?;
    }
    let started = Instant::now();
    let store = MessageStore::open(root, config())?;
    let queues = u64::from(TOPICS * QUEUES_PER_TOPIC);
    let rounds = MESSAGES / (queues * BATCH);
    let body = vec![b'x'; BODY_BYTES];
    for round in 0..rounds {
        for queue in 0..queues {
            let topic = format!("topic-{}", queue / u64::from(QUEUES_PER_TOPIC));
            let queue_id = (queue % u64::from(QUEUES_PER_TOPIC)) as u32;
            let batch: Vec<Message> = (0..BATCH)
                .map(|i| {
                    let n = round * BATCH + i;
                    Message::new(topic.as_str(), queue_id, body.clone()).with_keys([format!("{topic}-{queue_id}-{n}")])
                })
                .collect();
            store.put_batch(&batch)?;
        }
        println!(
            "built {} of {MESSAGES} messages ({:.1} s)",
            (round + 1) * queues * BATCH,
            started.elapsed().as_secs_f64()
        );
    }
    store.close()?;
    println!("built in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The minimum and the median of `times`.
fn min_median(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort();
    match times {
        [] => (Duration::ZERO, Duration::ZERO),
        _ => (times[0], times[times.len() / 2]),
    }
}

fn ms(time: Duration) -> String {
    format!("{:.1} ms", time.as_secs_f64() * 1e3)
}

/// The bytes of the files under `dir` (allocated blocks), in MiB.
fn mib(dir: &Path) -> Result<f64, Box<dyn Error>> {
    use std::os::unix::fs::MetadataExt as _;
    let mut bytes = 0u64;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        bytes += if meta.is_dir() { (mib(&entry.path())? * 1_048_576.0) as u64 } else { meta.blocks() * 512 };
    }
    Ok(bytes as f64 / 1_048_576.0)
}
