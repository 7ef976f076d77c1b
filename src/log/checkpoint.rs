//! The `checkpoint` file and the `.clean-shutdown` marker (DESIGN.md §3): small fixed-layout files,
//! CRC-protected, replaced atomically.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::failpoint::error_point;
use crate::format::{
    CHECKPOINT_CRC_POS, CHECKPOINT_FILE, CHECKPOINT_LEN, CHECKPOINT_LOG_START_POS, CHECKPOINT_MAGIC,
    CHECKPOINT_RECOVERY_POINT_POS, CHECKPOINT_VERSION, CHECKPOINT_VERSION_POS, CLEAN_ACTIVE_BASE_POS,
    CLEAN_ACTIVE_LEN_POS, CLEAN_CRC_POS, CLEAN_NEXT_OFFSET_POS, CLEAN_SHUTDOWN_FILE, CLEAN_SHUTDOWN_LEN,
};
use crate::storage;

/// The contents of `checkpoint`: where the log starts and up to where it is known durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Checkpoint {
    /// First readable offset.
    pub log_start_offset: u64,
    /// Every offset below it was durable when the checkpoint was written.
    pub recovery_point: u64,
}

impl Checkpoint {
    /// The file's bytes.
    pub fn encode(&self) -> [u8; CHECKPOINT_LEN] {
        let mut b = [0u8; CHECKPOINT_LEN];
        b[..CHECKPOINT_VERSION_POS].copy_from_slice(&CHECKPOINT_MAGIC);
        BigEndian::write_u16(&mut b[CHECKPOINT_VERSION_POS..], CHECKPOINT_VERSION);
        BigEndian::write_u64(&mut b[CHECKPOINT_LOG_START_POS..], self.log_start_offset);
        BigEndian::write_u64(&mut b[CHECKPOINT_RECOVERY_POINT_POS..], self.recovery_point);
        let crc = crc32fast::hash(&b[..CHECKPOINT_CRC_POS]);
        BigEndian::write_u32(&mut b[CHECKPOINT_CRC_POS..], crc);
        b
    }

    /// Parses and checks the file's bytes.
    pub fn decode(b: &[u8]) -> Result<Checkpoint, Corruption> {
        if b.len() != CHECKPOINT_LEN {
            return Err(Corruption::BadFile("checkpoint has the wrong length"));
        }
        if b[..CHECKPOINT_VERSION_POS] != CHECKPOINT_MAGIC {
            return Err(Corruption::BadFile("checkpoint has the wrong magic"));
        }
        check_crc(b, CHECKPOINT_CRC_POS)?;
        if BigEndian::read_u16(&b[CHECKPOINT_VERSION_POS..]) != CHECKPOINT_VERSION {
            return Err(Corruption::BadFile("checkpoint has an unsupported version"));
        }
        Ok(Checkpoint {
            log_start_offset: BigEndian::read_u64(&b[CHECKPOINT_LOG_START_POS..]),
            recovery_point: BigEndian::read_u64(&b[CHECKPOINT_RECOVERY_POINT_POS..]),
        })
    }

    /// Reads `dir/checkpoint`: `Ok(None)` if absent, `Err` with the reason if unusable.
    pub(crate) fn read(dir: &Path) -> Result<Option<Result<Checkpoint, Corruption>>> {
        Ok(storage::read_if_exists(&dir.join(CHECKPOINT_FILE))?.map(|b| Checkpoint::decode(&b)))
    }

    /// Replaces `dir/checkpoint` atomically and durably.
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        error_point!("write_checkpoint", dir.join(CHECKPOINT_FILE));
        storage::write_atomically(dir, CHECKPOINT_FILE, &self.encode())
    }
}

/// The contents of `.clean-shutdown`: the log's exact end at a clean close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CleanShutdown {
    /// The log's next offset.
    pub next_offset: u64,
    /// Base offset of the active segment.
    pub active_base: u64,
    /// Bytes of batches in the active segment.
    pub active_len: u32,
}

impl CleanShutdown {
    /// The file's bytes.
    pub fn encode(&self) -> [u8; CLEAN_SHUTDOWN_LEN] {
        let mut b = [0u8; CLEAN_SHUTDOWN_LEN];
        BigEndian::write_u64(&mut b[CLEAN_NEXT_OFFSET_POS..], self.next_offset);
        BigEndian::write_u64(&mut b[CLEAN_ACTIVE_BASE_POS..], self.active_base);
        BigEndian::write_u32(&mut b[CLEAN_ACTIVE_LEN_POS..], self.active_len);
        let crc = crc32fast::hash(&b[..CLEAN_CRC_POS]);
        BigEndian::write_u32(&mut b[CLEAN_CRC_POS..], crc);
        b
    }

    /// Parses and checks the file's bytes.
    pub fn decode(b: &[u8]) -> Result<CleanShutdown, Corruption> {
        if b.len() != CLEAN_SHUTDOWN_LEN {
            return Err(Corruption::BadFile("clean-shutdown marker has the wrong length"));
        }
        check_crc(b, CLEAN_CRC_POS)?;
        Ok(CleanShutdown {
            next_offset: BigEndian::read_u64(&b[CLEAN_NEXT_OFFSET_POS..]),
            active_base: BigEndian::read_u64(&b[CLEAN_ACTIVE_BASE_POS..]),
            active_len: BigEndian::read_u32(&b[CLEAN_ACTIVE_LEN_POS..]),
        })
    }

    /// Reads `dir/.clean-shutdown`: `Ok(None)` if absent.
    pub(crate) fn read(dir: &Path) -> Result<Option<Result<CleanShutdown, Corruption>>> {
        Ok(storage::read_if_exists(&dir.join(CLEAN_SHUTDOWN_FILE))?.map(|b| CleanShutdown::decode(&b)))
    }

    /// Writes `dir/.clean-shutdown` atomically and durably: the last step of a clean close.
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        storage::write_atomically(dir, CLEAN_SHUTDOWN_FILE, &self.encode())
    }
}

fn check_crc(b: &[u8], crc_pos: usize) -> Result<(), Corruption> {
    let stored = BigEndian::read_u32(&b[crc_pos..]);
    let computed = crc32fast::hash(&b[..crc_pos]);
    if stored == computed { Ok(()) } else { Err(Corruption::CrcMismatch { stored, computed }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trip_and_damage() {
        let cp = Checkpoint { log_start_offset: 17, recovery_point: 1 << 50 };
        let bytes = cp.encode();
        assert_eq!(&bytes[..4], b"SLCP");
        assert_eq!(Checkpoint::decode(&bytes), Ok(cp));
        for i in 0..bytes.len() {
            let mut damaged = bytes;
            damaged[i] ^= 0x10;
            assert!(Checkpoint::decode(&damaged).is_err(), "damage at byte {i} accepted");
        }
        assert!(Checkpoint::decode(&bytes[..25]).is_err());
    }

    #[test]
    fn clean_shutdown_round_trip_and_damage() {
        let marker = CleanShutdown { next_offset: 99, active_base: 50, active_len: 4096 };
        let bytes = marker.encode();
        assert_eq!(CleanShutdown::decode(&bytes), Ok(marker));
        let mut damaged = bytes;
        damaged[3] ^= 1;
        assert!(matches!(CleanShutdown::decode(&damaged), Err(Corruption::CrcMismatch { .. })));
    }

    #[test]
    fn files_are_written_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Checkpoint::read(dir.path()).expect("read"), None);
        let cp = Checkpoint { log_start_offset: 1, recovery_point: 2 };
        cp.write(dir.path()).expect("write");
        assert_eq!(Checkpoint::read(dir.path()).expect("read"), Some(Ok(cp)));
    }
}
