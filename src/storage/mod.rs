//! The file-system seam: every file-system call of the library goes through this module. The
//! segment file (`MappedFile`: appended with `pwrite`, read through a map or with `pread`), the
//! directory (`dir.rs`: create, lock, list), and the operations whose ordering durability depends
//! on (directory fsync, atomic replace, rename, tolerant unlink, cut and preallocate). The layers
//! above never call `std::fs`, so this is the one place a budget for mapped memory, or another
//! file system, plugs in.

mod dir;
pub(crate) mod map_budget;
mod mmap;
mod table;
mod value_file;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use dir::{list_dir, lock_dir, prepare_dir, require_dir};
pub(crate) use mmap::MappedFile;
pub(crate) use table::U32Table;
pub(crate) use value_file::ValueFile;

/// How a log reads its files (see [`LogConfig::read_path`](crate::LogConfig::read_path)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadPath {
    /// Slices of a shared read-only mapping: the fastest, but a file cut short by another
    /// process while mapped faults the reader (SIGBUS).
    #[default]
    Mmap,
    /// `pread` into a buffer: a read of a file cut short by another process is `Error::Corrupt`.
    /// Sealed segments are opened for each read, so they hold no descriptor.
    Pread,
}

/// Which file a name stood for when it was listed (device and inode): a file another process
/// replaced under the same name (a compaction swap) is told apart from the one listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    pub(crate) fn of(meta: &fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt as _;
        FileId { dev: meta.dev(), ino: meta.ino() }
    }
}

use crate::error::{Error, Result};
use crate::failpoint::{crash_point, error_point};
use crate::format::TMP_SUFFIX;

/// fsyncs a directory, making the creates, renames and unlinks inside it durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    error_point!("fsync_directory", dir);
    let handle = File::open(dir).map_err(Error::io("open directory", dir))?;
    handle.sync_all().map_err(Error::io("fsync directory", dir))
}

/// Replaces `dir/name` with `bytes` atomically and durably: temp file, fsync, rename, fsync dir.
pub(crate) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    // Unique per call, so two writers of the same name never share a temp file. Open deletes any
    // `.tmp` left by a crash.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}-{unique}{TMP_SUFFIX}", std::process::id()));
    let target = dir.join(name);
    let written = (|| {
        // Tests make the disk too full for a new file here (failpoint `new_file_enospc`).
        #[cfg(feature = "failpoints")]
        if fail::eval("new_file_enospc", |_| ()).is_some() {
            return Err(disk_full("write", &tmp, Some(bytes.len() as u64), "delete records or free space"));
        }
        let mut file =
            OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(Error::io("create", &tmp))?;
        file.write_all(bytes).map_err(Error::io("write", &tmp))?;
        file.sync_all().map_err(Error::io("fsync", &tmp))
    })();
    if let Err(error) = written {
        // Leave nothing behind (a full disk fails here; the next open would delete it anyway).
        let _ = remove_if_exists(&tmp);
        return Err(error);
    }
    crash_point!("after_tmp_write");
    fs::rename(&tmp, &target).map_err(Error::io("rename", &target))?;
    crash_point!("after_rename");
    sync_dir(dir)
}

/// Writes a derived file (an index, rebuilt from its `.log`): atomically, or, when the disk is too
/// full for a new file, over the existing one in place (cut to the new length, fdatasynced). In
/// place is not crash-atomic, which a derived file can afford: one torn by a crash fails its
/// sanity check at the next open and is rebuilt again. So a log on a full disk still recovers.
pub(crate) fn write_derived(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let error = match write_atomically(dir, name, bytes) {
        Err(error @ Error::DiskFull { .. }) => error,
        other => return other,
    };
    let path = dir.join(name);
    if !path.exists() {
        return Err(error);
    }
    tracing::warn!(%error, file = %path.display(), "disk full: rewriting the index in place");
    use std::os::unix::fs::FileExt as _;
    let file = OpenOptions::new().write(true).open(&path).map_err(Error::io("open", &path))?;
    file.write_all_at(bytes, 0).map_err(Error::io("write", &path))?;
    file.set_len(bytes.len() as u64).map_err(Error::io("truncate", &path))?;
    file.sync_data().map_err(Error::io("fdatasync", &path))
}

/// Overwrites `bytes` at `position` inside an existing file and fdatasyncs it: no new blocks are
/// needed (a full disk cannot stop it), no directory entry changes.
pub(crate) fn overwrite(path: &Path, position: u64, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt as _;
    let file = OpenOptions::new().write(true).open(path).map_err(Error::io("open", path))?;
    file.write_all_at(bytes, position).map_err(Error::io("write", path))?;
    #[cfg(feature = "failpoints")]
    if fail::eval("checkpoint_fdatasync", |_| ()).is_some() {
        return Err(Error::io("fdatasync", path)(std::io::Error::other("injected failure at checkpoint_fdatasync")));
    }
    file.sync_data().map_err(Error::io("fdatasync", path))
}

/// The length of a file.
pub(crate) fn file_len(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path).map_err(Error::io("stat", path))?.len())
}

/// Preallocates `file` (at `path`) to `len` bytes with real blocks: fallocate mode 0, which
/// extends a shorter file and never shrinks one. The call's own error code is used (fs2 read
/// errno after `posix_fallocate`, which returns its error instead, and reported "Success" on a
/// full disk): out of space or quota is `Error::DiskFull` with the bytes needed and free and
/// `advice` on what lowers the need. A file system without fallocate gets a sparse `set_len`
/// and a warning (appends use `pwrite`, so a full disk is then a write error, never a SIGBUS).
pub(crate) fn allocate(file: &File, path: &Path, len: u64, advice: &'static str) -> Result<()> {
    // Tests make the disk "full" here (failpoint `fallocate_enospc`; configured as `return(text)`,
    // only for paths containing `text`, so a unit test can fill "the disk" of its own directory
    // without failing the tests running beside it).
    #[cfg(feature = "failpoints")]
    if fail::eval("fallocate_enospc", |only| only.is_none_or(|text| path.to_string_lossy().contains(&text)))
        .unwrap_or(false)
    {
        return Err(disk_full("fallocate", path, Some(len), advice));
    }
    // A failed allocation may keep what it got and grow the file (ext4 does): it is undone, so a
    // failure takes no space and changes no length.
    let before = file.metadata().map_err(Error::io("stat", path))?.len();
    // A signal arriving during a long allocation interrupts it (EINTR): try again.
    let allocated = loop {
        match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    match allocated {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT) => {
            if file.metadata().is_ok_and(|m| m.len() > before) {
                file.set_len(before).map_err(Error::io("undo a partial fallocate", path))?;
            }
            Err(disk_full("fallocate", path, Some(len.saturating_sub(before)), advice))
        }
        Err(rustix::io::Errno::OPNOTSUPP) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(file = %path.display(), "the file system cannot fallocate: files are sparse (supported: ext4, XFS)");
            });
            let have = file.metadata().map_err(Error::io("stat", path))?.len();
            if have < len { file.set_len(len).map_err(Error::io("extend", path)) } else { Ok(()) }
        }
        Err(e) => Err(Error::io("fallocate", path)(e.into())),
    }
}

/// Makes `[position, position + len)` of `file` (at `path`) read as zeros, keeping its blocks
/// allocated: fallocate `ZERO_RANGE | KEEP_SIZE` (metadata only on ext4 and XFS), or, on a file
/// system or an operating system without it, zeros written 1 MiB at a time.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn zero_range(file: &File, path: &Path, position: u64, len: u64) -> Result<()> {
    use rustix::fs::FallocateFlags;
    let flags = FallocateFlags::ZERO_RANGE | FallocateFlags::KEEP_SIZE;
    let zeroed = loop {
        match rustix::fs::fallocate(file, flags, position, len) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    match zeroed {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => write_zeros(file, path, position, len),
        Err(e) => Err(Error::io("fallocate zero range", path)(e.into())),
    }
}

/// [`zero_range`] where fallocate has no `ZERO_RANGE` (macOS, the BSDs): zeros written.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn zero_range(file: &File, path: &Path, position: u64, len: u64) -> Result<()> {
    write_zeros(file, path, position, len)
}

fn write_zeros(file: &File, path: &Path, position: u64, len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt as _;
    const CHUNK: u64 = 1 << 20;
    let zeros = vec![0u8; CHUNK.min(len) as usize];
    let mut done = 0;
    while done < len {
        let n = CHUNK.min(len - done);
        file.write_all_at(&zeros[..n as usize], position + done).map_err(Error::io("write zeros", path))?;
        done += n;
    }
    Ok(())
}

/// The first `len` bytes of a file (all of it if it is shorter) and the file's length, with one
/// open: a header read without holding a descriptor afterwards.
pub(crate) fn read_head(path: &Path, len: usize) -> Result<(Vec<u8>, u64)> {
    use std::os::unix::fs::FileExt as _;
    let file = File::open(path).map_err(Error::io("open", path))?;
    let file_len = file.metadata().map_err(Error::io("stat", path))?.len();
    let mut head = vec![0u8; len.min(usize::try_from(file_len).unwrap_or(usize::MAX))];
    file.read_exact_at(&mut head, 0).map_err(Error::io("read", path))?;
    Ok((head, file_len))
}

/// Bytes free for unprivileged use on the file system holding `path`.
pub(crate) fn available_space(path: &Path) -> Result<u64> {
    let stat = rustix::fs::statvfs(path).map_err(|e| Error::io("statvfs", path)(e.into()))?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// `Error::DiskFull` for `op` on `path`, with the space free now if it can be learned.
pub(crate) fn disk_full(op: &'static str, path: &Path, needed: Option<u64>, advice: &'static str) -> Error {
    let available = available_space(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(path)).ok();
    Error::DiskFull { op, path: path.to_path_buf(), needed, available, advice }
}

/// What lowers the space a segment's `.log` needs.
pub(crate) const SEGMENT_ADVICE: &str = "lower segment_bytes (strata: --segment-bytes) or free space";
/// What lowers the space a segment's index files need.
pub(crate) const INDEX_ADVICE: &str = "lower index_bytes or free space";

/// Suffix removal on an unmapped file (docs/DESIGN.md §9): cuts it at `len`, preallocates it back
/// to `preallocated` (the new blocks read as zeros, so nothing past the cut can come back, whatever
/// a later crash leaves) and fsyncs. Metadata only: the cost does not depend on the bytes removed.
pub(crate) fn cut_file(path: &Path, len: u64, preallocated: u64) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).map_err(Error::io("open", path))?;
    file.set_len(len).map_err(Error::io("truncate", path))?;
    // The blocks past the cut are gone either way; re-extending only spares the next appends a
    // fallocate. On a full disk the segment stays short, and its first append re-extends it.
    match allocate(&file, path, preallocated, SEGMENT_ADVICE) {
        Ok(()) => {}
        Err(error @ Error::DiskFull { .. }) => tracing::warn!(%error, "cut segment left unextended"),
        Err(error) => return Err(error),
    }
    file.sync_all().map_err(Error::io("fsync", path))
}

/// Deletes a file; a file that is already gone is not an error. Returns whether it existed.
pub(crate) fn remove_if_exists(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("unlink", path)(e)),
    }
}

/// Renames `from` to `to` (not durable until the directory is fsynced).
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).map_err(Error::io("rename", from))
}

/// Creates `path`, which must not exist, for reading and writing.
pub(crate) fn create_new(path: &Path) -> Result<File> {
    OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(Error::io("create", path))
}

/// A file's metadata (`stat`).
pub(crate) fn stat(path: &Path) -> Result<fs::Metadata> {
    fs::metadata(path).map_err(Error::io("stat", path))
}

/// Opens a file for reading.
pub(crate) fn open_read(path: &Path) -> Result<File> {
    File::open(path).map_err(Error::io("open", path))
}

/// Copies `from` to `to` and fsyncs the copy.
pub(crate) fn copy_synced(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to).map_err(Error::io("copy", to))?;
    File::open(to).and_then(|f| f.sync_all()).map_err(Error::io("fsync", to))
}

/// Reads a small file whole; `None` if it does not exist.
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        write_atomically(dir.path(), "x", b"one").expect("write");
        write_atomically(dir.path(), "x", b"two").expect("replace");
        assert_eq!(fs::read(dir.path().join("x")).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(names, ["x"], "no temp file left");
    }

    #[test]
    fn removing_a_missing_file_is_fine() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!remove_if_exists(&dir.path().join("gone")).expect("remove"));
        assert_eq!(read_if_exists(&dir.path().join("gone")).expect("read"), None);
    }
}
