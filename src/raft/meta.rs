//! The Raft store's meta file, `<dir>/raft-meta`: the vote, the last committed log id and the last
//! purged log id, which the log itself has no place for (docs/FORMAT.md, "raft-meta").
//!
//! ```text
//! magic "SRFT" | version u16 = 1 | payload_len u32 | payload (postcard) | crc32 u32
//! ```
//!
//! Little endian; the CRC covers every byte before it. The file is only ever replaced whole
//! (temp, fsync, rename, fsync the directory), so a crash leaves the old one or the new one,
//! never a torn one: a file that fails its checks is damage, reported as `Error::Corrupt`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use openraft::{LogId, NodeId, Vote};
use serde::{Deserialize, Serialize};

use crate::error::{Corruption, Error, Result};
use crate::format::{
    RAFT_META_CRC_LEN, RAFT_META_FILE, RAFT_META_LEN_POS, RAFT_META_MAGIC, RAFT_META_PAYLOAD_POS, RAFT_META_TMP_FILE,
    RAFT_META_VERSION, RAFT_META_VERSION_POS,
};

/// What the meta file holds. Every field is written verbatim (a log id with its term).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub(crate) struct Meta<NID: NodeId> {
    /// The last vote saved (`save_vote`).
    pub vote: Option<Vote<NID>>,
    /// The last committed log id given to `save_committed` when the file was written.
    pub committed: Option<LogId<NID>>,
    /// The last purged log id: entries up to it are gone, and the log start is above it.
    pub last_purged: Option<LogId<NID>>,
}

impl<NID: NodeId> Default for Meta<NID> {
    fn default() -> Meta<NID> {
        Meta { vote: None, committed: None, last_purged: None }
    }
}

impl<NID: NodeId> Meta<NID> {
    /// The file's bytes: header, payload, CRC.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let payload = postcard::to_stdvec(self)
            .map_err(|e| Error::RaftEncode { what: "the vote or a log id".to_owned(), reason: e.to_string() })?;
        let payload_len = u32::try_from(payload.len()).expect("a vote and two log ids are far below 4 GiB");
        let mut bytes = Vec::with_capacity(RAFT_META_PAYLOAD_POS + payload.len() + RAFT_META_CRC_LEN);
        bytes.extend_from_slice(&RAFT_META_MAGIC);
        bytes.extend_from_slice(&RAFT_META_VERSION.to_le_bytes());
        bytes.extend_from_slice(&payload_len.to_le_bytes());
        bytes.extend_from_slice(&payload);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        Ok(bytes)
    }

    /// Decodes a whole file, checking magic, version, length and CRC.
    pub fn decode_from(bytes: &[u8], path: &Path) -> Result<Meta<NID>> {
        let corrupt =
            |position: usize, reason| Error::Corrupt { path: path.to_path_buf(), position: position as u64, reason };
        if bytes.len() < RAFT_META_PAYLOAD_POS + RAFT_META_CRC_LEN {
            let expected = (RAFT_META_PAYLOAD_POS + RAFT_META_CRC_LEN) as u64;
            return Err(corrupt(0, Corruption::ShortFile { len: bytes.len() as u64, expected }));
        }
        if bytes[..RAFT_META_VERSION_POS] != RAFT_META_MAGIC {
            return Err(corrupt(0, Corruption::BadFile("raft meta: bad magic")));
        }
        let version = u16::from_le_bytes([bytes[RAFT_META_VERSION_POS], bytes[RAFT_META_VERSION_POS + 1]]);
        if version != RAFT_META_VERSION {
            return Err(corrupt(RAFT_META_VERSION_POS, Corruption::BadFile("raft meta: unsupported version")));
        }
        let len_bytes: [u8; 4] = bytes[RAFT_META_LEN_POS..RAFT_META_PAYLOAD_POS].try_into().expect("four bytes");
        let payload_end = RAFT_META_PAYLOAD_POS + u32::from_le_bytes(len_bytes) as usize;
        if bytes.len() != payload_end + RAFT_META_CRC_LEN {
            let reason = Corruption::BadLength { length: payload_end as u64, available: bytes.len() as u64 };
            return Err(corrupt(RAFT_META_LEN_POS, reason));
        }
        let stored = u32::from_le_bytes(bytes[payload_end..].try_into().expect("four bytes"));
        let computed = crc32fast::hash(&bytes[..payload_end]);
        if stored != computed {
            return Err(corrupt(payload_end, Corruption::CrcMismatch { stored, computed }));
        }
        postcard::from_bytes(&bytes[RAFT_META_PAYLOAD_POS..payload_end])
            .map_err(|_| corrupt(RAFT_META_PAYLOAD_POS, Corruption::BadFile("raft meta: payload does not decode")))
    }

    /// Reads `<dir>/raft-meta`; a directory without one (a new store) has the default meta. A
    /// temporary file a crash left behind is not the meta (the rename never happened): it stays,
    /// as the space the next write reuses ([`Meta::write`]); one is made if none is there. Called
    /// with the log's directory lock held (a live store's temporary file is never touched).
    pub fn read(dir: &Path) -> Result<Meta<NID>> {
        reserve(dir);
        let path = dir.join(RAFT_META_FILE);
        match fs::read(&path) {
            Ok(bytes) => Meta::decode_from(&bytes, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Meta::default()),
            Err(e) => Err(Error::Io { op: "read", path, source: e }),
        }
    }

    /// Replaces `<dir>/raft-meta` atomically and durably: temp file written and fsynced, renamed
    /// over the old one, directory fsynced. When it returns `Ok`, a crash keeps this meta.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let bytes = self.encode()?;
        let tmp = dir.join(RAFT_META_TMP_FILE);
        let io = |op: &'static str, path: &PathBuf| {
            let path = path.clone();
            move |source| Error::Io { op, path, source }
        };
        // Not truncated: the blocks the reserve holds are overwritten, so that a write on a full
        // disk (a purge, the way Raft frees space) needs no new block.
        let mut file =
            OpenOptions::new().create(true).write(true).truncate(false).open(&tmp).map_err(io("create", &tmp))?;
        file.write_all(&bytes).map_err(io("write", &tmp))?;
        file.set_len(bytes.len() as u64).map_err(io("truncate", &tmp))?;
        file.sync_all().map_err(io("fsync", &tmp))?;
        drop(file);
        let path = dir.join(RAFT_META_FILE);
        fs::rename(&tmp, &path).map_err(io("rename", &path))?;
        sync_dir(dir)?;
        // The next write's space, taken now (the rename just freed the old meta's block).
        reserve(dir);
        Ok(())
    }
}

/// Bytes kept allocated in `raft-meta.tmp` between writes: a meta file is far smaller.
const RESERVE_BYTES: usize = 4096;

/// Makes `<dir>/raft-meta.tmp` hold `RESERVE_BYTES` of allocated space unless it exists, so the
/// next meta write needs no new block. Best effort: on a full disk the next write allocates.
fn reserve(dir: &Path) {
    let tmp = dir.join(RAFT_META_TMP_FILE);
    let made = OpenOptions::new().create_new(true).write(true).open(&tmp).and_then(|mut file| {
        file.write_all(&[0; RESERVE_BYTES])?;
        file.sync_all()
    });
    if let Err(error) = made
        && error.kind() != std::io::ErrorKind::AlreadyExists
    {
        tracing::debug!(path = %tmp.display(), %error, "no space reserved for the next Raft meta write");
    }
}

/// fsyncs a directory, so the names created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let io = |op| move |source| Error::Io { op, path: dir.to_path_buf(), source };
    File::open(dir).map_err(io("open directory"))?.sync_all().map_err(io("fsync directory"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use openraft::CommittedLeaderId;

    use super::*;

    fn sample() -> Meta<u64> {
        Meta {
            vote: Some(Vote::new_committed(7, 2)),
            committed: Some(LogId::new(CommittedLeaderId::new(7, 2), 1234)),
            last_purged: Some(LogId::new(CommittedLeaderId::new(5, 1), 99)),
        }
    }

    #[test]
    fn round_trip() {
        let path = Path::new("raft-meta");
        for meta in [Meta::default(), sample()] {
            assert_eq!(Meta::<u64>::decode_from(&meta.encode().unwrap(), path).unwrap(), meta);
        }
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let path = Path::new("raft-meta");
        let bytes = sample().encode().unwrap();
        for position in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[position] ^= 0x40;
            assert!(Meta::<u64>::decode_from(&damaged, path).is_err(), "flip at {position} accepted");
            assert!(Meta::<u64>::decode_from(&bytes[..position], path).is_err(), "cut at {position} accepted");
        }
    }

    #[test]
    fn write_then_read_and_a_leftover_temp_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Meta::<u64>::read(dir.path()).unwrap(), Meta::default());
        sample().write(dir.path()).unwrap();
        fs::write(dir.path().join(RAFT_META_TMP_FILE), vec![0xEE; 10_000]).unwrap();
        assert_eq!(Meta::<u64>::read(dir.path()).unwrap(), sample());
        // Kept as the space of the next write, which overwrites it whole.
        assert!(dir.path().join(RAFT_META_TMP_FILE).exists());
        Meta::<u64>::default().write(dir.path()).unwrap();
        assert_eq!(Meta::<u64>::read(dir.path()).unwrap(), Meta::default());
        let reserved = fs::metadata(dir.path().join(RAFT_META_TMP_FILE)).unwrap().len();
        assert_eq!(reserved, RESERVE_BYTES as u64, "the next write's space is reserved");
    }
}
