//! The machinery the offset and time indexes share (docs/DESIGN.md §6): fixed-size entries appended
//! to a preallocated mmap'd file, binary search, the structural sanity check, and trimming at seal.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::Path;

use crate::config::ReadPath;
use crate::error::{Corruption, Error, Result};
use crate::storage::map_budget::MapBudget;
use crate::storage::{self, FileId, INDEX_ADVICE, MappedFile};

/// A fixed-size index entry.
pub(crate) trait IndexEntry: Copy + Eq + Debug {
    /// Encoded size in bytes.
    const LEN: usize;
    /// Decodes from the first `LEN` bytes.
    fn decode_from(bytes: &[u8]) -> Self;
    /// Encodes into the first `LEN` bytes.
    fn encode_into(&self, out: &mut [u8]);
    /// An entry of all-zero bytes: never written (docs/DESIGN.md §6), so it marks unused space.
    fn is_zero(&self) -> bool;
    /// Whether `self` may follow `previous`, entry number `entry - 1` (the strict ordering of the
    /// index); what is wrong if not.
    fn check_follows(&self, previous: &Self, entry: u64) -> Result<(), Corruption>;
}

/// A sparse index file of `E` entries.
#[derive(Debug)]
pub(crate) struct SparseIndex<E> {
    file: MappedFile,
    max_entries: u64,
    _entry: PhantomData<E>,
}

impl<E: IndexEntry> SparseIndex<E> {
    /// Creates an empty index file preallocated to `index_bytes` rounded down to whole entries.
    pub(crate) fn create(path: &Path, index_bytes: u64, reads: ReadPath) -> Result<SparseIndex<E>> {
        let max_entries = index_bytes / E::LEN as u64;
        let file = MappedFile::create(path, max_entries * E::LEN as u64, reads, INDEX_ADVICE)?;
        Ok(SparseIndex { file, max_entries, _entry: PhantomData })
    }

    /// Opens an index holding `entries` entries for further appends (on a full disk, without
    /// re-extending it: [`SparseIndex::ensure_capacity`] does before the next entry).
    pub(crate) fn open_writable(
        path: &Path,
        entries: u64,
        index_bytes: u64,
        reads: ReadPath,
    ) -> Result<SparseIndex<E>> {
        // Room for one more entry at least: a sealed segment's final time entry must fit (an index
        // the cleaner wrote for a group of segments may hold more than `index_bytes`; a truncation
        // into that segment reopens it as the active one).
        let max_entries = (index_bytes / E::LEN as u64).max(entries + 1);
        let (len, capacity) = (entries * E::LEN as u64, max_entries * E::LEN as u64);
        let file = MappedFile::open_writable(path, len, capacity, reads, INDEX_ADVICE)?;
        Ok(SparseIndex { file, max_entries, _entry: PhantomData })
    }

    /// An index of a read-only open, read with `pread` and opened at each read (it holds no
    /// descriptor); a missing file is an empty index.
    pub(crate) fn open_pread(path: &Path) -> SparseIndex<E> {
        let meta = storage::stat(path).ok();
        let len = meta.as_ref().map_or(0, |meta| meta.len() / E::LEN as u64 * E::LEN as u64);
        let file = MappedFile::open_viewed(path, len, meta.as_ref().map(FileId::of));
        SparseIndex { file, max_entries: len / E::LEN as u64, _entry: PhantomData }
    }

    /// A sealed index's file put under a budget by `under`.
    pub(crate) fn budgeted_sealed(self, under: impl Fn(MappedFile) -> MappedFile) -> SparseIndex<E> {
        SparseIndex { file: under(self.file), ..self }
    }

    /// Puts the index file under `budget` (see `MappedFile::budgeted`).
    pub(crate) fn budgeted(self, budget: Option<&MapBudget>) -> Result<SparseIndex<E>> {
        Ok(SparseIndex { file: self.file.budgeted(budget)?, ..self })
    }

    /// A sealed index of `entries` entries, read at first use.
    pub(crate) fn open_sealed(path: &Path, entries: u64, reads: ReadPath) -> SparseIndex<E> {
        let file = MappedFile::open_sealed(path, entries * E::LEN as u64, reads);
        SparseIndex { file, max_entries: entries, _entry: PhantomData }
    }

    /// Whether the file has less room than the entries it may hold (opened on a full disk).
    pub(crate) fn is_short(&self) -> bool {
        self.file.capacity() < self.max_entries * E::LEN as u64
    }

    /// Makes sure the file has room for every entry it may hold (an index opened on a full disk
    /// was not re-extended). `Error::DiskFull` if it cannot; nothing is written then.
    pub(crate) fn ensure_capacity(&self) -> Result<()> {
        let wanted = self.max_entries * E::LEN as u64;
        if self.file.capacity() < wanted { self.file.grow(wanted) } else { Ok(()) }
    }

    pub(crate) fn entries(&self) -> u64 {
        self.file.len() / E::LEN as u64
    }

    /// Whether `reserved` more entries would not fit.
    pub(crate) fn is_full(&self, reserved: u64) -> bool {
        self.entries() + reserved >= self.max_entries
    }

    pub(crate) fn append(&self, entry: E) -> Result<()> {
        debug_assert!(!entry.is_zero(), "an all-zero entry would read as unused space");
        debug_assert!(
            self.last()?.is_none_or(|last| entry.check_follows(&last, self.entries()).is_ok()),
            "index entries must increase: {entry:?} after {:?}",
            self.last()
        );
        let mut buf = [0u8; 16];
        entry.encode_into(&mut buf);
        self.file.append(&buf[..E::LEN])?;
        Ok(())
    }

    pub(crate) fn last(&self) -> Result<Option<E>> {
        match self.entries() {
            0 => Ok(None),
            n => self.get(n - 1),
        }
    }

    fn get(&self, i: u64) -> Result<Option<E>> {
        self.file.read_with(i * E::LEN as u64, E::LEN, E::decode_from)
    }

    /// The last entry for which `at_or_before` holds, which must be true for a prefix of the entries.
    pub(crate) fn floor(&self, at_or_before: impl Fn(&E) -> bool) -> Result<Option<E>> {
        let n = self.entries() as usize;
        if self.file.window_len() < (n * E::LEN) as u64 {
            return self.floor_by_probes(n, at_or_before);
        }
        let found = self.file.read_with(0, n * E::LEN, |bytes| {
            let entry = |i: usize| E::decode_from(&bytes[i * E::LEN..]);
            let count = partition_point(n, |i| at_or_before(&entry(i)));
            count.checked_sub(1).map(entry)
        })?;
        Ok(found.flatten())
    }

    /// [`SparseIndex::floor`] reading one entry per step of the binary search (a large index read
    /// with `pread`: a few small reads instead of the whole file).
    fn floor_by_probes(&self, n: usize, at_or_before: impl Fn(&E) -> bool) -> Result<Option<E>> {
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(entry) = self.get(mid as u64)? else { return Ok(None) };
            if at_or_before(&entry) { lo = mid + 1 } else { hi = mid }
        }
        match lo.checked_sub(1) {
            Some(i) => self.get(i as u64),
            None => Ok(None),
        }
    }

    /// Every entry, for sanity checks and dumps.
    pub(crate) fn all(&self) -> Result<Vec<E>> {
        let n = self.entries() as usize;
        let entries =
            self.file.read_with(0, n * E::LEN, |bytes| bytes.chunks_exact(E::LEN).map(E::decode_from).collect())?;
        Ok(entries.unwrap_or_default())
    }

    /// Trims the file to its entries and closes it (an index is derived: a crash before the
    /// flush leaves one that fails its sanity check and is rebuilt).
    pub(crate) fn seal(&self) -> Result<()> {
        self.file.seal_derived()
    }

    /// See [`MappedFile::release_preallocation`].
    pub(crate) fn release_preallocation(&self) -> Result<()> {
        self.file.release_preallocation()
    }

    /// Uses only the first `entries` entries (a read-only view of an index still being written).
    pub(crate) fn limit_to(&self, entries: u64) {
        if entries < self.entries() {
            self.file.limit_len(entries * E::LEN as u64);
        }
    }

    /// Points a sealed index at a rebuilt file of `len` bytes renamed over its path.
    pub(crate) fn replace_sealed(&self, len: u64) {
        self.file.replace_sealed(len);
    }

    /// The file's current path (it changes when the segment is renamed `.deleted`).
    pub(crate) fn path(&self) -> std::path::PathBuf {
        self.file.path()
    }

    pub(crate) fn rename(&self, to: &Path) -> Result<()> {
        self.file.rename(to)
    }

    pub(crate) fn retire(&self) {
        self.file.retire()
    }
}

/// The number of leading indexes in `0..n` for which `pred` holds (it must hold for a prefix).
fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { lo = mid + 1 } else { hi = mid }
    }
    lo
}

/// Damage found in an index file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexDamage {
    /// Byte position in the index file.
    pub position: u64,
    pub reason: Corruption,
}

impl IndexDamage {
    fn at_entry<E: IndexEntry>(entry: usize, reason: Corruption) -> IndexDamage {
        IndexDamage { position: (entry * E::LEN) as u64, reason }
    }

    /// The damage as `Error::Corrupt` in the index file at `path`.
    pub(crate) fn into_error(self, path: &Path) -> Error {
        Error::corrupt(path, self.position, self.reason)
    }
}

/// The structural check of an index's entries: strictly ordered, and nothing but zero entries after
/// the first zero entry (the unused tail of an untrimmed index). Returns the number in use.
pub(crate) fn check_entries<E: IndexEntry>(entries: &[E]) -> Result<usize, IndexDamage> {
    let used = entries.iter().position(E::is_zero).unwrap_or(entries.len());
    if let Some(i) = entries[used..].iter().position(|e| !e.is_zero()) {
        let entry = used + i;
        return Err(IndexDamage::at_entry::<E>(entry, Corruption::IndexEntryAfterUnused { entry: entry as u64 }));
    }
    for (i, pair) in entries[..used].windows(2).enumerate() {
        let entry = i + 1;
        pair[1].check_follows(&pair[0], entry as u64).map_err(|reason| IndexDamage::at_entry::<E>(entry, reason))?;
    }
    Ok(used)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::log::offset_index::OffsetEntry;
    use crate::log::time_index::TimeEntry;

    fn offsets(entries: &[(u32, u32)]) -> Vec<OffsetEntry> {
        entries.iter().map(|&(relative_offset, position)| OffsetEntry { relative_offset, position }).collect()
    }

    fn times(entries: &[(i64, u32)]) -> Vec<TimeEntry> {
        entries.iter().map(|&(timestamp_ms, relative_offset)| TimeEntry { timestamp_ms, relative_offset }).collect()
    }

    #[test]
    fn well_formed_entries_pass_with_their_unused_tail() {
        assert_eq!(check_entries(&offsets(&[(1, 100), (5, 900), (0, 0), (0, 0)])), Ok(2));
        assert_eq!(check_entries(&times(&[(10, 0), (20, 0), (30, 7)])), Ok(3));
        assert_eq!(check_entries::<OffsetEntry>(&[]), Ok(0));
    }

    #[test]
    fn each_kind_of_index_damage_has_its_own_reason_and_position() {
        let damage = |position, reason| Err(IndexDamage { position, reason });
        assert_eq!(
            check_entries(&offsets(&[(1, 100), (0, 0), (3, 300)])),
            damage(16, Corruption::IndexEntryAfterUnused { entry: 2 })
        );
        assert_eq!(
            check_entries(&offsets(&[(9, 700), (4, 800)])),
            damage(8, Corruption::IndexOffsetNotIncreasing { entry: 1, previous: 9, found: 4 })
        );
        assert_eq!(
            check_entries(&offsets(&[(1, 100), (2, 200), (3, 200)])),
            damage(16, Corruption::IndexPositionNotIncreasing { entry: 2, previous: 200, found: 200 })
        );
        assert_eq!(
            check_entries(&times(&[(50, 1), (40, 2)])),
            damage(12, Corruption::TimeNotIncreasing { entry: 1, previous: 50, found: 40 })
        );
        assert_eq!(
            check_entries(&times(&[(50, 5), (60, 4)])),
            damage(12, Corruption::TimeOffsetBackwards { entry: 1, previous: 5, found: 4 })
        );
    }

    #[test]
    fn index_damage_reads_as_a_sentence() {
        let reason = Corruption::IndexOffsetNotIncreasing { entry: 1, previous: 9, found: 4 };
        let error = IndexDamage { position: 8, reason }.into_error(Path::new("/d/00000000000000000005.index"));
        assert!(matches!(
            &error,
            Error::Corrupt { position: 8, reason: Corruption::IndexOffsetNotIncreasing { .. }, .. }
        ));
        assert_eq!(
            error.to_string(),
            "corrupt /d/00000000000000000005.index at position 8: index entry 1: relative offset 4 does not increase past 9"
        );
    }

    #[test]
    fn partition_point_finds_the_boundary() {
        for n in 0..20 {
            for cut in 0..=n {
                assert_eq!(partition_point(n, |i| i < cut), cut);
            }
        }
    }
}
