//! `log.meta` (docs/FORMAT.md, docs/DESIGN.md §3): what a log directory is. The format version
//! and features its files use, so a build that does not know them refuses the directory instead
//! of misreading it; and the parameters the log's segments and indexes are made with, so every
//! tool that rebuilds a file (an index rebuilt by `strata recover`, a segment re-extended by an
//! admin command) builds it as the log would, without guessing from file sizes.
//!
//! Written at the first writer open of a directory (a log made before the file existed gets one
//! then) and again when a writer opens it with other parameters (logged); replaced atomically.
//! A read-only open only reads it.
//!
//! A build that adds a format feature must record its bit (and a newer version, if the layout of
//! this file changes) *before* it writes the first byte that uses it: otherwise a crash in between
//! leaves a file of the new format in a directory an older build would open.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::config::LogConfig;
use crate::error::{Corruption, Error, Result};
use crate::format::{
    META_CRC_POS, META_FEATURES_POS, META_FILE, META_INDEX_BYTES_POS, META_INDEX_INTERVAL_POS, META_KNOWN_FEATURES,
    META_LEN, META_MAGIC, META_MIN_LEN, META_SEGMENT_BYTES_POS, META_VERSION, META_VERSION_POS,
};
use crate::storage;

/// The contents of `log.meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LogMeta {
    /// The format version of the directory's files.
    pub version: u16,
    /// Optional format features in use, a bit each.
    pub features: u64,
    /// `LogConfig::segment_bytes` the log was last opened for writing with.
    pub segment_bytes: u64,
    /// `LogConfig::index_bytes` likewise.
    pub index_bytes: u64,
    /// `LogConfig::index_interval_bytes` likewise.
    pub index_interval_bytes: u64,
}

impl LogMeta {
    /// What a writer opened with `config` records.
    pub(crate) fn of(config: &LogConfig) -> LogMeta {
        LogMeta {
            version: META_VERSION,
            features: 0,
            segment_bytes: config.segment_bytes,
            index_bytes: config.index_bytes,
            index_interval_bytes: config.index_interval_bytes,
        }
    }

    /// The file's bytes.
    pub fn encode(&self) -> [u8; META_LEN] {
        let mut b = [0u8; META_LEN];
        b[..META_VERSION_POS].copy_from_slice(&META_MAGIC);
        BigEndian::write_u16(&mut b[META_VERSION_POS..], self.version);
        BigEndian::write_u64(&mut b[META_FEATURES_POS..], self.features);
        BigEndian::write_u64(&mut b[META_SEGMENT_BYTES_POS..], self.segment_bytes);
        BigEndian::write_u64(&mut b[META_INDEX_BYTES_POS..], self.index_bytes);
        BigEndian::write_u64(&mut b[META_INDEX_INTERVAL_POS..], self.index_interval_bytes);
        let crc = crc32fast::hash(&b[..META_CRC_POS]);
        BigEndian::write_u32(&mut b[META_CRC_POS..], crc);
        b
    }

    /// Parses the file's bytes. In every version the file starts with the magic and the version
    /// and ends with the CRC-32 of every byte before it, so any build can tell a damaged file from
    /// a newer one: a newer version (a layout this build cannot place) is returned with its version
    /// alone, for [`LogMeta::check_known`] to refuse. Version 0 is never written: damage.
    pub fn decode(b: &[u8]) -> std::result::Result<LogMeta, Corruption> {
        if b.len() < META_MIN_LEN || b[..META_VERSION_POS] != META_MAGIC {
            return Err(Corruption::BadFile("the file is too short or has the wrong magic"));
        }
        let crc_pos = b.len() - 4;
        if crc32fast::hash(&b[..crc_pos]) != BigEndian::read_u32(&b[crc_pos..]) {
            return Err(Corruption::BadFile("the file fails its CRC"));
        }
        let version = BigEndian::read_u16(&b[META_VERSION_POS..]);
        if version == 0 {
            return Err(Corruption::BadFile("the file has version 0, which is never written"));
        }
        if version > META_VERSION {
            return Ok(LogMeta { version, features: 0, segment_bytes: 0, index_bytes: 0, index_interval_bytes: 0 });
        }
        if b.len() != META_LEN {
            return Err(Corruption::BadFile("the file has the wrong length for its version"));
        }
        debug_assert_eq!(crc_pos, META_CRC_POS, "version 1's CRC is at its fixed position");
        Ok(LogMeta {
            version,
            features: BigEndian::read_u64(&b[META_FEATURES_POS..]),
            segment_bytes: BigEndian::read_u64(&b[META_SEGMENT_BYTES_POS..]),
            index_bytes: BigEndian::read_u64(&b[META_INDEX_BYTES_POS..]),
            index_interval_bytes: BigEndian::read_u64(&b[META_INDEX_INTERVAL_POS..]),
        })
    }

    /// `Error::UnsupportedFormat` unless this build knows the version and every feature.
    pub(crate) fn check_known(&self, dir: &Path) -> Result<()> {
        let unknown = |what: String| Err(Error::UnsupportedFormat { path: dir.join(META_FILE), what });
        if self.version > META_VERSION {
            return unknown(format!("format version {} (this build reads 1 to {META_VERSION})", self.version));
        }
        let features = self.features & !META_KNOWN_FEATURES;
        if features != 0 {
            return unknown(format!("format features {features:#x} (bits this build does not know)"));
        }
        Ok(())
    }

    /// Whether a writer opened with `config` would record something else.
    fn differs_from(&self, config: &LogConfig) -> bool {
        (self.segment_bytes, self.index_bytes, self.index_interval_bytes)
            != (config.segment_bytes, config.index_bytes, config.index_interval_bytes)
    }

    /// `config` with the parameters recorded here.
    pub(crate) fn apply(&self, config: LogConfig) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            index_bytes: self.index_bytes,
            index_interval_bytes: self.index_interval_bytes,
            ..config
        }
    }
}

/// The `log.meta` in `dir`: `None` if there is none, `Some(Err(why))` if it is damaged.
pub(crate) fn read(dir: &Path) -> Result<Option<std::result::Result<LogMeta, Corruption>>> {
    Ok(storage::read_if_exists(&dir.join(META_FILE))?.map(|bytes| LogMeta::decode(&bytes)))
}

/// Before any file of `dir` is touched: `Error::UnsupportedFormat` if `log.meta` names a version or
/// feature this build does not know, `Error::Corrupt` if it is damaged (it is replaced atomically,
/// so no crash leaves it so; and a damaged one cannot say whether the directory is of a newer
/// format: deleting it, which loses no record, lets the next writer open write it again).
/// Returns what it read (`None`: there is none).
pub(crate) fn check(dir: &Path) -> Result<Option<LogMeta>> {
    match read(dir)? {
        Some(Ok(meta)) => meta.check_known(dir).map(|()| Some(meta)),
        Some(Err(reason)) => Err(Error::corrupt(dir.join(META_FILE), 0, reason)),
        None => Ok(None),
    }
}

/// After a writer's open: records `config`'s parameters unless `found` already holds them.
pub(crate) fn record(dir: &Path, found: Option<LogMeta>, config: &LogConfig) -> Result<()> {
    let meta = LogMeta::of(config);
    match found {
        Some(found) if found.version == meta.version && !found.differs_from(config) => return Ok(()),
        Some(found) => tracing::info!(
            dir = %dir.display(),
            segment_bytes = config.segment_bytes,
            index_bytes = config.index_bytes,
            index_interval_bytes = config.index_interval_bytes,
            was_segment_bytes = found.segment_bytes,
            was_index_bytes = found.index_bytes,
            was_index_interval_bytes = found.index_interval_bytes,
            "the log is opened with other parameters than it recorded; recording these"
        ),
        None => {}
    }
    match storage::write_atomically(dir, META_FILE, &meta.encode()) {
        // A log on a full disk must still open (so records can be deleted to make room); the
        // next writer open writes the file.
        Err(error @ Error::DiskFull { .. }) => {
            tracing::warn!(%error, "could not write log.meta; the next open tries again");
            Ok(())
        }
        other => other,
    }
}

/// `config` with the parameters the log in `dir` records ([`LogConfig::with_recorded_parameters`]).
pub(crate) fn recorded(dir: &Path, config: LogConfig) -> Result<LogConfig> {
    Ok(match check(dir)? {
        Some(meta) => meta.apply(config),
        None => config,
    })
}

impl LogConfig {
    /// This config with the parameters the log in `dir` was last opened for writing with: its
    /// `segment_bytes`, `index_bytes` and `index_interval_bytes`, recorded in the directory's
    /// `log.meta`. Unchanged if the directory records none (no log yet, or one last written by a
    /// build before the file existed). A tool that reopens a log it did not create (a repair, an
    /// admin command) starts here, so it rebuilds indexes and re-extends segments as the log's
    /// writer would; a writer's open records its own parameters, so opening with others changes
    /// them for new segments and index rebuilds (logged).
    ///
    /// ```
    /// use strata_log::{Log, LogConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let made = LogConfig { segment_bytes: 1 << 20, index_interval_bytes: 512, ..LogConfig::default() };
    /// Log::open(dir.path(), made)?.close()?;
    /// let config = LogConfig::default().with_recorded_parameters(dir.path())?;
    /// assert_eq!((config.segment_bytes, config.index_interval_bytes), (1 << 20, 512));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A directory written by a newer build (a format version or feature this one does not know)
    /// is `Error::UnsupportedFormat`.
    pub fn with_recorded_parameters(self, dir: impl AsRef<std::path::Path>) -> Result<LogConfig> {
        recorded(dir.as_ref(), self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> LogMeta {
        LogMeta { version: 1, features: 0, segment_bytes: 64 << 20, index_bytes: 1 << 20, index_interval_bytes: 512 }
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let bytes = meta().encode();
        assert_eq!(LogMeta::decode(&bytes), Ok(meta()));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(LogMeta::decode(&bad).is_err(), "a flip at {i} (the version's too) is damage");
        }
        assert!(LogMeta::decode(&bytes[..10]).is_err());
        let mut zero = meta().encode();
        BigEndian::write_u16(&mut zero[META_VERSION_POS..], 0);
        let crc = crc32fast::hash(&zero[..META_CRC_POS]);
        BigEndian::write_u32(&mut zero[META_CRC_POS..], crc);
        assert!(LogMeta::decode(&zero).is_err(), "version 0 is never written");
    }

    #[test]
    fn a_newer_version_or_an_unknown_feature_is_refused_by_name() {
        let dir = Path::new("/x");
        for extra in [0, 30] {
            // A newer layout, shorter or longer: magic, version, ..., CRC last.
            let mut newer = meta().encode()[..12].to_vec();
            BigEndian::write_u16(&mut newer[META_VERSION_POS..], META_VERSION + 1);
            newer.extend(std::iter::repeat_n(7, extra));
            let crc = crc32fast::hash(&newer);
            newer.extend_from_slice(&crc.to_be_bytes());
            let found = LogMeta::decode(&newer).expect("magic and version are read");
            assert_eq!(found.version, META_VERSION + 1);
        }
        let mut newer = meta().encode().to_vec();
        BigEndian::write_u16(&mut newer[META_VERSION_POS..], META_VERSION + 1);
        let crc = crc32fast::hash(&newer[..META_CRC_POS]);
        BigEndian::write_u32(&mut newer[META_CRC_POS..], crc);
        let found = LogMeta::decode(&newer).expect("magic and version are read");
        let error = found.check_known(dir).expect_err("refused");
        assert!(error.to_string().contains("format version 2"), "{error}");
        let featured = LogMeta { features: 1 << 5, ..meta() };
        let error = LogMeta::decode(&featured.encode()).expect("decodes").check_known(dir).expect_err("refused");
        assert!(error.to_string().contains("0x20"), "{error}");
        meta().check_known(dir).expect("this build's own");
    }

    #[test]
    fn a_writer_records_its_parameters_and_rewrites_only_when_they_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig { segment_bytes: 1 << 20, index_interval_bytes: 100, ..LogConfig::default() };
        record(dir.path(), None, &config).expect("record");
        let found = check(dir.path()).expect("check").expect("written");
        assert_eq!((found.segment_bytes, found.index_interval_bytes), (1 << 20, 100));
        let applied = recorded(dir.path(), LogConfig::default()).expect("recorded");
        assert_eq!((applied.segment_bytes, applied.index_interval_bytes), (1 << 20, 100));
        let path = dir.path().join(META_FILE);
        std::fs::remove_file(&path).expect("remove");
        record(dir.path(), Some(found), &config).expect("unchanged: nothing written");
        assert!(!path.exists(), "no rewrite when nothing changed");
        record(dir.path(), Some(found), &LogConfig { index_interval_bytes: 200, ..config }).expect("record");
        assert_eq!(check(dir.path()).expect("check").expect("written").index_interval_bytes, 200);
    }
}
