//! `strata consume`: records of a log as text (a kcat-style `--format`) or JSON lines, from an
//! offset, a relative position or a time, up to an end offset or a count; `--follow` keeps
//! printing what another process appends.

use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Serialize;

use super::ToolError;
use super::text::{iso_ms, unescape};
use strata_log::internals::inspect;
use strata_log::{Log, LogConfig, RecordView};

/// Where consumption starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// This offset.
    Offset(u64),
    /// This many records after the log start (`beginning`, `beginning+5`).
    Beginning(u64),
    /// This many records before the end (`end`, `end-10`, `-10`).
    End(u64),
    /// The first record with a timestamp at or after this (milliseconds since the epoch).
    Time(i64),
}

impl std::str::FromStr for Start {
    type Err = String;

    /// `42`, `beginning`/`earliest`/`start` with an optional `+N`, `end`/`latest` with an optional
    /// `-N`, or `-N` alone (kcat's relative offset).
    fn from_str(text: &str) -> Result<Start, String> {
        let bad = || {
            format!(
                "{text:?}: expected an offset (42), beginning, beginning+N, end, end-N or -N (N records before the end)"
            )
        };
        let number = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
        let text_lower = text.trim().to_ascii_lowercase();
        for word in ["beginning", "earliest", "start"] {
            if let Some(rest) = text_lower.strip_prefix(word) {
                return if rest.is_empty() {
                    Ok(Start::Beginning(0))
                } else {
                    Ok(Start::Beginning(number(rest.strip_prefix('+').ok_or_else(bad)?)?))
                };
            }
        }
        for word in ["end", "latest"] {
            if let Some(rest) = text_lower.strip_prefix(word) {
                return if rest.is_empty() {
                    Ok(Start::End(0))
                } else {
                    Ok(Start::End(number(rest.strip_prefix('-').ok_or_else(bad)?)?))
                };
            }
        }
        match text_lower.strip_prefix('-') {
            Some(rest) => Ok(Start::End(number(rest)?)),
            None => Ok(Start::Offset(number(&text_lower)?)),
        }
    }
}

/// One piece of a `--format` template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Offset,
    Key,
    Value,
    TimestampMs,
    TimestampIso,
    Headers,
    KeyLen,
    ValueLen,
}

/// A kcat-style output template: `%o` offset, `%k` key, `%v` (or `%s`) value, `%T` timestamp in
/// milliseconds, `%t` timestamp as ISO 8601, `%h` headers as `k=v,k2=v2`, `%K` / `%S` key / value
/// length (-1 when absent), `%%` a percent sign; escapes `\n`, `\t`, `\0`, `\xNN`. A newline is
/// added after each record unless the template ends with one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Token>);

impl std::str::FromStr for Template {
    type Err = String;

    fn from_str(text: &str) -> Result<Template, String> {
        let bytes = unescape(text)?;
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut iter = bytes.iter().copied();
        while let Some(b) = iter.next() {
            if b != b'%' {
                literal.push(b);
                continue;
            }
            let token = match iter.next() {
                Some(b'o') => Token::Offset,
                Some(b'k') => Token::Key,
                Some(b'v' | b's') => Token::Value,
                Some(b'T') => Token::TimestampMs,
                Some(b't') => Token::TimestampIso,
                Some(b'h') => Token::Headers,
                Some(b'K') => Token::KeyLen,
                Some(b'S') => Token::ValueLen,
                Some(b'%') => {
                    literal.push(b'%');
                    continue;
                }
                Some(other) => {
                    return Err(format!(
                        "{text:?}: unknown %{} (use %o %k %v %T %t %h %K %S or %%)",
                        char::from(other)
                    ));
                }
                None => return Err(format!("{text:?}: ends with a lone %")),
            };
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(token);
        }
        // Literals are pushed only before a field, so `literal` is the template's whole tail.
        if !literal.ends_with(b"\n") {
            literal.push(b'\n');
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        Ok(Template(tokens))
    }
}

impl Default for Template {
    fn default() -> Template {
        Template(vec![Token::Offset, Token::Literal(b"\t".to_vec()), Token::Value, Token::Literal(b"\n".to_vec())])
    }
}

/// How records are printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Through a template; absent keys and values print as `null_text`.
    Text {
        /// The template.
        template: Template,
        /// What an absent key or value (a tombstone) prints as: empty by default, `NULL` with `-Z`.
        null_text: Vec<u8>,
    },
    /// One JSON object per line.
    Json,
}

/// Options of [`consume`].
#[derive(Debug, Clone)]
pub struct ConsumeOptions {
    /// Where to start.
    pub start: Start,
    /// Stop before this offset.
    pub end: Option<u64>,
    /// Stop after this many records.
    pub max_messages: Option<u64>,
    /// At the end, wait for more records instead of exiting.
    pub follow: bool,
    /// How often `follow` looks for new records.
    pub poll: Duration,
    /// How records are printed.
    pub output: Output,
}

impl Default for ConsumeOptions {
    fn default() -> ConsumeOptions {
        ConsumeOptions {
            start: Start::Beginning(0),
            end: None,
            max_messages: None,
            follow: false,
            poll: Duration::from_millis(100),
            output: Output::Text { template: Template::default(), null_text: Vec::new() },
        }
    }
}

/// What [`consume`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConsumeSummary {
    /// Records printed.
    pub records: u64,
    /// Where a following consume would continue.
    pub next_offset: u64,
    /// Stopped by a signal.
    pub interrupted: bool,
}

/// Prints the records of the log in `dir` to `out`. The log is opened read-only (no lock, nothing
/// changed: safe beside a live writer); with `follow`, a read-only view cannot be woken by a writer
/// in another process, so the log is looked at again every `poll` until `stop` is set.
pub fn consume(
    dir: &Path,
    config: &LogConfig,
    options: &ConsumeOptions,
    out: &mut dyn Write,
    stop: &AtomicBool,
) -> Result<ConsumeSummary, ToolError> {
    if let (Start::Offset(from), Some(to)) = (&options.start, options.end)
        && *from > to
    {
        return Err(ToolError::Usage(format!("--from {from} is after --to {to}: nothing would be printed")));
    }
    let mut log = Log::open_read_only(dir, config.clone())?;
    let mut next = resolve_start(&log, options)?;
    // With --follow a start past the end is waited for, not a truncation to follow back.
    let mut reached = next <= log.visible_end();
    if !reached {
        tracing::info!(offset = next, end = log.visible_end(), "past the end of the log: waiting for it");
    }
    let mut summary = ConsumeSummary::default();
    let limit = options.max_messages.unwrap_or(u64::MAX);
    let end = data_end(dir, options.end.unwrap_or(u64::MAX))?;
    // Read failures in a row at the same offset: with --follow, a writer truncating or deleting
    // under the view makes a read fail once; a fresh view then reads on. Damage fails every time.
    let mut failures = 0;
    loop {
        if reached && next < end && summary.records < limit {
            let before = next;
            let failed;
            (next, failed) = print_records(&log, next..end, options, out, stop, &mut summary)?;
            failures = if next > before { 0 } else { failures };
            if let Some(e) = failed {
                failures += 1;
                if !options.follow || failures > FOLLOW_READ_RETRIES {
                    out.flush()?;
                    return Err(e.into());
                }
                tracing::debug!(error = %e, offset = next, "read failed under a live writer: looking at the log again");
            }
        }
        out.flush()?;
        let finished = summary.records >= limit || next >= end;
        if stop.load(Ordering::Relaxed) {
            summary.interrupted = !finished;
            break;
        }
        if finished || !options.follow {
            break;
        }
        match wait_for_more(dir, config, next, reached, options.poll, stop) {
            Some((newer, from)) => {
                (log, next) = (newer, from);
                reached = true;
            }
            None => {
                summary.interrupted = true;
                break;
            }
        }
    }
    summary.next_offset = next;
    Ok(summary)
}

/// `end`, or where the data ends if that is before it: an empty stray `.log` last
/// (docs/DESIGN.md §4) is not where the log ends, but a read-only view takes its base for the end
/// and would blame the healthy segment before it.
fn data_end(dir: &Path, end: u64) -> Result<u64, ToolError> {
    if let (foreign, Some(real_end)) = inspect::empty_foreign_files(dir)? {
        let files: Vec<String> = foreign.iter().map(|f| f.display().to_string()).collect();
        tracing::warn!(files = %files.join(", "), end = real_end, "foreign segment file left out; `strata verify` names it");
        return Ok(end.min(real_end));
    }
    Ok(end)
}

/// One pass over `range` of `log`: prints its records until the range ends, `max_messages` are
/// printed or `stop` is set. Returns the offset it got to and the read failure that ended it, if
/// one did (the records before the failure are printed).
fn print_records(
    log: &Log,
    range: Range<u64>,
    options: &ConsumeOptions,
    out: &mut dyn Write,
    stop: &AtomicBool,
    summary: &mut ConsumeSummary,
) -> Result<(u64, Option<strata_log::Error>), ToolError> {
    let limit = options.max_messages.unwrap_or(u64::MAX);
    let next = range.start;
    let mut records = match log.records(range) {
        Ok(records) => records,
        Err(e) => return Ok((next, Some(e))),
    };
    let mut failed = None;
    for record in records.by_ref() {
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        write_record(out, &record, &options.output)?;
        summary.records += 1;
        if summary.records >= limit || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok((next.max(records.next_offset()), failed))
}

/// How often `--follow` opens a fresh view after a read fails at one offset before it gives up.
const FOLLOW_READ_RETRIES: u32 = 5;

/// The first offset to print, from the options and the log as it is now.
fn resolve_start(log: &Log, options: &ConsumeOptions) -> Result<u64, ToolError> {
    let (start, end) = (log.start_offset(), log.visible_end());
    let from = match options.start {
        Start::Offset(o) if o < start => {
            return Err(ToolError::Usage(format!(
                "offset {o} is before the log start {start} (records before it were deleted); use --from beginning"
            )));
        }
        Start::Offset(o) if o > end && !options.follow => {
            return Err(ToolError::Usage(format!(
                "offset {o} is past the end of the log ({end}); use --follow to wait for it"
            )));
        }
        Start::Offset(o) => o,
        Start::Beginning(n) => start.saturating_add(n).min(end),
        Start::End(n) => end.saturating_sub(n).max(start),
        Start::Time(ms) => log.offset_for_timestamp(ms)?.unwrap_or(end),
    };
    Ok(from)
}

/// Polls until the log has records at or past `next` (returning a fresh view and where to go on
/// from) or `stop` is set (`None`). A truncation or deletion that moved past `next` is reported
/// and followed; until `reached` (a start past the end), a log ending before `next` is waited on.
fn wait_for_more(
    dir: &Path,
    config: &LogConfig,
    next: u64,
    reached: bool,
    poll: Duration,
    stop: &AtomicBool,
) -> Option<(Log, u64)> {
    loop {
        let deadline = Instant::now() + poll;
        while Instant::now() < deadline {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(poll.min(Duration::from_millis(20)));
        }
        let log = match Log::open_read_only(dir, config.clone()) {
            Ok(log) => log,
            Err(e) => {
                // A writer renaming or removing files between the listing and the reads: look again.
                tracing::debug!(error = %e, "looking at the log again");
                continue;
            }
        };
        let (start, end) = (log.start_offset(), log.visible_end());
        if end < next && reached {
            tracing::warn!("the log was truncated to offset {end}; continuing from there");
            return Some((log, end));
        }
        if start > next {
            tracing::warn!("records before offset {start} were deleted; continuing from {start}");
            return Some((log, start));
        }
        if end > next && start <= next {
            return Some((log, next));
        }
    }
}

fn write_record(out: &mut dyn Write, record: &RecordView, output: &Output) -> Result<(), ToolError> {
    match output {
        Output::Json => {
            serde_json::to_writer(&mut *out, &json_record(record)).map_err(std::io::Error::from)?;
            out.write_all(b"\n")?;
        }
        Output::Text { template, null_text } => {
            for token in &template.0 {
                write_token(out, token, record, null_text)?;
            }
        }
    }
    Ok(())
}

fn write_token(out: &mut dyn Write, token: &Token, record: &RecordView, null_text: &[u8]) -> std::io::Result<()> {
    let len = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i64);
    match token {
        Token::Literal(bytes) => out.write_all(bytes),
        Token::Offset => write!(out, "{}", record.offset()),
        Token::Key => out.write_all(record.key().unwrap_or(null_text)),
        Token::Value => out.write_all(record.value().unwrap_or(null_text)),
        Token::TimestampMs => write!(out, "{}", record.timestamp_ms()),
        Token::TimestampIso => out.write_all(iso_ms(record.timestamp_ms()).as_bytes()),
        Token::KeyLen => write!(out, "{}", len(record.key())),
        Token::ValueLen => write!(out, "{}", len(record.value())),
        Token::Headers => {
            for (i, header) in record.headers().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}=", header.key)?;
                out.write_all(header.value.unwrap_or(null_text))?;
            }
            Ok(())
        }
    }
}

/// A record as JSON: text fields are strings when they are UTF-8 and base64 otherwise (with
/// `key_encoding` / `value_encoding: "base64"`); an absent key or value (a tombstone) is `null`.
#[derive(Debug, Serialize)]
pub struct JsonRecord {
    /// The offset.
    pub offset: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// The same as ISO 8601.
    pub timestamp: String,
    /// The key.
    pub key: Option<String>,
    /// `base64` when the key is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_encoding: Option<&'static str>,
    /// The value (`null`: a tombstone).
    pub value: Option<String>,
    /// `base64` when the value is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_encoding: Option<&'static str>,
    /// The headers, in order (a key may repeat).
    pub headers: Vec<JsonHeader>,
}

/// A header as JSON.
#[derive(Debug, Serialize)]
pub struct JsonHeader {
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: Option<String>,
    /// `base64` when the value is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_encoding: Option<&'static str>,
}

/// `record` as [`JsonRecord`].
pub fn json_record(record: &RecordView) -> JsonRecord {
    let (key, key_encoding) = encode(record.key());
    let (value, value_encoding) = encode(record.value());
    let headers = record
        .headers()
        .map(|h| {
            let (value, value_encoding) = encode(h.value);
            JsonHeader { key: h.key.to_owned(), value, value_encoding }
        })
        .collect();
    JsonRecord {
        offset: record.offset(),
        timestamp_ms: record.timestamp_ms(),
        timestamp: iso_ms(record.timestamp_ms()),
        key,
        key_encoding,
        value,
        value_encoding,
        headers,
    }
}

/// Bytes as a JSON string: as they are when UTF-8, else base64 (and the encoding's name).
fn encode(bytes: Option<&[u8]>) -> (Option<String>, Option<&'static str>) {
    match bytes.map(|b| (b, std::str::from_utf8(b))) {
        None => (None, None),
        Some((_, Ok(text))) => (Some(text.to_owned()), None),
        Some((b, Err(_))) => (Some(base64::engine::general_purpose::STANDARD.encode(b)), Some("base64")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_parse() {
        assert_eq!("42".parse(), Ok(Start::Offset(42)));
        assert_eq!("end-10".parse(), Ok(Start::End(10)));
        assert_eq!("-3".parse(), Ok(Start::End(3)));
        assert_eq!("latest".parse(), Ok(Start::End(0)));
        assert_eq!("beginning+5".parse(), Ok(Start::Beginning(5)));
        assert_eq!("earliest".parse(), Ok(Start::Beginning(0)));
        assert!("end+3".parse::<Start>().is_err());
        assert!("soon".parse::<Start>().is_err());
    }

    #[test]
    fn templates_parse() {
        let t: Template = "%o %k=%v".parse().expect("valid");
        assert_eq!(t.0.last(), Some(&Token::Literal(b"\n".to_vec())), "a newline is added");
        let t: Template = r"%o\n".parse().expect("valid");
        assert_eq!(t.0, [Token::Offset, Token::Literal(b"\n".to_vec())], "not twice");
        assert!("%q".parse::<Template>().is_err());
        assert!("100%".parse::<Template>().is_err());
    }
}
