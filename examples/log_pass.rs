//! The main job's 100-byte log phases one at a time, to profile (`perf record -g
//! target/release/examples/log_pass`): one pass over a freshly opened log as a consumer reads
//! it, or the appends that fill it.
//!
//! ```text
//! cargo run --release --example log_pass -- [MODE] [RECORDS] [SIZE] [DIR]
//! ```
//! `MODE` is `in_place` (default: `Log::read_batches`), `in_place_pread` (the same under
//! `ReadPath::Pread`), `owned` (`Log::read`), `pread` (`Log::read` under `ReadPath::Pread`), `raw` (`pread` of 1 MiB + CRC of every `.log` file, decoding
//! nothing), `append` (timed: `Log::append` of batches of 100 into a new log) or `raw_write`
//! (timed: `write(2)` of as many bytes, in batch-sized chunks); `RECORDS` 2,000,000 records of
//! `SIZE` (100) bytes, appended in batches of 100 first (untimed for the reads; the log is closed
//! and reopened before the pass). With `DIR`, the log there is read if it has records, else
//! filled there first and left (so a profile can leave the fill out).

use std::error::Error;
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt as _;
use std::time::Instant;

use strata_log::{FlushPolicy, Log, LogConfig, ReadPath, Record};

const SEGMENT_BYTES: u64 = 128 << 20;
const READ_BYTES: usize = 1 << 20;

fn config(read_path: ReadPath) -> LogConfig {
    // No fsync, as the main job's append and read phases (`--durability never`).
    LogConfig { segment_bytes: SEGMENT_BYTES, read_path, flush_policy: FlushPolicy::Never, ..LogConfig::default() }
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
    if mode == "append" || mode == "raw_write" {
        return write_pass(&mode, records, size);
    }
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
    let read_path = if mode == "pread" || mode == "in_place_pread" { ReadPath::Pread } else { ReadPath::Mmap };
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
            next = if mode.starts_with("in_place") {
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

/// The timed appends (`append`), or `write(2)` of the same bytes (`raw_write`).
fn write_pass(mode: &str, records: u64, size: usize) -> Result<(), Box<dyn Error>> {
    use std::io::Write as _;
    let dir = tempfile::tempdir()?;
    let value = vec![0xa5u8; size];
    let batch: Vec<Record<'_>> = (0..100).map(|_| Record::new(&value)).collect();
    let calls = records.div_ceil(100);
    let (took, bytes) = if mode == "append" {
        let log = Log::open(dir.path(), config(ReadPath::Mmap))?;
        let started = Instant::now();
        for _ in 0..calls {
            log.append(&batch)?;
        }
        let took = started.elapsed();
        let bytes = log.metrics().bytes_appended;
        log.close()?;
        (took, bytes)
    } else {
        // What the log writes for such a batch: the values plus ~12 bytes of framing each.
        let chunk = vec![0x5au8; 100 * (size + 12) + 61];
        let mut file = File::create(dir.path().join("raw"))?;
        let started = Instant::now();
        for _ in 0..calls {
            file.write_all(&chunk)?;
        }
        (started.elapsed(), calls * chunk.len() as u64)
    };
    println!(
        "{mode}: {} records ({bytes} bytes) in {took:.2?}: {:.1}M records/s, {:.0} MB/s",
        calls * 100,
        (calls * 100) as f64 / took.as_secs_f64() / 1e6,
        bytes as f64 / took.as_secs_f64() / 1e6
    );
    Ok(())
}
