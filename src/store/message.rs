//! A message of the store, and how it is one record of the commit log (docs/FORMAT.md "Message
//! records"): value = body, key = the first key, headers = topic, queue, queue offset, tag, keys,
//! born timestamp and user properties.

use std::ops::Range;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::format::{
    MAX_TOPIC_LEN, MESSAGE_BORN_HEADER, MESSAGE_HEADER_PREFIX, MESSAGE_KEY_HEADER, MESSAGE_QUEUE_HEADER,
    MESSAGE_QUEUE_OFFSET_HEADER, MESSAGE_TAG_HEADER, MESSAGE_TOPIC_HEADER,
};
use crate::log::{Header, Record, RecordView};

/// A message to put: a body for a topic's queue, with an optional tag, keys (each indexed for
/// `query_by_key`), properties and the producer's timestamp.
///
/// ```
/// use strata_log::Message;
/// let message = Message::new("orders", 3, &b"{\"id\": 17}"[..])
///     .with_tag("created")
///     .with_keys(["order-17"])
///     .with_property("source", &b"web"[..])
///     .with_born_timestamp(1_700_000_000_000);
/// assert_eq!((message.topic(), message.queue_id(), message.tag()), ("orders", 3, Some("created")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    topic: String,
    queue_id: u32,
    body: Vec<u8>,
    tag: Option<String>,
    keys: Vec<String>,
    properties: Vec<(String, Vec<u8>)>,
    born_timestamp_ms: Option<i64>,
}

impl Message {
    /// A message with `body` for queue `queue_id` of `topic`.
    pub fn new(topic: impl Into<String>, queue_id: u32, body: impl Into<Vec<u8>>) -> Message {
        Message {
            topic: topic.into(),
            queue_id,
            body: body.into(),
            tag: None,
            keys: Vec::new(),
            properties: Vec::new(),
            born_timestamp_ms: None,
        }
    }

    /// Sets the tag (one per message, as RocketMQ's): consumers can filter a queue by it.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Message {
        self.tag = Some(tag.into());
        self
    }

    /// Sets the keys; every key is indexed (`query_by_key`), the first is the record's key.
    pub fn with_keys<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Message {
        self.keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a user property (a name not starting with `strata.`).
    pub fn with_property(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> Message {
        self.properties.push((name.into(), value.into()));
        self
    }

    /// Sets the producer's timestamp (kept in a header; the record's timestamp is the store's
    /// append time, so it never goes backwards and time lookups can binary-search).
    pub fn with_born_timestamp(mut self, timestamp_ms: i64) -> Message {
        self.born_timestamp_ms = Some(timestamp_ms);
        self
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The queue id.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The keys.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Checks what the store can hold: a valid topic name, a queue id below `max_queues`,
    /// non-empty tag and keys, property names outside the reserved prefix.
    pub(crate) fn validate(&self, max_queues: u32) -> Result<()> {
        validate_topic(&self.topic)?;
        if self.queue_id >= max_queues {
            return Err(Error::InvalidQueue { queue_id: self.queue_id, max: max_queues });
        }
        let invalid = |what, name: &str, reason| Error::InvalidField { what, name: name.to_owned(), reason };
        if let Some(tag) = &self.tag
            && tag.is_empty()
        {
            return Err(invalid("tag", tag, "empty (leave the tag out instead)"));
        }
        if let Some(key) = self.keys.iter().find(|k| k.is_empty()) {
            return Err(invalid("key", key, "empty"));
        }
        for (name, _) in &self.properties {
            if name.is_empty() {
                return Err(invalid("property", name, "empty name"));
            }
            if name.starts_with(MESSAGE_HEADER_PREFIX) {
                return Err(invalid("property", name, "names starting with `strata.` are the store's"));
            }
        }
        Ok(())
    }

    /// Calls `f` with the record this message is at `queue_offset` (its headers live on this
    /// stack frame, so the record borrows them).
    #[cfg(test)]
    pub(crate) fn with_record<R>(&self, queue_offset: u64, f: impl FnOnce(&Record<'_>) -> R) -> R {
        let fixed = FixedFields::new(self, queue_offset);
        let headers = self.headers(&fixed);
        f(&self.record(&headers))
    }

    /// The record's headers: the store's fields, then the user's properties.
    pub(crate) fn headers<'a>(&'a self, fixed: &'a FixedFields) -> Vec<Header<'a>> {
        let mut headers = Vec::with_capacity(5 + self.keys.len() + self.properties.len());
        headers.push(header(MESSAGE_TOPIC_HEADER, self.topic.as_bytes()));
        headers.push(header(MESSAGE_QUEUE_HEADER, &fixed.queue));
        headers.push(header(MESSAGE_QUEUE_OFFSET_HEADER, &fixed.queue_offset));
        if let Some(tag) = &self.tag {
            headers.push(header(MESSAGE_TAG_HEADER, tag.as_bytes()));
        }
        headers.extend(self.keys.iter().map(|key| header(MESSAGE_KEY_HEADER, key.as_bytes())));
        if let Some(born) = &fixed.born {
            headers.push(header(MESSAGE_BORN_HEADER, born));
        }
        headers.extend(self.properties.iter().map(|(name, value)| Header { key: name.as_str(), value: Some(value) }));
        headers
    }

    /// The record: value = body, key = the first key, `headers` from [`Message::headers`].
    pub(crate) fn record<'a>(&'a self, headers: &'a [Header<'a>]) -> Record<'a> {
        let record = Record::new(&self.body).with_headers(headers);
        match self.keys.first() {
            Some(key) => record.with_key(key.as_bytes()),
            None => record,
        }
    }
}

/// The store's fixed-size header values of one message, encoded: what its headers borrow.
pub(crate) struct FixedFields {
    queue: [u8; 4],
    queue_offset: [u8; 8],
    born: Option<[u8; 8]>,
}

impl FixedFields {
    /// The values for `message` at `queue_offset`.
    pub(crate) fn new(message: &Message, queue_offset: u64) -> FixedFields {
        FixedFields {
            queue: message.queue_id.to_be_bytes(),
            queue_offset: queue_offset.to_be_bytes(),
            born: message.born_timestamp_ms.map(i64::to_be_bytes),
        }
    }
}

/// A header of a message's record.
fn header<'a>(key: &'a str, value: &'a [u8]) -> Header<'a> {
    Header { key, value: Some(value) }
}

/// `Ok` if `topic` can name a topic: 1 to 127 bytes of `[A-Za-z0-9._-]`, not `.` or `..` (it
/// names a directory, so no `/`, `\` or NUL can reach the file system).
pub fn validate_topic(topic: &str) -> Result<()> {
    let invalid = |reason| Err(Error::InvalidTopic { topic: topic.to_owned(), reason });
    if topic.is_empty() {
        return invalid("empty");
    }
    if topic == "." || topic == ".." {
        return invalid("`.` and `..` name directories");
    }
    if topic.len() > MAX_TOPIC_LEN {
        return invalid("longer than 127 bytes");
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return invalid("only letters, digits, `.`, `_` and `-` are allowed");
    }
    Ok(())
}

/// A message as stored: the record it is, with its store fields decoded. The text fields stay in
/// the record's bytes (the topic and tag are found there, not copied); the keys are made `String`s
/// at the first call of [`StoredMessage::keys`].
#[derive(Debug, Clone)]
pub struct StoredMessage {
    record: RecordView,
    /// Where the topic and the tag are in the record's header bytes.
    topic: Range<usize>,
    tag: Option<Range<usize>>,
    queue_id: u32,
    queue_offset: u64,
    born_timestamp_ms: Option<i64>,
    keys: OnceLock<Vec<String>>,
}

impl StoredMessage {
    /// Decodes a record of the commit log; `Error::NotAMessage` if the store did not write it.
    pub(crate) fn decode(record: RecordView) -> Result<StoredMessage> {
        let log_offset = record.offset();
        let not = |reason| Error::NotAMessage { log_offset, reason };
        let (mut topic, mut queue_id, mut queue_offset) = (None, None, None);
        let (mut tag, mut born) = (None, None);
        let bytes = record.header_bytes();
        // Where a header's value lies in `bytes` (it borrows them). An empty one may not: a null
        // value is a static empty slice, read as empty text as before.
        let span = |value: &[u8]| {
            if value.is_empty() {
                return 0..0;
            }
            let start = value.as_ptr() as usize - bytes.as_ptr() as usize;
            start..start + value.len()
        };
        for header in record.headers() {
            let value = header.value.unwrap_or_default();
            let text = || match std::str::from_utf8(value) {
                Ok(_) => Ok(span(value)),
                Err(_) => Err(not("a header is not UTF-8")),
            };
            match header.key {
                MESSAGE_TOPIC_HEADER => topic = Some(text()?),
                MESSAGE_QUEUE_HEADER => {
                    queue_id = Some(u32::from_be_bytes(value.try_into().map_err(|_| not("malformed queue id"))?));
                }
                MESSAGE_QUEUE_OFFSET_HEADER => {
                    let bytes = value.try_into().map_err(|_| not("malformed queue offset"))?;
                    queue_offset = Some(u64::from_be_bytes(bytes));
                }
                MESSAGE_TAG_HEADER => tag = Some(text()?),
                MESSAGE_KEY_HEADER => {
                    text()?;
                }
                MESSAGE_BORN_HEADER => {
                    born = Some(i64::from_be_bytes(value.try_into().map_err(|_| not("malformed born timestamp"))?));
                }
                _ => {}
            }
        }
        Ok(StoredMessage {
            topic: topic.ok_or_else(|| not("no topic header"))?,
            queue_id: queue_id.ok_or_else(|| not("no queue header"))?,
            queue_offset: queue_offset.ok_or_else(|| not("no queue offset header"))?,
            tag,
            born_timestamp_ms: born,
            keys: OnceLock::new(),
            record,
        })
    }

    /// A text field found by [`StoredMessage::decode`] (checked UTF-8 there).
    fn text(&self, span: &Range<usize>) -> &str {
        let bytes = self.record.header_bytes().get(span.clone()).unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        self.text(&self.topic)
    }

    /// The queue id.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The message's offset in its queue.
    pub fn queue_offset(&self) -> u64 {
        self.queue_offset
    }

    /// The message's offset in the commit log.
    pub fn log_offset(&self) -> u64 {
        self.record.offset()
    }

    /// When the store appended it (ms since the epoch).
    pub fn timestamp_ms(&self) -> i64 {
        self.record.timestamp_ms()
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        self.record.value().unwrap_or_default()
    }

    /// The tag, if any.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_ref().map(|span| self.text(span))
    }

    /// The keys, in the order given.
    pub fn keys(&self) -> &[String] {
        self.keys.get_or_init(|| {
            let keys = self.record.headers().filter(|h| h.key == MESSAGE_KEY_HEADER);
            keys.filter_map(|h| std::str::from_utf8(h.value.unwrap_or_default()).ok().map(str::to_owned)).collect()
        })
    }

    /// Whether `key` is one of its keys (no allocation: a key query checks every candidate).
    pub(crate) fn has_key(&self, key: &str) -> bool {
        self.record.headers().any(|h| h.key == MESSAGE_KEY_HEADER && h.value == Some(key.as_bytes()))
    }

    /// The producer's timestamp, if it gave one.
    pub fn born_timestamp_ms(&self) -> Option<i64> {
        self.born_timestamp_ms
    }

    /// A user property's value (the first, if it was given more than once).
    pub fn property(&self, name: &str) -> Option<&[u8]> {
        if name.starts_with(MESSAGE_HEADER_PREFIX) {
            return None;
        }
        self.record.headers().find(|h| h.key == name).and_then(|h| h.value)
    }

    /// The record's size in its batch (what a consume-queue entry stores).
    pub fn encoded_len(&self) -> usize {
        self.record.encoded_len()
    }

    /// Whether this is the message a queue entry at `queue_offset` of `topic`'s queue `queue_id`
    /// names (its headers say so): what every get checks before it returns the message an entry
    /// points at.
    pub(crate) fn is_at(&self, topic: &str, queue_id: u32, queue_offset: u64) -> bool {
        self.queue_id == queue_id && self.queue_offset == queue_offset && self.topic() == topic
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::log::Log;

    #[test]
    fn a_message_round_trips_through_a_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        let message = Message::new("orders", 3, b"body".to_vec())
            .with_tag("created")
            .with_keys(["k1", "k2"])
            .with_property("source", b"web".to_vec())
            .with_born_timestamp(1_700_000_000_000);
        message.validate(8).expect("valid");
        message.with_record(41, |record| log.append(std::slice::from_ref(record))).expect("append");
        let record = log.read(0, 1 << 20).expect("read").next().expect("one").expect("valid");
        let stored = StoredMessage::decode(record).expect("a message");
        assert_eq!((stored.topic(), stored.queue_id(), stored.queue_offset()), ("orders", 3, 41));
        assert_eq!((stored.body(), stored.tag()), (&b"body"[..], Some("created")));
        assert_eq!(stored.keys(), ["k1", "k2"]);
        assert!(stored.has_key("k2") && !stored.has_key("k") && !stored.has_key("created"));
        assert_eq!(stored.born_timestamp_ms(), Some(1_700_000_000_000));
        assert_eq!(stored.property("source"), Some(&b"web"[..]));
        assert_eq!(stored.property("strata.topic"), None, "reserved names are not properties");
        assert_eq!(stored.log_offset(), 0);
        assert!(stored.encoded_len() > 4);
    }

    #[test]
    fn a_record_the_store_did_not_write_is_not_a_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        log.append(&[Record::new(b"plain")]).expect("append");
        let record = log.read(0, 1 << 20).expect("read").next().expect("one").expect("valid");
        assert!(matches!(StoredMessage::decode(record), Err(Error::NotAMessage { log_offset: 0, .. })));
    }

    /// A header without a value (null, not empty), which the store never writes, reads as an
    /// empty text field, as it did before the fields stayed in the record's bytes: decoding a
    /// record from a damaged or foreign file never panics (its span is not in the header bytes).
    #[test]
    fn null_text_headers_read_as_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        let (queue, queue_offset) = (1u32.to_be_bytes(), 8u64.to_be_bytes());
        let headers = [
            Header { key: MESSAGE_TOPIC_HEADER, value: None },
            Header { key: MESSAGE_QUEUE_HEADER, value: Some(&queue) },
            Header { key: MESSAGE_QUEUE_OFFSET_HEADER, value: Some(&queue_offset) },
            Header { key: MESSAGE_TAG_HEADER, value: None },
            Header { key: MESSAGE_KEY_HEADER, value: None },
        ];
        log.append(&[Record::new(b"body").with_headers(&headers)]).expect("append");
        let record = log.read(0, 1 << 20).expect("read").next().expect("one").expect("valid");
        let stored = StoredMessage::decode(record).expect("a message");
        assert_eq!((stored.topic(), stored.tag(), stored.keys()), ("", Some(""), &[String::new()][..]));
        assert!(!stored.is_at("t", 1, 8), "no topic");
    }

    #[test]
    fn topics_that_could_escape_their_directory_are_refused() {
        for bad in ["", ".", "..", "a/b", "a\\b", "nul\0", "sp ace", "é", &"x".repeat(128)] {
            assert!(matches!(validate_topic(bad), Err(Error::InvalidTopic { .. })), "{bad:?}");
        }
        for good in ["orders", "a.b-c_d", "X", &"x".repeat(127), "..."] {
            validate_topic(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
        }
    }

    #[test]
    fn bad_fields_are_refused_before_anything_is_stored() {
        let base = || Message::new("t", 0, b"x".to_vec());
        assert!(matches!(base().validate(0), Err(Error::InvalidQueue { queue_id: 0, max: 0 })));
        assert!(matches!(base().with_tag("").validate(1), Err(Error::InvalidField { what: "tag", .. })));
        assert!(matches!(base().with_keys([""]).validate(1), Err(Error::InvalidField { what: "key", .. })));
        let reserved = base().with_property("strata.queue", b"7".to_vec());
        assert!(matches!(reserved.validate(1), Err(Error::InvalidField { what: "property", .. })));
        base().validate(1).expect("valid");
    }
}
