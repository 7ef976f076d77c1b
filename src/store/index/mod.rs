//! The IndexFile (docs/DESIGN.md §11; the bytes are in docs/FORMAT.md, "`.idx`"): RocketMQ's
//! hash-slot index from a message key to the log offsets of the messages carrying it, one
//! fixed-size file per stretch of the commit log, and [`IndexFiles`], the set of them in
//! `<root>/index/` (RocketMQ's `IndexService`).
//!
//! A put writes entry `n = index_count + 1` as `[key_hash][log_offset][time_diff_s][prev_entry]`,
//! `prev_entry` being what the key's hash slot held, then points the slot at `n`: every slot heads
//! a chain of its entries, newest first. A query walks the chain of its hash's slot and keeps the
//! entries with exactly that hash whose time is in its range. Log offsets and times never decrease
//! from one entry to the next, so the walk stops at the first entry older than the range, and it
//! takes at most `index_count` steps whatever the bytes say (a corrupt chain cannot loop). Hashes
//! collide (32 bits, and slots are shared): the caller re-reads each message and re-checks its key.
//!
//! Times are whole seconds since the file's `begin_timestamp`, so a query's time test is
//! conservative: it never drops an entry whose timestamp is in the range, and may return one up to
//! 999 ms outside it (the caller, which reads the message anyway, checks exactly if it cares). A
//! put whose timestamp is below an earlier put's second counts as that second.
//!
//! Concurrency (docs/DESIGN.md §5: bytes a reader may be reading are never modified while it reads
//! them): the active file's slots and newest entries change under puts, so a put and a query of
//! the active file exclude each other (the file's `active` lock, held for a put's memory writes,
//! or a query's walk). Entries are written to the file once, past those its queries read there.
//! A sealed file never changes: it is queried without that lock, holds no descriptor, and is
//! mapped at its first query (`MappedFile`). One writer (the dispatcher), any number of readers;
//! `IndexFiles` is `Send + Sync`. `IndexFiles` takes puts ahead (up to 64, under its writer lock)
//! and puts them into the file together — one hold of its lock, their slots loaded first so the
//! cache misses overlap — before anything reads the files: a query or a flush puts them in
//! first, so what a query sees is every put that returned before it. A put that needs a new
//! file goes in at once (its roll's failure is its own). Taken puts that cannot go in (a
//! poisoned file) are answered from memory by queries, and the store checkpoint stops below
//! the first of them.
//!
//! Durability: a new file is created at full size with fallocate (a full disk fails there, never
//! at a put), its header (with the begin timestamp every time is relative to) fdatasynced and the
//! directory fsynced. Puts sync nothing, and an entry not yet written is lost with the process;
//! `IndexFile::flush` writes the entries and changed slots, fdatasyncs, then writes the header
//! counting the entries and fdatasyncs again, so a header on disk never counts an entry that is
//! not. A failed fdatasync poisons the file (later puts, flushes and the seal are
//! `Error::Poisoned`): a retry that succeeds proves nothing. **Contract for the store**: it may record that every message below log offset X is
//! indexed (its checkpoint) only after a `flush` that returned after their puts. Then every entry
//! past a crashed file's header count is for a message at or past X, which dispatch redoes;
//! [`IndexFiles::recover`] validates the newest file entry by entry, cuts it, and rebuilds its
//! slots. A clean close is a `flush` (the slot table on disk is then whole).
//!
//! Lock order (a thread holding lock *n* takes only locks numbered above *n*): 1
//! `IndexFiles::writer` → 2 `IndexFiles::files` → 3 an `IndexFile`'s `flushing` → 4 its `active`
//! → 5 its `MappedFile`'s own locks.
//!
//! The files, each a room of its own, in the order they depend on one another (each uses only
//! those above it):
//!
//! - `layout.rs`: the one description of the `.idx` bytes: header and entry codecs, slot and entry
//!   positions, the header and size checks, and [`EntryRules`], the rules one entry is held to,
//!   which recovery and `strata verify` share.
//! - `active.rs`: what only the active file has, its slot table and newest entries in memory.
//! - `file.rs`: one `IndexFile`: create, open, put, query, flush, seal, retire.
//! - `files.rs`: [`IndexFiles`], the set of them (RocketMQ's `IndexService`): puts and rolls,
//!   queries across the files, retention.
//! - `recover.rs`: recovery after an unclean shutdown, of one file and of the set.
//! - `check.rs`: the cheap structural check an open makes of the files (headers, slots, the
//!   entries the store checkpoint recorded).
//! - `log_check.rs`: the open's check of a few entries and messages of each file against the
//!   commit log (another store's sound files are this store's to no other check).
//! - `read_only.rs`: [`ReadOnlyIndex`], the index as a process that does not own it reads it (no
//!   lock, no file changed, `pread`; it finds what the owner's last flush wrote).
//! - `tests.rs`: the tests of the files and of the set (the codecs' and the active state's are
//!   beside them).

mod active;
mod check;
mod file;
mod files;
mod layout;
mod log_check;
mod read_only;
mod recover;

pub(crate) use files::IndexFiles;
/// The layout, for `strata dump` and `verify` (`inspect/store.rs`).
#[cfg(feature = "internals")]
pub(crate) use layout::{EntryRules, IndexFileEntry, IndexHeader, entry_position, slot_of, slot_position};
pub(crate) use layout::{key_hash, read_header};
pub(crate) use read_only::ReadOnlyIndex;

#[cfg(test)]
mod tests;
