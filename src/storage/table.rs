#![allow(unsafe_code)] // Viewing an anonymous map as `[u32]`; the block has its SAFETY argument.
//! A zeroed table of `u32`s in anonymous memory, on transparent huge pages where the kernel
//! gives them (`MADV_HUGEPAGE`): an IndexFile's slot table, megabytes written at random.
//!
//! Measured on the message store's puts (random slots of a 20 MB table): with 4 KiB pages the
//! table's first touch was a page fault per page — 5,000 of them, about 2.5 % of a put's time —
//! and every slot load risked a TLB miss. With 2 MiB pages it faults ten times. Only for speed:
//! where huge pages are off, the table is ordinary zeroed memory.

use std::ops::{Deref, DerefMut};

use memmap2::MmapMut;

use crate::error::{Error, Result};

/// The size of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// `len` zeroed `u32`s; dereferences to `[u32]`.
pub(crate) struct U32Table {
    map: MmapMut,
    len: usize,
}

impl U32Table {
    /// A table of `len` zeros. From 2 MiB up the mapping is a whole number of huge pages (Linux
    /// aligns an anonymous mapping of that size to a huge page), so all of it can be huge; the
    /// memory is taken as it is first written. `Error::Io` if the system refuses the mapping.
    pub(crate) fn zeroed(len: usize) -> Result<U32Table> {
        // A table smaller than a huge page stays on small pages: one huge page would take 2 MiB
        // at its first write.
        let huge = len.saturating_mul(4) >= HUGE_PAGE;
        let mapped = len
            .checked_mul(4)
            .and_then(|bytes| if huge { bytes.checked_next_multiple_of(HUGE_PAGE) } else { Some(bytes.max(1)) })
            .filter(|&mapped| isize::try_from(mapped).is_ok())
            .ok_or(Error::InvalidConfig { field: "index_slots", reason: "a slot table larger than memory".into() })?;
        let map = MmapMut::map_anon(mapped).map_err(Error::io("mmap anonymous memory", "(index slot table)"))?;
        #[cfg(target_os = "linux")]
        if huge {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(U32Table { map, len })
    }
}

impl Deref for U32Table {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        // SAFETY: the map is page-aligned (so aligned for `u32`), at least `len * 4` bytes long
        // (`zeroed`), readable and initialised (anonymous memory reads as zeros), and lives as
        // long as `self`; every bit pattern is a valid `u32`; the returned borrow of `self` keeps
        // writers (`deref_mut`, which needs `&mut self`) out while it lives.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().cast::<u32>(), self.len) }
    }
}

impl DerefMut for U32Table {
    fn deref_mut(&mut self) -> &mut [u32] {
        // SAFETY: as in `deref`, and the map is writable; `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().cast::<u32>(), self.len) }
    }
}

impl std::fmt::Debug for U32Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("U32Table").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_starts_zeroed_and_keeps_what_is_written() {
        for len in [usize::MAX / 4, usize::MAX / 8, usize::MAX] {
            assert!(U32Table::zeroed(len).is_err(), "{len} u32s: refused, never a short map");
        }
        for len in [0, 1, 1000, HUGE_PAGE / 4 + 1] {
            let mut table = U32Table::zeroed(len).expect("map");
            assert_eq!(table.len(), len);
            assert!(table.iter().all(|&v| v == 0), "len {len}: zeroed");
            if len > 0 {
                table[len - 1] = 7;
                table[0] = 9;
                assert_eq!((table[0], table[len - 1]), (9, if len == 1 { 9 } else { 7 }));
            }
        }
    }
}
