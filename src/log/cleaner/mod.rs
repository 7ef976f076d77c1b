//! Compaction (docs/DESIGN.md §10, Kafka's log cleaner): keeps the latest record per key in sealed
//! segments. A pass maps key → latest offset over the dirty segments (those after the cleaner
//! checkpoint) as far as `cleaner_dedupe_bytes` allows, rewrites every sealed segment up to there
//! in groups of at most `segment_bytes` as `.cleaned` files, and swaps them in: `.cleaned` →
//! `.swap` (groups in descending order), directory fsync, originals → `.deleted`, fsync, `.swap`
//! stripped, fsync. A crash at any step leaves the old or the new segments (open completes or
//! discards the swap, §7 step 2). Offsets never change; reads skip the gaps.
//!
//! The long work (mapping, rewriting) runs without any log lock; only the swap takes the structure
//! lock, after checking that no truncation or retention replaced a segment meanwhile (else the
//! pass is abandoned and its output deleted). Passes run on their own thread, throttled by
//! `cleaner_io_bytes_per_sec` and cancelled by close.

pub(crate) mod checkpoint;
pub(crate) mod control;
mod key_map;
mod rewrite;

use std::fs::File;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{CleanupPolicy, ReadPath};
use crate::error::{Corruption, Error, Result};
use crate::failpoint::{crash_point, damage_point, error_point};
use crate::format::{CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, TIME_INDEX_SUFFIX, file_name};
use crate::log::batch::{self, BatchHeader};
use crate::log::index_plan::write_index_files_as;
use crate::log::metrics::Counters;
use crate::log::segment::LogSegment;
use crate::log::segments::StructureGuard;
use crate::log::state::LogState;
use crate::log::walk::{self, BatchPos};
use crate::storage::{self, MappedFile};
pub(crate) use control::CleanerState;
use key_map::KeyMap;
use rewrite::rewrite_batch;

/// Bytes a pass reads between two checks for cancellation and throttling.
const STEP_BYTES: u64 = 1 << 20;
/// Output buffered before each write.
const WRITE_BUFFER: usize = 1 << 20;

/// What one compaction pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CompactionReport {
    /// Segments rewritten, and the segments they became.
    pub segments_cleaned: u64,
    /// Segments written (groups of cleaned segments).
    pub segments_written: u64,
    /// Bytes read (mapping the dirty part and rewriting).
    pub bytes_read: u64,
    /// Bytes of the segments rewritten, and what they became.
    pub bytes_before: u64,
    /// Bytes written.
    pub bytes_after: u64,
    /// Records kept and removed (superseded by a later record of their key, or expired tombstones).
    pub records_kept: u64,
    /// Records removed.
    pub records_removed: u64,
    /// The log is clean below this offset now (the cleaner checkpoint).
    pub cleaned_up_to: u64,
    /// Distinct keys mapped.
    pub keys_mapped: u64,
    /// How long the pass took.
    pub duration_us: u64,
}

/// Pacing and cancellation for one pass.
struct Pace<'a> {
    state: &'a CleanerState,
    rate: Option<u64>,
    started: Instant,
    bytes: u64,
}

impl Pace<'_> {
    /// Counts `bytes` of I/O; sleeps as the rate requires; `Error::Cancelled` if the log closes.
    fn step(&mut self, bytes: u64) -> Result<()> {
        self.bytes += bytes;
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(self.started.elapsed())
                && self.state.sleep(wait)
            {
                return Err(Error::Cancelled("the log is closing"));
            }
        }
        if self.state.stopped() {
            return Err(Error::Cancelled("the log is closing"));
        }
        Ok(())
    }
}

/// A rewritten group waiting to be swapped in.
struct Output {
    base: u64,
    end: u64,
    len: u64,
}

impl LogState {
    /// Runs one compaction pass. Unless `forced`, only when the dirty share reaches
    /// `min_cleanable_dirty_percent`. `None` if there was nothing to do.
    pub(crate) fn compact(&self, forced: bool) -> Result<Option<CompactionReport>> {
        let _one = self.cleaner.pass.lock();
        self.check_writable()?;
        // A failing or panicking pass is abandoned: until the swap starts renaming, its output is
        // deleted (by `Written`'s drop) and the log is unchanged; a panic during the swap poisons
        // the log (reopening completes or discards the swap).
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.compact_pass(forced)))
            .unwrap_or_else(|payload| Err(Error::panicked("a compaction pass", payload.as_ref())));
        match &result {
            Ok(_) | Err(Error::Poisoned | Error::Closed) => {}
            Err(Error::Cancelled(why)) => tracing::debug!(dir = %self.dir.display(), why, "compaction pass cancelled"),
            Err(error) => {
                Counters::add(&self.counters.compaction_failures, 1);
                tracing::error!(dir = %self.dir.display(), %error, "compaction pass failed; the old segments stay");
            }
        }
        result
    }

    fn compact_pass(&self, forced: bool) -> Result<Option<CompactionReport>> {
        let started = Instant::now();
        self.seal_rolled()?;
        let sealed: Vec<Arc<LogSegment>> = {
            let app = self.appender.lock();
            let active = app.active.base_offset();
            self.segments.all().into_iter().take_while(|s| s.base_offset() < active && s.is_sealed()).collect()
        };
        let first_dirty = self.cleaner.cleaned_up_to.load(Ordering::Acquire).max(self.offsets.start());
        let Some(dirty_from) = sealed.iter().position(|s| s.next_offset() > first_dirty) else { return Ok(None) };
        let total: u64 = sealed.iter().map(|s| s.size()).sum();
        let dirty: u64 = sealed[dirty_from..].iter().map(|s| s.size()).sum();
        if !forced && dirty * 100 < u64::from(self.config.min_cleanable_dirty_percent) * total {
            return Ok(None);
        }
        let mut report = CompactionReport::default();
        let mut pace = Pace { state: &self.cleaner, rate: self.config.cleaner_io_bytes_per_sec, started, bytes: 0 };

        // Map the dirty segments, as many whole ones as the map holds.
        let mut map = KeyMap::new(self.config.cleaner_dedupe_bytes);
        let mut mapped = dirty_from;
        for segment in &sealed[dirty_from..] {
            if !self.map_segment(segment, &mut map, &mut pace)? {
                break;
            }
            mapped += 1;
        }
        if mapped == dirty_from {
            tracing::warn!(dir = %self.dir.display(), limit = self.config.cleaner_dedupe_bytes, "cleaner_dedupe_bytes cannot map one segment's keys; not compacting");
            return Ok(None);
        }
        let sources = &sealed[..mapped];
        let end_offset = sources[mapped - 1].next_offset();
        report.keys_mapped = map.len() as u64;

        // Rewrite every sealed segment up to there.
        let horizon = self
            .config
            .clock
            .now_ms()
            .saturating_sub(i64::try_from(self.config.delete_retention_ms).unwrap_or(i64::MAX));
        let groups = group(sources, self.config.segment_bytes);
        let mut written = Written { shared: self, outputs: Vec::new(), partial: None };
        for group in &groups {
            written.partial = Some(group[0].base_offset());
            let output = self.write_group(group, &map, horizon, &mut pace, &mut report)?;
            written.partial = None;
            written.outputs.push(output);
        }
        report.segments_written = written.outputs.len() as u64;
        self.swap_in(sources, written, end_offset)?;
        report.segments_cleaned = sources.len() as u64;
        report.bytes_read = pace.bytes;
        report.cleaned_up_to = end_offset;
        report.duration_us = started.elapsed().as_micros() as u64;
        let c = &self.counters;
        Counters::add(&c.compaction_passes, 1);
        Counters::add(&c.compaction_bytes_before, report.bytes_before);
        Counters::add(&c.compaction_bytes_after, report.bytes_after);
        Counters::add(&c.compaction_records_removed, report.records_removed);
        tracing::info!(dir = %self.dir.display(), segments = report.segments_cleaned, before = report.bytes_before, after = report.bytes_after, removed = report.records_removed, "compacted");
        Ok(Some(report))
    }

    /// Adds the keys of `segment` to `map`. Returns false if the map filled up part-way (the keys
    /// added stay: each is a real later record, so using them is still correct).
    fn map_segment(&self, segment: &LogSegment, map: &mut KeyMap, pace: &mut Pace<'_>) -> Result<bool> {
        let mut full = false;
        self.each_batch(segment, pace, |at, header, bytes| {
            batch::validate(bytes, Some(at.expected)).map_err(|reason| segment.corrupt(at.position, reason))?;
            for record in batch::RecordIter::new(bytes, header) {
                let record = record.map_err(|reason| segment.corrupt(at.position, reason))?;
                if let Some(key) = record.key.get(bytes)
                    && !map.insert(key, header.base_offset + u64::from(record.offset_delta))
                {
                    full = true;
                    return Ok(ControlFlow::Break(()));
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(!full)
    }

    /// Writes the cleaned copy of `group` as `<first base>.log.cleaned` with its indexes, fsynced,
    /// and checks it back (every batch valid, ending where the group ended).
    fn write_group(
        &self,
        group: &[Arc<LogSegment>],
        map: &KeyMap,
        horizon: i64,
        pace: &mut Pace<'_>,
        report: &mut CompactionReport,
    ) -> Result<Output> {
        let base = group[0].base_offset();
        let path = cleaned_path(&self.dir, base, LOG_SUFFIX);
        storage::remove_if_exists(&path)?;
        let mut file = storage::create_new(&path)?;
        let mut out = Vec::with_capacity(WRITE_BUFFER);
        let mut len = 0u64;
        for segment in group {
            report.bytes_before += segment.size();
            let end = segment.next_offset();
            self.each_batch(segment, pace, |at, header, bytes| {
                batch::validate(bytes, Some(at.expected)).map_err(|reason| segment.corrupt(at.position, reason))?;
                let keep = |offset: u64, record: &batch::RawRecord| {
                    let Some(key) = record.key.get(bytes) else { return true };
                    if map.get(key).is_some_and(|latest| offset < latest) {
                        return false;
                    }
                    record.value.get(bytes).is_some() || record.timestamp_ms >= horizon
                };
                let last = header.next_offset() == end;
                let done = rewrite_batch(bytes, header, last, keep, &mut out)
                    .map_err(|reason| segment.corrupt(at.position, reason))?;
                report.records_kept += done.kept;
                report.records_removed += done.dropped;
                if out.len() >= WRITE_BUFFER {
                    len += write_out(&mut file, &path, &mut out)?;
                }
                Ok(ControlFlow::Continue(()))
            })?;
        }
        len += write_out(&mut file, &path, &mut out)?;
        file.sync_all().map_err(Error::io("fsync", &path))?;
        drop(file);
        pace.step(len)?;
        report.bytes_after += len;

        damage_point!("cleaner_output_damaged", &path, len / 2);
        // The output's own check: a failure is damage (logged and counted by `compact`), never a
        // cancellation, and the pass ends here, before anything is renamed.
        let end = group[group.len() - 1].next_offset();
        let written = MappedFile::open_sealed(&path, len, ReadPath::Pread);
        let scan = walk::scan(&written, len, base, self.config.index_interval_bytes)?;
        written.retire();
        let Some(mut scan) = scan else { return Err(Error::corrupt(path, 0, Corruption::NotReadBack)) };
        if let Some(reason) = scan.invalid.take() {
            return Err(Error::corrupt(path, scan.valid_len, reason));
        }
        if scan.next_offset != end || scan.valid_len != len {
            let reason = Corruption::DataEndsEarly { end: scan.next_offset, upper: end };
            return Err(Error::corrupt(path, scan.valid_len, reason));
        }
        scan.plan.finish(base);
        write_index_files_as(&self.dir, base, &scan.plan, CLEANED_SUFFIX)?;
        #[cfg(feature = "failpoints")]
        fail::fail_point!("cleaner_group_written");
        Ok(Output { base, end, len })
    }

    /// Calls `visit` on every batch of `segment`, a step of `STEP_BYTES` at a time with pacing
    /// and cancellation in between (never inside a read guard).
    fn each_batch(
        &self,
        segment: &LogSegment,
        pace: &mut Pace<'_>,
        mut visit: impl FnMut(BatchPos, &BatchHeader, &[u8]) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let mut at = BatchPos { position: 0, expected: segment.base_offset() };
        loop {
            let mut used = 0u64;
            let mut failed = None;
            let walked = segment.walk(at, |pos, header, bytes| {
                if used >= STEP_BYTES {
                    return ControlFlow::Break(false);
                }
                used += header.size();
                match visit(pos, header, bytes) {
                    Ok(ControlFlow::Continue(())) => ControlFlow::Continue(()),
                    Ok(ControlFlow::Break(())) => ControlFlow::Break(true),
                    Err(error) => {
                        failed = Some(error);
                        ControlFlow::Break(true)
                    }
                }
            })?;
            if let Some(error) = failed {
                return Err(error);
            }
            let Some((stopped, reason)) = walked else {
                return Err(Error::Cancelled("a segment was removed during the pass"));
            };
            pace.step(used)?;
            match reason {
                None | Some(true) => return Ok(()),
                Some(false) => at = stopped,
            }
        }
    }

    /// The swap (docs/DESIGN.md §10), under the structure lock. Abandons the pass (output deleted,
    /// nothing changed) if a segment it read is no longer the log's; a failure once files started
    /// moving poisons the log (reopening completes or discards the swap).
    /// The cleaner checkpoint moves to `end_offset` under the same lock, so a truncation waiting
    /// for it lowers the new value, not the old one.
    fn swap_in(&self, sources: &[Arc<LogSegment>], written: Written<'_>, end_offset: u64) -> Result<()> {
        let structure = self.segments.lock();
        let unchanged = sources.iter().all(|s| self.segments.holds(s) && s.is_sealed());
        if !unchanged {
            return Err(Error::Cancelled("the log changed during the pass"));
        }
        self.check_writable()?;
        crash_point!("cleaner_after_cleaned");
        // From the first rename on, the files are the swap's: a failure or a panic poisons the log
        // and the next open completes or discards the swap (docs/DESIGN.md §10).
        let outputs = written.into_swapped();
        let swapped =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.swap_files(&structure, sources, &outputs)))
                .unwrap_or_else(|payload| Err(Error::panicked("a compaction swap", payload.as_ref())));
        swapped.map_err(|e| self.durability.poison(e))?;
        self.cleaner.cleaned_up_to.store(end_offset, Ordering::Release);
        checkpoint::write(&self.dir, end_offset)
    }

    /// The renames of the swap, then the skip map brought in line with them.
    fn swap_files(
        &self,
        structure: &StructureGuard<'_>,
        sources: &[Arc<LogSegment>],
        outputs: &[Output],
    ) -> Result<()> {
        debug_assert!(sources.windows(2).all(|w| w[0].next_offset() == w[1].base_offset()), "sources are contiguous");
        debug_assert!(outputs.windows(2).all(|w| w[0].end == w[1].base), "outputs tile the sources");
        debug_assert!(
            outputs.first().map(|o| o.base) == sources.first().map(|s| s.base_offset())
                && outputs.last().map(|o| o.end) == sources.last().map(|s| s.next_offset()),
            "outputs cover exactly the sources"
        );
        let moved = (|| {
            for output in outputs.iter().rev() {
                for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                    rename(&cleaned_path(&self.dir, output.base, suffix), &swap_path(&self.dir, output.base, suffix))?;
                }
                crash_point!("cleaner_after_swap_rename");
            }
            storage::sync_dir(&self.dir)?;
            let mut renamed = Vec::with_capacity(sources.len());
            for source in sources.iter().rev() {
                renamed.push(source.rename_deleted()?);
            }
            renamed.reverse();
            storage::sync_dir(&self.dir)?;
            crash_point!("cleaner_after_deleted_rename");
            for output in outputs {
                for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                    rename(&swap_path(&self.dir, output.base, suffix), &self.dir.join(file_name(output.base, suffix)))?;
                }
                crash_point!("cleaner_mid_strip");
            }
            storage::sync_dir(&self.dir)?;
            Ok::<_, Error>(renamed)
        })();
        let renamed = moved?;
        let cleaned: Vec<Arc<LogSegment>> = outputs
            .iter()
            .map(|o| Arc::new(LogSegment::open_sealed(&self.dir, o.base, o.len, o.end, &self.config)))
            .collect();
        // One step for readers: no lookup sees the map between a source leaving and its
        // replacement arriving (docs/DESIGN.md §10).
        self.segments.edit(structure, |map| {
            for source in sources {
                map.remove(source);
            }
            for segment in cleaned {
                map.insert(segment);
            }
        });
        debug_assert!(sources.iter().all(|s| !self.segments.holds(s)), "every source segment left the log");
        for (source, files) in sources.iter().zip(renamed) {
            self.schedule_unlink(Arc::clone(source), files);
        }
        Ok(())
    }
}

/// The `.cleaned` output of a pass before its swap: deleted on drop (a failed, cancelled or
/// panicking pass leaves nothing behind) unless handed to the swap.
struct Written<'a> {
    shared: &'a LogState,
    outputs: Vec<Output>,
    /// The group being written, if any.
    partial: Option<u64>,
}

impl Written<'_> {
    /// The outputs, now the swap's to rename (no longer deleted on drop).
    fn into_swapped(mut self) -> Vec<Output> {
        self.partial = None;
        std::mem::take(&mut self.outputs)
    }
}

impl Drop for Written<'_> {
    fn drop(&mut self) {
        let bases = self.outputs.iter().map(|o| o.base).chain(self.partial);
        for base in bases {
            for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
                if let Err(error) = storage::remove_if_exists(&cleaned_path(&self.shared.dir, base, suffix)) {
                    tracing::warn!(%error, "removing cleaner output failed; the next open removes it");
                }
            }
        }
    }
}

/// Consecutive segments cleaned together: at most `segment_bytes` of input and fewer than 2³²
/// offsets per group (relative offsets are 32-bit).
fn group(segments: &[Arc<LogSegment>], segment_bytes: u64) -> Vec<Vec<Arc<LogSegment>>> {
    let mut groups: Vec<Vec<Arc<LogSegment>>> = Vec::new();
    let mut bytes = 0;
    for segment in segments {
        let fits = groups.last().is_some_and(|g| {
            bytes + segment.size() <= segment_bytes && segment.next_offset() - g[0].base_offset() <= u64::from(u32::MAX)
        });
        if fits && let Some(last) = groups.last_mut() {
            bytes += segment.size();
            last.push(Arc::clone(segment));
        } else {
            bytes = segment.size();
            groups.push(vec![Arc::clone(segment)]);
        }
    }
    groups
}

fn cleaned_path(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{CLEANED_SUFFIX}", file_name(base, suffix)))
}

fn swap_path(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{SWAP_SUFFIX}", file_name(base, suffix)))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    storage::rename(from, to)
}

fn write_out(file: &mut File, path: &Path, out: &mut Vec<u8>) -> Result<u64> {
    error_point!("cleaner_write", path);
    file.write_all(out).map_err(Error::io("write", path))?;
    let written = out.len() as u64;
    out.clear();
    Ok(written)
}

/// Starts the cleaner thread when the log compacts: a pass every `cleaner_backoff_ms` when enough
/// is dirty, until close stops it.
pub(crate) fn spawn(shared: &Arc<LogState>) -> Result<Option<JoinHandle<()>>> {
    if shared.config.cleanup_policy != CleanupPolicy::Compact {
        return Ok(None);
    }
    let shared = Arc::clone(shared);
    let thread = std::thread::Builder::new()
        .name("strata-cleaner".into())
        .spawn(move || {
            let period = Duration::from_millis(shared.config.cleaner_backoff_ms);
            while !shared.cleaner.sleep(period) {
                // `compact` logs and counts a failed or panicking pass; the next one runs.
                let pass = shared.compact(false);
                if shared.durability.is_poisoned() {
                    shared.run_callbacks();
                }
                if let Err(Error::Poisoned | Error::Closed) = pass {
                    return;
                }
            }
        })
        .map_err(|e| Error::io("spawn cleaner", &PathBuf::new())(e))?;
    Ok(Some(thread))
}
