//! A message of the store, and how it is one record of the commit log (docs/FORMAT.md "Message
//! records"): value = body, key = the first key, a first header with an empty name whose value holds
//! the store's fields in a compact binary encoding (topic, queue, queue offset, tag, born
//! timestamp, the other keys), then the user's properties. Records of the earlier encoding (a named
//! `strata.*` header per field) are still read.

use std::ops::Range;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::format::{
    MAX_TOPIC_LEN, MESSAGE_BORN_HEADER, MESSAGE_FIELDS_BORN, MESSAGE_FIELDS_FIXED_LEN, MESSAGE_FIELDS_HEADER,
    MESSAGE_FIELDS_TAG, MESSAGE_FIELDS_VERSION, MESSAGE_HEADER_PREFIX, MESSAGE_KEY_HEADER, MESSAGE_QUEUE_HEADER,
    MESSAGE_QUEUE_OFFSET_HEADER, MESSAGE_TAG_HEADER, MESSAGE_TOPIC_HEADER,
};
use crate::log::varint;
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

    /// Calls `f` with the record this message is at `queue_offset` (its fields and headers live
    /// on this stack frame, so the record borrows them).
    #[cfg(test)]
    pub(crate) fn with_record<R>(&self, queue_offset: u64, f: impl FnOnce(&Record<'_>) -> R) -> R {
        let mut fields = Vec::new();
        self.encode_fields(queue_offset, &mut fields);
        let mut headers = Vec::new();
        self.push_headers(&fields, &mut headers);
        f(&self.record(&headers))
    }

    /// Appends the store's fields of this message at `queue_offset` to `out`, in the compact
    /// encoding (docs/FORMAT.md "Message records"): the value of the record's first header.
    pub(crate) fn encode_fields(&self, queue_offset: u64, out: &mut Vec<u8>) {
        let mut flags = 0;
        if self.tag.is_some() {
            flags |= MESSAGE_FIELDS_TAG;
        }
        if self.born_timestamp_ms.is_some() {
            flags |= MESSAGE_FIELDS_BORN;
        }
        out.reserve(self.fields_len());
        out.extend_from_slice(&[MESSAGE_FIELDS_VERSION, flags]);
        out.extend_from_slice(&self.queue_id.to_be_bytes());
        out.extend_from_slice(&queue_offset.to_be_bytes());
        // `validate` keeps a topic within `MAX_TOPIC_LEN` (127) bytes.
        debug_assert!(self.topic.len() <= MAX_TOPIC_LEN);
        out.push(self.topic.len() as u8);
        out.extend_from_slice(self.topic.as_bytes());
        if let Some(tag) = &self.tag {
            varint::encode_into(tag.len() as i64, out);
            out.extend_from_slice(tag.as_bytes());
        }
        if let Some(born) = self.born_timestamp_ms {
            out.extend_from_slice(&born.to_be_bytes());
        }
        // The first key is the record's key; the others follow here.
        let others = self.keys.get(1..).unwrap_or_default();
        varint::encode_into(others.len() as i64, out);
        for key in others {
            varint::encode_into(key.len() as i64, out);
            out.extend_from_slice(key.as_bytes());
        }
    }

    /// Bytes [`Message::encode_fields`] appends.
    pub(crate) fn fields_len(&self) -> usize {
        let text = |len: usize| varint::encoded_len(len as i64) + len;
        let others = self.keys.get(1..).unwrap_or_default();
        MESSAGE_FIELDS_FIXED_LEN
            + self.topic.len()
            + self.tag.as_ref().map_or(0, |tag| text(tag.len()))
            + self.born_timestamp_ms.map_or(0, |_| 8)
            + varint::encoded_len(others.len() as i64)
            + others.iter().map(|key| text(key.len())).sum::<usize>()
    }

    /// Appends the record's headers to `out`: the store's `fields` (from
    /// [`Message::encode_fields`]), then the user's properties.
    pub(crate) fn push_headers<'a>(&'a self, fields: &'a [u8], out: &mut Vec<Header<'a>>) {
        out.push(self.fields_header(fields));
        out.extend(self.properties.iter().map(|(name, value)| Header { key: name.as_str(), value: Some(value) }));
    }

    /// Its record's first header: the store's fields (`fields` from [`Message::encode_fields`]).
    pub(crate) fn fields_header<'a>(&self, fields: &'a [u8]) -> Header<'a> {
        Header { key: MESSAGE_FIELDS_HEADER, value: Some(fields) }
    }

    /// Headers of its record: the fields' and one per property.
    pub(crate) fn header_count(&self) -> usize {
        1 + self.properties.len()
    }

    /// The record: value = body, key = the first key, `headers` from [`Message::push_headers`].
    pub(crate) fn record<'a>(&'a self, headers: &'a [Header<'a>]) -> Record<'a> {
        let record = Record::new(&self.body).with_headers(headers);
        match self.keys.first() {
            Some(key) => record.with_key(key.as_bytes()),
            None => record,
        }
    }
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
    /// How the record holds the store's fields.
    encoding: Encoding,
    keys: OnceLock<Vec<String>>,
}

/// The two encodings of a message record (docs/FORMAT.md "Message records").
#[derive(Debug, Clone)]
enum Encoding {
    /// Fields version 2: one header with an empty name holds the fields; the keys after the first
    /// (the record's key) are at `other_keys` in the header bytes (their count, then each).
    Compact { other_keys: Range<usize> },
    /// Fields version 1: a named `strata.*` header per field and per key.
    Named,
}

impl StoredMessage {
    /// Decodes a record of the commit log; `Error::NotAMessage` if the store did not write it.
    pub(crate) fn decode(record: RecordView) -> Result<StoredMessage> {
        let bytes = record.header_bytes();
        // A compact record's first header has an empty name: its key length, a zig-zag 0, is the
        // byte 0. A named-header record's first header is `strata.topic`, and no user property
        // has an empty name.
        if bytes.first() == Some(&0) { Self::decode_compact(record) } else { Self::decode_named(record) }
    }

    /// Decodes a record of the compact encoding: the fields are its first header's value.
    fn decode_compact(record: RecordView) -> Result<StoredMessage> {
        let log_offset = record.offset();
        let not = |reason| Error::NotAMessage { log_offset, reason };
        let bytes = record.header_bytes();
        let malformed = || not("malformed message fields");
        let (len, n) = varint::decode_from(&bytes[1..]).ok_or_else(malformed)?;
        let start = 1 + n;
        let end = usize::try_from(len).ok().and_then(|len| start.checked_add(len)).ok_or_else(malformed)?;
        let fields = bytes.get(start..end).ok_or_else(malformed)?;
        let mut at = Fields { bytes: fields, at: 0, base: start, log_offset };
        let (version, flags) = (at.u8()?, at.u8()?);
        if version != MESSAGE_FIELDS_VERSION {
            return Err(not("message fields of a version this build does not know"));
        }
        if flags & !(MESSAGE_FIELDS_TAG | MESSAGE_FIELDS_BORN) != 0 {
            return Err(not("message fields with flags this build does not know"));
        }
        let queue_id = u32::from_be_bytes(at.array()?);
        let queue_offset = u64::from_be_bytes(at.array()?);
        let topic_len = usize::from(at.u8()?);
        let topic = at.text(topic_len)?;
        if validate_topic(std::str::from_utf8(&fields[topic.start - start..topic.end - start]).unwrap_or_default())
            .is_err()
        {
            return Err(not("the topic is not a valid topic name"));
        }
        let tag = match flags & MESSAGE_FIELDS_TAG {
            0 => None,
            _ => {
                let len = at.len()?;
                Some(at.text(len)?)
            }
        };
        let born = (flags & MESSAGE_FIELDS_BORN != 0).then(|| at.array().map(i64::from_be_bytes)).transpose()?;
        // The other keys: checked here (UTF-8, and that they fill the fields exactly), made
        // `String`s only if asked for.
        let other_keys = at.base + at.at..at.base + fields.len();
        for _ in 0..at.len()? {
            let len = at.len()?;
            at.text(len)?;
        }
        if at.at != fields.len() {
            return Err(malformed());
        }
        if record.key().is_some_and(|key| std::str::from_utf8(key).is_err()) {
            return Err(not("the key is not UTF-8"));
        }
        Ok(StoredMessage {
            topic,
            tag,
            queue_id,
            queue_offset,
            born_timestamp_ms: born,
            encoding: Encoding::Compact { other_keys },
            keys: OnceLock::new(),
            record,
        })
    }

    /// Decodes a record of the named-header encoding.
    fn decode_named(record: RecordView) -> Result<StoredMessage> {
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
            encoding: Encoding::Named,
            keys: OnceLock::new(),
            record,
        })
    }

    /// The keys of a compact record after the first, from its encoded `other_keys` (checked by
    /// [`StoredMessage::decode_compact`]).
    fn other_keys(&self, other_keys: &Range<usize>) -> impl Iterator<Item = &[u8]> {
        let bytes = self.record.header_bytes().get(other_keys.clone()).unwrap_or_default();
        let mut at = Fields { bytes, at: 0, base: 0, log_offset: 0 };
        let count = at.len().unwrap_or(0);
        (0..count).map_while(move |_| {
            let len = at.len().ok()?;
            let span = at.span(len).ok()?;
            bytes.get(span)
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
            let text = |bytes: &[u8]| std::str::from_utf8(bytes).ok().map(str::to_owned);
            match &self.encoding {
                Encoding::Compact { other_keys } => {
                    let first = self.record.key().into_iter();
                    first.chain(self.other_keys(other_keys)).filter_map(text).collect()
                }
                Encoding::Named => {
                    let keys = self.record.headers().filter(|h| h.key == MESSAGE_KEY_HEADER);
                    keys.filter_map(|h| text(h.value.unwrap_or_default())).collect()
                }
            }
        })
    }

    /// Whether `key` is one of its keys (no allocation: a key query checks every candidate).
    pub(crate) fn has_key(&self, key: &str) -> bool {
        match &self.encoding {
            Encoding::Compact { other_keys } => {
                self.record.key() == Some(key.as_bytes()) || self.other_keys(other_keys).any(|k| k == key.as_bytes())
            }
            Encoding::Named => {
                self.record.headers().any(|h| h.key == MESSAGE_KEY_HEADER && h.value == Some(key.as_bytes()))
            }
        }
    }

    /// The producer's timestamp, if it gave one.
    pub fn born_timestamp_ms(&self) -> Option<i64> {
        self.born_timestamp_ms
    }

    /// A user property's value (the first, if it was given more than once).
    pub fn property(&self, name: &str) -> Option<&[u8]> {
        if name.is_empty() || name.starts_with(MESSAGE_HEADER_PREFIX) {
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

/// A reader of a compact record's fields: `bytes` are the fields, found at `base` in the record's
/// header bytes (the spans it returns are relative to those); errors name `log_offset`.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
    base: usize,
    log_offset: u64,
}

impl Fields<'_> {
    fn malformed(&self) -> Error {
        Error::NotAMessage { log_offset: self.log_offset, reason: "malformed message fields" }
    }

    /// The next `len` bytes' span in the header bytes.
    fn span(&mut self, len: usize) -> Result<Range<usize>> {
        let end = self.at.checked_add(len).filter(|&end| end <= self.bytes.len()).ok_or_else(|| self.malformed())?;
        let span = self.base + self.at..self.base + end;
        self.at = end;
        Ok(span)
    }

    /// The next `len` bytes' span, checked UTF-8.
    fn text(&mut self, len: usize) -> Result<Range<usize>> {
        let start = self.at;
        let span = self.span(len)?;
        match std::str::from_utf8(&self.bytes[start..self.at]) {
            Ok(_) => Ok(span),
            Err(_) => Err(Error::NotAMessage { log_offset: self.log_offset, reason: "a text field is not UTF-8" }),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let start = self.at;
        self.span(N)?;
        Ok(self.bytes[start..self.at].try_into().unwrap_or([0; N]))
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A length or count: a zig-zag varint, not negative.
    fn len(&mut self) -> Result<usize> {
        let rest = self.bytes.get(self.at..).unwrap_or_default();
        match varint::decode_from(rest) {
            Some((value, n)) if value >= 0 => {
                self.at += n;
                usize::try_from(value).map_err(|_| self.malformed())
            }
            _ => Err(self.malformed()),
        }
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

    /// Every truncation and many byte changes of a compact record's fields, as a log holds them:
    /// each decodes to a message or is `Error::NotAMessage`, never a panic; a changed version or
    /// an unknown flag is refused by name.
    #[test]
    fn damaged_compact_fields_are_not_messages() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Log::open(dir.path(), LogConfig::default()).expect("open");
        let message = Message::new("orders", 3, b"body".to_vec())
            .with_tag("created")
            .with_keys(["k1", "k2", "k3"])
            .with_born_timestamp(-5);
        let mut fields = Vec::new();
        message.encode_fields(1 << 40, &mut fields);
        let mut variants: Vec<Vec<u8>> = (0..fields.len()).map(|len| fields[..len].to_vec()).collect();
        for at in 0..fields.len() {
            for value in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut changed = fields.clone();
                changed[at] = value;
                variants.push(changed);
            }
        }
        let mut longer = fields.clone();
        longer.push(0);
        variants.push(longer);
        let headers: Vec<[Header<'_>; 1]> =
            variants.iter().map(|v| [Header { key: MESSAGE_FIELDS_HEADER, value: Some(v) }]).collect();
        let records: Vec<Record<'_>> = headers.iter().map(|h| Record::new(b"body").with_headers(h)).collect();
        log.append(&records).expect("append");
        let mut decoded = 0;
        for (record, variant) in log.read(0, 64 << 20).expect("read").zip(&variants) {
            match StoredMessage::decode(record.expect("valid")) {
                Ok(stored) => {
                    decoded += 1;
                    // Whatever decodes reads every field without a panic.
                    let _ = (stored.topic(), stored.tag(), stored.keys(), stored.has_key("k2"));
                }
                Err(Error::NotAMessage { reason, .. }) => {
                    if variant.first() != Some(&MESSAGE_FIELDS_VERSION) && !variant.is_empty() {
                        assert!(reason.contains("version"), "{reason}");
                    }
                }
                Err(other) => panic!("{other}"),
            }
        }
        assert!(decoded > 0 && decoded < variants.len(), "{decoded} of {}", variants.len());
        for topic in [&b""[..], b"a/b", b".."] {
            let mut fields = vec![MESSAGE_FIELDS_VERSION, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, topic.len() as u8];
            fields.extend_from_slice(topic);
            fields.push(0);
            let headers = [Header { key: MESSAGE_FIELDS_HEADER, value: Some(&fields[..]) }];
            let at = log.append(&[Record::new(b"x").with_headers(&headers)]).expect("append").base_offset;
            let record = log.read(at, 1 << 20).expect("read").next().expect("one").expect("valid");
            let error = StoredMessage::decode(record).expect_err("refused");
            assert!(error.to_string().contains("topic"), "{topic:?}: {error}");
        }
        let unknown_flag = [MESSAGE_FIELDS_VERSION, 0x80];
        let headers = [Header { key: MESSAGE_FIELDS_HEADER, value: Some(&unknown_flag[..]) }];
        let at = log.append(&[Record::new(b"x").with_headers(&headers)]).expect("append").base_offset;
        let record = log.read(at, 1 << 20).expect("read").next().expect("one").expect("valid");
        let error = StoredMessage::decode(record).expect_err("refused");
        assert!(error.to_string().contains("flags"), "{error}");
    }

    /// The compact encoding's overhead: a message of the store's benchmarks (one tag, one key)
    /// takes 19 bytes beside its topic, tag and key (two header lengths, 17 bytes of fields), 71
    /// fewer than the named headers (which also held the key twice).
    #[test]
    fn compact_fields_cost_little() {
        let message = Message::new("bench", 2, vec![7u8; 100]).with_tag("tagA").with_keys(["key-123456"]);
        let len = message.with_record(123_456, |record| crate::log::batch::record_len(record, 0, 0));
        let named = {
            let (queue, offset) = (2u32.to_be_bytes(), 123_456u64.to_be_bytes());
            let headers = [
                Header { key: MESSAGE_TOPIC_HEADER, value: Some(b"bench") },
                Header { key: MESSAGE_QUEUE_HEADER, value: Some(&queue) },
                Header { key: MESSAGE_QUEUE_OFFSET_HEADER, value: Some(&offset) },
                Header { key: MESSAGE_TAG_HEADER, value: Some(b"tagA") },
                Header { key: MESSAGE_KEY_HEADER, value: Some(b"key-123456") },
            ];
            let record = Record::new(&[7u8; 100]).with_key(b"key-123456").with_headers(&headers);
            crate::log::batch::record_len(&record, 0, 0)
        };
        assert_eq!(message.fields_len(), MESSAGE_FIELDS_FIXED_LEN + 5 + 1 + 4 + 1);
        assert_eq!(named - len, 71, "compact {len} bytes, named {named}");
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
