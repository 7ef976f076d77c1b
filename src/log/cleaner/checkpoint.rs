//! The `cleaner-checkpoint` file (docs/DESIGN.md §3): the offset below which the log was last
//! cleaned, so the next pass maps only what was appended since. Losing it costs work, never data: a
//! missing or damaged file means "nothing is clean yet".

use std::path::Path;

use crate::error::Result;
use crate::format::{CLEANER_CHECKPOINT_FILE, CLEANER_CHECKPOINT_MAGIC, CLEANER_CHECKPOINT_VERSION};
use crate::storage::ValueFile;

/// The file: one value, `cleaned_up_to`.
const FILE: ValueFile =
    ValueFile { name: CLEANER_CHECKPOINT_FILE, magic: CLEANER_CHECKPOINT_MAGIC, version: CLEANER_CHECKPOINT_VERSION };

/// Parses and checks the file's bytes (`strata dump` shows them).
#[cfg(feature = "internals")]
pub(crate) fn decode(b: &[u8]) -> Result<u64, crate::error::Corruption> {
    FILE.decode(b)
}

/// The cleaned-up-to offset in `dir`, or 0 if there is no usable file (logged).
pub(crate) fn read(dir: &Path) -> Result<u64> {
    Ok(match FILE.read(dir)? {
        None => 0,
        Some(value) => value.unwrap_or_else(|reason| {
            tracing::warn!(dir = %dir.display(), %reason, "ignoring the cleaner checkpoint: the next pass maps the whole log");
            0
        }),
    })
}

/// Replaces the file atomically and durably.
pub(crate) fn write(dir: &Path, cleaned_up_to: u64) -> Result<()> {
    FILE.write(dir, cleaned_up_to)
}
