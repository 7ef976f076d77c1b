//! The `cleaner-checkpoint` file (DESIGN.md §3): the offset below which the log was last cleaned,
//! so the next pass maps only what was appended since. Losing it costs work, never data: a missing
//! or damaged file means "nothing is clean yet".

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::format::{
    CLEANER_CHECKPOINT_FILE, CLEANER_CHECKPOINT_LEN, CLEANER_CHECKPOINT_MAGIC, CLEANER_CHECKPOINT_VERSION,
};
use crate::storage;

const VERSION_POS: usize = 4;
const CLEANED_UP_TO_POS: usize = 6;
const CRC_POS: usize = 14;

/// The file's bytes for `cleaned_up_to`.
pub(crate) fn encode(cleaned_up_to: u64) -> [u8; CLEANER_CHECKPOINT_LEN] {
    let mut b = [0u8; CLEANER_CHECKPOINT_LEN];
    b[..VERSION_POS].copy_from_slice(&CLEANER_CHECKPOINT_MAGIC);
    BigEndian::write_u16(&mut b[VERSION_POS..], CLEANER_CHECKPOINT_VERSION);
    BigEndian::write_u64(&mut b[CLEANED_UP_TO_POS..], cleaned_up_to);
    let crc = crc32fast::hash(&b[..CRC_POS]);
    BigEndian::write_u32(&mut b[CRC_POS..], crc);
    b
}

/// Parses and checks the file's bytes.
pub(crate) fn decode(b: &[u8]) -> Result<u64, Corruption> {
    if b.len() != CLEANER_CHECKPOINT_LEN || b[..VERSION_POS] != CLEANER_CHECKPOINT_MAGIC {
        return Err(Corruption::BadFile("cleaner-checkpoint has the wrong length or magic"));
    }
    if crc32fast::hash(&b[..CRC_POS]) != BigEndian::read_u32(&b[CRC_POS..]) {
        return Err(Corruption::BadFile("cleaner-checkpoint fails its CRC"));
    }
    if BigEndian::read_u16(&b[VERSION_POS..]) != CLEANER_CHECKPOINT_VERSION {
        return Err(Corruption::BadFile("cleaner-checkpoint has an unsupported version"));
    }
    Ok(BigEndian::read_u64(&b[CLEANED_UP_TO_POS..]))
}

/// The cleaned-up-to offset in `dir`, or 0 if there is no usable file (logged).
pub(crate) fn read(dir: &Path) -> Result<u64> {
    Ok(match storage::read_if_exists(&dir.join(CLEANER_CHECKPOINT_FILE))? {
        None => 0,
        Some(bytes) => decode(&bytes).unwrap_or_else(|reason| {
            tracing::warn!(dir = %dir.display(), %reason, "ignoring the cleaner checkpoint: the next pass maps the whole log");
            0
        }),
    })
}

/// Replaces the file atomically and durably.
pub(crate) fn write(dir: &Path, cleaned_up_to: u64) -> Result<()> {
    storage::write_atomically(dir, CLEANER_CHECKPOINT_FILE, &encode(cleaned_up_to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let bytes = encode(123_456);
        assert_eq!(decode(&bytes), Ok(123_456));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(decode(&bad).is_err(), "a flip at {i} is caught");
        }
        assert!(decode(&bytes[..10]).is_err());
    }
}
