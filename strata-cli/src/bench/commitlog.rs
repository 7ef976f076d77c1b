//! The peer's phases: the `commitlog` crate (0.2), the closest embeddable Rust log (segmented,
//! a CRC-32C per message, a sparse offset index), on the workloads of the log's 100-byte phases
//! — appends of batches without fsync, and one pass over a freshly opened log with 1 MiB reads —
//! so the comparison with it comes from the main job, in the same sitting as strata's figures.

use std::path::Path;
use std::time::Instant;

use commitlog::message::{MessageBuf, MessageSet};
use commitlog::{CommitLog, LogOptions, ReadLimit};
use strata_log::Result;
use strata_log::internals::io_error;

use super::{BenchOptions, BenchResult, result, size_name};

type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// Bytes per read call, as strata's read phases.
const READ_BYTES: usize = 1 << 20;

fn open(dir: &Path) -> Result<CommitLog> {
    let mut options = LogOptions::new(dir);
    options.segment_max_bytes(256 << 20).message_max_bytes(8 << 20);
    CommitLog::new(options).map_err(io_error("open commitlog", dir))
}

/// A failure of the peer, as an I/O error naming what it was doing.
fn peer_error(op: &'static str, dir: &Path) -> impl FnOnce(String) -> strata_log::Error {
    let error = io_error(op, dir);
    move |text| error(std::io::Error::other(text))
}

/// `records` messages of `size` bytes appended to a new commitlog at `dir`, `options.batch` per
/// call (`commitlog_append_<size>`). The log is left for [`read`].
pub(super) fn append(
    dir: &Path,
    options: &BenchOptions,
    size: usize,
    records: u64,
    progress: Progress<'_>,
) -> Result<BenchResult> {
    let name = format!("commitlog_append_{}", size_name(size));
    let mut log = open(dir)?;
    let value = vec![0xa5u8; size];
    let mut batch = MessageBuf::default();
    for _ in 0..options.batch.max(1) {
        batch.push(&value).map_err(|e| peer_error("build a commitlog batch", dir)(format!("{e:?}")))?;
    }
    let calls = records.div_ceil(batch.len() as u64);
    let mut latencies = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for call in 0..calls {
        let t = Instant::now();
        log.append(&mut batch).map_err(|e| peer_error("commitlog append", dir)(format!("{e:?}")))?;
        latencies.push(t.elapsed());
        if call % 1024 == 0 {
            progress(&name, call, calls);
        }
    }
    let elapsed = started.elapsed();
    log.flush().map_err(io_error("commitlog flush", dir))?;
    let count = calls * batch.len() as u64;
    Ok(result(&name, count, count * size as u64, elapsed, latencies))
}

/// One pass over the commitlog at `dir` (written by [`append`]), freshly opened, in reads of
/// 1 MiB, each message's CRC checked by the peer and its payload looked at
/// (`commitlog_read_<size>`).
pub(super) fn read(dir: &Path, size: usize, progress: Progress<'_>) -> Result<BenchResult> {
    let name = format!("commitlog_read_{}", size_name(size));
    let log = open(dir)?;
    let end = log.next_offset();
    let (mut next, mut count, mut bytes) = (0u64, 0u64, 0u64);
    let mut latencies = Vec::new();
    let started = Instant::now();
    while next < end {
        let t = Instant::now();
        let messages = log
            .read(next, ReadLimit::max_bytes(READ_BYTES))
            .map_err(|e| peer_error("commitlog read", dir)(format!("{e:?}")))?;
        for message in messages.iter() {
            bytes += message.payload().len() as u64;
            count += 1;
            next = message.offset() + 1;
        }
        latencies.push(t.elapsed());
        if messages.is_empty() {
            return Err(peer_error("commitlog read", dir)(format!("nothing at offset {next} of {end}")));
        }
        progress(&name, next, end);
    }
    Ok(result(&name, count, bytes, started.elapsed(), latencies))
}
