//! Walking the batches of a `.log` file: header by header through bounded windows (a mapped file is
//! one window; a `pread` file is read a window at a time), and the full-validation scan that
//! recovery, index rebuilds and `strata verify` share.

use std::ops::ControlFlow;

use crate::error::{Corruption, Error, Result};
use crate::format::BATCH_HEADER_LEN;
use crate::log::batch::{self, BatchHeader};
use crate::log::index_plan::PlannedIndexes;
use crate::storage::MappedFile;

/// Where a batch is: its byte position and the offset it must start at (docs/DESIGN.md §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchPos {
    pub position: u64,
    pub expected: u64,
}

/// Why a walk stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop<B> {
    /// The end of the data: the end of the file, or zero bytes where a header would be.
    End,
    /// The visitor broke off at this batch.
    Break(B),
    /// The header at this position is invalid.
    Invalid(Corruption),
}

/// Where a walk stopped (`at` is the batch it stopped at, or the end of the data).
#[derive(Debug)]
pub(crate) struct WalkEnd<B> {
    pub at: BatchPos,
    pub stop: Stop<B>,
}

/// Walks the batches of the first `len` bytes of `file` from `start`, checking each header (magic,
/// length, expected offset) and calling `visit` with its position, header and bytes. `None` if the
/// file was retired.
pub(crate) fn walk_file<B>(
    file: &MappedFile,
    len: u64,
    start: BatchPos,
    visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
) -> Result<Option<WalkEnd<B>>> {
    walk_file_in(file, len, start, file.window_len(), visit)
}

/// [`walk_file`] reading at most `window` bytes at once (more for a batch larger than that): a
/// reader that wants a chunk of batches from a `pread` file reads about that chunk, not a
/// megabyte.
pub(crate) fn walk_file_in<B>(
    file: &MappedFile,
    len: u64,
    start: BatchPos,
    window: u64,
    mut visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
) -> Result<Option<WalkEnd<B>>> {
    let window = window.min(file.window_len()).max(BATCH_HEADER_LEN as u64);
    let mut at = start;
    let mut needed = 0u64;
    // A `pread` file's windows are read into one buffer (a mapped file's are lent from the map).
    let mut buffer = Vec::new();
    loop {
        let remaining = len.saturating_sub(at.position);
        if remaining == 0 {
            return Ok(Some(WalkEnd { at, stop: Stop::End }));
        }
        let read = remaining.min(window.max(needed)) as usize;
        let position = at.position;
        let walk = |bytes: &[u8]| walk_window(bytes, remaining, &mut at, &mut visit);
        let step = file.read_with_buffer(position, read, &mut buffer, walk)?;
        match step {
            None => return Ok(None),
            Some(Step::Done(stop)) => return Ok(Some(WalkEnd { at, stop })),
            Some(Step::NeedMore(bytes, _)) => needed = bytes,
        }
    }
}

/// [`walk_file_in`] for a caller that keeps the bytes it walks: each window is appended to `out`
/// with [`MappedFile::copy_into`] (one copy, no map) and walked there. On return `out` ends with
/// exactly the batches visited before the stop (those `visit` continued past); a visited batch's
/// bytes are in `out` already when `visit` sees them (as its third argument). A batch that does
/// not fit in the window stops the walk with `Stop::Break(full)`, unread, if a batch was visited
/// before it (a window sized to what the caller takes: it would not take that batch) or if
/// `wanted` says no to its header; else it is read whole. `Ok(None)` (the file retired) leaves
/// `out` as it was.
#[allow(clippy::too_many_arguments)]
pub(crate) fn walk_copied<B>(
    file: &MappedFile,
    len: u64,
    start: BatchPos,
    window: u64,
    out: &mut Vec<u8>,
    full: B,
    wanted: impl Fn(&BatchHeader) -> bool,
    mut visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
) -> Result<Option<WalkEnd<B>>> {
    let window = window.max(BATCH_HEADER_LEN as u64);
    let from = out.len();
    let mut at = start;
    let mut needed = 0u64;
    let end = loop {
        // `out` holds the batches visited so far: a window straddling a batch is read again.
        out.truncate(from + (at.position - start.position) as usize);
        let remaining = len.saturating_sub(at.position);
        if remaining == 0 {
            break WalkEnd { at, stop: Stop::End };
        }
        let read = remaining.min(window.max(needed)) as usize;
        let window_at = out.len();
        if file.copy_into(at.position, read, out)?.is_none() {
            out.truncate(from);
            return Ok(None);
        }
        match walk_window(&out[window_at..], remaining, &mut at, &mut visit) {
            Step::Done(stop) => break WalkEnd { at, stop },
            Step::NeedMore(..) if at != start => break WalkEnd { at, stop: Stop::Break(full) },
            // The first batch is larger than the window: read it whole only if it is wanted.
            Step::NeedMore(_, Some(header)) if !wanted(&header) => break WalkEnd { at, stop: Stop::Break(full) },
            Step::NeedMore(bytes, _) => needed = bytes,
        }
    };
    out.truncate(from + (end.at.position - start.position) as usize);
    Ok(Some(end))
}

enum Step<B> {
    Done(Stop<B>),
    /// The batch at the walk's position needs this many bytes in one window (its header, if the
    /// window held that much).
    NeedMore(u64, Option<BatchHeader>),
}

/// Walks the batches wholly inside `window`, which starts at `at.position` with `remaining` bytes
/// of the file from there, advancing `at`.
fn walk_window<B>(
    window: &[u8],
    remaining: u64,
    at: &mut BatchPos,
    visit: &mut impl FnMut(BatchPos, &BatchHeader, &[u8]) -> ControlFlow<B>,
) -> Step<B> {
    let window_start = at.position;
    loop {
        let used = (at.position - window_start) as usize;
        let rest = &window[used..];
        let left_in_file = remaining - used as u64;
        if left_in_file == 0 {
            return Step::Done(Stop::End);
        }
        let Some(header) = BatchHeader::decode_from(rest) else {
            if (rest.len() as u64) < left_in_file {
                return Step::NeedMore(BATCH_HEADER_LEN as u64, None);
            }
            // Fewer than 43 bytes left in the file: a zero tail ends the data, anything else is torn.
            return Step::Done(if rest.iter().all(|&b| b == 0) {
                Stop::End
            } else {
                Stop::Invalid(Corruption::ShortHeader { available: left_in_file })
            });
        };
        if header.is_zero() {
            return Step::Done(Stop::End);
        }
        if let Err(e) = header.check(left_in_file, Some(at.expected)) {
            return Step::Done(Stop::Invalid(e));
        }
        let size = header.size();
        if size > rest.len() as u64 {
            return Step::NeedMore(size, Some(header));
        }
        if let ControlFlow::Break(b) = visit(*at, &header, &rest[..size as usize]) {
            return Step::Done(Stop::Break(b));
        }
        *at = BatchPos { position: at.position + size, expected: header.next_offset() };
    }
}

/// What a full-validation scan of a segment found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Index entries of the valid batches.
    pub plan: PlannedIndexes,
    /// Bytes of valid batches from position 0.
    pub valid_len: u64,
    /// The offset after the last valid batch (the segment base if none).
    pub next_offset: u64,
    /// Valid batches and records.
    pub batches: u64,
    pub records: u64,
    /// Why the scan stopped before the end of the data: the first invalid batch. A zero header or
    /// the end of the file is a normal end (`None`). Never `BadAttributes`: a whole batch of a
    /// newer format fails the scan with `Error::UnsupportedFormat` instead.
    pub invalid: Option<Corruption>,
}

/// Validates batch after batch (docs/DESIGN.md §4) from the start of a segment file's first `len`
/// bytes, planning index entries with `interval`, and stops at the first invalid batch, a zero
/// header or the end. `None` if the file was retired. A batch whose CRC matches but whose attributes
/// this build does not know is `Error::UnsupportedFormat` (docs/DESIGN.md §4), not a stop.
pub(crate) fn scan(file: &MappedFile, len: u64, base_offset: u64, interval: u64) -> Result<Option<Scan>> {
    scan_checking_from(file, len, base_offset, interval, 0)
}

/// [`scan`], validating in full only the batches that hold an offset at or after `check_from`
/// (the log start offset): a batch wholly below it is deleted anyway, so only its header is
/// checked (to step over it), and damage inside it never costs the records after it.
pub(crate) fn scan_checking_from(
    file: &MappedFile,
    len: u64,
    base_offset: u64,
    interval: u64,
    check_from: u64,
) -> Result<Option<Scan>> {
    let mut scan = Scan { next_offset: base_offset, ..Scan::default() };
    let start = BatchPos { position: 0, expected: base_offset };
    let end = walk_file(file, len, start, |at, header, bytes| {
        if header.last_offset() >= check_from
            && let Err(e) = batch::validate(bytes, Some(at.expected))
        {
            return ControlFlow::Break(e);
        }
        scan.plan.add(base_offset, at.position, header, interval);
        scan.batches += 1;
        scan.records += u64::from(header.record_count);
        ControlFlow::Continue(())
    })?;
    let Some(end) = end else { return Ok(None) };
    scan.valid_len = end.at.position;
    scan.next_offset = end.at.expected;
    scan.invalid = match end.stop {
        Stop::End => None,
        // A whole batch of a newer format (its CRC matched) is not where the data ends: no caller
        // may cut it, or index only what comes before it, so the scan refuses it.
        Stop::Break(reason @ Corruption::BadAttributes(_)) => {
            return Err(Error::corrupt(file.path(), end.at.position, reason));
        }
        Stop::Break(e) | Stop::Invalid(e) => Some(e),
    };
    Ok(Some(scan))
}

/// The position after the last non-zero byte in `[from, len)` of `file` (`from` if all zero): how
/// much a truncation at `from` really removes, as opposed to preallocated zeros.
pub(crate) fn nonzero_end(file: &MappedFile, from: u64, len: u64) -> Result<u64> {
    let window = file.window_len().min(len.max(1));
    let mut end = from;
    let mut position = from;
    while position < len {
        let read = (len - position).min(window) as usize;
        let last = file.read_with(position, read, |bytes| bytes.iter().rposition(|&b| b != 0))?;
        if let Some(Some(i)) = last {
            end = position + i as u64 + 1;
        }
        position += read as u64;
    }
    Ok(end)
}
