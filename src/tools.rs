//! The `strata produce` and `strata consume` commands as library functions over any reader and
//! writer, so they are tested without a process.

use std::io::{BufRead, Write};

use crate::error::{Error, Result};
use crate::log::{Log, Record};

/// Options of [`produce`].
#[derive(Debug, Clone, Copy)]
pub struct ProduceOptions {
    /// Flush after each batch and report each record's offset only once it is durable.
    pub sync: bool,
    /// Lines per append (a smaller batch is appended at end of input).
    pub batch: usize,
    /// Report offsets as soon as they are stored, before they are durable (ignored with `sync`).
    pub print_offsets: bool,
}

/// Appends each line of `input` (without its line ending) as one record, `batch` lines per append.
/// With `sync`, each batch is flushed, then the offset of each of its records is written to `out`,
/// one per line, and `out` is flushed: a printed offset is durable. Returns the records appended.
pub fn produce(log: &Log, input: impl BufRead, out: &mut dyn Write, options: ProduceOptions) -> Result<u64> {
    let mut lines: Vec<String> = Vec::with_capacity(options.batch);
    let mut appended = 0;
    let mut input = input.lines();
    loop {
        let line = input.next().transpose().map_err(Error::io("read", "stdin"))?;
        if let Some(line) = line {
            lines.push(line);
            if lines.len() < options.batch.max(1) {
                continue;
            }
        }
        if lines.is_empty() {
            break;
        }
        let records: Vec<Record<'_>> = lines.iter().map(|l| Record::new(l.as_bytes())).collect();
        let info = log.append(&records)?;
        appended += records.len() as u64;
        lines.clear();
        if options.sync {
            log.flush()?;
        }
        if options.sync || options.print_offsets {
            for offset in info.base_offset..=info.last_offset {
                writeln!(out, "{offset}").map_err(write_error)?;
            }
            out.flush().map_err(write_error)?;
        }
    }
    log.flush()?;
    Ok(appended)
}

/// Writes every visible record from `from` (default: the log start) to `out`: `offset<TAB>value`
/// lines, or with `json` one object per line with offset, timestamp, key and value (as UTF-8,
/// invalid bytes replaced). Returns the records written.
pub fn consume(log: &Log, from: Option<u64>, json: bool, out: &mut dyn Write) -> Result<u64> {
    let mut next = from.unwrap_or(log.start_offset()).max(log.start_offset());
    let end = log.visible_end();
    let mut written = 0;
    while next < end {
        let mut reader = log.read(next, 1 << 20)?;
        for record in reader.by_ref() {
            let record = record?;
            let value = record.value().unwrap_or_default();
            if json {
                let line = serde_json::json!({
                    "offset": record.offset(),
                    "timestamp_ms": record.timestamp_ms(),
                    "key": record.key().map(String::from_utf8_lossy),
                    "value": String::from_utf8_lossy(value),
                });
                writeln!(out, "{line}").map_err(write_error)?;
            } else {
                write!(out, "{}\t", record.offset()).map_err(write_error)?;
                out.write_all(value).map_err(write_error)?;
                writeln!(out).map_err(write_error)?;
            }
            written += 1;
        }
        next = reader.next_offset();
    }
    out.flush().map_err(write_error)?;
    Ok(written)
}

fn write_error(source: std::io::Error) -> Error {
    Error::Io { op: "write", path: "stdout".into(), source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;

    #[test]
    fn produce_then_consume_round_trips_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        let mut acks = Vec::new();
        let options = ProduceOptions { sync: true, batch: 2, print_offsets: false };
        let n = produce(&log, &b"one\ntwo\nthree\n"[..], &mut acks, options).expect("produce");
        assert_eq!(n, 3);
        assert_eq!(String::from_utf8(acks).expect("utf8"), "0\n1\n2\n");
        let mut out = Vec::new();
        consume(&log, Some(1), false, &mut out).expect("consume");
        assert_eq!(String::from_utf8(out).expect("utf8"), "1\ttwo\n2\tthree\n");
        let mut out = Vec::new();
        consume(&log, None, true, &mut out).expect("consume");
        let first: serde_json::Value =
            serde_json::from_slice(out.split(|&b| b == b'\n').next().expect("line")).expect("json");
        assert_eq!(first["offset"], 0);
        assert_eq!(first["value"], "one");
    }
}
