//! Named crash points and injected failures, for the crash tests. With the cargo feature
//! `failpoints` each point is a [`fail`](https://docs.rs/fail) point: configured to `return` (programmatically with
//! `fail::cfg`, or in a child process with the `FAILPOINTS` environment variable, e.g.
//! `FAILPOINTS=after_roll=return` or `2*off->return` for the third hit), a crash point exits the
//! process on the spot, as a kill would, and an error point makes the operation fail. Without the
//! feature both compile to nothing.
//!
//! Crash points, in the order they occur:
//! - roll: `after_roll` (new segment created and published, old one not yet sealed),
//!   `before_index_flush` (a sealing segment's `.log` flushed and trimmed, its indexes not yet),
//!   `after_seal` (every rolled segment sealed, directory and checkpoint not yet written);
//! - atomic replace: `after_tmp_write` (temp file written and fsynced, not yet renamed),
//!   `after_rename` (renamed, directory not yet fsynced);
//! - close: `before_clean_marker` (everything synced and checkpointed, marker not yet written);
//! - truncation: `truncate_after_checkpoint` (recovery point lowered, nothing else changed),
//!   `truncate_after_rename` (later segments renamed `.deleted`, cut segment not yet cut),
//!   `truncate_after_cut` (cut and fsynced, its indexes not yet rewritten);
//!   `reset_after_checkpoint` (start = recovery point = the new offset and the reset marked in
//!   progress, segments not yet renamed), `reset_after_rename` (old segments renamed `.deleted`,
//!   the new one not yet created);
//! - open: `after_marker_delete`, `swap_renamed` (after each swap file is renamed into place),
//!   `mid_delete` (after each file a swap replaces is deleted), `after_truncate` (torn segment cut,
//!   later segments not yet deleted), `after_index_rebuild` (after each rebuilt index pair).
//!
//! - message store: `store_after_abort_created` (open: the log recovered, `abort` written, nothing
//!   else done), `store_recovery_after_queue_cut` (after each queue recovery cut),
//!   `store_recovery_after_index` (index recovered, dispatch not yet resumed),
//!   `store_after_queue_entry` (dispatch: a message's queue entry written, its index entries not
//!   yet; at open too, while dispatch catches up), `store_after_queue_roll` (a new `.cq` file
//!   created, its first entry not yet written), `store_before_checkpoint` (queues and index
//!   flushed, `store.checkpoint` not yet written), `store_offsets_after_backup` (`offsets.json`
//!   copied to `.bak`, the new one not yet written), `store_before_abort_removed` (close: log
//!   closed cleanly, `abort` not yet removed).
//!
//! - Raft store: `raft_purge_after_meta` (a purge's `last_purged` written to `raft-meta`, the
//!   entries not yet deleted).
//!
//! Pause points: `read_holding_segment` (a reader copying batches, inside its read guard);
//! `channel_commit_stored` (a channel commit, its batch stored, the log's slot held, its
//! durability wait not yet begun).
//!
//! Panic points (configure with `panic`; they test that a bug in a background thread never hangs
//! or kills a caller): `sync_round` (start of a sync round), `cleaner_group_written` (a compaction
//! pass, its `.cleaned` output written, before the swap), `producer_sender` (the producer's sender
//! thread, about to append batches).
//!
//! Error points: `create_segment` (a roll, before any byte of the batch is stored),
//! `append_after_data` (after a batch's bytes are stored), `fdatasync`, `fsync_directory`,
//! `write_checkpoint` (before anything is written), `checkpoint_fdatasync` (the checkpoint's slot
//! written, its fdatasync failing), `lower_store_checkpoint` (the store checkpoint lowered in
//! place on a full disk, before anything is written); `fallocate_enospc` makes every preallocation fail as on a full
//! disk (`Error::DiskFull`), `new_file_enospc` every file written whole (a checkpoint, a marker)
//! replaced atomically. Configured as `return(text)`, the error points made with `error_point!`
//! and `fallocate_enospc` fail only for paths containing `text`.
//!
//! Damage points (flip a byte, as a bug or failing hardware would): `cleaner_output_damaged` (a
//! compaction group's `.cleaned` output written and fsynced, not yet checked).

/// Flips every bit of the byte at `position` of the file at `path` (a damage point).
#[cfg(feature = "failpoints")]
pub(crate) fn flip_byte(path: &std::path::Path, position: u64) -> crate::Result<()> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).map_err(crate::Error::io("open", path))?;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, position).map_err(crate::Error::io("read", path))?;
    file.write_all_at(&[!byte[0]], position).map_err(crate::Error::io("write", path))
}

/// The exit status of a process stopped at a crash point.
#[cfg(any(feature = "failpoints", feature = "internals"))]
pub const CRASH_EXIT_CODE: i32 = 86;

/// Exits the process at crash point `name` without running destructors or flushing anything, as a
/// kill would (the page cache keeps what was written).
#[cfg(feature = "failpoints")]
pub fn crash(name: &str) -> ! {
    eprintln!("strata: crash point {name}");
    std::process::exit(CRASH_EXIT_CODE)
}

/// A crash point: exits the process when the point `$name` is configured to `return`.
macro_rules! crash_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        if fail::eval($name, |_| ()).is_some() {
            $crate::failpoint::crash($name);
        }
    };
}

/// An error point: returns `Error::Io` for `$path` when the point `$name` is configured.
/// Configured as `return(text)`, it fails only for paths containing `text` (a unit test can fail
/// the files of its own directory without failing the tests running beside it).
macro_rules! error_point {
    ($name:literal, $path:expr) => {
        #[cfg(feature = "failpoints")]
        // The path is built only when the point is configured: appends pass here, and must not
        // allocate (tests/append_allocations.rs).
        if let Some(path) = fail::eval($name, |only: Option<String>| {
            let path = ::std::path::PathBuf::from($path);
            only.is_none_or(|text| path.to_string_lossy().contains(&text)).then_some(path)
        })
        .flatten()
        {
            let source = std::io::Error::other(concat!("injected failure at ", $name));
            return Err($crate::error::Error::Io { op: $name, path, source });
        }
    };
}

/// A damage point: flips the byte at `$position` of the file at `$path` when the point `$name` is
/// configured, as a bug writing wrong bytes or failing hardware would.
macro_rules! damage_point {
    ($name:literal, $path:expr, $position:expr) => {
        #[cfg(feature = "failpoints")]
        if fail::eval($name, |_| ()).is_some() {
            $crate::failpoint::flip_byte($path, $position)?;
        }
    };
}

pub(crate) use {crash_point, damage_point, error_point};
