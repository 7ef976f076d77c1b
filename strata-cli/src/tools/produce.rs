//! `strata produce`: records from a byte stream (lines, another delimiter, NUL-separated or
//! length-prefixed), with keys, headers and timestamps, appended in batches. Stops cleanly when
//! asked to (Ctrl-C): the batch being read is appended, nothing is lost half-way.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ToolError;
use super::text::{human_bytes, parse_record_time_ms};
use strata_log::internals::format::{BATCH_HEADER_LEN, MAX_BATCH_LEN};
use strata_log::internals::max_record_len;
use strata_log::{Error, Header, Log, Record};

/// How records are cut out of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// Each record ends with this byte string (a newline by default; `\0` for NUL-separated input).
    /// The last record needs no delimiter.
    Delimited(Vec<u8>),
    /// Each record is a 4-byte big-endian length and then that many bytes.
    LengthPrefixed,
}

/// Options of [`produce`].
#[derive(Debug, Clone)]
pub struct ProduceOptions {
    /// Flush after each batch and report each record's offset only once it is durable.
    pub sync: bool,
    /// Records per append (a smaller batch is appended at the end of the input or on a stop).
    pub batch: usize,
    /// Report offsets as soon as the append returns (durable under `FlushPolicy::Always`).
    pub print_offsets: bool,
    /// How records are cut out of the input.
    pub framing: Framing,
    /// Split each record at the first occurrence into key and value (kcat's `-K`); a record without
    /// it has no key.
    pub key_separator: Option<Vec<u8>>,
    /// Each record starts with a timestamp (milliseconds or ISO 8601) ended by this separator.
    pub timestamp_separator: Option<Vec<u8>>,
    /// The timestamp of every record (create time); `None`: the log's append time.
    pub timestamp_ms: Option<i64>,
    /// Headers added to every record.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// An empty key or value is stored as absent (an empty value is then a tombstone), kcat's `-Z`.
    pub empty_as_null: bool,
    /// Refuse a record that is not valid UTF-8, naming its line (otherwise bytes are stored as they
    /// are).
    pub require_utf8: bool,
    /// The log's `max_batch_bytes`: a record that cannot fit in a batch is refused, naming its line,
    /// and batches are appended early rather than grow past it.
    pub max_batch_bytes: u64,
}

impl ProduceOptions {
    /// Checks what cannot work before anything is read or opened: empty separators, delimiters
    /// and header keys.
    pub fn validate(&self) -> Result<(), ToolError> {
        let usage = |what: &str| Err(ToolError::Usage(what.to_owned()));
        if self.framing == Framing::Delimited(Vec::new()) {
            return usage("the delimiter (-D) is empty: give one (\\n, \\t, \\0, \\xNN escapes work)");
        }
        if self.key_separator.as_ref().is_some_and(Vec::is_empty) {
            return usage("the key separator (-K) is empty: give one, or leave -K out for records without keys");
        }
        if self.timestamp_separator.as_ref().is_some_and(Vec::is_empty) {
            return usage("the timestamp separator (--timestamp-separator) is empty: give one");
        }
        if self.headers.iter().any(|(key, _)| key.is_empty()) {
            return usage("a header (-H) has an empty key: write key=value, or key alone for no value");
        }
        if self.batch == 0 {
            return usage("--batch must be at least 1");
        }
        Ok(())
    }
}

impl Default for ProduceOptions {
    fn default() -> ProduceOptions {
        ProduceOptions {
            sync: false,
            batch: 1,
            print_offsets: false,
            framing: Framing::Delimited(b"\n".to_vec()),
            key_separator: None,
            timestamp_separator: None,
            timestamp_ms: None,
            headers: Vec::new(),
            empty_as_null: false,
            require_utf8: false,
            max_batch_bytes: strata_log::LogConfig::default().max_batch_bytes,
        }
    }
}

/// What [`produce`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProduceSummary {
    /// Records appended.
    pub records: u64,
    /// Key and value bytes appended.
    pub bytes: u64,
    /// Offset of the first record appended.
    pub first_offset: Option<u64>,
    /// Offset of the last record appended.
    pub last_offset: Option<u64>,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Stopped by a signal before the end of the input.
    pub interrupted: bool,
}

impl ProduceSummary {
    /// Records per second.
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.seconds.max(1e-9)
    }

    /// Bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(1e-9)
    }
}

/// One record as read: its bytes and the line (record number, from 1) it came from.
type Raw = (u64, Vec<u8>);

/// The log [`produce`] appends to: opened by `open` only once the first batch is ready (or at the
/// end of an input with no records), so input refused before any record is stored leaves no log
/// behind and an existing one untouched.
struct Target<'a> {
    open: Option<Box<dyn FnOnce() -> Result<Log, Error> + 'a>>,
    log: Option<Log>,
}

impl Target<'_> {
    fn get(&mut self) -> Result<&Log, ToolError> {
        if self.log.is_none() {
            let open = self.open.take().ok_or_else(|| ToolError::Usage("the log failed to open".to_owned()))?;
            self.log = Some(open()?);
        }
        self.log.as_ref().ok_or_else(|| ToolError::Usage("the log failed to open".to_owned()))
    }
}

/// Appends the records of `input` to the log `open` opens (when the first batch is ready), `batch`
/// per append, until the end of the input or until `stop` is set (then the records already read
/// are appended and it returns with `interrupted`), and closes it. With `sync` each batch is
/// flushed before its offsets are written to `out`, so a printed offset is durable. Input is read
/// on its own thread, so a stop is noticed while the input is idle.
///
/// Returns what was stored even when it fails part-way (a record refused, the disk full): the
/// records before the failure stay in the log. A failure before the first append opens nothing.
pub fn produce<'a>(
    open: impl FnOnce() -> Result<Log, Error> + 'a,
    input: impl Read + Send + 'static,
    out: &mut dyn Write,
    options: &ProduceOptions,
    stop: &AtomicBool,
) -> (ProduceSummary, Result<(), ToolError>) {
    let started = Instant::now();
    let mut summary = ProduceSummary::default();
    let mut target = Target { open: Some(Box::new(open)), log: None };
    let result = options.validate().and_then(|()| {
        let (sender, receiver) = sync_channel::<Result<Raw, ToolError>>(4096);
        let framing = options.framing.clone();
        std::thread::Builder::new()
            .name("strata-stdin".to_owned())
            .spawn(move || read_records(input, &framing, &mut |raw| sender.send(raw).is_ok()))
            .map_err(|e| ToolError::Input(format!("cannot start the input thread: {e}")))?;
        append_all(&mut target, &receiver, out, options, stop, &mut summary)
    });
    let closed = target.log.map_or(Ok(()), Log::close).map_err(ToolError::from);
    summary.seconds = started.elapsed().as_secs_f64();
    (summary, result.and(closed))
}

fn append_all(
    target: &mut Target<'_>,
    receiver: &Receiver<Result<Raw, ToolError>>,
    out: &mut dyn Write,
    options: &ProduceOptions,
    stop: &AtomicBool,
    summary: &mut ProduceSummary,
) -> Result<(), ToolError> {
    let mut pending: Vec<Parsed> = Vec::with_capacity(options.batch.max(1));
    let mut pending_bytes = BATCH_HEADER_LEN as u64;
    let unit = if options.framing == Framing::Delimited(b"\n".to_vec()) { "line" } else { "record" };
    loop {
        let (more, failure) = match receiver.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok((line, bytes))) => match parse(line, bytes, options, unit) {
                Ok(parsed) => {
                    // A batch is appended early rather than grow past max_batch_bytes.
                    if !pending.is_empty() && pending_bytes + parsed.size > options.max_batch_bytes {
                        append_batch(target.get()?, &pending, out, options, summary)?;
                        pending.clear();
                        pending_bytes = BATCH_HEADER_LEN as u64;
                    }
                    pending_bytes += parsed.size;
                    pending.push(parsed);
                    (true, None)
                }
                Err(e) => (false, Some(e)),
            },
            Ok(Err(e)) => (false, Some(e)),
            Err(RecvTimeoutError::Timeout) => (true, None),
            Err(RecvTimeoutError::Disconnected) => (false, None),
        };
        let stopping = stop.load(Ordering::Relaxed);
        if !pending.is_empty() && (pending.len() >= options.batch.max(1) || !more || stopping) {
            append_batch(target.get()?, &pending, out, options, summary)?;
            pending.clear();
            pending_bytes = BATCH_HEADER_LEN as u64;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if stopping {
            summary.interrupted = true;
        }
        if !more || stopping {
            break;
        }
    }
    // An input with no records still makes (or checks) the log.
    target.get()?.flush()?;
    Ok(())
}

/// A record parsed from its input bytes.
struct Parsed {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp_ms: Option<i64>,
    /// At most the bytes it adds to a batch.
    size: u64,
}

fn parse(line: u64, mut bytes: Vec<u8>, options: &ProduceOptions, unit: &str) -> Result<Parsed, ToolError> {
    if options.require_utf8
        && let Err(e) = std::str::from_utf8(&bytes)
    {
        return Err(ToolError::Input(format!(
            "{unit} {line}: invalid UTF-8 at byte {} (leave out --require-utf8 to store bytes as they are)",
            e.valid_up_to() + 1
        )));
    }
    let mut timestamp_ms = options.timestamp_ms;
    if let Some(separator) = &options.timestamp_separator {
        let Some(at) = find(&bytes, separator) else {
            return Err(ToolError::Input(format!("{unit} {line}: no timestamp separator")));
        };
        let text = String::from_utf8_lossy(&bytes[..at]).into_owned();
        timestamp_ms = Some(parse_record_time_ms(&text).map_err(|e| ToolError::Input(format!("{unit} {line}: {e}")))?);
        bytes.drain(..at + separator.len());
    }
    let (key, value) = match options.key_separator.as_ref().and_then(|s| find(&bytes, s).map(|at| (at, s.len()))) {
        Some((at, len)) => (Some(bytes[..at].to_vec()), bytes[at + len..].to_vec()),
        None => (None, bytes),
    };
    let null_if_empty = |b: Vec<u8>| if options.empty_as_null && b.is_empty() { None } else { Some(b) };
    let (key, value) = (key.and_then(null_if_empty), null_if_empty(value));
    let headers: Vec<Header<'_>> =
        options.headers.iter().map(|(k, v)| Header { key: k.as_str(), value: v.as_deref() }).collect();
    let record = Record { key: key.as_deref(), value: value.as_deref(), headers: &headers, timestamp_ms };
    // The largest varints a timestamp delta and an offset delta can take: an upper bound.
    let size = max_record_len(&record) as u64;
    if size + BATCH_HEADER_LEN as u64 > options.max_batch_bytes {
        return Err(ToolError::Input(format!(
            "{unit} {line}: a record of {} is larger than a batch may be (max_batch_bytes {}; --max-batch-bytes raises it, up to 64 MiB)",
            human_bytes(size),
            human_bytes(options.max_batch_bytes)
        )));
    }
    Ok(Parsed { key, value, timestamp_ms, size })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn append_batch(
    log: &Log,
    pending: &[Parsed],
    out: &mut dyn Write,
    options: &ProduceOptions,
    summary: &mut ProduceSummary,
) -> Result<(), ToolError> {
    let headers: Vec<Header<'_>> =
        options.headers.iter().map(|(k, v)| Header { key: k.as_str(), value: v.as_deref() }).collect();
    let records: Vec<Record<'_>> = pending
        .iter()
        .map(|p| Record {
            key: p.key.as_deref(),
            value: p.value.as_deref(),
            headers: &headers,
            timestamp_ms: p.timestamp_ms,
        })
        .collect();
    let info = log.append(&records)?;
    if options.sync {
        log.flush()?;
    }
    summary.records += records.len() as u64;
    summary.bytes += pending
        .iter()
        .map(|p| (p.key.as_ref().map_or(0, Vec::len) + p.value.as_ref().map_or(0, Vec::len)) as u64)
        .sum::<u64>();
    summary.first_offset.get_or_insert(info.base_offset);
    summary.last_offset = Some(info.last_offset);
    if options.sync || options.print_offsets {
        for offset in info.base_offset..=info.last_offset {
            writeln!(out, "{offset}")?;
        }
        out.flush()?;
    }
    Ok(())
}

/// Cuts `input` into records and hands each to `send` (which returns false to stop).
fn read_records(input: impl Read, framing: &Framing, send: &mut dyn FnMut(Result<Raw, ToolError>) -> bool) {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut line = 0u64;
    loop {
        line += 1;
        let record = match framing {
            Framing::Delimited(delimiter) => read_delimited(&mut input, delimiter),
            Framing::LengthPrefixed => read_length_prefixed(&mut input, line),
        };
        match record {
            Ok(Some(bytes)) => {
                if !send(Ok((line, bytes))) {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                send(Err(e));
                return;
            }
        }
    }
}

/// The next record ended by `delimiter` (or by the end of the input); `None` at the end.
fn read_delimited(input: &mut impl BufRead, delimiter: &[u8]) -> Result<Option<Vec<u8>>, ToolError> {
    let Some(&last) = delimiter.last() else {
        return Err(ToolError::Input("the delimiter is empty".to_owned()));
    };
    let mut record = Vec::new();
    loop {
        let read = input.read_until(last, &mut record).map_err(|e| ToolError::Input(format!("reading stdin: {e}")))?;
        if read == 0 {
            return Ok((!record.is_empty()).then_some(record));
        }
        if record.ends_with(delimiter) {
            record.truncate(record.len() - delimiter.len());
            return Ok(Some(record));
        }
    }
}

/// The next `[u32 big-endian length][bytes]` record; `None` at a clean end.
fn read_length_prefixed(input: &mut impl Read, line: u64) -> Result<Option<Vec<u8>>, ToolError> {
    let mut prefix = [0u8; 4];
    let got = read_full(input, &mut prefix)?;
    if got == 0 {
        return Ok(None);
    }
    if got < 4 {
        return Err(ToolError::Input(format!("record {line}: the input ends inside its 4-byte length")));
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > MAX_BATCH_LEN {
        return Err(ToolError::Input(format!("record {line}: length {len} is larger than any batch may be")));
    }
    let mut bytes = vec![0; len];
    let got = read_full(input, &mut bytes)?;
    if got < len {
        return Err(ToolError::Input(format!("record {line}: {len} bytes announced, the input ends after {got}")));
    }
    Ok(Some(bytes))
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, ToolError> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ToolError::Input(format!("reading stdin: {e}"))),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(input: &[u8], framing: Framing) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        read_records(input, &framing, &mut |r| {
            out.push(r.map(|(_, b)| b).map_err(|e| e.to_string()).expect("valid"));
            true
        });
        out
    }

    #[test]
    fn framings() {
        let lines = Framing::Delimited(b"\n".to_vec());
        assert_eq!(records(b"a\n\nb", lines.clone()), [b"a".to_vec(), vec![], b"b".to_vec()]);
        assert_eq!(records(b"a\nb\n", lines), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(records(b"a::b::", Framing::Delimited(b"::".to_vec())), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(records(b"x:\0y\0", Framing::Delimited(vec![0])), [b"x:".to_vec(), b"y".to_vec()]);
        assert_eq!(records(b"\0\0\0\x02hi\0\0\0\0", Framing::LengthPrefixed), [b"hi".to_vec(), vec![]]);
    }

    #[test]
    fn keys_timestamps_and_utf8() {
        let options = ProduceOptions {
            key_separator: Some(b":".to_vec()),
            timestamp_separator: Some(b" ".to_vec()),
            ..ProduceOptions::default()
        };
        let p = parse(1, b"2026-11-30T05:20:00Z user:a:b".to_vec(), &options, "line").expect("parses");
        assert_eq!((p.key.as_deref(), p.value.as_deref()), (Some(&b"user"[..]), Some(&b"a:b"[..])));
        assert_eq!(p.timestamp_ms, Some(1_796_016_000_000));
        let strict = ProduceOptions { require_utf8: true, ..ProduceOptions::default() };
        let refused = parse(7, b"ok\xff".to_vec(), &strict, "line").err().expect("refused").to_string();
        assert!(refused.contains("line 7") && refused.contains("byte 3"), "{refused}");
    }
}
