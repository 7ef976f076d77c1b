//! The log's segments: a skip map by base offset (docs/DESIGN.md §1, §5) and the rules for changing
//! it.
//!
//! A roll adds a segment past the last one before any offset in it is published, which readers
//! tolerate with no help. Every other change (truncation, reset, retention, the cleaner's swap)
//! holds the structure lock and makes its in-memory change inside [`Segments::edit`]. The skip map
//! cannot replace an entry atomically (crossbeam-skiplist unlinks the old node before it links the
//! new one, so a concurrent `upper_bound` sees the previous segment, or none), so an edit is
//! bracketed by a version counter, a seqlock: odd while an edit runs. A lookup whose answer could
//! be an artefact of a half-done edit (an offset that seems missing) checks the version it started
//! with and looks again if an edit ran meanwhile ([`Segments::stable`]); a found segment needs no
//! check, its bytes stay valid until its last reader is done.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, MutexGuard};

use crate::log::positions::POSITION_TABLES;
use crate::log::segment::LogSegment;

/// The segments of a log, ascending by base offset; the last is the active one.
pub(crate) struct Segments {
    map: SkipMap<u64, Arc<LogSegment>>,
    /// Odd while an edit is changing `map`; bumped before and after each edit.
    version: AtomicU64,
    /// Held by whatever replaces or removes segments other than by rolling: truncation, reset,
    /// retention and the cleaner's swap (after the append lock, where both are taken).
    structure: Mutex<()>,
    /// Segments rolled away from but not yet sealed, oldest first.
    rolled: Mutex<Vec<Arc<LogSegment>>>,
    /// Held while sealing rolled segments, so when one `seal_rolled` returns, every segment rolled
    /// before it was sealed (by it or by the call it waited for).
    sealing: Mutex<()>,
}

/// Proof that the structure lock is held (required by [`Segments::edit`]).
pub(crate) struct StructureGuard<'a> {
    _guard: MutexGuard<'a, ()>,
}

/// What an edit may do to the map.
pub(crate) struct Edit<'a> {
    map: &'a SkipMap<u64, Arc<LogSegment>>,
}

impl Edit<'_> {
    /// Adds `segment`, replacing a segment with the same base offset.
    pub(crate) fn insert(&self, segment: Arc<LogSegment>) {
        self.map.insert(segment.base_offset(), segment);
    }

    /// Removes the segment at `base`, if it is still `segment` (a replacement stays).
    pub(crate) fn remove(&self, segment: &Arc<LogSegment>) {
        if let Some(entry) = self.map.get(&segment.base_offset())
            && Arc::ptr_eq(entry.value(), segment)
        {
            entry.remove();
        }
    }
}

impl Segments {
    pub(crate) fn new(segments: impl IntoIterator<Item = Arc<LogSegment>>) -> Segments {
        let map = SkipMap::new();
        for segment in segments {
            map.insert(segment.base_offset(), segment);
        }
        Segments {
            map,
            version: AtomicU64::new(0),
            structure: Mutex::new(()),
            rolled: Mutex::new(Vec::new()),
            sealing: Mutex::new(()),
        }
    }

    /// Takes the structure lock.
    pub(crate) fn lock(&self) -> StructureGuard<'_> {
        StructureGuard { _guard: self.structure.lock() }
    }

    /// A roll: adds `active`, the segment it starts, past every other (no edit: readers never
    /// look for its offsets before they are published), and queues `old` for sealing.
    pub(crate) fn roll(&self, active: Arc<LogSegment>, old: Arc<LogSegment>) {
        debug_assert!(
            self.map.back().is_none_or(|last| *last.key() < active.base_offset()),
            "a rolled segment follows every other"
        );
        self.map.insert(active.base_offset(), active);
        self.rolled.lock().push(old);
        // The newest segments keep their position tables; the one just past them lets its go.
        if let Some(older) = self.map.iter().rev().nth(POSITION_TABLES) {
            older.value().drop_positions();
        }
    }

    /// Takes `doomed` out of the map (as one edit) and off the list waiting to be sealed.
    pub(crate) fn remove(&self, held: &StructureGuard<'_>, doomed: &[Arc<LogSegment>]) {
        self.forget_rolled(doomed);
        self.edit(held, |map| doomed.iter().for_each(|segment| map.remove(segment)));
    }

    /// Segments rolled away from and not sealed yet.
    pub(crate) fn rolled_count(&self) -> usize {
        self.rolled.lock().len()
    }

    /// The oldest segment waiting to be sealed.
    pub(crate) fn oldest_rolled(&self) -> Option<Arc<LogSegment>> {
        self.rolled.lock().first().cloned()
    }

    /// Takes `segments` off the list of those waiting to be sealed (sealed, or removed), by
    /// identity: a list that changed meanwhile loses only these.
    pub(crate) fn forget_rolled(&self, segments: &[Arc<LogSegment>]) {
        self.rolled.lock().retain(|r| segments.iter().all(|s| !Arc::ptr_eq(r, s)));
    }

    /// Takes `segment`, just sealed under [`Segments::lock_sealing`], off the list.
    pub(crate) fn forget_sealed(&self, segment: &Arc<LogSegment>) {
        let mut rolled = self.rolled.lock();
        rolled.retain(|r| !Arc::ptr_eq(r, segment));
        debug_assert!(rolled.iter().all(|r| !r.is_sealed()), "only unsealed segments wait to be sealed");
    }

    /// Serialises sealing (see the field).
    pub(crate) fn lock_sealing(&self) -> MutexGuard<'_, ()> {
        self.sealing.lock()
    }

    /// Runs `change` on the map as one step for readers that use [`Segments::stable`].
    pub(crate) fn edit<R>(&self, _held: &StructureGuard<'_>, change: impl FnOnce(&Edit<'_>) -> R) -> R {
        let before = self.version.fetch_add(1, Ordering::SeqCst);
        debug_assert!(before.is_multiple_of(2), "edits never overlap: the structure lock is held");
        // Ends the edit even if `change` panics, so readers never spin forever.
        struct End<'a>(&'a AtomicU64);
        impl Drop for End<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let _end = End(&self.version);
        change(&Edit { map: &self.map })
    }

    /// Runs `lookup` until it ran with no edit in progress or completed meanwhile, and returns
    /// what that run returned. Edits are in-memory and short, so waiting for one only yields.
    pub(crate) fn stable<R>(&self, mut lookup: impl FnMut() -> R) -> R {
        loop {
            let version = self.settled_version();
            let result = lookup();
            if self.version.load(Ordering::SeqCst) == version {
                return result;
            }
        }
    }

    /// The current version once no edit is in progress.
    pub(crate) fn settled_version(&self) -> u64 {
        loop {
            let version = self.version.load(Ordering::SeqCst);
            if version.is_multiple_of(2) {
                return version;
            }
            std::thread::yield_now();
        }
    }

    /// Whether an edit ran (or runs) since [`Segments::settled_version`] returned `version`.
    pub(crate) fn changed_since(&self, version: u64) -> bool {
        self.version.load(Ordering::SeqCst) != version
    }

    /// The segment that would hold `offset`: the one with the greatest base offset ≤ it.
    pub(crate) fn floor(&self, offset: u64) -> Option<Arc<LogSegment>> {
        self.map.upper_bound(Bound::Included(&offset)).map(|e| Arc::clone(e.value()))
    }

    /// Whether `segment` is (still) the log's segment at its base offset.
    pub(crate) fn holds(&self, segment: &Arc<LogSegment>) -> bool {
        self.map.get(&segment.base_offset()).is_some_and(|e| Arc::ptr_eq(e.value(), segment))
    }

    /// Every segment, ascending.
    pub(crate) fn all(&self) -> Vec<Arc<LogSegment>> {
        self.map.iter().map(|e| Arc::clone(e.value())).collect()
    }

    /// The segments with a base offset ≥ `base`, ascending.
    pub(crate) fn from(&self, base: u64) -> Vec<Arc<LogSegment>> {
        self.map.range(base..).map(|e| Arc::clone(e.value())).collect()
    }

    /// Calls `visit` on the segments with a base offset ≥ `base`, ascending, until it fails; no
    /// allocation (the append path's sync rounds use it).
    pub(crate) fn try_for_each_from<E>(
        &self,
        base: u64,
        mut visit: impl FnMut(&Arc<LogSegment>) -> Result<(), E>,
    ) -> Result<(), E> {
        for entry in self.map.range(base..) {
            visit(entry.value())?;
        }
        Ok(())
    }

    /// Calls `visit` on every segment, ascending, without collecting them.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(&Arc<LogSegment>)) {
        for entry in self.map.iter() {
            visit(entry.value());
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use std::sync::atomic::AtomicBool;

    /// crossbeam-skiplist's `insert` over an existing key unlinks the old node before linking the
    /// new one (a tight loop of raw inserts made two thirds of concurrent `upper_bound`s miss,
    /// measured here): a lookup through `stable` never sees that gap.
    #[test]
    fn lookups_never_see_an_edit_half_done() {
        let config = LogConfig { segment_bytes: 4096, index_bytes: 256, ..LogConfig::default() };
        let dirs = [(); 3].map(|()| tempfile::tempdir().expect("tempdir"));
        let segment = |dir: &tempfile::TempDir, base| {
            Arc::new(LogSegment::create(dir.path(), base, &config, 0).expect("create segment"))
        };
        let (first, replacement) = (segment(&dirs[0], 0), segment(&dirs[1], 0));
        let segments = Arc::new(Segments::new([Arc::clone(&first), segment(&dirs[2], 10)]));
        let stop = Arc::new(AtomicBool::new(false));
        let editor = {
            let (segments, stop) = (Arc::clone(&segments), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut edits = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let held = segments.lock();
                    let next = if edits.is_multiple_of(2) { &replacement } else { &first };
                    segments.edit(&held, |map| map.insert(Arc::clone(next)));
                    edits += 1;
                }
                edits
            })
        };
        let mut lookups = 0u64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(300);
        while std::time::Instant::now() < deadline {
            let found = segments.stable(|| segments.floor(5));
            assert_eq!(found.map(|s| s.base_offset()), Some(0), "lookup {lookups} missed the segment at 0");
            lookups += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let edits = editor.join().expect("editor");
        assert!(edits > 100 && lookups > 100, "{edits} edits, {lookups} lookups");
    }
}
