//! The file-system seam: the mmap'd append-only file and the few file operations whose ordering
//! durability depends on (directory fsync, atomic replace, tolerant unlink). Everything above this
//! module is written against these functions, so a `pwrite` writer could replace the mmap one.

mod mmap;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use mmap::MappedFile;

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
    let mut file =
        OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(Error::io("create", &tmp))?;
    file.write_all(bytes).map_err(Error::io("write", &tmp))?;
    file.sync_all().map_err(Error::io("fsync", &tmp))?;
    drop(file);
    crash_point!("after_tmp_write");
    fs::rename(&tmp, &target).map_err(Error::io("rename", &target))?;
    crash_point!("after_rename");
    sync_dir(dir)
}

/// Suffix removal on an unmapped file (DESIGN.md §9): cuts it at `len`, preallocates it back to
/// `preallocated` (the new blocks read as zeros, so nothing past the cut can come back, whatever a
/// later crash leaves) and fsyncs. Metadata only: the cost does not depend on the bytes removed.
pub(crate) fn cut_file(path: &Path, len: u64, preallocated: u64) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).map_err(Error::io("open", path))?;
    file.set_len(len).map_err(Error::io("truncate", path))?;
    fs2::FileExt::allocate(&file, preallocated).map_err(Error::io("fallocate", path))?;
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
