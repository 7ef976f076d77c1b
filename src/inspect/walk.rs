//! A segment's `.log` read batch by batch, and an index file entry by entry, never mapped and
//! without opening the log: what `dump` shows and `verify` judges.

use std::ops::ControlFlow;
use std::path::Path;

use super::Damage;
use crate::config::ReadPath;
use crate::error::{Corruption, Error, Result};
use crate::log::BatchHeader;
use crate::log::batch;
use crate::log::index::{IndexEntry, check_entries};
use crate::log::walk::{BatchPos, Stop, walk_file};
use crate::storage::MappedFile;

/// One batch as `dump` shows it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BatchInfo {
    /// Byte position in the `.log`.
    pub position: u64,
    /// Bytes the batch takes.
    pub size: u64,
    /// First and last offset it covers.
    pub base_offset: u64,
    /// Last offset it covers.
    pub last_offset: u64,
    /// Number of records.
    pub record_count: u32,
    /// Timestamps from the header.
    pub base_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Attribute bits.
    pub attributes: u16,
    /// `"ok"` or why the batch is invalid (then it is the damage, and the last batch shown).
    pub status: String,
    /// The records, with `--records`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub records: Option<Vec<RecordInfo>>,
}

/// One record as `dump --records` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RecordInfo {
    /// Its offset.
    pub offset: u64,
    /// Its timestamp.
    pub timestamp_ms: i64,
    /// Key as UTF-8 (invalid bytes replaced).
    pub key: Option<String>,
    /// Value as UTF-8 (invalid bytes replaced).
    pub value: Option<String>,
    /// Header count.
    pub headers: u32,
}

/// The batches of a `.log` file, validated one by one until the first invalid one.
pub(super) struct Walked {
    pub(super) batches: Vec<BatchInfo>,
    pub(super) valid_len: u64,
    pub(super) next_offset: u64,
    pub(super) damage: Option<Damage>,
}

impl Walked {
    /// The batches that validated (all but a damaged last one).
    pub(super) fn valid_batches(&self) -> impl Iterator<Item = &BatchInfo> {
        self.batches.iter().filter(|b| b.status == "ok")
    }
}

pub(super) fn walk_batches(path: &Path, base: u64, len: u64, with_records: bool) -> Result<Walked> {
    let file = MappedFile::open_sealed(path, len, ReadPath::Pread);
    let mut batches = Vec::new();
    let start = BatchPos { position: 0, expected: base };
    let end = walk_file(&file, len, start, |at, header, bytes| {
        let valid = batch::validate(bytes, Some(at.expected));
        let records = match (&valid, with_records) {
            (Ok(_), true) => Some(records_of(bytes, header)),
            _ => None,
        };
        let status = valid.as_ref().map_or_else(|e| e.to_string(), |_| "ok".to_owned());
        batches.push(batch_info(at.position, header, status, records));
        match valid {
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    })?;
    let end = end.ok_or_else(|| Error::io("read", path)(std::io::ErrorKind::NotFound.into()))?;
    let damage = match end.stop {
        Stop::End => None,
        // A whole batch of a newer format (its CRC matched): not damage, and no tool of this build
        // can judge what follows it.
        Stop::Break(reason @ Corruption::BadAttributes(_)) => {
            return Err(Error::corrupt(path, end.at.position, reason));
        }
        Stop::Break(reason) | Stop::Invalid(reason) => {
            Some(Damage { position: end.at.position, reason: reason.to_string() })
        }
    };
    Ok(Walked { batches, valid_len: end.at.position, next_offset: end.at.expected, damage })
}

fn batch_info(position: u64, h: &BatchHeader, status: String, records: Option<Vec<RecordInfo>>) -> BatchInfo {
    BatchInfo {
        position,
        size: h.size(),
        base_offset: h.base_offset,
        last_offset: h.last_offset(),
        record_count: h.record_count,
        base_timestamp: h.base_timestamp,
        max_timestamp: h.max_timestamp,
        attributes: h.attributes,
        status,
        records,
    }
}

fn records_of(bytes: &[u8], header: &BatchHeader) -> Vec<RecordInfo> {
    let text = |span: batch::Span| span.get(bytes).map(|b| String::from_utf8_lossy(b).into_owned());
    batch::RecordIter::new(bytes, header)
        .map_while(|r| r.ok())
        .map(|r| RecordInfo {
            offset: header.base_offset + u64::from(r.offset_delta),
            timestamp_ms: r.timestamp_ms,
            key: text(r.key),
            value: text(r.value),
            headers: r.header_count,
        })
        .collect()
}

/// An index file's entries up to the first unused one, and a structural problem if any.
pub(super) fn read_index<E: IndexEntry>(path: &Path) -> Result<(Vec<E>, Option<Damage>)> {
    let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
    let whole = bytes.len() / E::LEN * E::LEN;
    let entries: Vec<E> = bytes[..whole].chunks_exact(E::LEN).map(E::decode_from).collect();
    let damage = if whole != bytes.len() {
        let reason = Corruption::IndexLength { len: bytes.len() as u64, entry_len: E::LEN as u64 };
        Some(Damage { position: whole as u64, reason: reason.to_string() })
    } else {
        check_entries(&entries).err().map(|d| Damage { position: d.position, reason: d.reason.to_string() })
    };
    let used = entries.iter().position(E::is_zero).unwrap_or(entries.len());
    Ok((entries[..used].to_vec(), damage))
}
