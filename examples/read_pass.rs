//! One pass over a freshly opened log, as a consumer reads it: the program to profile for the
//! main job's read phases (`perf record -g target/release/examples/read_pass`).
//!
//! ```text
//! cargo run --release --example read_pass -- [MODE] [RECORDS] [SIZE] [DIR]
//! ```
//! `MODE` is `in_place` (default: `Log::read_batches`), `owned` (`Log::read`), `pread` (`Log::read`
//! under `ReadPath::Pread`) or `raw` (`pread` of 1 MiB + CRC of every `.log` file, decoding
//! nothing); `RECORDS` 2,000,000 records of `SIZE` (100) bytes, appended in batches of 100 first
//! (untimed; the log is closed and reopened before the pass). With `DIR`, the log there is read
//! if it has records, else filled there first and left (so a profile can leave the fill out).

use std::error::Error;
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt as _;
use std::time::Instant;

use strata_log::{Log, LogConfig, ReadPath, Record};

const SEGMENT_BYTES: u64 = 128 << 20;
const READ_BYTES: usize = 1 << 20;

fn config(read_path: ReadPath) -> LogConfig {
    LogConfig { segment_bytes: SEGMENT_BYTES, read_path, ..LogConfig::default() }
}

fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(7)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "in_place".to_owned());
    let records: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(2_000_000);
    let size: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(100);
    let temp = tempfile::tempdir()?;
    let dir = args.next().map_or_else(|| temp.path().to_path_buf(), std::path::PathBuf::from);
    let probe = Log::open(&dir, config(ReadPath::Mmap))?;
    let filled = probe.next_offset() > 0;
    probe.close()?;
    if !filled {
        let log = Log::open(&dir, config(ReadPath::Mmap))?;
        let value = vec![0xa5u8; size];
        let batch: Vec<Record<'_>> = (0..100).map(|_| Record::new(&value)).collect();
        for _ in 0..records.div_ceil(100) {
            log.append(&batch)?;
        }
        log.close()?;
    }
    let read_path = if mode == "pread" { ReadPath::Pread } else { ReadPath::Mmap };
    let faults = minor_faults();
    let started = Instant::now();
    let (mut count, mut bytes) = (0u64, 0u64);
    let took = if mode == "raw" {
        let mut files: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .collect();
        files.sort();
        let mut buf = vec![0u8; READ_BYTES];
        let mut checksum = 0u32;
        for path in &files {
            let file = File::open(path)?;
            let mut position = 0;
            loop {
                let n = file.read_at(&mut buf, position)?;
                if n == 0 {
                    break;
                }
                checksum ^= crc32fast::hash(&buf[..n]);
                position += n as u64;
                bytes += n as u64;
            }
        }
        std::hint::black_box(checksum);
        count = records;
        started.elapsed()
    } else {
        let log = Log::open(&dir, config(read_path))?;
        let (mut next, end) = (log.start_offset(), log.next_offset());
        while next < end {
            next = if mode == "in_place" {
                log.read_batches(next, READ_BYTES, |batch| {
                    for record in batch.records() {
                        bytes += record.value().map_or(0, <[u8]>::len) as u64;
                        count += 1;
                    }
                    ControlFlow::Continue(())
                })?
            } else {
                let mut reader = log.read(next, READ_BYTES)?;
                for record in reader.by_ref() {
                    bytes += record?.value().map_or(0, <[u8]>::len) as u64;
                    count += 1;
                }
                reader.next_offset()
            };
        }
        let took = started.elapsed();
        log.close()?;
        took
    };
    println!(
        "{mode}: {count} records ({bytes} bytes) in {took:.2?}: {:.1}M records/s, {} page faults",
        count as f64 / took.as_secs_f64() / 1e6,
        minor_faults() - faults
    );
    Ok(())
}
