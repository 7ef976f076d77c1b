//! A small file holding one `u64` (docs/FORMAT.md: the `cleaner-checkpoint` and
//! `store.checkpoint`): `[magic 4][version u16][value u64][crc32 u32 of the 14 bytes before]`,
//! big-endian, replaced atomically. Each kind has its own magic and version.

use std::path::Path;

use byteorder::{BigEndian, ByteOrder};

use crate::error::{Corruption, Result};
use crate::format::VALUE_FILE_LEN;

const VERSION_POS: usize = 4;
const VALUE_POS: usize = 6;
const CRC_POS: usize = 14;
const _: () = assert!(CRC_POS + 4 == VALUE_FILE_LEN);

/// One kind of value file: its name in the directory, magic and version.
pub(crate) struct ValueFile {
    pub name: &'static str,
    pub magic: [u8; 4],
    pub version: u16,
}

impl ValueFile {
    /// The file's bytes for `value`.
    pub(crate) fn encode(&self, value: u64) -> [u8; VALUE_FILE_LEN] {
        let mut b = [0u8; VALUE_FILE_LEN];
        b[..VERSION_POS].copy_from_slice(&self.magic);
        BigEndian::write_u16(&mut b[VERSION_POS..], self.version);
        BigEndian::write_u64(&mut b[VALUE_POS..], value);
        let crc = crc32fast::hash(&b[..CRC_POS]);
        BigEndian::write_u32(&mut b[CRC_POS..], crc);
        b
    }

    /// Parses and checks the file's bytes.
    pub(crate) fn decode(&self, b: &[u8]) -> std::result::Result<u64, Corruption> {
        if b.len() != VALUE_FILE_LEN || b[..VERSION_POS] != self.magic {
            return Err(Corruption::BadFile("the file has the wrong length or magic"));
        }
        if crc32fast::hash(&b[..CRC_POS]) != BigEndian::read_u32(&b[CRC_POS..]) {
            return Err(Corruption::BadFile("the file fails its CRC"));
        }
        if BigEndian::read_u16(&b[VERSION_POS..]) != self.version {
            return Err(Corruption::BadFile("the file has an unsupported version"));
        }
        Ok(BigEndian::read_u64(&b[VALUE_POS..]))
    }

    /// The value in `dir`: `None` if there is no file, `Some(Err(why))` if it cannot be used.
    pub(crate) fn read(&self, dir: &Path) -> Result<Option<std::result::Result<u64, Corruption>>> {
        Ok(super::read_if_exists(&dir.join(self.name))?.map(|bytes| self.decode(&bytes)))
    }

    /// Replaces the file atomically and durably.
    pub(crate) fn write(&self, dir: &Path, value: u64) -> Result<()> {
        super::write_atomically(dir, self.name, &self.encode(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: ValueFile = ValueFile { name: "value", magic: *b"TEST", version: 3 };

    #[test]
    fn round_trips_and_rejects_damage() {
        let bytes = FILE.encode(123_456);
        assert_eq!(FILE.decode(&bytes), Ok(123_456));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(FILE.decode(&bad).is_err(), "a flip at {i} is caught");
        }
        assert!(FILE.decode(&bytes[..10]).is_err());
        let other = ValueFile { magic: *b"ELSE", ..FILE };
        assert!(other.decode(&bytes).is_err(), "another kind's file is refused");
    }

    #[test]
    fn a_missing_file_reads_as_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(FILE.read(dir.path()).expect("read"), None);
        FILE.write(dir.path(), 7).expect("write");
        assert_eq!(FILE.read(dir.path()).expect("read"), Some(Ok(7)));
    }
}
