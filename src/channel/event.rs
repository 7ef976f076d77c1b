//! `Event`: what a channel carries (Flume's event: a body and named headers), and its record in
//! the channel's log (docs/FORMAT.md "Channel records": no key, value = body, the headers as the
//! record's headers).

use std::fmt;
use std::sync::Arc;

use crate::log::{Header, Record, RecordView};

/// An event: a body and named headers. Cloning is cheap (the contents are shared), so a take
/// hands the caller a clone while its transaction keeps the event for a rollback.
///
/// ```
/// use strata_log::Event;
/// let event = Event::new("GET /index.html 200").with_header("host", "web-1").with_header("host", "web-2");
/// assert_eq!(event.body(), b"GET /index.html 200");
/// assert_eq!(event.header("host"), Some(&b"web-2"[..]), "a name is set once: the last value wins");
/// assert_eq!(event.headers().len(), 1);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Event {
    contents: Arc<Contents>,
}

#[derive(Clone, PartialEq, Eq)]
struct Contents {
    body: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
}

impl Event {
    /// An event with `body` and no headers.
    pub fn new(body: impl Into<Vec<u8>>) -> Event {
        Event { contents: Arc::new(Contents { body: body.into(), headers: Vec::new() }) }
    }

    /// Sets header `name` to `value` (replacing a value it had), as Flume's header map does.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Event {
        let (name, value) = (name.into(), value.into());
        let contents = Arc::make_mut(&mut self.contents);
        match contents.headers.iter_mut().find(|(n, _)| *n == name) {
            Some((_, old)) => *old = value,
            None => contents.headers.push((name, value)),
        }
        self
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.contents.body
    }

    /// The headers, in the order they were first set.
    pub fn headers(&self) -> &[(String, Vec<u8>)] {
        &self.contents.headers
    }

    /// The value of header `name`, if set.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.contents.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }

    /// What the event costs against the byte capacity: its body's length (Flume's accounting;
    /// headers are what `byte_capacity_buffer_percentage` leaves room for).
    pub(crate) fn cost(&self) -> u64 {
        self.contents.body.len() as u64
    }

    /// The record's headers, borrowed from the event.
    pub(crate) fn record_headers(&self) -> Vec<Header<'_>> {
        self.contents.headers.iter().map(|(key, value)| Header { key, value: Some(value) }).collect()
    }

    /// The event as a record of the channel's log, with `headers` from [`Event::record_headers`].
    pub(crate) fn record<'a>(&'a self, headers: &'a [Header<'a>]) -> Record<'a> {
        Record::new(&self.contents.body).with_headers(headers)
    }

    /// The bytes its record takes as the record at `index` of a batch, at most.
    pub(crate) fn record_len(&self, index: usize) -> usize {
        let headers = self.record_headers();
        record_len_at(self.record(&headers).encoded_len(), index)
    }

    /// The event a record holds; `None` if the record is not an event's (it has a key or no
    /// value).
    pub(crate) fn from_record(record: &RecordView) -> Option<Event> {
        if record.key().is_some() {
            return None;
        }
        let body = record.value()?.to_vec();
        let headers = record.headers().map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec())).collect();
        Some(Event { contents: Arc::new(Contents { body, headers }) })
    }
}

/// A record whose first-record length (`Record::encoded_len`) is `first_len` takes at most this
/// much at `index` of a batch: its offset delta's varint grows with the index, and the record's
/// length prefix may take one byte more for it. Its timestamp delta stays 0: channel records take
/// the log's append time.
pub(crate) fn record_len_at(first_len: usize, index: usize) -> usize {
    first_len + zigzag_varint_len(index as u64) - 1 + 1
}

/// Bytes of the zigzag varint of the non-negative `value` (the record format's varints).
fn zigzag_varint_len(value: u64) -> usize {
    let zigzag = value << 1;
    (64 - zigzag.leading_zeros() as usize).div_ceil(7).max(1)
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, String)> =
            self.headers().iter().map(|(n, v)| (n.as_str(), String::from_utf8_lossy(v).into_owned())).collect();
        f.debug_struct("Event").field("body", &String::from_utf8_lossy(self.body())).field("headers", &headers).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths_follow_the_zigzag_encoding() {
        for (value, len) in [(0, 1), (63, 1), (64, 2), (8191, 2), (8192, 3), (1 << 19, 3), (1 << 20, 4), (1 << 27, 5)] {
            assert_eq!(zigzag_varint_len(value), len, "{value}");
        }
    }

    #[test]
    fn a_header_set_twice_keeps_its_place_and_the_last_value() {
        let event = Event::new("b").with_header("a", "1").with_header("b", "2").with_header("a", "3");
        let names: Vec<&str> = event.headers().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(event.header("a"), Some(&b"3"[..]));
        assert_eq!(event.header("c"), None);
        assert_eq!(event.cost(), 1);
    }
}
