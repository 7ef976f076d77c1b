#![allow(unsafe_code)] // The crate's mmap unsafe lives here, each block with its SAFETY argument.

//! `MappedFile`: an append-only file, preallocated with fallocate, appended to with `pwrite` (or,
//! for a file of small appends whose blocks are all allocated, stores into a writable map:
//! [`MappedFile::with_mapped_appends`]), and
//! read either through short-lived slices of a shared read-only mapping (`ReadPath::Mmap`, the
//! default) or with `pread` (`ReadPath::Pread`: reads that cannot fault, for a directory other
//! tools may truncate files in). This file holds the crate's mmap `unsafe`; the rules that make it
//! sound are docs/DESIGN.md §5:
//!
//! - Readers only see bytes below the *published length* (`len`, stored with Release after the bytes
//!   are written, loaded with Acquire). The single appender (serialised by `append_lock`) only writes
//!   at or above it. So no byte a reader can see is ever written while it can be read.
//! - A slice lives only inside [`MappedFile::read_with`]'s closure, under the state's read lock.
//!   Everything that unmaps, shrinks or rewrites published bytes (grow, retire, a cut) takes the
//!   write lock first, so it waits for those slices to end. A seal never waits: it trims the file
//!   to its published length under the read lock (readers never read past it) and drops the
//!   writable map when no reader holds the file — at once, or as the last reader leaves.
//! - The file is never shorter than the published length while mapped by us: the map of a file
//!   being appended to covers a file preallocated with fallocate (checked at open), a sealed file's
//!   map is created only after checking the file's length, and a seal trims a file only down to
//!   its published length (its writable map may outlive the trim: no reader touches the pages past
//!   that length, which no longer move; `populate` may still advise them, racing the trim, and
//!   `MADV_POPULATE_READ` then fails with EFAULT where a read would SIGBUS — it never raises the
//!   signal). Another process truncating a mapped file is outside these rules: a
//!   read past its new end is a SIGBUS; `ReadPath::Pread` is for directories where that can happen.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use memmap2::{MmapOptions, MmapRaw};
use parking_lot::{Mutex, RwLock};

use super::ReadPath;
use super::map_budget::{MapBudget, Reclaim, Unmap};
use crate::error::{Corruption, Error, Result};
use crate::failpoint::error_point;
use crate::storage::{FileId, allocate};

/// Bytes a `pread` file is read in at once by walks that read everything.
const PREAD_WINDOW: u64 = 1 << 20;

/// An append-only file (a segment's `.log`, `.index` or `.timeindex`).
#[derive(Debug)]
pub(crate) struct MappedFile {
    /// The file's current name; held while the file is opened by name, so a rename (to
    /// `.deleted`, with another file taking the old name) never makes a reader open the wrong one.
    path: Mutex<PathBuf>,
    /// The file's state, shared (weakly) with the map budget, which may unmap it.
    slot: Arc<Slot>,
    /// Published length: readers may read `[0, len)`.
    len: AtomicU64,
    /// Serialises appenders so exactly one thread writes above `len`.
    append_lock: Mutex<()>,
    /// Sealed (trimmed and synced) while readers held slices: the writable map and descriptor are
    /// dropped by the next thread to find the file free ([`MappedFile::finish_seal`]).
    seal_pending: AtomicBool,
    /// Bytes below this were written (data, or zeros by [`MappedFile::zero_ahead`]) by this
    /// handle: past the published length, the zeroed run ahead of the appends.
    zeroed_to: AtomicU64,
    reads: ReadPath,
    /// What to tell a user whose disk is too full to preallocate this file.
    advice: &'static str,
    /// Appends are stores into the (writable) map instead of `pwrite`s
    /// ([`MappedFile::with_mapped_appends`]); cleared if the map is made again read-only.
    mapped_appends: AtomicBool,
    /// For a file of a read-only view (opened by name at each read): the file the name stood for
    /// when the view was taken. Another process replacing it makes reads fail (and the view be
    /// taken again) rather than read the new file at the old file's positions.
    identity: Option<FileId>,
}

/// What the map budget may reach: the state, the read mark and the budget.
#[derive(Debug)]
struct Slot {
    state: RwLock<State>,
    /// Read since the budget's clock hand last passed (only kept under a budget).
    referenced: AtomicBool,
    budget: Option<MapBudget>,
}

impl Slot {
    /// Replaces the state, accounting for the old one: a sealed map is dropped *before* it is
    /// given back to the budget (so the maps that exist never outnumber what the budget counts),
    /// a writable file's descriptor is counted closed.
    fn replace(&self, state: &mut State, new: State) -> State {
        let to_writable = matches!(new, State::Writable { .. });
        let mut old = std::mem::replace(state, new);
        self.give_back(&mut old, to_writable);
        old
    }

    fn give_back(&self, old: &mut State, to_writable: bool) {
        let Some(budget) = &self.budget else { return };
        match old {
            State::Sealed { map } => {
                if let Some(map) = map.take() {
                    let len = map.len() as u64;
                    drop(map);
                    budget.uncharge(len);
                }
            }
            State::Writable { .. } if !to_writable => budget.close_file(),
            _ => {}
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = std::mem::replace(self.state.get_mut(), State::Retired);
        self.give_back(&mut state, false);
    }
}

impl Reclaim for Slot {
    fn take_referenced(&self) -> bool {
        self.referenced.swap(false, Ordering::Relaxed)
    }

    fn try_unmap(&self) -> Unmap {
        // Never waits: a reader inside `read_with` holds the read lock.
        let Some(mut state) = self.state.try_write() else { return Unmap::Busy };
        match &mut *state {
            // Counted by the budget itself: no `uncharge`.
            State::Sealed { map } => map.take().map_or(Unmap::NotMapped, |map| Unmap::Freed(map.len() as u64)),
            // Active files are always mapped; retired ones hold nothing.
            State::Writable { .. } | State::Retired => Unmap::NotMapped,
        }
    }
}

#[derive(Debug)]
enum State {
    /// Open for appends: the descriptor, the bytes allocated, and (under `ReadPath::Mmap`) a
    /// read-only map of them.
    Writable { file: File, capacity: u64, map: Option<MmapRaw> },
    /// Sealed: no descriptor. Under `ReadPath::Mmap` a read-only map is created at the first read
    /// (after checking the file's length); under `ReadPath::Pread` each read opens the file.
    Sealed { map: Option<MmapRaw> },
    /// Released for good; reads return `None`.
    Retired,
}

impl MappedFile {
    /// Creates `path` (which must not exist), preallocated to `capacity` bytes.
    /// A failure after the file was created removes it again.
    pub(crate) fn create(path: &Path, capacity: u64, reads: ReadPath, advice: &'static str) -> Result<MappedFile> {
        let file =
            OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(Error::io("create", path))?;
        allocate(&file, path, capacity, advice)
            .and_then(|()| MappedFile::writable(path, file, 0, capacity, reads, advice))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(path);
            })
    }

    /// Opens an existing file for appends after its first `len` bytes, re-extended to `capacity`.
    /// On a full disk it opens anyway with the blocks it has (a log must open so records can be
    /// deleted); [`MappedFile::grow`] re-extends it before the next append needs the space.
    pub(crate) fn open_writable(
        path: &Path,
        len: u64,
        capacity: u64,
        reads: ReadPath,
        advice: &'static str,
    ) -> Result<MappedFile> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(Error::io("open", path))?;
        let capacity = match allocate(&file, path, len.max(capacity), advice) {
            Ok(()) => len.max(capacity),
            Err(error @ Error::DiskFull { .. }) => {
                tracing::warn!(%error, "opening without re-extending; appends need free space");
                file.metadata().map_err(Error::io("stat", path))?.len()
            }
            Err(error) => return Err(error),
        };
        if capacity < len {
            return Err(Error::corrupt(path, capacity, Corruption::ShortFile { len: capacity, expected: len }));
        }
        MappedFile::writable(path, file, len, capacity, reads, advice)
    }

    /// Creates `path` (which must not exist) as a fixed-size file of `len` zero bytes, preallocated
    /// and published whole: a file whose bytes are changed in place ([`MappedFile::write_at`]),
    /// never appended to (an IndexFile's slots and entries). A failure removes the file again.
    pub(crate) fn create_fixed(path: &Path, len: u64, reads: ReadPath, advice: &'static str) -> Result<MappedFile> {
        let file = MappedFile::create(path, len, reads, advice)?;
        // Nobody else holds the file yet, and its preallocated blocks read as zeros.
        file.len.store(len, Ordering::Release);
        Ok(file)
    }

    /// An existing sealed file of `len` bytes; nothing is opened until the first read.
    pub(crate) fn open_sealed(path: &Path, len: u64, reads: ReadPath) -> MappedFile {
        MappedFile::with_state(path, State::Sealed { map: None }, len, reads, "")
    }

    /// A file of a read-only view: read with `pread`, opened at each read, and only while the
    /// name still stands for the file `identity` (as listed).
    pub(crate) fn open_viewed(path: &Path, len: u64, identity: Option<FileId>) -> MappedFile {
        let mut file = MappedFile::open_sealed(path, len, ReadPath::Pread);
        file.identity = identity;
        file
    }

    fn writable(
        path: &Path,
        file: File,
        len: u64,
        capacity: u64,
        reads: ReadPath,
        advice: &'static str,
    ) -> Result<MappedFile> {
        let map = match reads {
            ReadPath::Mmap => Some(map_read_only(path, &file, capacity)?),
            ReadPath::Pread => None,
        };
        Ok(MappedFile::with_state(path, State::Writable { file, capacity, map }, len, reads, advice))
    }

    fn with_state(path: &Path, state: State, len: u64, reads: ReadPath, advice: &'static str) -> MappedFile {
        MappedFile {
            path: Mutex::new(path.to_path_buf()),
            slot: Arc::new(Slot { state: RwLock::new(state), referenced: AtomicBool::new(false), budget: None }),
            len: AtomicU64::new(len),
            append_lock: Mutex::new(()),
            seal_pending: AtomicBool::new(false),
            zeroed_to: AtomicU64::new(len),
            reads,
            advice,
            mapped_appends: AtomicBool::new(false),
            identity: None,
        }
    }

    /// Makes appends stores into the map rather than `pwrite`s: for files of small appends (a
    /// consume queue's 20-byte entries), where a `pwrite` costs 10 to 40 times a store
    /// (`examples/cq_entry_write.rs`); the log's segments keep `pwrite` (§5: stores of whole
    /// batches into fresh pages ran far slower). Only for a writable, mapped file whose every
    /// block is allocated: a store into a hole would fault for a block a full disk may not give
    /// (SIGBUS); otherwise appends stay `pwrite`s. And only on a file system that never copies a
    /// block on write (ext4, tmpfs): on XFS with reflink, btrfs or APFS an allocated block another
    /// file shares (a `cp` of the live file reflinks by default) needs a new one at the next
    /// store, which a full disk turns into a SIGBUS where a `pwrite` fails with ENOSPC
    /// (tests/store_cq_reflink_xfs.rs). Before the file is shared.
    pub(crate) fn with_mapped_appends(mut self) -> Result<MappedFile> {
        use std::os::unix::fs::MetadataExt as _;
        let path = self.path();
        let slot = Arc::get_mut(&mut self.slot).expect("mapped appends are chosen before anyone shares the file");
        let State::Writable { file, capacity, map: Some(map) } = slot.state.get_mut() else { return Ok(self) };
        if !writes_in_place(file) {
            return Ok(self);
        }
        let allocated = file.metadata().map_err(Error::io("stat", &path))?.blocks().saturating_mul(512);
        if allocated < *capacity {
            return Ok(self);
        }
        let len = usize::try_from(*capacity)
            .map_err(|_| Error::io("mmap", &path)(std::io::ErrorKind::InvalidInput.into()))?;
        *map = MmapOptions::new().len(len).map_raw(&*file).map_err(Error::io("mmap", &path))?;
        self.mapped_appends.store(true, Ordering::Relaxed);
        Ok(self)
    }

    /// Puts the file under `budget` (if any): its sealed maps are charged to it and reclaimable,
    /// and, while it is writable, its descriptor counts against `max_open_files`
    /// (`Error::OpenFileBudget` if that is reached; the file is closed then).
    pub(crate) fn budgeted(mut self, budget: Option<&MapBudget>) -> Result<MappedFile> {
        let Some(budget) = budget else { return Ok(self) };
        let slot = Arc::get_mut(&mut self.slot).expect("a file is budgeted before anyone shares it");
        if matches!(&*slot.state.get_mut(), State::Writable { .. }) {
            budget.open_file()?;
        }
        slot.budget = Some(budget.clone());
        Ok(self)
    }

    /// The file's current path.
    pub(crate) fn path(&self) -> PathBuf {
        self.path.lock().clone()
    }

    /// Published length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// Bytes allocated for appends (0 once sealed).
    pub(crate) fn capacity(&self) -> u64 {
        match &*self.read_state() {
            State::Writable { capacity, .. } if !self.seal_pending.load(Ordering::Relaxed) => *capacity,
            _ => 0,
        }
    }

    /// How many bytes a walk over everything should read at once: everything for a mapped file (a
    /// slice costs nothing), a bounded window for a `pread` file (every byte read is copied).
    pub(crate) fn window_len(&self) -> u64 {
        match self.reads {
            ReadPath::Mmap => u64::MAX,
            ReadPath::Pread => PREAD_WINDOW,
        }
    }

    /// Copies `bytes` to the end of the published data and publishes them. Returns their position.
    pub(crate) fn append(&self, bytes: &[u8]) -> Result<u64> {
        let _appender = self.append_lock.lock();
        let state = self.read_state();
        let State::Writable { file, capacity, map } = &*state else {
            return Err(self.misuse("append to a sealed file"));
        };
        if self.seal_pending.load(Ordering::Relaxed) {
            return Err(self.misuse("append to a sealed file"));
        }
        let position = self.len.load(Ordering::Relaxed);
        let end = position + bytes.len() as u64;
        if end > *capacity {
            return Err(self.misuse("append past the preallocated capacity"));
        }
        match map {
            Some(map) if self.mapped_appends.load(Ordering::Relaxed) => {
                debug_assert!(end <= map.len() as u64, "the writable map covers the capacity");
                // SAFETY: the map is writable (`with_mapped_appends`, cleared whenever it is made
                // again) and covers `capacity` ≥ `end`, of a file whose blocks are all allocated
                // (a store cannot fault for a block). The state's read lock keeps it mapped. Only
                // this appender (under `append_lock`) writes, and only at or past the published
                // length, which no reader reads until the store below publishes it: nobody reads
                // or writes these bytes meanwhile. `bytes` is the caller's, not the map's.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), map.as_mut_ptr().add(position as usize), bytes.len());
                }
            }
            // `pwrite`, not a store into the map: measured here, stores into a fallocated shared
            // mapping ran at 0.5 GB/s with 9 ms p99 page-fault stalls and halved the fdatasync
            // rate, `pwrite` into the same file at 4.3 GB/s. Mapped readers see the same page
            // cache. Nobody reads at or past `position` until it is published below.
            _ => file.write_all_at(bytes, position).map_err(|e| self.io_error("pwrite", e))?,
        }
        self.len.store(end, Ordering::Release);
        Ok(position)
    }

    /// Bytes written ahead of the published length ([`MappedFile::zero_ahead`]); `u64::MAX`-ish
    /// once nothing is left to zero (the capacity reached, a failure, the preallocation released).
    pub(crate) fn zeroed_ahead(&self) -> u64 {
        self.zeroed_to.load(Ordering::Relaxed).saturating_sub(self.len())
    }

    /// Writes zeros over the preallocated bytes from where the last appends or zeros end, up to
    /// `end` (at most the capacity) and at most `chunk` bytes, holding the append lock (an append
    /// waits for it); the caller then syncs them ([`MappedFile::sync_zeroed`]). A fallocated block is an *unwritten* extent until
    /// written, and the first fdatasync of each block converts it in the file system's journal: a
    /// durable append into blocks already written and synced costs one data write, not a journal
    /// commit as well. Never touches published bytes; zeros past the data read as its end.
    /// Returns the bytes zeroed.
    pub(crate) fn zero_ahead(&self, end: u64, chunk: u64) -> Result<u64> {
        static ZEROS: [u8; 256 << 10] = [0; 256 << 10];
        let zeroed = {
            let appender = self.append_lock.lock();
            let state = self.read_state();
            let State::Writable { file, capacity, map } = &*state else { return Ok(0) };
            if self.seal_pending.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let from = self.zeroed_to.load(Ordering::Relaxed).max(self.len.load(Ordering::Relaxed));
            if from >= *capacity {
                // Nothing left to zero: say so, so no more zeroing is asked for this file.
                self.zeroed_to.store(u64::MAX, Ordering::Relaxed);
                return Ok(0);
            }
            let until = end.min(*capacity).min(from.saturating_add(chunk));
            if from >= until {
                return Ok(0);
            }
            let mut position = from;
            while position < until {
                let n = (until - position).min(ZEROS.len() as u64);
                if let Err(error) = file.write_all_at(&ZEROS[..n as usize], position) {
                    // Zeroing is only for speed: a file it fails on is not zeroed again.
                    self.zeroed_to.store(u64::MAX, Ordering::Relaxed);
                    return Err(self.io_error("pwrite", error));
                }
                position += n;
            }
            self.zeroed_to.store(until, Ordering::Relaxed);
            // The appends need not wait for this: the state's read lock keeps the map. A seal may
            // trim the file meanwhile; populating past the trim fails (EFAULT), it never faults.
            drop(appender);
            if let Some(map) = map {
                populate(map, from, until);
            }
            until - from
        };
        Ok(zeroed)
    }

    /// fdatasync after [`MappedFile::zero_ahead`], on the file's own descriptor (so it shares the
    /// log's error state: Linux reports a failed writeback once per open file, and this sync
    /// covers appended data too). The caller treats a failure as the data's.
    pub(crate) fn sync_zeroed(&self) -> Result<()> {
        if let State::Writable { file, .. } = &*self.read_state() {
            error_point!("zero_ahead_fdatasync", self.path());
            file.sync_data().map_err(|e| self.io_error("fdatasync", e))?;
        }
        Ok(())
    }

    /// Overwrites published bytes of a writable file in place with `pwrite`, holding the state's
    /// write lock, so it first waits for every slice of this file to end: bytes a reader may be
    /// reading are never modified while it reads them (docs/DESIGN.md §5). For files changed in
    /// place (an IndexFile, made by [`MappedFile::create_fixed`]); appended files use
    /// [`MappedFile::append`].
    /// The written pages are then mapped ([`populate`]) under the read lock only: the file's
    /// queries, which read them next, need not wait for that.
    pub(crate) fn write_at(&self, position: u64, bytes: &[u8]) -> Result<()> {
        let state = self.slot.state.write();
        let State::Writable { file, .. } = &*state else {
            return Err(self.misuse("write into a sealed file"));
        };
        if self.seal_pending.load(Ordering::Relaxed) {
            return Err(self.misuse("write into a sealed file"));
        }
        let Some(end) = position.checked_add(bytes.len() as u64).filter(|&end| end <= self.len()) else {
            return Err(self.misuse("write past the published length"));
        };
        file.write_all_at(bytes, position).map_err(|e| self.io_error("pwrite", e))?;
        // Read-locked from here (a `StateRead`, so a seal that comes meanwhile finishes when it
        // is released).
        let state = StateRead { file: self, guard: Some(parking_lot::RwLockWriteGuard::downgrade(state)) };
        if let State::Writable { map: Some(map), .. } = &*state {
            populate(map, position, end);
        }
        Ok(())
    }

    /// Makes the published bytes `[position, position + len)` of a writable file read as zeros,
    /// their blocks staying allocated, holding the state's write lock (so after every slice of the
    /// file ends). Metadata only where the file system can (fallocate `ZERO_RANGE`: ext4, XFS),
    /// else zeros are written. The stale tail of a recovered IndexFile.
    pub(crate) fn zero_range(&self, position: u64, len: u64) -> Result<()> {
        let state = self.slot.state.write();
        let State::Writable { file, .. } = &*state else {
            return Err(self.misuse("zero a range of a sealed file"));
        };
        if self.seal_pending.load(Ordering::Relaxed) {
            return Err(self.misuse("zero a range of a sealed file"));
        }
        if position.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(self.misuse("zero past the published length"));
        }
        super::zero_range(file, &self.path(), position, len)
    }

    /// Appends the published bytes `[position, position + len)` to `out`, for a reader that keeps
    /// them: one copy. Under `ReadPath::Mmap` out of the map (measured on a one-pass `Log::read`
    /// of 100-byte records: a copy out of a fresh map, its page faults included, beat `pread` into
    /// the buffer by 10 %); under `ReadPath::Pread` with `pread` straight into `out` (a writable
    /// file's descriptor; a sealed file is opened for the read, under its path lock), with no
    /// zeroing first and no buffer in between. `None` if the file was retired (the caller
    /// re-resolves). The state's read lock is held throughout, as for [`MappedFile::read_with`].
    pub(crate) fn copy_into(&self, position: u64, len: usize, out: &mut Vec<u8>) -> Result<Option<()>> {
        if self.reads == ReadPath::Mmap {
            return self.read_with(position, len, |bytes| {
                // Tests hold a reader inside its guard here (a truncation must wait for it).
                #[cfg(feature = "failpoints")]
                fail::fail_point!("read_holding_segment");
                out.extend_from_slice(bytes);
            });
        }
        let Some(end) = position.checked_add(len as u64) else {
            return Err(self.past_end());
        };
        let state = self.read_state();
        if end > self.len() {
            return Err(self.past_end());
        }
        // Tests hold a reader inside its guard here (a truncation must wait for it).
        #[cfg(feature = "failpoints")]
        fail::fail_point!("read_holding_segment");
        match &*state {
            State::Writable { file, .. } => self.pread_into(file, position, len, out).map(Some),
            State::Sealed { .. } => self.pread_into(&self.open_for_pread()?, position, len, out).map(Some),
            State::Retired => Ok(None),
        }
    }

    /// A sealed file opened for one `pread` read, under the path lock (a concurrent rename cannot
    /// hand us another file) and checked to be the file listed.
    fn open_for_pread(&self) -> Result<File> {
        let path = self.path.lock();
        let file = File::open(&*path).map_err(Error::io("open", &*path))?;
        drop(path);
        self.check_identity(&file)?;
        Ok(file)
    }

    /// `pread`s `[position, position + len)` of `file` onto the end of `out`, with no zeroing
    /// first. A file shorter than that is `Error::Corrupt` (`ShortFile`), and `out` is as it was.
    fn pread_into(&self, file: &File, position: u64, len: usize, out: &mut Vec<u8>) -> Result<()> {
        let kept = out.len();
        out.reserve(len);
        while out.len() - kept < len {
            let done = out.len() - kept;
            let spare = &mut out.spare_capacity_mut()[..len - done];
            match rustix::io::pread(file, spare, position + done as u64) {
                Ok(([], _)) => {
                    out.truncate(kept);
                    let file_len = file.metadata().map_or(0, |m| m.len());
                    let expected = position + len as u64;
                    return Err(Error::corrupt(
                        self.path(),
                        file_len,
                        Corruption::ShortFile { len: file_len, expected },
                    ));
                }
                Ok((read, _)) => {
                    let n = read.len();
                    // SAFETY: `pread` initialised the first `n` bytes of the spare capacity (the
                    // slice it returned), which follow the vector's length, and `n` is at most
                    // the `len - done` bytes of capacity it was given.
                    unsafe { out.set_len(out.len() + n) };
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(errno) => {
                    out.truncate(kept);
                    return Err(self.io_error("pread", errno.into()));
                }
            }
        }
        Ok(())
    }

    /// Calls `f` with the published bytes `[position, position + len)`. `None` if the file was
    /// retired (its segment was deleted): the caller re-resolves.
    pub(crate) fn read_with<R>(&self, position: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>> {
        self.read_with_buffer(position, len, &mut Vec::new(), f)
    }

    /// [`MappedFile::read_with`], reading into `buffer` (emptied first) where the bytes are read
    /// with `pread` rather than lent from the map: a walk over many windows reuses one buffer
    /// and zeroes none (measured on a one-pass `read_batches` under `ReadPath::Pread`: a new
    /// zeroed megabyte per window cost half its time).
    pub(crate) fn read_with_buffer<R>(
        &self,
        position: u64,
        len: usize,
        buffer: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        let Some(end) = position.checked_add(len as u64) else {
            return Err(self.past_end());
        };
        loop {
            let state = self.read_state();
            // Checked under the lock: the published length only shrinks (a rebuilt index, a
            // truncation) under the write lock.
            if end > self.len() {
                return Err(self.past_end());
            }
            if len == 0 {
                return Ok(Some(f(&[])));
            }
            let map = match &*state {
                State::Sealed { map: Some(map) } => {
                    if self.slot.budget.is_some() {
                        self.slot.referenced.store(true, Ordering::Relaxed);
                    }
                    map
                }
                State::Writable { map: Some(map), .. } => map,
                State::Writable { file, map: None, .. } => {
                    buffer.clear();
                    self.pread_into(file, position, len, buffer)?;
                    return Ok(Some(f(buffer)));
                }
                State::Sealed { map: None } if self.reads == ReadPath::Pread => {
                    buffer.clear();
                    self.pread_into(&self.open_for_pread()?, position, len, buffer)?;
                    return Ok(Some(f(buffer)));
                }
                State::Retired => return Ok(None),
                State::Sealed { map: None } => {
                    drop(state);
                    self.map_sealed()?;
                    continue;
                }
            };
            if end > map.len() as u64 {
                return Err(self.past_end());
            }
            // SAFETY: [position, end) is inside the map (checked just above, under the lock) and
            // below the published length, so no writer of ours touches it; the slice lives only
            // inside `f`, while `state` is read-locked, so the map cannot be dropped (that takes the
            // write lock) and the file is never shrunk below the published length by us under it
            // (a seal trims past it only; cuts take the write lock).
            let bytes = unsafe { std::slice::from_raw_parts(map.as_ptr().add(position as usize), len) };
            return Ok(Some(f(bytes)));
        }
    }

    /// An I/O error with this file's path, built only when there is an error (the path is cloned).
    fn io_error(&self, op: &'static str, source: std::io::Error) -> Error {
        Error::io(op, self.path())(source)
    }

    /// A read outside the published bytes: not a bug by itself, a reader holding a stale length can
    /// race a truncation or an index rebuild.
    fn past_end(&self) -> Error {
        Error::Io {
            op: "read past the published length",
            path: self.path(),
            source: std::io::ErrorKind::UnexpectedEof.into(),
        }
    }

    /// `Error::Io` (not found) if the name now stands for another file than the one listed.
    fn check_identity(&self, file: &File) -> Result<()> {
        let Some(expected) = self.identity else { return Ok(()) };
        let meta = file.metadata().map_err(|e| self.io_error("stat", e))?;
        if FileId::of(&meta) != expected {
            let replaced = std::io::Error::new(std::io::ErrorKind::NotFound, "replaced since it was listed");
            return Err(self.io_error("open", replaced));
        }
        Ok(())
    }

    /// Maps a sealed file read-only, after checking it holds every published byte (a file cut
    /// short by someone else is `Error::Corrupt`, never a SIGBUS at the first read past its end).
    fn map_sealed(&self) -> Result<()> {
        let mut state = self.slot.state.write();
        if let State::Sealed { map: map @ None } = &mut *state {
            let path = self.path.lock();
            let file = File::open(&*path).map_err(Error::io("open", &*path))?;
            let file_len = file.metadata().map_err(Error::io("stat", &*path))?.len();
            if file_len < self.len() {
                let reason = Corruption::ShortFile { len: file_len, expected: self.len() };
                return Err(Error::corrupt(&*path, file_len, reason));
            }
            let len = self.len();
            if let Some(budget) = &self.slot.budget {
                let slot: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(&self.slot) as Arc<dyn Reclaim>));
                budget.charge(len, slot)?;
            }
            match map_read_only(&path, &file, len) {
                Ok(mapped) => *map = Some(mapped),
                Err(error) => {
                    if let Some(budget) = &self.slot.budget {
                        budget.uncharge(len);
                    }
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// fdatasync: makes every appended byte durable (on Linux also those stored through the map:
    /// its pages are the file's page cache; elsewhere the map is `msync`ed first).
    pub(crate) fn flush(&self) -> Result<()> {
        if let State::Writable { file, map, .. } = &*self.read_state() {
            #[cfg(not(target_os = "linux"))]
            if let Some(map) = map.as_ref().filter(|_| self.mapped_appends.load(Ordering::Relaxed)) {
                map.flush().map_err(|e| self.io_error("msync", e))?;
            }
            #[cfg(target_os = "linux")]
            let _ = map;
            error_point!("fdatasync", self.path());
            file.sync_data().map_err(|e| self.io_error("fdatasync", e))?;
        }
        Ok(())
    }

    /// Zeroes the bytes from the published length up to `end` (at most the capacity) of a writable
    /// file and fdatasyncs it: the stale tail of a file cut in place, so bytes past the cut can
    /// never pass for data after a later crash (a derived file's recovery ends at its first zero
    /// entry). Nobody reads those bytes (they are not published) and appends wait meanwhile.
    /// Writes into the file's own allocated blocks, so a full disk cannot stop it.
    pub(crate) fn zero_unpublished(&self, end: u64) -> Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let _appender = self.append_lock.lock();
        let state = self.read_state();
        let State::Writable { file, capacity, .. } = &*state else {
            return Err(self.misuse("zero the tail of a sealed file"));
        };
        if self.seal_pending.load(Ordering::Relaxed) {
            return Err(self.misuse("zero the tail of a sealed file"));
        }
        let (start, end) = (self.len.load(Ordering::Relaxed), end.min(*capacity));
        if start >= end {
            return Ok(());
        }
        let mut position = start;
        while position < end {
            let chunk = (end - position).min(ZEROS.len() as u64);
            file.write_all_at(&ZEROS[..chunk as usize], position).map_err(|e| self.io_error("pwrite", e))?;
            position += chunk;
        }
        error_point!("fdatasync", self.path());
        file.sync_data().map_err(|e| self.io_error("fdatasync", e))
    }

    /// fdatasync, as [`MappedFile::flush`], but the sync runs on a duplicate of the descriptor
    /// without holding the state lock, so in-place writes ([`MappedFile::write_at`], which take the
    /// write lock) are not held up for the sync's duration. Every byte written before the call is
    /// durable when it returns.
    pub(crate) fn flush_detached(&self) -> Result<()> {
        let file = match &*self.read_state() {
            State::Writable { file, .. } => file.try_clone().map_err(|e| self.io_error("dup", e))?,
            // Sealing synced everything; a retired file has nothing left to make durable.
            State::Sealed { .. } | State::Retired => return Ok(()),
        };
        error_point!("fdatasync", self.path());
        file.sync_data().map_err(|e| self.io_error("fdatasync", e))
    }

    /// Seals the file: flush, trim to the published length, flush, then drop the map and
    /// descriptor — at once if no reader holds the file, else as the last one leaves
    /// ([`StateRead`]). Never waits for a reader. Appends and writes fail from here on.
    pub(crate) fn seal(&self) -> Result<()> {
        self.flush()?;
        self.trim_and_close()
    }

    /// Seals a derived file (an index): trimmed, then one flush. A crash before the flush leaves
    /// an index that fails its sanity check and is rebuilt, so the flush before trimming that a
    /// `.log` needs (its data must be durable before it looks sealed) is not needed.
    pub(crate) fn seal_derived(&self) -> Result<()> {
        self.trim_and_close()
    }

    /// Trims the file to its published length and syncs it, then drops the writable map and
    /// descriptor — at once if no reader holds a slice of the file, else when the last one ends
    /// (a seal runs in the sync round: it must never wait for a reader, who may be a caller's
    /// visitor of [`Log::read_batches`](crate::Log::read_batches)).
    fn trim_and_close(&self) -> Result<()> {
        {
            // Appends are over; `zero_ahead` also writes under this lock, and must not extend the
            // file again after the trim.
            let _appender = self.append_lock.lock();
            let state = self.read_state();
            let State::Writable { file, .. } = &*state else { return Ok(()) };
            // Under the read lock only: appends are over, so the published length no longer moves,
            // and readers read only below it; cutting the preallocated tail past it changes
            // nothing they can see (the map's pages past the new end are never touched).
            let path = self.path();
            file.set_len(self.len()).map_err(Error::io("trim", &path))?;
            file.sync_data().map_err(Error::io("fdatasync", &path))?;
            self.seal_pending.store(true, Ordering::Relaxed);
        }
        // The read guard's release just now finished the seal if no reader holds the file (see
        // `StateRead`); else the last reader does.
        Ok(())
    }

    /// The state's read lock (every reader of the state takes it through here).
    fn read_state(&self) -> StateRead<'_> {
        StateRead { file: self, guard: Some(self.slot.state.read()) }
    }

    /// Drops the writable map and descriptor of a file sealed while readers held it, if none does
    /// now (never waits).
    fn finish_seal(&self) {
        let Some(mut state) = self.slot.state.try_write() else { return };
        if self.seal_pending.swap(false, Ordering::Relaxed) && matches!(&*state, State::Writable { .. }) {
            drop(self.slot.replace(&mut state, State::Sealed { map: None }));
        }
    }

    /// Grows the allocated capacity of a writable file to `capacity` (an empty segment taking a
    /// batch larger than it, or a segment opened on a full disk taking its first append).
    pub(crate) fn grow(&self, capacity: u64) -> Result<()> {
        let mut state = self.slot.state.write();
        let path = self.path();
        let State::Writable { file, capacity: current, map } = &mut *state else {
            return Err(self.misuse("grow a sealed file"));
        };
        if self.seal_pending.load(Ordering::Relaxed) {
            return Err(self.misuse("grow a sealed file"));
        }
        if capacity > *current {
            allocate(file, &path, capacity, self.advice)?;
            if map.is_some() {
                // Read-only again: appends go back to `pwrite` (the new blocks may be holes).
                self.mapped_appends.store(false, Ordering::Relaxed);
                *map = Some(map_read_only(&path, file, capacity)?);
            }
            *current = capacity;
        }
        Ok(())
    }

    /// Points a sealed file at new contents of `len` bytes that were renamed over its path (a rebuilt
    /// index), waiting for current readers of the old contents.
    pub(crate) fn replace_sealed(&self, len: u64) {
        let mut state = self.slot.state.write();
        if matches!(&*state, State::Writable { .. }) && !self.seal_pending.swap(false, Ordering::Relaxed) {
            debug_assert!(false, "replace_sealed on a writable file: {}", self.path().display());
            return;
        }
        self.slot.replace(&mut state, State::Sealed { map: None });
        self.len.store(len, Ordering::Release);
    }

    /// Gives back the preallocated space past the published bytes of a writable file that is being
    /// removed (it may wait as `.deleted` for a while): the file is cut to its published length.
    /// Readers never read past it, and no append comes any more, so nothing reads what goes.
    pub(crate) fn release_preallocation(&self) -> Result<()> {
        // No zeroing after this: it would allocate the released blocks again.
        let _appender = self.append_lock.lock();
        self.zeroed_to.store(u64::MAX, Ordering::Relaxed);
        if let State::Writable { file, .. } = &*self.read_state() {
            file.set_len(self.len()).map_err(|e| self.io_error("trim", e))?;
        }
        Ok(())
    }

    /// Publishes fewer bytes: a read-only view using a prefix of a file still being written, or
    /// the first step of cutting a file in place (waits for current readers, so once it returns no
    /// reader reads past `len`; an append then continues at `len`).
    pub(crate) fn limit_len(&self, len: u64) {
        let _state = self.slot.state.write();
        if len < self.len() {
            self.len.store(len, Ordering::Release);
        }
    }

    /// [`MappedFile::retire`], giving up (returning `false`, nothing changed) if readers still hold
    /// slices after `wait`.
    pub(crate) fn retire_within(&self, wait: std::time::Duration) -> bool {
        match self.slot.state.try_write_for(wait) {
            Some(mut state) => {
                self.slot.replace(&mut state, State::Retired);
                true
            }
            None => false,
        }
    }

    /// Whether the file was retired (its segment left the log).
    pub(crate) fn is_retired(&self) -> bool {
        matches!(&*self.read_state(), State::Retired)
    }

    /// Renames the file; later opens by name use the new name.
    pub(crate) fn rename(&self, to: &Path) -> Result<()> {
        let mut path = self.path.lock();
        std::fs::rename(&*path, to).map_err(Error::io("rename", &*path))?;
        *path = to.to_path_buf();
        Ok(())
    }

    /// Releases the map and descriptor for good, waiting for current readers.
    pub(crate) fn retire(&self) {
        let mut state = self.slot.state.write();
        self.slot.replace(&mut state, State::Retired);
    }

    fn misuse(&self, what: &'static str) -> Error {
        debug_assert!(false, "{what}: {}", self.path().display());
        Error::Io { op: what, path: self.path(), source: std::io::ErrorKind::InvalidInput.into() }
    }
}

/// Whether a write into an allocated block of `file` always stays in that block (never needs a new
/// one): file systems without copy on write or shared extents. Others, and any doubt, say no.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn writes_in_place(file: &File) -> bool {
    const EXT4_SUPER_MAGIC: u64 = 0xEF53;
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)] // `f_type`'s type varies by target
    rustix::fs::fstatfs(file).is_ok_and(|fs| matches!(fs.f_type as u64, EXT4_SUPER_MAGIC | TMPFS_MAGIC))
}

/// Elsewhere (APFS clones files; others are not known here): never.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn writes_in_place(_file: &File) -> bool {
    false
}

/// Maps the first `len` bytes of `file` read-only, after checking the file holds them (a mapped
/// read past a file's end is a SIGBUS). Appends use `pwrite`; the map is only read.
fn map_read_only(path: &Path, file: &File, len: u64) -> Result<MmapRaw> {
    let file_len = file.metadata().map_err(Error::io("stat", path))?.len();
    if file_len < len {
        return Err(Error::corrupt(path, file_len, Corruption::ShortFile { len: file_len, expected: len }));
    }
    let len = usize::try_from(len).map_err(|_| Error::io("mmap", path)(std::io::ErrorKind::InvalidInput.into()))?;
    MmapOptions::new().len(len).map_raw_read_only(file).map_err(Error::io("mmap", path))
}

/// Maps the pages of `[from, until)` into `map` now (`MADV_POPULATE_READ`), on the thread that
/// just wrote them (zeros ahead of a log's appends, an index file's entries), so what lands there
/// is read without a page fault: a file written with `pwrite` and read through its map otherwise
/// faults at the first read of every 64 KiB (the kernel's fault-around). Measured on the message
/// store's key queries (random reads of a freshly written log and index): those faults were most
/// of a query's time. Only for speed: a kernel without it (before Linux 5.14) or a failure
/// leaves the faults.
fn populate(map: &MmapRaw, from: u64, until: u64) {
    #[cfg(target_os = "linux")]
    if let (Ok(from), Ok(len)) = (usize::try_from(from), usize::try_from(until - from)) {
        let _ = map.advise_range(memmap2::Advice::PopulateRead, from, len);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (map, from, until);
}

/// The read lock on a file's state. Released (also while unwinding, from a panicking visitor),
/// it finishes a seal that found the file in use if nobody holds it now: whoever releases the
/// last read lock after a seal set `seal_pending` sees the flag (the `SeqCst` fences on both
/// sides: either the sealer's `try_write` sees the readers gone, or the last of them sees the
/// flag), so a seal never waits for a reader and never stays pending once readers are gone.
struct StateRead<'a> {
    file: &'a MappedFile,
    guard: Option<parking_lot::RwLockReadGuard<'a, State>>,
}

impl std::ops::Deref for StateRead<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        self.guard.as_deref().unwrap_or(&State::Retired)
    }
}

impl Drop for StateRead<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.file.seal_pending.load(Ordering::Relaxed) {
            self.file.finish_seal();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: [ReadPath; 2] = [ReadPath::Mmap, ReadPath::Pread];

    #[test]
    fn appended_bytes_are_readable_and_survive_seal() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = MappedFile::create(&path, 4096, reads, "").expect("create");
            assert_eq!(file.append(b"hello").expect("append"), 0);
            assert_eq!(file.append(b" world").expect("append"), 5);
            let read = file.read_with(0, 11, |b| b.to_vec()).expect("read");
            assert_eq!(read.as_deref(), Some(&b"hello world"[..]));
            file.seal().expect("seal");
            assert_eq!(std::fs::metadata(&path).expect("stat").len(), 11, "sealing trims");
            let read = file.read_with(6, 5, |b| b.to_vec()).expect("read");
            assert_eq!(read.as_deref(), Some(&b"world"[..]), "sealed files are read lazily");
            file.retire();
            assert_eq!(file.read_with(0, 1, |b| b.len()).expect("read"), None);
        }
    }

    #[test]
    fn mapped_appends_reach_the_file_and_its_other_readers() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f.cq");
            let file = MappedFile::create(&path, 4096, reads, "").expect("create").with_mapped_appends().expect("map");
            // Only a mapped file gets them (under `Pread` there is no map to store into), on a file
            // system that writes in place.
            let in_place = writes_in_place(&File::open(&path).expect("open"));
            assert_eq!(file.mapped_appends.load(Ordering::Relaxed), reads == ReadPath::Mmap && in_place);
            for i in 0..100u8 {
                assert_eq!(file.append(&[i + 1; 20]).expect("append"), u64::from(i) * 20);
            }
            let read = file.read_with(40, 20, |b| b.to_vec()).expect("read");
            assert_eq!(read.as_deref(), Some(&[3u8; 20][..]));
            // Another reader of the file (another process) sees the same bytes at once.
            let on_disk = std::fs::read(&path).expect("read the file");
            assert_eq!(&on_disk[1980..2000], &[100u8; 20]);
            file.flush().expect("fdatasync");
            file.seal().expect("seal");
            assert_eq!(std::fs::read(&path).expect("read the file").len(), 2000);
        }
    }

    #[test]
    fn a_file_with_holes_keeps_pwrite_and_so_does_a_grown_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sparse");
        let sparse = OpenOptions::new().read(true).write(true).create_new(true).open(&path).expect("create");
        sparse.set_len(1 << 20).expect("extend without allocating");
        let file = MappedFile::writable(&path, sparse, 0, 1 << 20, ReadPath::Mmap, "").expect("open");
        let file = file.with_mapped_appends().expect("checked");
        assert!(!file.mapped_appends.load(Ordering::Relaxed), "a store into a hole could fault");
        file.append(b"data").expect("pwrite");
        assert_eq!(file.read_with(0, 4, |b| b.to_vec()).expect("read").as_deref(), Some(&b"data"[..]));

        let path = dir.path().join("grown");
        let file =
            MappedFile::create(&path, 4096, ReadPath::Mmap, "").expect("create").with_mapped_appends().expect("map");
        let in_place = writes_in_place(&File::open(&path).expect("open"));
        assert_eq!(file.mapped_appends.load(Ordering::Relaxed), in_place);
        file.grow(8192).expect("grow");
        assert!(!file.mapped_appends.load(Ordering::Relaxed), "the map is read-only again");
        file.append(&[7; 5000]).expect("pwrite past the old capacity");
        assert_eq!(file.read_with(4999, 1, |b| b[0]).expect("read"), Some(7));
    }

    #[test]
    fn a_seal_does_not_wait_for_a_reader_and_the_reader_finishes_it() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = Arc::new(MappedFile::create(&path, 4096, reads, "").expect("create"));
            file.append(b"hello").expect("append");
            let (inside, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
            let reader = {
                let (file, inside, release) = (Arc::clone(&file), inside.0, release.1);
                std::thread::spawn(move || {
                    file.read_with(0, 5, |bytes| {
                        inside.send(()).expect("send");
                        release.recv().expect("recv");
                        bytes.to_vec()
                    })
                })
            };
            inside.1.recv().expect("the reader holds the file");
            file.seal().expect("seal");
            assert_eq!(std::fs::metadata(&path).expect("stat").len(), 5, "trimmed under the reader");
            assert!(matches!(&*file.slot.state.read(), State::Writable { .. }), "unmapped later");
            assert_eq!(file.capacity(), 0, "no appends any more");
            release.0.send(()).expect("send");
            let read = reader.join().expect("join").expect("read");
            assert_eq!(read.as_deref(), Some(&b"hello"[..]));
            assert!(matches!(&*file.slot.state.read(), State::Sealed { .. }), "the reader finished the seal");
            assert_eq!(file.read_with(0, 5, |b| b.to_vec()).expect("read").as_deref(), Some(&b"hello"[..]));
        }
    }

    /// Regression (review): a seal that found the state read-locked by something other than a
    /// read (a flush holds it across its fdatasync) stayed pending for good.
    #[test]
    fn a_seal_racing_any_holder_of_the_state_completes_when_it_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = Arc::new(MappedFile::create(&path, 1 << 20, ReadPath::Mmap, "").expect("create"));
        file.append(b"hello").expect("append");
        let held = file.read_state(); // as `flush` holds it during its fdatasync
        let sealer = {
            let file = Arc::clone(&file);
            std::thread::spawn(move || file.seal().expect("seal"))
        };
        sealer.join().expect("join");
        assert!(matches!(&*file.slot.state.read(), State::Writable { .. }), "pending while held");
        drop(held);
        assert!(matches!(&*file.slot.state.read(), State::Sealed { .. }), "completed by the holder");
    }

    #[test]
    fn reopened_file_continues_after_published_length() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = MappedFile::create(&path, 64, reads, "").expect("create");
            file.append(b"abc").expect("append");
            file.seal().expect("seal");
            let file = MappedFile::open_writable(&path, 3, 64, reads, "").expect("reopen");
            assert_eq!(file.capacity(), 64);
            file.append(b"def").expect("append");
            assert_eq!(file.read_with(0, 6, |b| b.to_vec()).expect("read").as_deref(), Some(&b"abcdef"[..]));
        }
    }

    #[test]
    fn a_file_shorter_than_expected_is_an_error_not_a_sigbus() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            std::fs::write(&path, b"short").expect("write");
            let file = MappedFile::open_sealed(&path, 100, reads);
            assert!(matches!(file.read_with(0, 100, |b| b.len()), Err(Error::Corrupt { .. })), "{reads:?}");
        }
    }

    #[test]
    fn a_writable_file_cut_by_someone_else_is_corrupt_under_pread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let file = MappedFile::create(&path, 4096, ReadPath::Pread, "").expect("create");
        file.append(&[1u8; 100]).expect("append");
        std::fs::OpenOptions::new().write(true).open(&path).expect("open").set_len(0).expect("cut");
        let read = file.read_with(0, 100, |b| b.len());
        assert!(matches!(read, Err(Error::Corrupt { reason: Corruption::ShortFile { .. }, .. })), "{read:?}");
    }

    #[test]
    fn pread_files_read_the_same_bytes_in_windows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").expect("write");
        let file = MappedFile::open_sealed(&path, 10, ReadPath::Pread);
        assert_eq!(file.window_len(), PREAD_WINDOW);
        assert_eq!(file.read_with(3, 4, |b| b.to_vec()).expect("read").as_deref(), Some(&b"3456"[..]));
        assert!(file.read_with(8, 4, |b| b.len()).is_err(), "past the length");
    }

    #[test]
    fn a_cut_zeroes_the_unpublished_tail_and_appends_continue_at_the_cut() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = MappedFile::create(&path, 64, reads, "").expect("create");
            file.append(b"0123456789").expect("append");
            file.limit_len(4);
            assert!(file.read_with(0, 5, |b| b.len()).is_err(), "past the cut");
            file.zero_unpublished(u64::MAX).expect("zero");
            assert_eq!(std::fs::read(&path).expect("read")[..12], *b"0123\0\0\0\0\0\0\0\0");
            assert_eq!(file.append(b"ab").expect("append"), 4);
            assert_eq!(file.read_with(0, 6, |b| b.to_vec()).expect("read").as_deref(), Some(&b"0123ab"[..]));
        }
    }

    #[test]
    fn fixed_files_are_published_whole_and_changed_in_place() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = MappedFile::create_fixed(&path, 64, reads, "").expect("create");
            assert_eq!(file.len(), 64);
            assert_eq!(file.read_with(0, 64, |b| b.iter().all(|&x| x == 0)).expect("read"), Some(true));
            file.write_at(10, b"abc").expect("write");
            file.flush_detached().expect("flush");
            assert_eq!(file.read_with(9, 5, |b| b.to_vec()).expect("read").as_deref(), Some(&b"\0abc\0"[..]));
            file.write_at(40, &[7u8; 24]).expect("write up to the end");
            file.zero_range(8, 40).expect("zero");
            let read = file.read_with(0, 64, |b| b.to_vec()).expect("read").expect("not retired");
            assert!(read[..48].iter().all(|&x| x == 0), "{read:?}");
            assert_eq!(&read[48..], &[7u8; 16]);
            file.seal_derived().expect("seal");
            assert_eq!(std::fs::metadata(&path).expect("stat").len(), 64, "nothing to trim");
            assert_eq!(file.read_with(48, 1, |b| b[0]).expect("read"), Some(7), "read again after the seal");
            file.flush_detached().expect("a sealed file has nothing to flush");
        }
    }

    /// Whether every page of `[position, position + len)` of `file`'s map is in the process's
    /// page tables (`/proc/self/pagemap`'s "present" bit), i.e. reading it takes no fault.
    #[cfg(target_os = "linux")]
    fn mapped_in(file: &MappedFile, pagemap: &File, position: u64, len: u64) -> bool {
        let state = file.read_state();
        let (State::Writable { map: Some(map), .. } | State::Sealed { map: Some(map) }) = &*state else {
            panic!("no map")
        };
        // SAFETY: sysconf only reads a system parameter.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let first = (map.as_ptr() as u64 + position) / page;
        let last = (map.as_ptr() as u64 + position + len - 1) / page;
        (first..=last).all(|page| {
            let mut entry = [0u8; 8];
            pagemap.read_exact_at(&mut entry, page * 8).expect("read pagemap");
            u64::from_le_bytes(entry) >> 63 == 1
        })
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn written_pages_are_mapped_before_anyone_reads_them() {
        // Needs MADV_POPULATE_READ (Linux 5.14) and a readable pagemap: skipped, saying so, where
        // either is missing (the code then only takes the faults it took before).
        let probe = MmapOptions::new().len(4096).map_anon().expect("anonymous map");
        if let Err(error) = probe.advise_range(memmap2::Advice::PopulateRead, 0, 4096) {
            eprintln!("skipped: MADV_POPULATE_READ is not available here ({error})");
            return;
        }
        let Ok(pagemap) = File::open("/proc/self/pagemap") else {
            eprintln!("skipped: no /proc/self/pagemap");
            return;
        };
        let mapped_in = |file: &MappedFile, position, len| mapped_in(file, &pagemap, position, len);
        let dir = tempfile::tempdir().expect("tempdir");
        let fixed = MappedFile::create_fixed(&dir.path().join("fixed"), 1 << 20, ReadPath::Mmap, "").expect("create");
        assert!(!mapped_in(&fixed, 256 << 10, 64 << 10), "nothing read or written there yet");
        fixed.write_at(256 << 10, &[1u8; 64 << 10]).expect("write");
        assert!(mapped_in(&fixed, 256 << 10, 64 << 10), "written in place: mapped");

        let appended = MappedFile::create(&dir.path().join("appended"), 1 << 20, ReadPath::Mmap, "").expect("create");
        appended.append(&[1u8; 100]).expect("append");
        assert!(!mapped_in(&appended, 512 << 10, 4096), "nothing zeroed there yet");
        assert_eq!(appended.zero_ahead(1 << 20, 1 << 20).expect("zero"), (1 << 20) - 100);
        assert!(mapped_in(&appended, 100, (1 << 20) - 100), "zeroed ahead: mapped for the appends to come");
    }

    #[test]
    fn grow_keeps_the_data() {
        for reads in BOTH {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("f");
            let file = MappedFile::create(&path, 16, reads, "").expect("create");
            file.append(b"0123456789").expect("append");
            file.grow(4096).expect("grow");
            file.append(&[7u8; 1000]).expect("append after grow");
            assert_eq!(file.read_with(0, 10, |b| b.to_vec()).expect("read").as_deref(), Some(&b"0123456789"[..]));
        }
    }
}
