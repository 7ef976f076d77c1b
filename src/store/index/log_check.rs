//! The open's check of the index against the commit log ([`IndexFiles::check_against_log`]), made
//! whatever the shutdown was, once the files are sound (`check.rs`, and after an unclean shutdown
//! their recovery): a few entries of each file point at messages that carry a key with their hash,
//! and a message inside the file's stretch of the log finds each of its keys in it.
//!
//! Why: another store's `index/` put in is sound, and may fit every record this store keeps of
//! its own (after an unclean shutdown the checkpoint may record no index file at all, and a
//! recorded entry count and last log offset are small numbers two stores can share): only its
//! entries tell it, naming keys this log's messages do not carry, and missing theirs. Its keys
//! would be lost for good, the checkpoint saying they are indexed. A constant number of entries
//! and messages per file: O(files) reads of the log, never a scan.

use crate::error::Result;
use crate::store::index::IndexFiles;
use crate::store::index::file::IndexFile;
use crate::store::index::layout::IndexFileEntry;

/// Entries of each file checked against their messages (spread from the first entry for a message
/// the log holds to the last).
const SAMPLED_ENTRIES: u32 = 4;

/// What the log holds at a log offset, as the check asks it: the hashes of the keys of the message
/// there (`key_hash` of its topic and each key); `None` if there is no message there.
pub(crate) type KeysAt<'a> = dyn FnMut(u64) -> Result<Option<Vec<u32>>> + 'a;

impl IndexFiles {
    /// Why the index is not this log's, if it is not (see the module documentation). Only entries
    /// for messages the log holds, in `[log_start, log_next)`, are checked; `keys_at` reads them.
    /// Call once the files are sound: after [`IndexFiles::check`], and after an unclean shutdown
    /// after [`IndexFiles::recover`] (which rebuilds the newest file's slots).
    pub(crate) fn check_against_log(&self, log_bounds: (u64, u64), keys_at: &mut KeysAt<'_>) -> Result<Option<String>> {
        let files = self.files.read().clone();
        for file in &files {
            if let Some(fault) = file_against_log(file, log_bounds, keys_at)? {
                return Ok(Some(format!("{}: {fault}", file.path().display())));
            }
        }
        Ok(None)
    }
}

/// Why `file` is not this log's, if it is not.
fn file_against_log(
    file: &IndexFile,
    (log_start, log_next): (u64, u64),
    keys_at: &mut KeysAt<'_>,
) -> Result<Option<String>> {
    let count = file.index_count();
    if count == 0 {
        return Ok(None);
    }
    // Entries are in log-offset order: those for messages the log holds are [first, past).
    let first = first_entry_from(file, count, log_start)?;
    let past = first_entry_from(file, count, log_next)?;
    if first >= past {
        return Ok(None);
    }
    let last = past - 1;
    for n in spread(first, last) {
        let entry = entry(file, n)?;
        if !(log_start..log_next).contains(&entry.log_offset) {
            continue; // out of order: the structural checks' to judge, not this one's
        }
        let at = entry.log_offset;
        match keys_at(at)? {
            None => return Ok(Some(format!("entry {n} is for log offset {at}, where the log holds no message"))),
            Some(hashes) if !hashes.contains(&entry.key_hash) => {
                let hash = entry.key_hash;
                return Ok(Some(format!(
                    "entry {n}: the message at log offset {at} has no key with hash {hash:#010x}"
                )));
            }
            Some(_) => {}
        }
    }
    // The other way: a message strictly inside the file's stretch (above its first log offset,
    // below its last entry's: a message whose keys rolled into the next file is the last one
    // there, the one before its first) has each of its keys here. The last such message, so the
    // walk down its keys' chains passes only the entries above it.
    let end = entry(file, count)?.log_offset;
    let Some(inside) = first_entry_from(file, count, end.min(log_next))?.checked_sub(1) else { return Ok(None) };
    if inside < first {
        return Ok(None);
    }
    let at = entry(file, inside)?.log_offset;
    if at <= file.begin_log_offset() || !(log_start..log_next).contains(&at) {
        return Ok(None);
    }
    let Some(hashes) = keys_at(at)? else {
        return Ok(Some(format!("entry {inside} is for log offset {at}, where the log holds no message")));
    };
    for hash in hashes {
        if !file.holds(hash, at)? {
            return Ok(Some(format!(
                "the message at log offset {at} has a key (hash {hash:#010x}) the file does not hold"
            )));
        }
    }
    Ok(None)
}

/// The first entry (of `1..=count`) for log offset `log_offset` or past it; `count + 1` if none
/// is. A binary search: the entries are in log-offset order (one out of order only moves where
/// the search lands, and every entry it picks is checked on its own).
fn first_entry_from(file: &IndexFile, count: u32, log_offset: u64) -> Result<u32> {
    let (mut low, mut high) = (1, count + 1);
    while low < high {
        let mid = low + (high - low) / 2;
        if entry(file, mid)?.log_offset < log_offset {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    Ok(low)
}

/// Entry `n` of `file` (never retired during an open: nothing else runs).
fn entry(file: &IndexFile, n: u32) -> Result<IndexFileEntry> {
    file.read_entry(n)?.ok_or_else(|| file.misuse("read a retired index file"))
}

/// Up to [`SAMPLED_ENTRIES`] entry numbers spread over `first..=last`, both ends included.
fn spread(first: u32, last: u32) -> Vec<u32> {
    let span = u64::from(last - first);
    let mut picked: Vec<u32> =
        (0..u64::from(SAMPLED_ENTRIES)).map(|i| first + (span * i / u64::from(SAMPLED_ENTRIES - 1)) as u32).collect();
    picked.dedup();
    picked
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn samples_spread_over_the_range_both_ends_included() {
        assert_eq!(spread(1, 1), [1]);
        assert_eq!(spread(1, 2), [1, 2]);
        assert_eq!(spread(5, 104), [5, 38, 71, 104]);
        assert_eq!(spread(1, u32::MAX - 1), [1, 1_431_655_765, 2_863_311_529, u32::MAX - 1]);
    }
}
