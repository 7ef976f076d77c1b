//! The `checkpoint` file and the `.clean-shutdown` marker (docs/DESIGN.md §3): small fixed-layout
//! files, CRC-protected. The checkpoint has two slots written alternately in place (the newest
//! valid one wins), so writing it needs no new blocks: a log on a full disk can still checkpoint,
//! open and delete records. The marker is replaced atomically.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::failpoint::error_point;
use crate::format::{
    CHECKPOINT_CRC_POS, CHECKPOINT_FILE, CHECKPOINT_LEN, CHECKPOINT_LOG_START_POS, CHECKPOINT_MAGIC,
    CHECKPOINT_NO_RESET, CHECKPOINT_PENDING_RESET_POS, CHECKPOINT_RECOVERY_POINT_POS, CHECKPOINT_SEQUENCE_POS,
    CHECKPOINT_SLOT_DATA_LEN, CHECKPOINT_SLOT_LEN, CHECKPOINT_SLOTS, CHECKPOINT_V1_CRC_POS, CHECKPOINT_V1_LEN,
    CHECKPOINT_V1_LOG_START_POS, CHECKPOINT_V1_RECOVERY_POINT_POS, CHECKPOINT_V1_VERSION, CHECKPOINT_VERSION,
    CHECKPOINT_VERSION_POS, CLEAN_ACTIVE_BASE_POS, CLEAN_ACTIVE_LEN_POS, CLEAN_CRC_POS, CLEAN_NEXT_OFFSET_POS,
    CLEAN_SHUTDOWN_FILE, CLEAN_SHUTDOWN_LEN,
};
use crate::storage;

/// The contents of `checkpoint`: where the log starts and up to where it is known durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Checkpoint {
    /// First readable offset.
    pub log_start_offset: u64,
    /// Every offset below it was durable when the checkpoint was written.
    pub recovery_point: u64,
}

/// A checkpoint as found in the file: its contents, the sequence number of its slot (0 for a
/// version 1 file), and a reset in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stored {
    pub checkpoint: Checkpoint,
    pub sequence: u64,
    /// Whether the file is a current-version file (else the next write replaces it whole).
    pub current: bool,
    /// A `reset_at` to this offset wrote this checkpoint before changing any file and did not
    /// finish: the next open completes it (docs/DESIGN.md §9: old state or new, never a mix).
    pub pending_reset: Option<u64>,
}

// The public codec (`encode_slot`, `encode_file`, `decode_slot`, `decode`) serves `inspect` and
// the tests (feature `internals`); the log itself reads and writes through `read` and `write`.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl Checkpoint {
    /// The data bytes of the slot holding sequence number `sequence`.
    pub fn encode_slot(&self, sequence: u64) -> [u8; CHECKPOINT_SLOT_DATA_LEN] {
        self.encode_slot_with(sequence, None)
    }

    /// [`Checkpoint::encode_slot`] with a reset to `pending_reset` in progress.
    pub(crate) fn encode_slot_with(&self, sequence: u64, pending_reset: Option<u64>) -> [u8; CHECKPOINT_SLOT_DATA_LEN] {
        let mut b = [0u8; CHECKPOINT_SLOT_DATA_LEN];
        b[..CHECKPOINT_VERSION_POS].copy_from_slice(&CHECKPOINT_MAGIC);
        BigEndian::write_u16(&mut b[CHECKPOINT_VERSION_POS..], CHECKPOINT_VERSION);
        BigEndian::write_u64(&mut b[CHECKPOINT_SEQUENCE_POS..], sequence);
        BigEndian::write_u64(&mut b[CHECKPOINT_LOG_START_POS..], self.log_start_offset);
        BigEndian::write_u64(&mut b[CHECKPOINT_RECOVERY_POINT_POS..], self.recovery_point);
        BigEndian::write_u64(&mut b[CHECKPOINT_PENDING_RESET_POS..], pending_reset.unwrap_or(CHECKPOINT_NO_RESET));
        let crc = crc32fast::hash(&b[..CHECKPOINT_CRC_POS]);
        BigEndian::write_u32(&mut b[CHECKPOINT_CRC_POS..], crc);
        b
    }

    /// A version 1 file (written only in place over one, on a full disk).
    fn encode_v1(&self) -> [u8; CHECKPOINT_V1_LEN] {
        let mut b = [0u8; CHECKPOINT_V1_LEN];
        b[..CHECKPOINT_VERSION_POS].copy_from_slice(&CHECKPOINT_MAGIC);
        BigEndian::write_u16(&mut b[CHECKPOINT_VERSION_POS..], CHECKPOINT_V1_VERSION);
        BigEndian::write_u64(&mut b[CHECKPOINT_V1_LOG_START_POS..], self.log_start_offset);
        BigEndian::write_u64(&mut b[CHECKPOINT_V1_RECOVERY_POINT_POS..], self.recovery_point);
        let crc = crc32fast::hash(&b[..CHECKPOINT_V1_CRC_POS]);
        BigEndian::write_u32(&mut b[CHECKPOINT_V1_CRC_POS..], crc);
        b
    }

    /// A whole version 2 file holding `self` as sequence `sequence` (the other slot empty).
    pub fn encode_file(&self, sequence: u64) -> Vec<u8> {
        self.encode_file_with(sequence, None)
    }

    fn encode_file_with(&self, sequence: u64, pending_reset: Option<u64>) -> Vec<u8> {
        let mut file = vec![0u8; CHECKPOINT_LEN];
        let at = slot_position(sequence) as usize;
        file[at..at + CHECKPOINT_SLOT_DATA_LEN].copy_from_slice(&self.encode_slot_with(sequence, pending_reset));
        file
    }

    /// Parses and checks one slot: the checkpoint and its sequence number.
    pub fn decode_slot(b: &[u8]) -> Result<(Checkpoint, u64), Corruption> {
        decode_slot_with_reset(b).map(|(checkpoint, sequence, _)| (checkpoint, sequence))
    }

    /// Parses and checks a whole file (version 2, or a version 1 file written by an older strata):
    /// the newest valid checkpoint in it.
    pub fn decode(b: &[u8]) -> Result<Checkpoint, Corruption> {
        decode_file(b).map(|stored| stored.checkpoint)
    }

    /// Reads `dir/checkpoint`: `Ok(None)` if absent, `Err` with the reason if unusable.
    pub(crate) fn read(dir: &Path) -> Result<Option<Result<Stored, Corruption>>> {
        Ok(storage::read_if_exists(&dir.join(CHECKPOINT_FILE))?.map(|b| decode_file(&b)))
    }

    /// Writes `self` as the newest checkpoint, durably: into the slot after the newest one in
    /// place (no new blocks), or, if the file is missing, of an older version or unreadable as a
    /// whole, as a new file replacing it atomically (which needs a block).
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        self.write_with(dir, None)
    }

    /// [`Checkpoint::write`] with a reset to `pending_reset` in progress (or none).
    pub(crate) fn write_with(&self, dir: &Path, pending_reset: Option<u64>) -> Result<()> {
        let path = dir.join(CHECKPOINT_FILE);
        error_point!("write_checkpoint", &path);
        let stored = match Checkpoint::read(dir)? {
            Some(Ok(stored)) => Some(stored),
            // Both slots unreadable: the file keeps its length, so a slot write still fits.
            Some(Err(_)) => {
                Some(Stored { checkpoint: *self, sequence: 0, current: file_is_current(&path)?, pending_reset: None })
            }
            None => None,
        };
        match stored {
            Some(stored) if stored.current => {
                let sequence = stored.sequence + 1;
                let slot = self.encode_slot_with(sequence, pending_reset);
                storage::overwrite(&path, slot_position(sequence), &slot)
            }
            stored => {
                let sequence = stored.map_or(1, |s| s.sequence + 1);
                let written =
                    storage::write_atomically(dir, CHECKPOINT_FILE, &self.encode_file_with(sequence, pending_reset));
                match written {
                    // A version 1 file on a full disk: overwritten in place as version 1 (one
                    // 26-byte write inside its first sector), so records can still be deleted to
                    // make room; the first write with room replaces it by version 2.
                    Err(crate::Error::DiskFull { .. })
                        if pending_reset.is_none()
                            && storage::file_len(&path).ok() == Some(CHECKPOINT_V1_LEN as u64) =>
                    {
                        tracing::warn!(file = %path.display(), "disk full: checkpoint kept at version 1 for now");
                        storage::overwrite(&path, 0, &self.encode_v1())
                    }
                    written => written,
                }
            }
        }
    }
}

/// One slot: the checkpoint, its sequence number and a reset in progress.
fn decode_slot_with_reset(b: &[u8]) -> Result<(Checkpoint, u64, Option<u64>), Corruption> {
    let b = b.get(..CHECKPOINT_SLOT_DATA_LEN).ok_or(Corruption::BadFile("checkpoint slot is too short"))?;
    if b.iter().all(|&x| x == 0) {
        return Err(Corruption::BadFile("checkpoint slot is empty"));
    }
    if b[..CHECKPOINT_VERSION_POS] != CHECKPOINT_MAGIC {
        return Err(Corruption::BadFile("checkpoint slot has the wrong magic"));
    }
    check_crc(b, CHECKPOINT_CRC_POS)?;
    if BigEndian::read_u16(&b[CHECKPOINT_VERSION_POS..]) != CHECKPOINT_VERSION {
        return Err(Corruption::BadFile("checkpoint slot has an unsupported version"));
    }
    let checkpoint = Checkpoint {
        log_start_offset: BigEndian::read_u64(&b[CHECKPOINT_LOG_START_POS..]),
        recovery_point: BigEndian::read_u64(&b[CHECKPOINT_RECOVERY_POINT_POS..]),
    };
    let pending = BigEndian::read_u64(&b[CHECKPOINT_PENDING_RESET_POS..]);
    let pending = (pending != CHECKPOINT_NO_RESET).then_some(pending);
    Ok((checkpoint, BigEndian::read_u64(&b[CHECKPOINT_SEQUENCE_POS..]), pending))
}

/// Where the slot of sequence number `sequence` starts.
fn slot_position(sequence: u64) -> u64 {
    (sequence % CHECKPOINT_SLOTS as u64) * CHECKPOINT_SLOT_LEN as u64
}

fn file_is_current(path: &Path) -> Result<bool> {
    Ok(storage::file_len(path)? == CHECKPOINT_LEN as u64)
}

/// The newest valid checkpoint in a file's bytes.
fn decode_file(b: &[u8]) -> Result<Stored, Corruption> {
    if b.len() == CHECKPOINT_V1_LEN {
        return decode_v1(b).map(|checkpoint| Stored { checkpoint, sequence: 0, current: false, pending_reset: None });
    }
    if b.len() != CHECKPOINT_LEN {
        return Err(Corruption::BadFile("checkpoint has the wrong length"));
    }
    let mut newest: Option<Stored> = None;
    let mut first_error = None;
    for slot in b.chunks_exact(CHECKPOINT_SLOT_LEN).map(decode_slot_with_reset) {
        match slot {
            Ok((checkpoint, sequence, pending_reset)) if newest.is_none_or(|n| sequence > n.sequence) => {
                newest = Some(Stored { checkpoint, sequence, current: true, pending_reset });
            }
            Ok(_) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (newest, first_error) {
        (Some(stored), _) => Ok(stored),
        (None, Some(e)) => Err(e),
        (None, None) => Err(Corruption::BadFile("checkpoint has no valid slot")),
    }
}

/// A version 1 file: magic, version 1, log start, recovery point, CRC.
fn decode_v1(b: &[u8]) -> Result<Checkpoint, Corruption> {
    if b[..CHECKPOINT_VERSION_POS] != CHECKPOINT_MAGIC {
        return Err(Corruption::BadFile("checkpoint has the wrong magic"));
    }
    check_crc(b, CHECKPOINT_V1_CRC_POS)?;
    if BigEndian::read_u16(&b[CHECKPOINT_VERSION_POS..]) != CHECKPOINT_V1_VERSION {
        return Err(Corruption::BadFile("checkpoint has an unsupported version"));
    }
    Ok(Checkpoint {
        log_start_offset: BigEndian::read_u64(&b[CHECKPOINT_V1_LOG_START_POS..]),
        recovery_point: BigEndian::read_u64(&b[CHECKPOINT_V1_RECOVERY_POINT_POS..]),
    })
}

/// The contents of `.clean-shutdown`: the log's exact end at a clean close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
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
    fn checkpoint_slot_round_trip_and_damage() {
        let cp = Checkpoint { log_start_offset: 17, recovery_point: 1 << 50 };
        let bytes = cp.encode_slot(9);
        assert_eq!(&bytes[..4], b"SLCP");
        assert_eq!(Checkpoint::decode_slot(&bytes), Ok((cp, 9)));
        for i in 0..bytes.len() {
            let mut damaged = bytes;
            damaged[i] ^= 0x10;
            assert!(Checkpoint::decode_slot(&damaged).is_err(), "damage at byte {i} accepted");
        }
        assert!(Checkpoint::decode_slot(&bytes[..25]).is_err());
    }

    #[test]
    fn a_pending_reset_round_trips() {
        let cp = Checkpoint { log_start_offset: 50, recovery_point: 50 };
        let file = cp.encode_file_with(3, Some(50));
        let stored = decode_file(&file).expect("valid");
        assert_eq!((stored.checkpoint, stored.sequence, stored.pending_reset), (cp, 3, Some(50)));
        assert_eq!(decode_file(&cp.encode_file(3)).expect("valid").pending_reset, None);
    }

    #[test]
    fn the_newest_valid_slot_wins() {
        let (old, new) = (
            Checkpoint { log_start_offset: 1, recovery_point: 10 },
            Checkpoint { log_start_offset: 1, recovery_point: 20 },
        );
        let mut file = old.encode_file(4);
        let at = slot_position(5) as usize;
        file[at..at + CHECKPOINT_SLOT_DATA_LEN].copy_from_slice(&new.encode_slot(5));
        assert_eq!(Checkpoint::decode(&file), Ok(new));
        // A torn write of the newer slot: the older one is used.
        file[at + CHECKPOINT_LOG_START_POS] ^= 1;
        assert_eq!(Checkpoint::decode(&file), Ok(old));
        assert!(Checkpoint::decode(&vec![0u8; CHECKPOINT_LEN]).is_err(), "no valid slot");
    }

    #[test]
    fn version_1_files_are_read_and_replaced_by_version_2() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut v1 = [0u8; CHECKPOINT_V1_LEN];
        v1[..4].copy_from_slice(b"SLCP");
        BigEndian::write_u16(&mut v1[4..], 1);
        BigEndian::write_u64(&mut v1[6..], 3);
        BigEndian::write_u64(&mut v1[14..], 8);
        let crc = crc32fast::hash(&v1[..22]);
        BigEndian::write_u32(&mut v1[22..], crc);
        std::fs::write(dir.path().join(CHECKPOINT_FILE), v1).expect("write v1");
        let read = Checkpoint::read(dir.path()).expect("read").expect("present").expect("valid");
        assert_eq!(read.checkpoint, Checkpoint { log_start_offset: 3, recovery_point: 8 });
        let next = Checkpoint { log_start_offset: 3, recovery_point: 9 };
        next.write(dir.path()).expect("write");
        let len = std::fs::metadata(dir.path().join(CHECKPOINT_FILE)).expect("stat").len();
        assert_eq!(len, CHECKPOINT_LEN as u64, "rewritten as version 2");
        assert_eq!(Checkpoint::read(dir.path()).expect("read").expect("present").expect("valid").checkpoint, next);
    }

    #[test]
    fn writes_alternate_slots_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(Checkpoint::read(dir.path()).expect("read"), None);
        for point in 1..=5 {
            let cp = Checkpoint { log_start_offset: 0, recovery_point: point };
            cp.write(dir.path()).expect("write");
            let stored = Checkpoint::read(dir.path()).expect("read").expect("present").expect("valid");
            assert_eq!((stored.checkpoint, stored.sequence), (cp, point));
        }
        let bytes = std::fs::read(dir.path().join(CHECKPOINT_FILE)).expect("read");
        let slots: Vec<_> =
            bytes.chunks_exact(CHECKPOINT_SLOT_LEN).map(|s| Checkpoint::decode_slot(s).expect("slot")).collect();
        assert_eq!(slots.iter().map(|(_, seq)| *seq).collect::<Vec<_>>(), [4, 5], "the two newest, one per slot");
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
}
