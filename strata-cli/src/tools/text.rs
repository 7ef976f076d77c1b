//! Text helpers shared by the commands: human-readable sizes, ISO 8601 timestamps, escapes.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `1536` → `"1.5 KiB"`; below 1 KiB the exact count, `"512 B"`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Milliseconds since the Unix epoch as ISO 8601 in UTC with milliseconds,
/// `2026-11-30T05:36:51.123Z`; a timestamp outside the calendar's range stays a number.
pub fn iso_ms(timestamp_ms: i64) -> String {
    let nanos = i128::from(timestamp_ms) * 1_000_000;
    match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => {
            let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
            let (h, mi, s, ms) = (t.hour(), t.minute(), t.second(), t.millisecond());
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
        }
        Err(_) => format!("{timestamp_ms} ms"),
    }
}

/// A point in time as the user writes it: milliseconds since the Unix epoch (`1796016000000`), or
/// ISO 8601 / RFC 3339 (`2026-11-30T05:36:51Z`, `2026-11-30T06:36:51+01:00`,
/// `2026-11-30T05:36:51.5`, `2026-11-30 05:36`, `2026-11-30`); without an offset the time is UTC.
pub fn parse_time_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let normalised = normalise_iso(text);
    let parsed = OffsetDateTime::parse(&normalised, &Rfc3339).map_err(|e| {
        format!("{text:?} is neither milliseconds since the epoch nor an ISO 8601 time like 2026-11-30T05:36:51Z ({e})")
    })?;
    i64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).map_err(|_| format!("{text:?} is out of range"))
}

/// The latest timestamp a record may carry: 9999-12-31T23:59:59.999Z, the last one ISO 8601 writes
/// with four year digits.
pub const MAX_RECORD_TIME_MS: i64 = 253_402_300_799_999;

/// [`parse_time_ms`] for a record's own timestamp, which must be from the epoch (records cannot
/// carry a negative one) up to [`MAX_RECORD_TIME_MS`].
pub fn parse_record_time_ms(text: &str) -> Result<i64, String> {
    let ms = parse_time_ms(text)?;
    if !(0..=MAX_RECORD_TIME_MS).contains(&ms) {
        return Err(format!(
            "{:?} is out of range: a record's timestamp is from 1970-01-01T00:00:00Z (0) to \
             9999-12-31T23:59:59.999Z ({MAX_RECORD_TIME_MS} ms)",
            text.trim()
        ));
    }
    Ok(ms)
}

/// Fills in what RFC 3339 requires and ISO 8601 users often leave out: a time for a bare date,
/// seconds, and the UTC offset; a space between date and time becomes `T`.
fn normalise_iso(text: &str) -> String {
    let mut s = text.replacen(' ', "T", 1);
    if s.len() == 10 {
        s.push_str("T00:00:00");
    }
    let has_offset = s.ends_with('Z')
        || s.ends_with('z')
        || s.get(10..).is_some_and(|time| time.contains('+') || time.contains('-'));
    if !has_offset {
        // `HH:MM` without seconds.
        if s.len() == 16 {
            s.push_str(":00");
        }
        s.push('Z');
    }
    s
}

/// `one` if `n` is 1, else `many`: `format!("{n} {}", plural(n, "record", "records"))`.
pub fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// `n` and what it counts: `1 pass`, `2 passes`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", plural(n, one, many))
}

/// Interprets the escapes a shell makes awkward to type: `\n`, `\t`, `\r`, `\0`, `\\` and `\xNN`.
/// Any other backslash is kept as it is.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' || i + 1 == bytes.len() {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let (byte, used) = match bytes[i + 1] {
            b'n' => (b'\n', 2),
            b't' => (b'\t', 2),
            b'r' => (b'\r', 2),
            b'0' => (0, 2),
            b'\\' => (b'\\', 2),
            b'x' => {
                let hex = text.get(i + 2..i + 4).ok_or_else(|| format!("{text:?}: \\x needs two hex digits"))?;
                let byte = u8::from_str_radix(hex, 16).map_err(|_| format!("{text:?}: \\x{hex} is not hex"))?;
                (byte, 4)
            }
            other => (other, 0),
        };
        if used == 0 {
            out.push(b'\\');
            i += 1;
        } else {
            out.push(byte);
            i += used;
        }
    }
    Ok(out)
}

/// A byte string for a person: as text when it is UTF-8, else with `\xNN` escapes for the bytes
/// that are not.
pub fn display_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_human() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
    }

    #[test]
    fn times_parse_and_print_as_iso_8601() {
        assert_eq!(parse_time_ms("1796016000000"), Ok(1_796_016_000_000));
        assert_eq!(parse_time_ms("2026-11-30T05:20:00Z"), Ok(1_796_016_000_000));
        assert_eq!(parse_time_ms("2026-11-30T06:20:00+01:00"), Ok(1_796_016_000_000));
        assert_eq!(parse_time_ms("2026-11-30 05:20"), Ok(1_796_016_000_000));
        assert_eq!(parse_time_ms("2026-11-30"), Ok(1_795_996_800_000));
        assert_eq!(parse_time_ms("2026-11-30T05:20:00.250"), Ok(1_796_016_000_250));
        assert!(parse_time_ms("yesterday").is_err());
        assert!(parse_record_time_ms("-5").is_err_and(|e| e.contains("1970-01-01T00:00:00Z")));
        assert!(parse_record_time_ms("99999999999999999").is_err());
        assert_eq!(parse_record_time_ms("9999-12-31T23:59:59.999Z"), Ok(MAX_RECORD_TIME_MS));
        assert_eq!(iso_ms(1_796_016_000_250), "2026-11-30T05:20:00.250Z");
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape(r"a\tb\n\0\x41\\\q").expect("valid"), b"a\tb\n\0A\\\\q");
        assert!(unescape(r"\xZZ").is_err());
        assert_eq!(display_bytes(b"ok\xff"), "ok\\xff");
    }
}
