//! The store checkpoint (`store.checkpoint`, docs/DESIGN.md §11) and the `abort` marker.
//!
//! The checkpoint holds X, the commit-log offset below which every message's consume-queue and
//! index entries are fdatasynced: dispatch at open restarts there. It is written only after those
//! flushes. Losing it costs work, never data: a missing or damaged file means "redispatch from
//! the log's start" (dispatch is idempotent).
//!
//! `abort` exists while the store is open: created (durably) at open, removed at a clean close.
//! Present at open, the last run did not close, and the newest index file is validated before use
//! (the queues are checked at every open).

use std::path::Path;

use crate::error::Result;
use crate::format::{STORE_ABORT_FILE, STORE_CHECKPOINT_FILE, STORE_CHECKPOINT_MAGIC, STORE_CHECKPOINT_VERSION};
use crate::storage::{self, ValueFile};

/// The file: one value, `dispatched_up_to`.
pub(crate) const FILE: ValueFile =
    ValueFile { name: STORE_CHECKPOINT_FILE, magic: STORE_CHECKPOINT_MAGIC, version: STORE_CHECKPOINT_VERSION };

/// The dispatched-up-to offset in `root`, or 0 if there is no usable file (logged).
pub(crate) fn read(root: &Path) -> Result<u64> {
    Ok(match FILE.read(root)? {
        None => 0,
        Some(value) => value.unwrap_or_else(|reason| {
            tracing::warn!(root = %root.display(), %reason, "ignoring the store checkpoint: dispatch restarts at the log's start");
            0
        }),
    })
}

/// Replaces the file atomically and durably. Call only once every queue and index entry for
/// offsets below `dispatched_up_to` is fdatasynced.
pub(crate) fn write(root: &Path, dispatched_up_to: u64) -> Result<()> {
    FILE.write(root, dispatched_up_to)
}

/// Creates `abort` durably; returns whether it was already there (the last run did not close).
pub(crate) fn mark_open(root: &Path) -> Result<bool> {
    let existed = storage::read_if_exists(&root.join(STORE_ABORT_FILE))?.is_some();
    if !existed {
        storage::write_atomically(root, STORE_ABORT_FILE, b"")?;
    }
    Ok(existed)
}

/// Removes `abort` durably (the last step of a clean close).
pub(crate) fn mark_closed(root: &Path) -> Result<()> {
    if storage::remove_if_exists(&root.join(STORE_ABORT_FILE))? {
        storage::sync_dir(root)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_round_trips_and_damage_means_start_over() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()).expect("missing"), 0);
        write(dir.path(), 12_345).expect("write");
        assert_eq!(read(dir.path()).expect("read"), 12_345);
        let path = dir.path().join(STORE_CHECKPOINT_FILE);
        let mut bytes = std::fs::read(&path).expect("bytes");
        bytes[6] ^= 1; // the value's first byte
        std::fs::write(&path, &bytes).expect("damage");
        assert_eq!(read(dir.path()).expect("damaged"), 0, "a damaged checkpoint costs work, not data");
    }

    #[test]
    fn abort_tells_an_unclean_last_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!mark_open(dir.path()).expect("first open"));
        assert!(mark_open(dir.path()).expect("no close in between"), "the last run did not close");
        mark_closed(dir.path()).expect("close");
        assert!(!mark_open(dir.path()).expect("after a clean close"));
    }
}
