//! Directories: creating a log's (durably), taking its lock, listing and checking it.

use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::path::Path;

use crate::error::{Error, Result};
use crate::format::LOCK_FILE;

/// Creates the log directory if needed, fsyncing each parent whose entries changed.
pub(crate) fn prepare_dir(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) if e.kind() == ErrorKind::NotADirectory => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) => return Err(Error::io("stat", dir)(e)),
    }
    let mut missing = vec![dir];
    while let Some(parent) =
        missing.last().and_then(|d| d.parent()).filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        missing.push(parent);
    }
    fs::create_dir_all(dir).map_err(|e| match e.kind() {
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory => Error::NotADirectory { path: dir.to_path_buf() },
        _ => Error::io("create directory", dir)(e),
    })?;
    for created in missing.iter().rev() {
        let parent = created.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        super::sync_dir(parent)?;
    }
    Ok(())
}

/// How long taking a held directory lock is retried before `Error::Locked`: a child process
/// started by another thread holds a copy of a just-closed log's lock between its fork and its
/// exec (a few milliseconds), and a close followed at once by an open must not fail for it.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Takes the directory's exclusive lock (held as long as the returned file is open).
pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(Error::io("create lock file", &path))?;
    let deadline = std::time::Instant::now() + LOCK_RETRY;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked { path }),
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path)(e)),
        }
    }
}

/// `Ok` if `dir` is an existing directory.
pub(crate) fn require_dir(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(Error::NotADirectory { path: dir.to_path_buf() }),
        Err(e) => Err(Error::io("open", dir)(e)),
    }
}

/// The names in `dir` (names that are not UTF-8 are left out: no file of a log has one).
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<String>> {
    let entries = fs::read_dir(dir).map_err(Error::io("list", dir))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(Error::io("list", dir))?;
        names.extend(entry.file_name().to_str().map(str::to_owned));
    }
    Ok(names)
}
