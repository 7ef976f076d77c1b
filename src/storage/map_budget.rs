//! `MapBudget` (docs/DESIGN.md §12): a budget for mapped memory with the Linux zone
//! watermarks `min < low < high`, counted in two resources, mapped bytes and maps (a process may
//! hold at most `vm.max_map_count` maps). The budget is *below* a watermark when either
//! resource's free share is.
//!
//! - A sealed file asks the budget before it maps ([`MapBudget::charge`]). If the map would take
//!   free below `min`, the caller reclaims first (direct reclaim, its stall counted). If the hard
//!   cap `max_maps` would still be passed, the map is refused (`Error::MapBudget`); the soft byte
//!   budget may be passed (counted), for waiting would deadlock two readers each holding what the
//!   other wants reclaimed.
//! - After a map, free below `low` asks for background reclaim (kswapd): it unmaps until free is
//!   at `high` again.
//! - Reclaim walks the mapped files in clock order (second chance: a file read since the hand last
//!   passed is skipped once) and never waits: a file whose map is in use is skipped
//!   ([`Reclaim::try_unmap`] takes its map lock with `try_write`). An unmapped file is only
//!   "sealed, not mapped": its next read maps it again.
//!
//! This module is the accounting and the reclaim walk, over anything that implements [`Reclaim`]
//! (`storage::MappedFile` does: its sealed maps are charged here). Background reclaim runs on the
//! budget's own `EventManager` thread; the step-by-step tests drive it by hand
//! ([`MapBudget::background_wanted`], [`MapBudget::reclaim_background`]) to check the watermark
//! arithmetic without threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::events::EventManager;
use crate::histogram::{Histogram, LatencySummary};

/// How a budget is sized. The watermarks are shares of each limit that must stay *free*.
#[derive(Debug, Clone, PartialEq)]
pub struct MapBudgetConfig {
    /// Bytes all budgeted files may keep mapped (a soft limit: passed, and counted, when nothing
    /// can be reclaimed).
    pub max_mapped_bytes: u64,
    /// Maps all budgeted files may hold: a hard cap, below `vm.max_map_count`.
    pub max_maps: u64,
    /// Below this free share a map first reclaims in the caller (direct reclaim).
    pub min_free: f64,
    /// Below this free share background reclaim starts ...
    pub low_free: f64,
    /// ... and runs until this free share is reached.
    pub high_free: f64,
    /// Files with a descriptor (active files) all users of the budget may hold.
    pub max_open_files: u64,
}

impl Default for MapBudgetConfig {
    fn default() -> MapBudgetConfig {
        MapBudgetConfig {
            max_mapped_bytes: 4 << 30,
            max_maps: 16_384,
            min_free: 0.05,
            low_free: 0.10,
            high_free: 0.20,
            max_open_files: 4_096,
        }
    }
}

impl MapBudgetConfig {
    /// Checks the limits and `0 ≤ min < low < high ≤ 1`; `max_maps` must stay below
    /// `max_map_count` (the process's `vm.max_map_count`).
    pub fn validate(&self, max_map_count: u64) -> Result<()> {
        let invalid = |field, reason: String| Err(Error::InvalidConfig { field, reason });
        if self.max_mapped_bytes == 0 {
            return invalid("max_mapped_bytes", "must be at least 1".into());
        }
        if self.max_maps == 0 || self.max_maps >= max_map_count {
            return invalid(
                "max_maps",
                format!("{} must be 1 to {} (below vm.max_map_count)", self.max_maps, max_map_count - 1),
            );
        }
        let (min, low, high) = (self.min_free, self.low_free, self.high_free);
        if !(0.0 <= min && min < low && low < high && high <= 1.0) {
            return invalid(
                "min_free",
                format!("watermarks must satisfy 0 ≤ min < low < high ≤ 1: {min}, {low}, {high}"),
            );
        }
        if self.max_open_files == 0 {
            return invalid("max_open_files", "must be at least 1".into());
        }
        Ok(())
    }
}

/// What the budget can ask of a mapped file.
pub(crate) trait Reclaim: Send + Sync {
    /// Whether the file was read since the last call (and clears the mark): the second chance.
    fn take_referenced(&self) -> bool;
    /// Unmaps the file if that needs no waiting.
    fn try_unmap(&self) -> Unmap;
}

/// What [`Reclaim::try_unmap`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unmap {
    /// Unmapped: these bytes and one map are free.
    Freed(u64),
    /// In use (a reader holds it): try again later.
    Busy,
    /// Not mapped (any more): nothing to do, and the file leaves the clock.
    NotMapped,
}

/// A snapshot of a budget's metrics.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct MapBudgetMetrics {
    /// Bytes mapped now by the budget's files.
    pub mapped_bytes: u64,
    /// Maps held now.
    pub maps: u64,
    /// Times background reclaim ran.
    pub background_wakeups: u64,
    /// Files unmapped by background reclaim.
    pub reclaimed_background: u64,
    /// Files unmapped by direct reclaim (in a caller about to map).
    pub reclaimed_direct: u64,
    /// Direct reclaims: how many, and how long a caller stalled in one (p50, p99, max).
    pub direct_stall: LatencySummary,
    /// Maps made over the soft byte budget because nothing could be reclaimed.
    pub over_budget: u64,
    /// Maps refused because the hard cap `max_maps` would have been passed.
    pub refusals: u64,
    /// Files holding a descriptor now.
    pub open_files: u64,
}

/// A budget shared by handle (clones are the same budget): see the module documentation.
#[derive(Clone)]
pub struct MapBudget {
    inner: Arc<Inner>,
}

struct Inner {
    config: MapBudgetConfig,
    state: Mutex<State>,
    /// The background reclaim's thread (kswapd's part); `None` in step-by-step tests.
    events: Option<EventManager>,
    /// Background reclaim was asked for and has not run yet.
    background_wanted: AtomicBool,
    background_wakeups: AtomicU64,
    reclaimed_background: AtomicU64,
    reclaimed_direct: AtomicU64,
    direct_stall: Histogram,
    over_budget: AtomicU64,
    refusals: AtomicU64,
    open_files: AtomicU64,
}

struct State {
    bytes: u64,
    maps: u64,
    /// Mapped files in clock order: the hand is the front. Files that dropped their maps
    /// themselves stay here until the hand or [`State::prune`] passes.
    clock: VecDeque<Weak<dyn Reclaim>>,
    /// The clock's length at which [`State::prune`] runs next.
    prune_at: usize,
}

/// The clock is pruned when it is this long at least (and twice what the last pruning left).
const PRUNE_MIN: usize = 1024;

impl State {
    fn new() -> State {
        State { bytes: 0, maps: 0, clock: VecDeque::new(), prune_at: PRUNE_MIN }
    }

    /// Puts a newly mapped file in the clock, pruning it when it grew to twice what the last
    /// pruning left. Without reclaim (a budget far from its limits) the hand never moves, and
    /// every file ever mapped would stay in the clock, keeping its dropped slot's memory: a
    /// process that rolls and reads segments for days must not grow without bound.
    fn push(&mut self, file: Weak<dyn Reclaim>) {
        self.clock.push_back(file);
        if self.clock.len() >= self.prune_at {
            self.prune();
        }
    }

    /// Drops the clock's entries for dropped files and the earlier entries of a file listed twice
    /// (mapped again after it unmapped itself: its last map is its place in the clock), keeping
    /// the order. Amortised O(1) per push.
    fn prune(&mut self) {
        let mut seen = std::collections::HashSet::with_capacity(self.clock.len());
        let keep: Vec<bool> = (self.clock.iter().rev())
            .map(|file| file.strong_count() > 0 && seen.insert(file.as_ptr().cast::<()>()))
            .collect();
        let mut keep = keep.into_iter().rev();
        self.clock.retain(|_| keep.next().unwrap_or(false));
        self.prune_at = (self.clock.len() * 2).max(PRUNE_MIN);
    }
}

/// Which watermark.
#[derive(Debug, Clone, Copy)]
enum Mark {
    Min,
    Low,
    High,
}

impl std::fmt::Debug for MapBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapBudget").field("config", &self.inner.config).field("metrics", &self.metrics()).finish()
    }
}

impl MapBudget {
    /// A budget of `config`, checked against this process's `vm.max_map_count`
    /// (`/proc/sys/vm/max_map_count`; 65,530 if it cannot be read).
    pub fn new(config: MapBudgetConfig) -> Result<MapBudget> {
        config.validate(max_map_count())?;
        Ok(MapBudget::with_events(config, Some(EventManager::start("strata-map-budget")?)))
    }

    /// The budget every log and store opened without one (`LogConfig::map_budget: None`) shares:
    /// one per process, as `vm.max_map_count` is, made at the first open that asks for it. Its
    /// caps keep such logs at most half of `vm.max_map_count` (and at most 32,768 maps), so a
    /// process reading tens of thousands of segments never runs out of maps, for its own opens
    /// or anything else's (an allocator or a thread stack maps too); its byte budget is 16 GiB;
    /// it does not limit descriptors (the system's limit applies). Give a log its own
    /// [`MapBudget`] to size or share it differently; this one's [`MapBudget::metrics`] show what
    /// the defaulted logs hold.
    pub fn process_default() -> MapBudget {
        static DEFAULT: std::sync::OnceLock<MapBudget> = std::sync::OnceLock::new();
        DEFAULT.get_or_init(|| MapBudget::for_max_map_count(max_map_count())).clone()
    }

    /// The default budget for a process allowed `max_map_count` maps. If its background thread
    /// cannot start, reclaim happens only in the callers (direct reclaim), which keeps the caps.
    fn for_max_map_count(max_map_count: u64) -> MapBudget {
        let config = MapBudgetConfig {
            max_mapped_bytes: 16 << 30,
            max_maps: (max_map_count / 2).clamp(1, 32_768),
            max_open_files: u64::MAX,
            ..MapBudgetConfig::default()
        };
        debug_assert!(config.validate(max_map_count.max(2)).is_ok(), "the default budget fits the process");
        let events = EventManager::start("strata-map-budget")
            .inspect_err(|error| tracing::warn!(%error, "the default map budget reclaims in the callers only"))
            .ok();
        MapBudget::with_events(config, events)
    }

    #[cfg(test)]
    fn unchecked(config: MapBudgetConfig) -> MapBudget {
        MapBudget::with_events(config, None)
    }

    fn with_events(config: MapBudgetConfig, events: Option<EventManager>) -> MapBudget {
        MapBudget {
            inner: Arc::new(Inner {
                config,
                events,
                state: Mutex::new(State::new()),
                background_wanted: AtomicBool::new(false),
                background_wakeups: AtomicU64::new(0),
                reclaimed_background: AtomicU64::new(0),
                reclaimed_direct: AtomicU64::new(0),
                direct_stall: Histogram::default(),
                over_budget: AtomicU64::new(0),
                refusals: AtomicU64::new(0),
                open_files: AtomicU64::new(0),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MapBudgetConfig {
        &self.inner.config
    }

    /// A snapshot of the metrics.
    pub fn metrics(&self) -> MapBudgetMetrics {
        let inner = &self.inner;
        let (mapped_bytes, maps) = {
            let state = inner.state.lock();
            (state.bytes, state.maps)
        };
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        MapBudgetMetrics {
            mapped_bytes,
            maps,
            background_wakeups: load(&inner.background_wakeups),
            reclaimed_background: load(&inner.reclaimed_background),
            reclaimed_direct: load(&inner.reclaimed_direct),
            direct_stall: inner.direct_stall.snapshot(),
            over_budget: load(&inner.over_budget),
            refusals: load(&inner.refusals),
            open_files: load(&inner.open_files),
        }
    }

    /// Before `file` maps `bytes`: reclaims in the caller if the map would take free below `min`,
    /// refuses it (`Error::MapBudget`) if the hard cap on maps would still be passed, then counts
    /// it and puts the file in the clock. Call [`MapBudget::uncharge`] when the file drops the map
    /// itself (not when [`Reclaim::try_unmap`] returned `Freed`: the budget counted that).
    pub(crate) fn charge(&self, bytes: u64, file: Weak<dyn Reclaim>) -> Result<()> {
        let inner = &self.inner;
        let max_maps = inner.config.max_maps;
        let room =
            |budget: &MapBudget, state: &State| budget.free_after(state, bytes, Mark::Min) && state.maps < max_maps;
        // Dropped after the lock: see `reclaim`.
        let mut held = Vec::new();
        let mut state = inner.state.lock();
        if !room(self, &state) {
            let started = Instant::now();
            let freed = self.reclaim(&mut state, &mut held, room);
            inner.reclaimed_direct.fetch_add(freed, Ordering::Relaxed);
            inner.direct_stall.record(started.elapsed());
        }
        if state.maps >= max_maps {
            inner.refusals.fetch_add(1, Ordering::Relaxed);
            return Err(Error::MapBudget { maps: state.maps, max_maps });
        }
        if state.bytes + bytes > inner.config.max_mapped_bytes {
            inner.over_budget.fetch_add(1, Ordering::Relaxed);
        }
        state.bytes += bytes;
        state.maps += 1;
        state.push(file);
        let below_low = !self.is_free(&state, Mark::Low);
        drop(state);
        if below_low && !inner.background_wanted.swap(true, Ordering::AcqRel) {
            self.schedule_background();
        }
        Ok(())
    }

    /// Queues background reclaim on the budget's event thread (none in the step-by-step tests).
    fn schedule_background(&self) {
        let Some(events) = &self.inner.events else { return };
        let budget = Arc::downgrade(&self.inner);
        let queued = events.put("map budget reclaim", move || {
            if let Some(inner) = budget.upgrade() {
                MapBudget { inner }.reclaim_background();
            }
            Ok(())
        });
        if queued.is_err() {
            self.inner.background_wanted.store(false, Ordering::Release);
        }
    }

    /// A file dropped a map of `bytes` itself (retired, sealed again, grown).
    pub(crate) fn uncharge(&self, bytes: u64) {
        let mut state = self.inner.state.lock();
        debug_assert!(state.maps > 0 && state.bytes >= bytes, "uncharging more than was charged");
        state.bytes = state.bytes.saturating_sub(bytes);
        state.maps = state.maps.saturating_sub(1);
    }

    /// Whether free dropped below `low` since background reclaim last ran.
    #[cfg(test)]
    pub(crate) fn background_wanted(&self) -> bool {
        self.inner.background_wanted.load(Ordering::Acquire)
    }

    /// Background reclaim: unmaps until free is at `high` (or nothing more can be). Returns the
    /// files unmapped.
    pub(crate) fn reclaim_background(&self) -> u64 {
        let inner = &self.inner;
        inner.background_wanted.store(false, Ordering::Release);
        inner.background_wakeups.fetch_add(1, Ordering::Relaxed);
        let mut held = Vec::new();
        let mut state = inner.state.lock();
        let freed = self.reclaim(&mut state, &mut held, |budget, state| budget.is_free(state, Mark::High));
        drop(state);
        drop(held);
        inner.reclaimed_background.fetch_add(freed, Ordering::Relaxed);
        freed
    }

    /// A file took a descriptor: `Error::MapBudget` past `max_open_files`.
    pub(crate) fn open_file(&self) -> Result<()> {
        let max = self.inner.config.max_open_files;
        let opened = self
            .inner
            .open_files
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| (open < max).then_some(open + 1));
        opened.map(|_| ()).map_err(|open| Error::OpenFileBudget { open, max_open_files: max })
    }

    /// `Error::OpenFileBudget` unless `files` more descriptors fit now: checked by an operation
    /// that opens files after a step it cannot take back (a truncation or reset, after its
    /// checkpoint), so a full budget refuses it before anything changes.
    pub(crate) fn check_open_room(&self, files: u64) -> Result<()> {
        let (open, max) = (self.inner.open_files.load(Ordering::Acquire), self.inner.config.max_open_files);
        if open.saturating_add(files) > max {
            return Err(Error::OpenFileBudget { open, max_open_files: max });
        }
        Ok(())
    }

    /// A file gave its descriptor back.
    pub(crate) fn close_file(&self) {
        let _ = self.inner.open_files.fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| open.checked_sub(1));
    }

    /// Walks the clock until `enough` or a whole turn without progress; returns files unmapped.
    /// Never waits: `try_unmap` only tries.
    ///
    /// The files it looked at are pushed on `held`, for the caller to drop once it released the
    /// budget's lock: the last reference to a file may be this one, and dropping a file gives its
    /// map back to the budget (which takes the lock).
    fn reclaim(
        &self,
        state: &mut State,
        held: &mut Vec<Arc<dyn Reclaim>>,
        enough: impl Fn(&MapBudget, &State) -> bool,
    ) -> u64 {
        let mut freed = 0;
        // Two turns: the first may only clear referenced marks.
        let mut budget = state.clock.len() * 2;
        while budget > 0 && !enough(self, state) {
            budget -= 1;
            let Some(slot) = state.clock.pop_front() else { break };
            let Some(file) = slot.upgrade() else { continue };
            let unmapped = if file.take_referenced() { Unmap::Busy } else { file.try_unmap() };
            held.push(file);
            match unmapped {
                Unmap::Freed(bytes) => {
                    state.bytes = state.bytes.saturating_sub(bytes);
                    state.maps = state.maps.saturating_sub(1);
                    freed += 1;
                }
                Unmap::Busy => state.clock.push_back(slot),
                Unmap::NotMapped => {}
            }
        }
        freed
    }

    /// Whether free is at least `mark` after a map of `bytes` more.
    fn free_after(&self, state: &State, bytes: u64, mark: Mark) -> bool {
        let after = State { bytes: state.bytes + bytes, maps: state.maps + 1, ..State::new() };
        self.is_free(&after, mark)
    }

    /// Whether both resources have at least `mark`'s share free.
    fn is_free(&self, state: &State, mark: Mark) -> bool {
        let config = &self.inner.config;
        let share = match mark {
            Mark::Min => config.min_free,
            Mark::Low => config.low_free,
            Mark::High => config.high_free,
        };
        let free = |used: u64, limit: u64| limit.saturating_sub(used) as f64 >= share * limit as f64;
        free(state.bytes, config.max_mapped_bytes) && free(state.maps, config.max_maps)
    }
}

/// This process's `vm.max_map_count`.
fn max_map_count() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/max_map_count").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(65_530)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapped file as the budget sees it: `bytes` mapped, or not; busy or referenced on demand.
    struct Fake {
        bytes: u64,
        mapped: AtomicBool,
        busy: AtomicBool,
        referenced: AtomicBool,
    }

    impl Fake {
        fn new(bytes: u64) -> Arc<Fake> {
            Arc::new(Fake {
                bytes,
                mapped: AtomicBool::new(false),
                busy: AtomicBool::new(false),
                referenced: AtomicBool::new(false),
            })
        }
    }

    impl Reclaim for Fake {
        fn take_referenced(&self) -> bool {
            self.referenced.swap(false, Ordering::SeqCst)
        }

        fn try_unmap(&self) -> Unmap {
            if self.busy.load(Ordering::SeqCst) {
                return Unmap::Busy;
            }
            if self.mapped.swap(false, Ordering::SeqCst) { Unmap::Freed(self.bytes) } else { Unmap::NotMapped }
        }
    }

    /// Maps `file` through the budget.
    fn map(budget: &MapBudget, file: &Arc<Fake>) -> Result<()> {
        let weak: Weak<dyn Reclaim> = Arc::downgrade(&(Arc::clone(file) as Arc<dyn Reclaim>));
        budget.charge(file.bytes, weak)?;
        file.mapped.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn budget(max_maps: u64) -> MapBudget {
        MapBudget::unchecked(MapBudgetConfig {
            max_mapped_bytes: 1 << 40,
            max_maps,
            min_free: 0.1,
            low_free: 0.3,
            high_free: 0.5,
            max_open_files: 2,
        })
    }

    #[test]
    fn background_reclaim_starts_below_low_and_stops_at_high() {
        // 10 maps: min keeps 1 free, low 3, high 5.
        let budget = budget(10);
        let files: Vec<_> = (0..10).map(|_| Fake::new(100)).collect();
        for file in &files[..7] {
            map(&budget, file).expect("map");
        }
        assert!(!budget.background_wanted(), "7 maps leave 3 free: at low, not below");
        map(&budget, &files[7]).expect("map");
        assert!(budget.background_wanted(), "8 maps leave 2 free: below low");
        assert_eq!(budget.reclaim_background(), 3, "until 5 are free");
        assert!(!budget.background_wanted());
        let metrics = budget.metrics();
        assert_eq!((metrics.maps, metrics.mapped_bytes, metrics.background_wakeups), (5, 500, 1));
        assert!(files[..3].iter().all(|f| !f.mapped.load(Ordering::SeqCst)), "the oldest went first");
        assert_eq!(metrics.reclaimed_direct, 0);
    }

    #[test]
    fn the_clock_forgets_dropped_files_without_any_reclaim() {
        // Far from its limits: the hand never moves.
        let budget = budget(1 << 20);
        let kept = Fake::new(1);
        map(&budget, &kept).expect("map");
        for _ in 0..10_000 {
            let file = Fake::new(1);
            map(&budget, &file).expect("map");
            budget.uncharge(1);
            // Mapped again after it unmapped itself: listed twice until pruned.
            map(&budget, &kept).expect("map");
            budget.uncharge(1);
        }
        let clock = budget.inner.state.lock().clock.len();
        assert!(clock <= 2 * PRUNE_MIN, "10,000 dropped files and 10,000 maps of one, {clock} listed");
        let state = budget.inner.state.lock();
        let live = state.clock.iter().filter(|f| f.strong_count() > 0).count();
        assert!(live >= 1, "the live file stays listed");
        drop(state);
        assert_eq!(budget.metrics().maps, 1);
    }

    #[test]
    fn pruning_keeps_a_remapped_files_last_place_in_the_clock() {
        let budget = budget(1 << 20);
        let (a, b) = (Fake::new(1), Fake::new(1));
        map(&budget, &a).expect("map");
        map(&budget, &b).expect("map");
        budget.uncharge(1);
        map(&budget, &a).expect("a mapped again, after b");
        budget.inner.state.lock().prune();
        let order: Vec<*const ()> = budget.inner.state.lock().clock.iter().map(|f| f.as_ptr().cast::<()>()).collect();
        let ptr = |f: &Arc<Fake>| Arc::as_ptr(f).cast::<()>();
        assert_eq!(order, [ptr(&b), ptr(&a)], "b, then a at its last map");
    }

    #[test]
    fn direct_reclaim_starts_when_a_map_would_leave_less_than_min() {
        let budget = budget(10);
        let files: Vec<_> = (0..10).map(|_| Fake::new(1)).collect();
        for file in &files[..9] {
            map(&budget, file).expect("map");
        }
        assert_eq!(budget.metrics().direct_stall.count, 0, "9 maps leave 1 free: at min");
        map(&budget, &files[9]).expect("map");
        let metrics = budget.metrics();
        assert_eq!((metrics.direct_stall.count, metrics.reclaimed_direct), (1, 1), "one unmapped so one stays free");
        assert_eq!(metrics.maps, 9);
        assert!(!files[0].mapped.load(Ordering::SeqCst));
    }

    #[test]
    fn reclaim_gives_a_second_chance_skips_busy_files_and_never_waits() {
        let budget = budget(10);
        let files: Vec<_> = (0..8).map(|_| Fake::new(1)).collect();
        for file in &files {
            map(&budget, file).expect("map");
        }
        files[0].referenced.store(true, Ordering::SeqCst); // read since: skipped once
        files[1].busy.store(true, Ordering::SeqCst); // a reader holds it
        assert_eq!(budget.reclaim_background(), 3);
        let mapped: Vec<bool> = files.iter().map(|f| f.mapped.load(Ordering::SeqCst)).collect();
        assert_eq!(mapped, [true, true, false, false, false, true, true, true]);
    }

    #[test]
    fn the_hard_cap_refuses_a_map_when_nothing_can_be_reclaimed_and_the_soft_byte_budget_bends() {
        let budget = MapBudget::unchecked(MapBudgetConfig {
            max_mapped_bytes: 100,
            max_maps: 3,
            min_free: 0.0,
            low_free: 0.1,
            high_free: 0.2,
            max_open_files: 1,
        });
        let files: Vec<_> = (0..4).map(|_| Fake::new(60)).collect();
        for file in &files {
            file.busy.store(true, Ordering::SeqCst);
        }
        map(&budget, &files[0]).expect("within both limits");
        map(&budget, &files[1]).expect("over the byte budget, counted");
        map(&budget, &files[2]).expect("at the cap");
        assert!(matches!(map(&budget, &files[3]), Err(Error::MapBudget { maps: 3, max_maps: 3 })));
        let metrics = budget.metrics();
        assert_eq!((metrics.over_budget, metrics.refusals, metrics.maps), (2, 1, 3));
        files[0].busy.store(false, Ordering::SeqCst);
        map(&budget, &files[3]).expect("one could be reclaimed");
        assert_eq!(budget.metrics().maps, 3);
    }

    #[test]
    fn files_that_went_away_or_unmapped_themselves_leave_the_clock() {
        let budget = budget(10);
        {
            let gone = Fake::new(1);
            map(&budget, &gone).expect("map");
            budget.uncharge(1); // it dropped its map itself (retired), then went away
        }
        let unmapped = Fake::new(1);
        map(&budget, &unmapped).expect("map");
        unmapped.mapped.store(false, Ordering::SeqCst);
        budget.uncharge(1);
        let kept: Vec<_> = (0..6).map(|_| Fake::new(1)).collect();
        for file in &kept {
            map(&budget, file).expect("map");
        }
        assert_eq!(budget.metrics().maps, 6);
        assert_eq!(budget.reclaim_background(), 1, "6 maps leave 4 free: one more to reach high");
        assert_eq!(budget.metrics().maps, 5);
        assert_eq!(budget.inner.state.lock().clock.len(), 5, "the dead and the unmapped entries left");
    }

    #[test]
    fn open_files_are_counted_against_their_limit() {
        let budget = budget(10);
        budget.open_file().expect("1");
        budget.open_file().expect("2");
        assert!(matches!(budget.open_file(), Err(Error::OpenFileBudget { open: 2, max_open_files: 2 })));
        budget.close_file();
        budget.open_file().expect("room again");
        assert_eq!(budget.metrics().open_files, 2);
    }

    #[test]
    fn the_process_default_takes_half_the_maps_a_process_may_hold() {
        for (max_map_count, expected) in [(65_530, 32_765), (262_144, 32_768), (1_000, 500)] {
            let budget = MapBudget::for_max_map_count(max_map_count);
            assert_eq!(budget.config().max_maps, expected, "vm.max_map_count {max_map_count}");
            budget.config().validate(max_map_count).expect("valid");
        }
        let shared = MapBudget::process_default();
        assert!(Arc::ptr_eq(&shared.inner, &MapBudget::process_default().inner), "one per process");
    }

    #[test]
    fn configs_are_checked() {
        let good = MapBudgetConfig::default();
        good.validate(65_530).expect("default");
        assert!(matches!(
            MapBudgetConfig { max_maps: 65_530, ..good.clone() }.validate(65_530),
            Err(Error::InvalidConfig { field: "max_maps", .. })
        ));
        assert!(matches!(
            MapBudgetConfig { low_free: 0.3, high_free: 0.2, ..good.clone() }.validate(65_530),
            Err(Error::InvalidConfig { field: "min_free", .. })
        ));
        assert!(MapBudget::new(MapBudgetConfig { max_maps: 100, ..good }).is_ok());
    }
}
