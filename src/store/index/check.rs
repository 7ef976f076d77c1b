//! The cheap check of the index an open makes whatever the shutdown was ([`IndexFiles::check`]):
//! every file's slot table points only at entries the file counts (the newest file's only after a
//! clean shutdown: after an unclean one its recovery rebuilds it), and every file the store
//! checkpoint recorded is there, counts at least the entries it recorded, and holds, at the last
//! of them, the log offset it recorded (another store's file, or a file cut or replaced, does not).
//! Each header's end is its last entry's log offset, below the log's end (the rest of the header
//! was checked when the files were opened). Damage in the middle of the entries is
//! no cheap check's to find: `strata verify` finds it, and every query re-checks each message's key.
//! Files that pass, sound but another store's, are found by their entries (`log_check.rs`).

use std::sync::Arc;

use byteorder::{BigEndian, ByteOrder};

use crate::error::Result;
use crate::format::INDEX_FILE_SLOT_LEN;
use crate::store::checkpoint::IndexFileSummary;
use crate::store::index::IndexFiles;
use crate::store::index::file::IndexFile;
use crate::store::index::layout::slot_position;

/// Slots read at a time from a sealed file.
const SLOTS_PER_READ: usize = 64 * 1024;

impl IndexFiles {
    /// What is wrong with the index, if anything (see the module documentation), given the store
    /// checkpoint's record of its files, `summaries`, and the log's start (a recorded file that
    /// ends below it may have been deleted by retention) and next offset (no entry is for a
    /// message at or past it).
    pub(crate) fn check(
        &self,
        summaries: &[IndexFileSummary],
        (log_start, log_next): (u64, u64),
        unclean: bool,
    ) -> Result<Option<String>> {
        let files: Vec<Arc<IndexFile>> = self.files.read().clone();
        for summary in summaries {
            let file = files.iter().find(|f| f.begin_log_offset() == summary.begin_log_offset);
            let Some(file) = file else {
                if summary.end_log_offset >= log_start && summary.index_count > 0 {
                    return Ok(Some(format!(
                        "the index file for log offset {} the store checkpoint recorded is missing",
                        summary.begin_log_offset
                    )));
                }
                continue;
            };
            if let Some(fault) = against_summary(file, summary)? {
                return Ok(Some(format!("{}: {fault}", file.path().display())));
            }
        }
        for (i, file) in files.iter().enumerate() {
            // After an unclean shutdown the newest file may hold slots and entries its header
            // does not count yet, or count entries for messages the log lost: its recovery
            // (`IndexFiles::recover`) cuts and rebuilds it, so it is not condemned here. (A sealed
            // file's slot table is read whole: 4 bytes a slot, at every open.)
            if unclean && i + 1 == files.len() {
                continue;
            }
            let log_end = if unclean { u64::MAX } else { log_next };
            if let Some(fault) = header_fault(file, log_end)? {
                return Ok(Some(format!("{}: {fault}", file.path().display())));
            }
            if let Some((slot, value)) = file.slot_past_entries()? {
                return Ok(Some(format!(
                    "{}: slot {slot} points at entry {value}, past the {} entries it holds",
                    file.path().display(),
                    file.index_count()
                )));
            }
        }
        Ok(None)
    }
}

/// Why `file`'s header does not fit its entries or the log, if it does not: its last entry is
/// for the log offset the header ends at, below the log's end.
fn header_fault(file: &IndexFile, log_next: u64) -> Result<Option<String>> {
    let count = file.index_count();
    if count == 0 {
        return Ok(None);
    }
    let end = file.end_log_offset();
    if end >= log_next {
        return Ok(Some(format!("its header ends at log offset {end}, past the commit log's end {log_next}")));
    }
    let last = file.read_entry(count)?.map(|entry| entry.log_offset);
    if last != Some(end) {
        return Ok(Some(format!("its header ends at log offset {end}, its last entry is for {last:?}")));
    }
    Ok(None)
}

/// Why `file` is not what the checkpoint recorded of it, if it is not.
fn against_summary(file: &IndexFile, summary: &IndexFileSummary) -> Result<Option<String>> {
    if file.index_count() < summary.index_count {
        return Ok(Some(format!(
            "it counts {} entries, the store checkpoint recorded {}",
            file.index_count(),
            summary.index_count
        )));
    }
    if summary.index_count == 0 {
        return Ok(None);
    }
    let held = file.read_entry(summary.index_count)?.map(|entry| entry.log_offset);
    if held != Some(summary.end_log_offset) {
        return Ok(Some(format!(
            "its entry {} is for log offset {held:?}, the store checkpoint recorded {}",
            summary.index_count, summary.end_log_offset
        )));
    }
    Ok(None)
}

impl IndexFile {
    /// The first slot pointing past the entries the file counts, and what it holds. The active
    /// file's slots are in memory; a sealed file's are read in pieces.
    pub(crate) fn slot_past_entries(&self) -> Result<Option<(usize, u32)>> {
        let count = self.index_count();
        let past = |slots: &[u32], first: usize| slots.iter().position(|&n| n > count).map(|i| (first + i, slots[i]));
        if let Some(state) = self.active.read().as_ref() {
            return Ok(past(&state.slots, 0));
        }
        let slot_count = self.slot_count as usize;
        let mut first = 0;
        let mut slots = vec![0u32; SLOTS_PER_READ];
        while first < slot_count {
            let n = SLOTS_PER_READ.min(slot_count - first);
            let read = |b: &[u8]| BigEndian::read_u32_into(b, &mut slots[..n]);
            if self.file.read_with(slot_position(first as u64), n * INDEX_FILE_SLOT_LEN, read)?.is_none() {
                return Ok(None); // retired meanwhile: nothing left to check
            }
            if let Some(found) = past(&slots[..n], first) {
                return Ok(Some(found));
            }
            first += n;
        }
        Ok(None)
    }
}
