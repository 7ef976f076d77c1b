//! Stress: every public operation of one `Log` at once, against an exact model.
//!
//! Two appenders (keyed and unkeyed records, so compaction has work), two readers at random
//! offsets, a tailer following the end with `wait_visible`, a mutator (`truncate_to`, `reset_at`,
//! `delete_records_before`, `enforce_retention`), a `compact()` loop and a `flush()` loop (with
//! `metrics`, `offset_for_timestamp`, `wait_durable`) run together in phases; between phases every
//! thread stops, the log is checked against the model, then closed and reopened — cleanly, or
//! from a copy of its directory taken while it was open (an unclean open, as after a crash) — and
//! checked again.
//!
//! The model is exact because every operation that changes the logical content records its
//! result while it cannot race another one that does: appends and prefix removals hold the
//! content lock shared (so they race each other), truncations and resets hold it exclusively.
//! Compaction is the only change the model does not serialise; it may only remove a record that
//! a later record of the same key superseded (no tombstones are written), and the model marks
//! such records as soon as the later one is appended.
//!
//! Readers take no lock. They check at once that every record they read is well formed (its
//! value and key are a function of a unique append id) and that offsets strictly increase; they
//! check (later, once all threads stopped, if its appender had not registered it yet) that the id
//! was appended at that very offset and, if before the read began, was not removed by a
//! truncation or reset by then; and that a read no truncation, reset or prefix removal overlapped
//! skipped nothing but superseded records. An error is legitimate only if: `Truncated` — a truncation or reset overlapped the
//! call; `OffsetOutOfRange` — the offset was below the start or past the next offset before the
//! call (a read from the visible end to the next offset is empty), or a truncation, reset or
//! prefix removal overlapped it. Anything else (`Corrupt`,
//! `Io`, a panic, a hang) fails the test.
//!
//! Three more roles use the owned APIs: a cursor, its interrupter, durability callbacks. A
//! `Cursor` tails the log with `next_batch` and `next_batch_wait` (small `max_bytes`, short
//! timeouts), and is now and then sought, dropped and made again; its records get the readers'
//! checks, and across calls its offsets strictly increase until it reports `Truncated`
//! (legitimate only if a truncation or reset began since its previous call began: that is the one
//! it reports) or is sought. An interrupter stops its waits (`Interrupted` is legitimate only
//! while the cursor has had fewer than it was sent, and a wait an interrupt reached more than two
//! seconds before its deadline must not time out). The last role appends with `append_nowait` and
//! hands each batch to `on_durable`; see [`check_callbacks`] for what is checked of the calls once
//! the log is closed. Its batches are not waited for, so under `Always` the visible end may trail
//! the next offset until the syncer's round: quiet-log checks first give it that round
//! ([`quiet_offsets`]).
//!
//! A third test, `stress_prefix_removal_and_compaction_vs_reset`, races `delete_records_before`
//! and `compact` against `reset_at` directly (the model-based tests never overlap those two).
//!
//! Length: `STRATA_STRESS_SECS` (default 8 s under `Always`, 5 s under `Never`, 2 s for the third
//! test, a quarter of it; the three run in parallel, about 9 s in all). Seed: printed, replay with
//! `STRATA_SEED` (threads interleave differently on every run, so a replay repeats the
//! configuration and each thread's choices, not the timing). Debugging aids:
//! `STRATA_STRESS_KEEP=1` keeps the directories of a failed run, `STRATA_STRESS_SKIP` leaves
//! operations out and `STRATA_STRESS_TOLERATE` counts known false errors instead of failing (see
//! [`skipped`] and [`tolerated`]).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use strata_log::{
    AppendInfo, Clock, Cursor, CursorInterrupt, Error, FlushPolicy, Log, LogConfig, MapBudget, MapBudgetConfig, Record,
    RecordView,
};

/// Distinct keys keyed records use: few enough that most keyed records get superseded.
const KEYS: u64 = 24;

fn key_of(id: u64) -> Option<Vec<u8>> {
    id.is_multiple_of(2).then(|| format!("key-{}", (id / 2) % KEYS).into_bytes())
}

/// The value appended with id `id`: names the id, and its length and filler depend on it. Now and
/// then one larger than a whole segment (it gets a segment of its own).
fn value_of(id: u64) -> Vec<u8> {
    let mut v = format!("id={id};").into_bytes();
    let pad = if id.is_multiple_of(389) { 5000 } else { (id.wrapping_mul(2_654_435_761) % 120) as usize };
    v.resize(v.len() + pad, b'a' + (id % 26) as u8);
    v
}

/// The id a value names, if it is well formed at all.
fn id_in(value: &[u8]) -> Option<u64> {
    let rest = value.strip_prefix(b"id=")?;
    let end = rest.iter().position(|&b| b == b';')?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// `STRATA_STRESS_SKIP=compact,reset,truncate,prefix,retention,flush,unclean`: leave those
/// operations out (to look for other bugs while a known one is open).
fn skipped(what: &str) -> bool {
    std::env::var("STRATA_STRESS_SKIP").is_ok_and(|s| s.split(',').any(|w| w.trim() == what))
}

fn stress_secs(default: f64) -> f64 {
    std::env::var("STRATA_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// One append, as the model remembers it.
#[derive(Debug, Clone)]
struct Assigned {
    offset: u64,
    /// Content epoch (truncations and resets so far) when it was appended.
    epoch: u64,
    /// The last offset of its batch.
    batch_last: u64,
    /// Registration order, for the `Never` durability rule (`flush` covers what came before it).
    seq: u64,
}

/// Everything the model knows. One mutex: appenders, the mutator and (briefly) readers use it.
#[derive(Default)]
struct Model {
    /// offset -> id of every record that must be (or, if superseded, may be) in the log now.
    present: BTreeMap<u64, u64>,
    /// key -> offsets of present records with that key.
    by_key: HashMap<Vec<u8>, std::collections::BTreeSet<u64>>,
    start: u64,
    next: u64,
    /// id -> where it was appended (never forgotten).
    assigned: HashMap<u64, Assigned>,
    /// offset -> ids ever appended there, in order.
    by_offset: HashMap<u64, Vec<u64>>,
    /// Ids a later record of the same key superseded: compaction may remove them.
    superseded: HashSet<u64>,
    /// cut of each truncation: `cuts[e - 1]` moved the content epoch from e - 1 to e (0 for a reset).
    cuts: Vec<u64>,
    /// Parallel to `cuts`: the cut as the log notes it for waiters and durability callbacks
    /// (`u64::MAX` if it noted none: a failed truncation, or one at or past the end; a reset's is
    /// `min(start, offset)`), and the `Durables::clock` stamp taken once the call returned.
    noted_cuts: Vec<(u64, u64)>,
    /// Ids whose batch a durability callback reported durable before the directory was copied
    /// (under `Never`, an unclean reopen must keep them).
    durable_acked: HashSet<u64>,
    epoch: u64,
    seq: u64,
    /// Registrations up to this `seq` were covered by a successful `flush` (or a clean close).
    flushed_seq: u64,
    /// Observations readers could not check yet (the appender had not registered the id).
    deferred: Vec<(u64, u64, &'static str)>,
    /// Offsets `[from, to)` a read that raced no truncation/reset/prefix removal skipped, at epoch.
    gaps: Vec<(u64, u64, u64, &'static str)>,
}

impl Model {
    fn register(&mut self, id: u64, offset: u64, batch_last: u64) {
        self.seq += 1;
        let a = Assigned { offset, epoch: self.epoch, batch_last, seq: self.seq };
        assert!(self.assigned.insert(id, a).is_none(), "id {id} appended twice");
        self.by_offset.entry(offset).or_default().push(id);
        self.next = self.next.max(batch_last + 1);
        if offset < self.start {
            return; // a concurrent prefix removal already took it
        }
        self.present.insert(offset, id);
        if let Some(key) = key_of(id) {
            let offsets = self.by_key.entry(key).or_default();
            // Earlier records of the key are superseded; so is this one if a later one came first.
            for &o in offsets.range(..offset) {
                self.superseded.insert(self.present[&o]);
            }
            if offsets.range(offset + 1..).next().is_some() {
                self.superseded.insert(id);
            }
            offsets.insert(offset);
        }
    }

    fn forget(&mut self, offset: u64) {
        if let Some(id) = self.present.remove(&offset)
            && let Some(key) = key_of(id)
            && let Some(offsets) = self.by_key.get_mut(&key)
        {
            offsets.remove(&offset);
        }
    }

    fn remove_from(&mut self, cut: u64) {
        let doomed: Vec<u64> = self.present.range(cut..).map(|(&o, _)| o).collect();
        doomed.into_iter().for_each(|o| self.forget(o));
    }

    fn remove_below(&mut self, start: u64) {
        let doomed: Vec<u64> = self.present.range(..start).map(|(&o, _)| o).collect();
        doomed.into_iter().for_each(|o| self.forget(o));
    }

    fn truncated(&mut self, cut: u64, noted: u64, stamp: u64) {
        self.epoch += 1;
        self.cuts.push(cut);
        self.noted_cuts.push((noted, stamp));
    }

    /// Whether a truncation or reset after epoch `epoch` noted a cut at or below `last_offset`
    /// (then a callback or wait for the batch ending there gets `Truncated`).
    fn cut_since(&self, epoch: u64, last_offset: u64) -> bool {
        self.noted_cuts[epoch as usize..].iter().any(|&(cut, _)| cut <= last_offset)
    }

    /// The id offset `x` held during epoch `epoch`, if any record was there.
    fn holder_at(&self, x: u64, epoch: u64) -> Option<u64> {
        let ids = self.by_offset.get(&x)?;
        let &id = ids.iter().rev().find(|id| self.assigned[*id].epoch <= epoch)?;
        let from = self.assigned[&id].epoch;
        // Removed by a truncation (or reset) after it was appended, and never appended again.
        let cut_since = self.cuts[from as usize..epoch as usize].iter().any(|&c| c <= x);
        (!cut_since).then_some(id)
    }
}

/// Counters for deciding whether an error or a skip is legitimate.
#[derive(Default)]
struct Ops {
    trunc_started: AtomicU64,
    trunc_finished: AtomicU64,
    content_started: AtomicU64,
    content_finished: AtomicU64,
    compact_started: AtomicU64,
    compact_finished: AtomicU64,
    epoch: AtomicU64,
}

#[derive(Default)]
struct Stats {
    appends: AtomicU64,
    reads: AtomicU64,
    records_read: AtomicU64,
    truncations: AtomicU64,
    resets: AtomicU64,
    prefix: AtomicU64,
    compactions: AtomicU64,
    flushes: AtomicU64,
    legit_errors: AtomicU64,
    tolerated: AtomicU64,
    reopens: AtomicU64,
    cursor_calls: AtomicU64,
    cursor_records: AtomicU64,
    cursor_errors: AtomicU64,
    cursors_made: AtomicU64,
    interrupts: AtomicU64,
    interrupted: AtomicU64,
    callbacks: AtomicU64,
    callbacks_ok: AtomicU64,
    callbacks_truncated: AtomicU64,
    callbacks_closed: AtomicU64,
    /// Ok calls whose durable offset could be checked (no truncation began since registration).
    durable_checked: AtomicU64,
    /// Calls that ran while a callback of a lower key was known to be pending (order checked).
    order_checked: AtomicU64,
}

/// What the `on_durable` role's callbacks share with the checks: `'static`, the log calls them on
/// its own threads (the syncer, a flush, a truncation, the close).
#[derive(Default)]
struct Durables {
    /// One order for registrations, calls, truncations and the close: each takes a stamp.
    clock: AtomicU64,
    /// This log's registrations (cleared once checked, after its close).
    registrations: Mutex<Vec<Arc<Registration>>>,
    /// Every call, in the order they were made.
    calls: Mutex<Vec<Call>>,
    /// The stamp taken before the log was closed (`u64::MAX` while open).
    closing: AtomicU64,
}

impl Durables {
    fn stamp(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// One `on_durable` registration.
struct Registration {
    index: usize,
    first_id: u64,
    records: u64,
    last_offset: u64,
    /// The model's content epoch when the batch was appended.
    epoch: u64,
    /// Stamps just before `on_durable` was called and just after it returned.
    before: u64,
    after: AtomicU64,
    /// `Ops::trunc_started` and `trunc_finished` before `on_durable` was called.
    trunc_started: u64,
    trunc_finished: u64,
    /// How many times its callback was called.
    calls: AtomicU64,
}

/// One call of a durability callback.
struct Call {
    registration: usize,
    stamp: u64,
    outcome: Result<(), Error>,
    /// `durable_offset()` read in the callback (after the stamp), if the log was still shared.
    durable: Option<u64>,
    /// `Ops::trunc_started` read after it.
    trunc_started: u64,
}

/// The cursor role's cursor as the interrupter sees it.
#[derive(Default)]
struct CursorShared {
    /// The current cursor's interrupt handle, and when each interrupt was sent to it.
    slot: Mutex<Option<(CursorInterrupt, Vec<Instant>)>>,
    /// The cursor is in a long wait: interrupt it soon.
    long_wait: AtomicBool,
}

struct Ctx {
    policy: FlushPolicy,
    model: Mutex<Model>,
    content: RwLock<()>,
    /// Shared: durability callbacks read it.
    ops: Arc<Ops>,
    durables: Arc<Durables>,
    cursor: CursorShared,
    /// The log of this phase, for the callbacks (which must not keep it alive).
    log_weak: Mutex<Weak<Log>>,
    stats: Stats,
    next_id: AtomicU64,
    stop: AtomicBool,
    failures: Mutex<Vec<String>>,
    started: Instant,
    /// Per thread: ms since `started` of its last progress (the watchdog reads them).
    heartbeats: Vec<AtomicU64>,
    /// The directory of the run (kept on failure with `STRATA_STRESS_KEEP=1`).
    root: Mutex<Option<tempfile::TempDir>>,
}

impl Ctx {
    fn fail(&self, who: &str, msg: String) {
        let line = format!("[{:.3}s {who}] {msg}", self.started.elapsed().as_secs_f64());
        eprintln!("FAILURE {line}");
        self.failures.lock().push(line);
        self.stop.store(true, Ordering::SeqCst);
    }

    fn beat(&self, thread: usize) {
        self.heartbeats[thread].store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A snapshot taken just before a read or wait.
struct Before {
    start: u64,
    visible: u64,
    next: u64,
    trunc_finished: u64,
    content_finished: u64,
    compact_finished: u64,
    epoch: u64,
}

impl Before {
    fn take(ctx: &Ctx, log: &Log) -> Before {
        // The counters first: anything that starts after them is seen as overlapping.
        let trunc_finished = ctx.ops.trunc_finished.load(Ordering::SeqCst);
        let content_finished = ctx.ops.content_finished.load(Ordering::SeqCst);
        let compact_finished = ctx.ops.compact_finished.load(Ordering::SeqCst);
        let epoch = ctx.ops.epoch.load(Ordering::SeqCst);
        Before {
            start: log.start_offset(),
            visible: log.visible_end(),
            next: log.next_offset(),
            trunc_finished,
            content_finished,
            compact_finished,
            epoch,
        }
    }

    fn truncation_overlapped(&self, ctx: &Ctx) -> bool {
        ctx.ops.trunc_started.load(Ordering::SeqCst) > self.trunc_finished
    }

    fn content_op_overlapped(&self, ctx: &Ctx) -> bool {
        ctx.ops.content_started.load(Ordering::SeqCst) > self.content_finished
    }

    fn compaction_overlapped(&self, ctx: &Ctx) -> bool {
        ctx.ops.compact_started.load(Ordering::SeqCst) > self.compact_finished
    }
}

/// `STRATA_STRESS_TOLERATE=compaction-reads[,time-lookups]`: count, instead of failing on, the false
/// `Corrupt(DataEndsEarly)` / `OffsetOutOfRange` read errors of a read a compaction overlapped
/// (a known bug: the swap replaces a segment in the skip map non-atomically), to look for others.
fn tolerated(ctx: &Ctx, before: &Before, error: &Error) -> bool {
    let known = matches!(error, Error::OffsetOutOfRange { .. })
        || matches!(error, Error::Corrupt { reason: strata_log::Corruption::DataEndsEarly { .. }, .. });
    let on =
        std::env::var("STRATA_STRESS_TOLERATE").is_ok_and(|s| s.split(',').any(|w| w.trim() == "compaction-reads"));
    if on && known && before.compaction_overlapped(ctx) {
        ctx.stats.tolerated.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

/// Whether a read error is one the concurrent operations explain.
fn read_error_is_legit(ctx: &Ctx, before: &Before, error: &Error) -> bool {
    match error {
        Error::Truncated { .. } => before.truncation_overlapped(ctx),
        Error::OffsetOutOfRange { requested, .. } => {
            *requested < before.start || *requested > before.next || before.content_op_overlapped(ctx)
        }
        _ => false,
    }
}

/// Reads from `offset` and checks everything a lock-free reader can. Returns where to continue,
/// or `None` after a (legitimate) error.
fn checked_read(
    ctx: &Ctx,
    who: &'static str,
    log: &Log,
    offset: u64,
    max_bytes: usize,
    rng: &mut StdRng,
) -> Option<u64> {
    let before = Before::take(ctx, log);
    ctx.stats.reads.fetch_add(1, Ordering::Relaxed);
    let mut reader = match log.read(offset, max_bytes) {
        Ok(reader) => reader,
        Err(error) => {
            if read_error_is_legit(ctx, &before, &error) {
                ctx.stats.legit_errors.fetch_add(1, Ordering::Relaxed);
            } else if !tolerated(ctx, &before, &error) {
                ctx.fail(who, format!("read({offset}, {max_bytes}): false error {error:?} (start {}, visible end {} before the call; no truncation/prefix removal overlapped)", before.start, before.visible));
            }
            return None;
        }
    };
    // Sometimes stop early: a reader dropped part-way must release everything.
    let limit = if rng.random_bool(0.1) { rng.random_range(1..5usize) } else { usize::MAX };
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut failed = false;
    for record in reader.by_ref().take(limit) {
        match record {
            Ok(view) => {
                let id = check_record(ctx, who, "read", offset, seen.last().map(|&(p, _)| p), &view)?;
                seen.push((view.offset(), id));
            }
            Err(error) => {
                if read_error_is_legit(ctx, &before, &error) {
                    ctx.stats.legit_errors.fetch_add(1, Ordering::Relaxed);
                } else if !tolerated(ctx, &before, &error) {
                    let files: Vec<String> = std::fs::read_dir(log.dir())
                        .map(|d| {
                            d.filter_map(|e| e.ok())
                                .map(|e| e.file_name().to_string_lossy().into_owned())
                                .filter(|n| n.ends_with(".log") || n.contains(".log."))
                                .collect()
                        })
                        .unwrap_or_default();
                    ctx.fail(who, format!("read({offset}, {max_bytes}) after {} records (last {:?}): false error {error:?} (start {}, visible end {} before the call; no truncation/prefix removal overlapped); now: {log:?}, .log files {files:?}", seen.len(), seen.last(), before.start, before.visible));
                }
                failed = true;
                break;
            }
        }
    }
    let continue_at = reader.next_offset();
    drop(reader);
    ctx.stats.records_read.fetch_add(seen.len() as u64, Ordering::Relaxed);
    let clean = !before.content_op_overlapped(ctx);
    if seen.is_empty() && (failed || offset >= before.visible) {
        return (!failed).then_some(continue_at);
    }
    let complete = clean && !failed && limit == usize::MAX;
    let tail = seen.is_empty().then_some(before.visible);
    if !note_seen(ctx, who, "read", offset, &seen, &before, complete.then_some(tail)) {
        return None;
    }
    (!failed).then_some(continue_at)
}

/// Checks one record a read from `from` returned after the one at `prev`: its offset strictly
/// increases (from `from` on), its value names an id and its key and value are that id's. Returns
/// the id, or `None` after a failure. `call` names the call in messages.
fn check_record(
    ctx: &Ctx,
    who: &'static str,
    call: &str,
    from: u64,
    prev: Option<u64>,
    view: &RecordView,
) -> Option<u64> {
    let o = view.offset();
    if o < from || prev.is_some_and(|p| o <= p) {
        ctx.fail(
            who,
            format!("{call}({from}): offset {o} after {prev:?}: not strictly increasing from the requested offset"),
        );
        return None;
    }
    let Some(id) = view.value().and_then(id_in) else {
        ctx.fail(
            who,
            format!(
                "{call}({from}): record at {o} has a foreign value {:?}",
                view.value().map(String::from_utf8_lossy)
            ),
        );
        return None;
    };
    if view.value() != Some(&value_of(id)[..]) || view.key() != key_of(id).as_deref() {
        ctx.fail(who, format!("{call}({from}): record at {o} (id {id}) has a damaged key or value"));
        return None;
    }
    Some(id)
}

/// What a read from `from` returned (`seen`: offset and id): each id must have been appended at
/// the offset it was read at (checked now, or once every thread stopped if its appender has not
/// registered it yet), and not removed by a truncation or reset before the call. `gaps`: the read returned all it found and no truncation, reset or prefix
/// removal overlapped it (`Before`); the offsets it skipped are then noted for
/// [`check_observations`] (only superseded records may be skipped): from `from` up to each record,
/// and from after the last one (or from `from`) up to the `Some` offset given. Returns `false`
/// after a failure.
fn note_seen(
    ctx: &Ctx,
    who: &'static str,
    call: &str,
    from: u64,
    seen: &[(u64, u64)],
    before: &Before,
    gaps: Option<Option<u64>>,
) -> bool {
    let mut model = ctx.model.lock();
    for &(o, id) in seen {
        match model.assigned.get(&id) {
            // Appended before the call began: it must not have been removed by then (a truncation
            // the model knows of finished before the call; one running may still be unknown).
            Some(a) if a.offset == o && a.epoch <= before.epoch && model.holder_at(o, before.epoch) != Some(id) => {
                let (epoch, now) = (a.epoch, before.epoch);
                drop(model);
                ctx.fail(who, format!("{call}({from}): returned id {id} at offset {o} (appended in epoch {epoch}), but a truncation or reset had removed it before the call (epoch {now})"));
                return false;
            }
            Some(a) if a.offset == o => {}
            Some(a) => {
                let at = a.offset;
                drop(model);
                ctx.fail(who, format!("{call}({from}): id {id} returned at offset {o}, but it was appended at {at}"));
                return false;
            }
            None => model.deferred.push((o, id, who)),
        }
    }
    if let Some(tail) = gaps {
        let mut next = from;
        for &(o, _) in seen {
            if o > next {
                model.gaps.push((next, o, before.epoch, who));
            }
            next = o + 1;
        }
        if let Some(tail) = tail
            && tail > next
        {
            model.gaps.push((next, tail, before.epoch, who));
        }
    }
    true
}

/// An id's key (if it has one) and value.
type KeyValue = (Option<Vec<u8>>, Vec<u8>);

/// One to four new ids, taken in order, with the key and value each is written with.
fn next_values(ctx: &Ctx, rng: &mut StdRng) -> (u64, u64, Vec<KeyValue>) {
    let n = rng.random_range(1..=4u64);
    let first = ctx.next_id.fetch_add(n, Ordering::SeqCst);
    (first, n, (first..first + n).map(|id| (key_of(id), value_of(id))).collect())
}

/// The records of `values`.
fn records_of(values: &[KeyValue]) -> Vec<Record<'_>> {
    values
        .iter()
        .map(|(k, v)| match k {
            Some(k) => Record::new(v).with_key(k),
            None => Record::new(v),
        })
        .collect()
}

fn appender(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    while !ctx.stopped() {
        ctx.beat(thread);
        let (first, n, values) = next_values(ctx, &mut rng);
        let records = records_of(&values);
        // append (60%), append_nowait + wait_batch_durable, append_batch; under `Never` the wait
        // is an fsync, so rarer there.
        let how = match rng.random_range(0..100u32) {
            0..60 => 0,
            60..80 if ctx.policy == FlushPolicy::Always || rng.random_bool(0.2) => 6,
            _ => 8,
        };
        let _content = ctx.content.read();
        let result = match how {
            0 => log.append(&records),
            6 => log.append_nowait(&records).and_then(|info| {
                log.wait_batch_durable(&info, Duration::from_secs(30))?;
                Ok(info)
            }),
            _ => common::encode(&records, Clock::system().now_ms()).and_then(|b| log.append_batch(&b)),
        };
        let info = match result {
            Ok(info) => info,
            Err(error) => {
                ctx.fail("appender", format!("append of {n} records (mode {how}) failed: {error:?}"));
                return;
            }
        };
        if info.last_offset - info.base_offset + 1 != n {
            ctx.fail("appender", format!("append of {n} records returned {info:?}"));
            return;
        }
        let mut model = ctx.model.lock();
        for (i, id) in (first..first + n).enumerate() {
            model.register(id, info.base_offset + i as u64, info.last_offset);
        }
        drop(model);
        ctx.stats.appends.fetch_add(1, Ordering::Relaxed);
    }
}

fn reader(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    const SIZES: [usize; 5] = [1, 100, 700, 4096, 1 << 20];
    while !ctx.stopped() {
        ctx.beat(thread);
        let (start, visible) = (log.start_offset(), log.visible_end());
        let offset = match rng.random_range(0..10u32) {
            0 => start.saturating_sub(rng.random_range(0..3)),
            1 => visible.saturating_sub(1) + rng.random_range(0..3),
            _ if visible > start => rng.random_range(start..visible),
            _ => start,
        };
        if checked_read(ctx, "reader", log, offset, SIZES[rng.random_range(0..SIZES.len())], &mut rng).is_none() {
            // Leave the cores to the writers for a moment (2 cores, 11 threads).
            std::thread::sleep(Duration::from_micros(rng.random_range(0..300)));
        }
        std::thread::yield_now();
    }
}

fn tailer(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    let mut position = log.visible_end();
    while !ctx.stopped() {
        ctx.beat(thread);
        let before = Before::take(ctx, log);
        match log.wait_visible(position, Duration::from_millis(200)) {
            Ok(()) => {
                let max = [1usize, 512, 1 << 16][rng.random_range(0..3)];
                match checked_read(ctx, "tailer", log, position, max, &mut rng) {
                    Some(next) => position = next,
                    None => position = log.visible_end().max(log.start_offset()),
                }
            }
            Err(Error::Timeout { .. }) => {
                if position < before.visible && !before.truncation_overlapped(ctx) {
                    ctx.fail(
                        "tailer",
                        format!(
                            "wait_visible({position}) timed out although the visible end was {} before the call",
                            before.visible
                        ),
                    );
                    return;
                }
                // Behind a truncation or reset, or ahead of the end: follow the end again.
                if position > log.next_offset() || position < log.start_offset() {
                    position = log.visible_end();
                }
            }
            Err(error @ Error::Truncated { .. }) if before.truncation_overlapped(ctx) => {
                let _ = error;
                ctx.stats.legit_errors.fetch_add(1, Ordering::Relaxed);
                position = log.visible_end();
            }
            Err(error) => {
                ctx.fail("tailer", format!("wait_visible({position}): false error {error:?}"));
                return;
            }
        }
    }
}

fn mutator(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    while !ctx.stopped() {
        ctx.beat(thread);
        std::thread::sleep(Duration::from_micros(rng.random_range(0..8000)));
        let op = rng.random_range(0..100u32);
        let kind = match op {
            0..32 => "truncate",
            32..38 => "reset",
            38..75 => "prefix",
            _ => "retention",
        };
        if skipped(kind) {
            continue;
        }
        if op < 38 {
            // Suffix removal or reset: exclusive, no append or prefix removal runs meanwhile.
            let _content = ctx.content.write();
            let (start, next) = {
                let m = ctx.model.lock();
                (m.start, m.next)
            };
            let live = quiet_offsets(log);
            if live != (start, next, next) {
                ctx.fail(
                    "mutator",
                    format!("quiet log: (start, next, visible end) = {live:?}, model says ({start}, {next}, {next})"),
                );
                return;
            }
            ctx.ops.trunc_started.fetch_add(1, Ordering::SeqCst);
            ctx.ops.content_started.fetch_add(1, Ordering::SeqCst);
            if op < 32 {
                let offset = match rng.random_range(0..4u32) {
                    0 => next.saturating_sub(rng.random_range(1..4)),
                    1 if next > start => rng.random_range(start..next),
                    2 => start.saturating_sub(rng.random_range(0..2)),
                    _ => next.saturating_sub(rng.random_range(0..40)),
                };
                let result = log.truncate_to(offset);
                let stamp = ctx.durables.stamp();
                let mut m = ctx.model.lock();
                match result {
                    Ok(cut) => {
                        let bad = if offset >= next {
                            (cut != next).then(|| format!("returned {cut}, not the next offset {next}"))
                        } else if cut > offset || cut < start {
                            Some(format!("returned {cut}, outside [start {start}, {offset}]"))
                        } else {
                            // Every record it removed below `offset` was in the batch holding it,
                            // or superseded (a compaction gap).
                            m.present
                                .range(cut..offset)
                                .find(|(_, id)| !m.superseded.contains(*id) && m.assigned[*id].batch_last < offset)
                                .map(|(o, id)| format!("returned {cut}: it removed offset {o} (id {id}), a live record in an earlier batch"))
                        };
                        if let Some(bad) = bad {
                            drop(m);
                            ctx.fail("mutator", format!("truncate_to({offset}) (start {start}, next {next}): {bad}"));
                            return;
                        }
                        let cut = cut.min(next);
                        m.remove_from(cut);
                        m.next = cut;
                        // At or past the end nothing is cut, and the log notes no truncation.
                        m.truncated(cut, if offset >= next { u64::MAX } else { cut }, stamp);
                    }
                    Err(Error::OffsetOutOfRange { .. }) if offset < start => m.truncated(u64::MAX, u64::MAX, stamp),
                    Err(Error::Busy { .. }) => m.truncated(u64::MAX, u64::MAX, stamp),
                    Err(error) => {
                        drop(m);
                        ctx.fail("mutator", format!("truncate_to({offset}) (start {start}, next {next}): {error:?}"));
                        return;
                    }
                }
                ctx.ops.epoch.store(m.epoch, Ordering::SeqCst);
                ctx.stats.truncations.fetch_add(1, Ordering::Relaxed);
            } else {
                let offset = match rng.random_range(0..4u32) {
                    0 | 1 => next,
                    2 if next > start => rng.random_range(start..next),
                    _ => next + rng.random_range(0..50),
                };
                let result = log.reset_at(offset);
                let stamp = ctx.durables.stamp();
                let mut m = ctx.model.lock();
                if let Err(error) = result {
                    drop(m);
                    ctx.fail("mutator", format!("reset_at({offset}) (start {start}, next {next}): {error:?}"));
                    return;
                }
                m.remove_from(0);
                m.start = offset;
                m.next = offset;
                // Every record goes; the log notes a cut at the lower of the start and `offset`.
                m.truncated(0, start.min(offset), stamp);
                ctx.ops.epoch.store(m.epoch, Ordering::SeqCst);
                ctx.stats.resets.fetch_add(1, Ordering::Relaxed);
            }
            ctx.ops.content_finished.fetch_add(1, Ordering::SeqCst);
            ctx.ops.trunc_finished.fetch_add(1, Ordering::SeqCst);
            let live = (log.start_offset(), log.next_offset(), log.visible_end());
            let m = ctx.model.lock();
            if live != (m.start, m.next, m.next) {
                let msg = format!(
                    "after a truncation/reset: (start, next, visible end) = {live:?}, model says ({}, {}, {})",
                    m.start, m.next, m.next
                );
                drop(m);
                ctx.fail("mutator", msg);
                return;
            }
        } else {
            // Prefix removal: shared, so it races the appenders.
            let _content = ctx.content.read();
            let start = ctx.model.lock().start;
            ctx.ops.content_started.fetch_add(1, Ordering::SeqCst);
            let result = if op < 75 {
                let next = log.next_offset();
                // Mostly a small prefix; now and then all of it (or past the end).
                let offset = match rng.random_range(0..20u32) {
                    0..4 => start,
                    4 => next,
                    5 => next + rng.random_range(0..10),
                    _ if next > start => start + rng.random_range(0..=(next - start) / 4),
                    _ => start,
                };
                log.delete_records_before(offset).and_then(|s| {
                    if s < start || s > offset.max(start) {
                        return Err(Error::InvalidConfig {
                            field: "harness",
                            reason: format!("delete_records_before({offset}) returned {s} (start was {start})"),
                        });
                    }
                    Ok(s)
                })
            } else {
                log.enforce_retention().map(|_| log.start_offset())
            };
            match result {
                Ok(new_start) => {
                    let mut m = ctx.model.lock();
                    if new_start > m.start {
                        m.start = new_start;
                        m.next = m.next.max(new_start);
                        m.remove_below(new_start);
                    }
                }
                Err(error) => {
                    ctx.fail("mutator", format!("prefix removal (op {op}, start {start}): {error:?}"));
                    return;
                }
            }
            ctx.ops.content_finished.fetch_add(1, Ordering::SeqCst);
            ctx.stats.prefix.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// (start, next, visible end) of a log no append or removal runs on. Under `Always` the visible
/// end is the durable offset, which trails the next offset until the sync round an `append_nowait`
/// asked for has run (the `on_durable` role does not wait for its batches): it gets 5 s to.
fn quiet_offsets(log: &Log) -> (u64, u64, u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let live = (log.start_offset(), log.next_offset(), log.visible_end());
        if live.2 == live.1 || Instant::now() >= deadline {
            return live;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// An offset a cursor may be made at or sought to, as the log was before the call.
fn legal_offset(before: &Before, rng: &mut StdRng) -> u64 {
    match rng.random_range(0..4u32) {
        0 => before.start,
        1 => before.next,
        _ if before.visible > before.start => rng.random_range(before.start..=before.visible),
        _ => before.visible.max(before.start),
    }
}

/// The cursor role's cursor, with what it knows of it.
struct Tail {
    cursor: Cursor,
    /// `Ops::trunc_finished` before the last call that caught up with the truncations (its
    /// creation, or a call that returned anything but `Interrupted`, which may return before
    /// looking): a `Truncated` it returns must come from a truncation that began after it.
    since: u64,
    /// The offset of the last record it returned since it was made, sought, or reported a
    /// truncation: later ones must be higher.
    last: Option<u64>,
    /// `Interrupted` returns so far: never more than interrupts sent to it.
    interrupted: u64,
}

/// Tails the log with a [`Cursor`]: `next_batch` and `next_batch_wait` with small `max_bytes` and
/// short timeouts, now and then a long wait the interrupter stops, a seek, or a new cursor.
fn cursor_role(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    const SIZES: [usize; 4] = [1, 100, 700, 4096];
    let who = "cursor";
    let mut tail: Option<Tail> = None;
    while !ctx.stopped() {
        ctx.beat(thread);
        // Now and then dropped mid-tail and made again.
        if tail.is_none() || rng.random_bool(0.005) {
            *ctx.cursor.slot.lock() = None;
            tail = None;
            let before = Before::take(ctx, log);
            let offset = legal_offset(&before, &mut rng);
            match log.cursor(offset) {
                Ok(cursor) => {
                    *ctx.cursor.slot.lock() = Some((cursor.interrupter(), Vec::new()));
                    ctx.stats.cursors_made.fetch_add(1, Ordering::Relaxed);
                    tail = Some(Tail { cursor, since: before.trunc_finished, last: None, interrupted: 0 });
                }
                Err(error @ Error::OffsetOutOfRange { .. }) if read_error_is_legit(ctx, &before, &error) => {
                    ctx.stats.legit_errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(error) => {
                    ctx.fail(who, format!("log.cursor({offset}): false error {error:?} (start {}, next {} before the call; no truncation/prefix removal overlapped)", before.start, before.next));
                    return;
                }
            }
        }
        let Some(t) = tail.as_mut() else { continue };
        if rng.random_bool(0.01) {
            // Sought: a truncation it has not reported yet is still reported (`since` stays).
            let before = Before::take(ctx, log);
            let offset = legal_offset(&before, &mut rng);
            t.cursor.seek(offset);
            if t.cursor.position() != offset {
                ctx.fail(who, format!("seek({offset}) left the cursor at {}", t.cursor.position()));
                return;
            }
            t.last = None;
        }
        let from = t.cursor.position();
        let max = SIZES[rng.random_range(0..SIZES.len())];
        // next_batch 40%, a short wait 55%, a long one (the interrupter stops it) 5%.
        let wait = match rng.random_range(0..100u32) {
            0..40 => None,
            40..95 => Some(Duration::from_millis(rng.random_range(0..20))),
            _ => Some(Duration::from_secs(3)),
        };
        let call = if wait.is_some() { "next_batch_wait" } else { "next_batch" };
        let sent_before = ctx.cursor.slot.lock().as_ref().map_or(0, |(_, sent)| sent.len());
        let before = Before::take(ctx, log);
        let long = wait.is_some_and(|w| w >= Duration::from_secs(1));
        ctx.cursor.long_wait.store(long, Ordering::SeqCst);
        let called = Instant::now();
        let result = match wait {
            Some(timeout) => t.cursor.next_batch_wait(max, timeout),
            None => t.cursor.next_batch(max),
        };
        let elapsed = called.elapsed();
        ctx.cursor.long_wait.store(false, Ordering::SeqCst);
        ctx.stats.cursor_calls.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(batches) => {
                t.since = before.trunc_finished;
                let mut seen: Vec<(u64, u64)> = Vec::new();
                let mut prev = t.last;
                let mut prev_batch: Option<u64> = None;
                for batch in &batches {
                    if prev_batch.is_some_and(|p| batch.base_offset() <= p) || batch.base_offset() > batch.last_offset()
                    {
                        ctx.fail(
                            who,
                            format!(
                                "{call}({from}): batch [{}, {}] after a batch ending at {prev_batch:?}",
                                batch.base_offset(),
                                batch.last_offset()
                            ),
                        );
                        return;
                    }
                    prev_batch = Some(batch.last_offset());
                    for record in batch.records() {
                        let Some(id) = check_record(ctx, who, call, from, prev, record) else { return };
                        let o = record.offset();
                        if o < batch.base_offset() || o > batch.last_offset() {
                            ctx.fail(
                                who,
                                format!(
                                    "{call}({from}): record at {o} in batch [{}, {}]",
                                    batch.base_offset(),
                                    batch.last_offset()
                                ),
                            );
                            return;
                        }
                        seen.push((o, id));
                        prev = Some(o);
                    }
                }
                let position = t.cursor.position();
                if position < from || prev_batch.is_some_and(|p| position <= p) {
                    ctx.fail(
                        who,
                        format!("{call}({from}): returned batches up to {prev_batch:?} and moved to {position}"),
                    );
                    return;
                }
                // Visible when returned (under `Always`: durable), unless a truncation lowered it since.
                if let Some(&(o, _)) = seen.last() {
                    let visible = log.visible_end();
                    if o >= visible && !before.truncation_overlapped(ctx) {
                        ctx.fail(who, format!("{call}({from}): returned offset {o}, but the visible end is {visible}"));
                        return;
                    }
                }
                // A wait an interrupt reached well before its deadline must not time out.
                if let Some(timeout) = wait
                    && batches.is_empty()
                    && elapsed >= timeout
                    && let Some(&sent) = ctx.cursor.slot.lock().as_ref().and_then(|(_, sent)| sent.get(sent_before))
                    && sent + Duration::from_secs(2) <= called + timeout
                {
                    ctx.fail(who, format!("{call}({from}, {timeout:?}) timed out after {elapsed:?}, although interrupted {:?} after it began", sent.saturating_duration_since(called)));
                    return;
                }
                t.last = prev;
                ctx.stats.cursor_records.fetch_add(seen.len() as u64, Ordering::Relaxed);
                let clean = !before.content_op_overlapped(ctx);
                // Nothing returned: nothing is visible from `from` up to the visible end.
                let tail_end = if seen.is_empty() { before.visible } else { position };
                if !note_seen(ctx, who, call, from, &seen, &before, clean.then_some(Some(tail_end))) {
                    return;
                }
            }
            Err(Error::Truncated { next_offset }) => {
                let started = ctx.ops.trunc_started.load(Ordering::SeqCst);
                if started <= t.since {
                    ctx.fail(who, format!("{call}({from}): Truncated (next offset {next_offset}), but no truncation or reset began since its previous call ({started} began in all)"));
                    return;
                }
                ctx.stats.cursor_errors.fetch_add(1, Ordering::Relaxed);
                t.since = before.trunc_finished;
                t.last = None;
                // Mostly moved on (to where the error says the log ends, or to its start); else
                // it reads on from where it was (out of range, or records appended since).
                match rng.random_range(0..10u32) {
                    0..6 => t.cursor.seek(next_offset),
                    6..9 => t.cursor.seek(log.start_offset()),
                    _ => {}
                }
            }
            Err(error @ Error::OffsetOutOfRange { .. }) => {
                if !read_error_is_legit(ctx, &before, &error) && !tolerated(ctx, &before, &error) {
                    ctx.fail(who, format!("{call}({from}): false error {error:?} (start {}, next {} before the call; no truncation/prefix removal overlapped)", before.start, before.next));
                    return;
                }
                ctx.stats.cursor_errors.fetch_add(1, Ordering::Relaxed);
                t.since = before.trunc_finished;
                t.last = None;
                t.cursor.seek(if rng.random_bool(0.5) { log.start_offset() } else { log.visible_end() });
            }
            Err(Error::Interrupted) => {
                t.interrupted += 1;
                let sent = ctx.cursor.slot.lock().as_ref().map_or(0, |(_, sent)| sent.len() as u64);
                if wait.is_none() || t.interrupted > sent {
                    ctx.fail(
                        who,
                        format!("{call}({from}): Interrupted, its {} time, after {sent} interrupt(s)", t.interrupted),
                    );
                    return;
                }
                ctx.stats.interrupted.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                ctx.fail(who, format!("{call}({from}, {max}, {wait:?}): false error {error:?} (start {}, visible end {}, next {} before the call)", before.start, before.visible, before.next));
                return;
            }
        }
    }
    *ctx.cursor.slot.lock() = None;
}

/// Interrupts the cursor role's waits: soon after it begins a long one, and now and then when it
/// is not waiting (its next wait is then interrupted).
fn interrupter(ctx: &Ctx, _log: &Log, thread: usize, mut rng: StdRng) {
    while !ctx.stopped() {
        ctx.beat(thread);
        std::thread::sleep(Duration::from_micros(rng.random_range(500..20_000)));
        if ctx.cursor.long_wait.load(Ordering::SeqCst) || rng.random_bool(0.02) {
            // Counted before it is sent: an `Interrupted` is never ahead of the count.
            if let Some((handle, sent)) = ctx.cursor.slot.lock().as_mut() {
                sent.push(Instant::now());
                handle.interrupt();
                ctx.stats.interrupts.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A batch `append_nowait` stored, to register a callback for.
struct Stored {
    info: AppendInfo,
    first_id: u64,
    records: u64,
    /// The model's content epoch when it was appended.
    epoch: u64,
}

/// Appends with `append_nowait` (or `append_batch_nowait`) and registers durability callbacks:
/// at once under the content lock (no truncation between), after letting it go, or a few
/// appends later (a truncation may have removed the batch by then); now and then two or three
/// for one batch.
fn durable_role(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    let weak = ctx.log_weak.lock().clone();
    let mut later: Vec<Stored> = Vec::new();
    while !ctx.stopped() {
        ctx.beat(thread);
        let (first, n, values) = next_values(ctx, &mut rng);
        let records = records_of(&values);
        let encoded = rng.random_bool(0.3);
        let content = ctx.content.read();
        let epoch = ctx.model.lock().epoch;
        let result = if encoded {
            common::encode(&records, Clock::system().now_ms()).and_then(|b| log.append_batch_nowait(&b))
        } else {
            log.append_nowait(&records)
        };
        let info = match result {
            Ok(info) if info.last_offset - info.base_offset + 1 == n => info,
            other => {
                ctx.fail("durable-cb", format!("append_nowait of {n} records (encoded: {encoded}): {other:?}"));
                return;
            }
        };
        let mut model = ctx.model.lock();
        for (i, id) in (first..first + n).enumerate() {
            model.register(id, info.base_offset + i as u64, info.last_offset);
        }
        drop(model);
        ctx.stats.appends.fetch_add(1, Ordering::Relaxed);
        let stored = Stored { info, first_id: first, records: n, epoch };
        let copies = if rng.random_bool(0.1) { rng.random_range(2..=3) } else { 1 };
        match rng.random_range(0..10u32) {
            0..6 => {
                (0..copies).for_each(|_| register(ctx, log, &weak, &stored));
                drop(content);
            }
            6..9 => {
                drop(content);
                (0..copies).for_each(|_| register(ctx, log, &weak, &stored));
            }
            _ => {
                drop(content);
                later.push(stored);
            }
        }
        if later.len() > rng.random_range(0..8) {
            later.drain(..).for_each(|s| register(ctx, log, &weak, &s));
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..500)));
    }
    later.drain(..).for_each(|s| register(ctx, log, &weak, &s));
}

/// Registers a callback for `stored` that records its call in `ctx.durables`.
fn register(ctx: &Ctx, log: &Log, weak: &Weak<Log>, stored: &Stored) {
    let durables = &ctx.durables;
    // Finished, then started: equal means no truncation was running from the first load on.
    let trunc_finished = ctx.ops.trunc_finished.load(Ordering::SeqCst);
    let trunc_started = ctx.ops.trunc_started.load(Ordering::SeqCst);
    let before = durables.stamp();
    let registration = {
        let mut registrations = durables.registrations.lock();
        let registration = Arc::new(Registration {
            index: registrations.len(),
            first_id: stored.first_id,
            records: stored.records,
            last_offset: stored.info.last_offset,
            epoch: stored.epoch,
            before,
            after: AtomicU64::new(u64::MAX),
            trunc_started,
            trunc_finished,
            calls: AtomicU64::new(0),
        });
        registrations.push(Arc::clone(&registration));
        registration
    };
    let (shared, ops, weak, r) = (Arc::clone(durables), Arc::clone(&ctx.ops), weak.clone(), Arc::clone(&registration));
    log.on_durable(&stored.info, move |outcome| {
        let stamp = shared.stamp();
        // The `Arc` this takes is dropped here, on whatever thread runs the callback: allowed, and
        // never the last (the test holds one while the log is shared; after that it is gone).
        let durable = weak.upgrade().map(|log| log.durable_offset());
        let trunc_started = ops.trunc_started.load(Ordering::SeqCst);
        r.calls.fetch_add(1, Ordering::SeqCst);
        shared.calls.lock().push(Call { registration: r.index, stamp, outcome, durable, trunc_started });
    });
    registration.after.store(durables.stamp(), Ordering::SeqCst);
    ctx.stats.callbacks.fetch_add(1, Ordering::Relaxed);
}

/// Ids whose durability callback was called with `Ok` so far.
fn durable_acked_ids(ctx: &Ctx) -> Vec<u64> {
    let registrations = ctx.durables.registrations.lock();
    let calls = ctx.durables.calls.lock();
    calls
        .iter()
        .filter(|c| c.outcome.is_ok())
        .flat_map(|c| {
            let r = &registrations[c.registration];
            r.first_id..r.first_id + r.records
        })
        .collect()
}

/// Once the log whose callbacks these are is closed (no thread of it is left to call one):
///
/// - every callback was called exactly once;
/// - `Ok`: if no truncation or reset ran from (before) its registration until the callback
///   read `durable_offset()`, that offset was past its batch (it was at the decision, and only a
///   truncation or reset lowers it). And no truncation or reset that cut at or below its batch
///   after its append had returned before its fate was decided: decided after its registration
///   began and after the previous call began (calls are made one at a time, each taken from the
///   queue after the previous one returned), a cut noted earlier makes it `Truncated`;
/// - `Truncated`: a truncation or reset after its append cut at or below its last offset (as
///   the log notes the cut, [`Model::noted_cuts`]);
/// - `Closed`: called after the close began; nothing else (`Poisoned` included: nothing here
///   poisons the log).
/// - Order. Pending callbacks wait in one queue keyed by (last offset, registration number),
///   whatever the truncation epoch (after a truncation offsets are reused, so a later batch may
///   have a lower offset than an earlier one still queued), and the calls take its head one at a
///   time. So a call must not be made while a callback of a lower key is known to be queued:
///   one whose registration returned before the previous call began (so it was queued before
///   this call was taken from the queue) and that is called later. A tie in last offset is a
///   lower key only if its registration returned before this one's began (registration numbers
///   follow). Nothing is assumed across epochs beyond what the queue does, and a callback
///   registered after a higher one ran (decided already: it runs at once) is not compared.
fn check_callbacks(ctx: &Ctx) {
    let durables = &ctx.durables;
    let registrations = std::mem::take(&mut *durables.registrations.lock());
    // Every thread of the log stopped at its close; give a straggler a moment all the same.
    let deadline = Instant::now() + Duration::from_secs(2);
    while registrations.iter().any(|r| r.calls.load(Ordering::SeqCst) == 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let calls = std::mem::take(&mut *durables.calls.lock());
    let closing = durables.closing.swap(u64::MAX, Ordering::SeqCst);
    let m = ctx.model.lock();
    let s = &ctx.stats;
    let mut failures = Vec::new();
    for r in &registrations {
        let n = r.calls.load(Ordering::SeqCst);
        if n != 1 {
            failures.push(format!(
                "the callback for the batch ending at {} (registration {}, epoch {}) was called {n} times",
                r.last_offset, r.index, r.epoch
            ));
        }
    }
    let mut first_call: Vec<Option<usize>> = vec![None; registrations.len()];
    for (k, c) in calls.iter().enumerate() {
        first_call[c.registration].get_or_insert(k);
    }
    for (k, c) in calls.iter().enumerate() {
        let r = &registrations[c.registration];
        let what = format!("the callback for the batch ending at {} (registration {})", r.last_offset, r.index);
        match &c.outcome {
            Ok(()) => {
                s.callbacks_ok.fetch_add(1, Ordering::Relaxed);
                if let Some(durable) = c.durable
                    && r.trunc_started == r.trunc_finished
                    && c.trunc_started == r.trunc_started
                {
                    s.durable_checked.fetch_add(1, Ordering::Relaxed);
                    if durable <= r.last_offset {
                        failures.push(format!("{what} got Ok, but durable_offset() was {durable} when it ran"));
                    }
                }
                let decided_after = r.before.max(if k > 0 { calls[k - 1].stamp } else { 0 });
                if let Some((cut, _)) = m.noted_cuts[r.epoch as usize..]
                    .iter()
                    .find(|&&(cut, stamp)| cut <= r.last_offset && stamp < decided_after)
                {
                    failures.push(format!(
                        "{what} got Ok, but a truncation after its append had cut at {cut} before it was decided"
                    ));
                }
            }
            Err(Error::Truncated { .. }) => {
                s.callbacks_truncated.fetch_add(1, Ordering::Relaxed);
                if !m.cut_since(r.epoch, r.last_offset) {
                    failures.push(format!("{what} got Truncated, but no truncation or reset after its append (epoch {}) cut at or below it", r.epoch));
                }
            }
            Err(Error::Closed) if c.stamp > closing => {
                s.callbacks_closed.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => failures.push(format!(
                "{what} got {error:?} (the close began at stamp {closing}, the call was at {})",
                c.stamp
            )),
        }
    }
    drop(m);
    // Order (see above): sweep the calls, keeping the callbacks known to be queued.
    let mut by_after: Vec<usize> = (0..registrations.len()).collect();
    by_after.sort_by_key(|&i| registrations[i].after.load(Ordering::SeqCst));
    let mut next_after = 0;
    let mut queued: BTreeSet<(u64, u64, usize)> = BTreeSet::new();
    for (k, c) in calls.iter().enumerate() {
        if first_call[c.registration] != Some(k) {
            continue;
        }
        if k > 0 {
            let previous = calls[k - 1].stamp;
            while let Some(&i) = by_after.get(next_after) {
                let r = &registrations[i];
                let after = r.after.load(Ordering::SeqCst);
                if after >= previous {
                    break;
                }
                next_after += 1;
                if first_call[i].is_some_and(|j| j >= k) {
                    queued.insert((r.last_offset, after, i));
                }
            }
        }
        let b = &registrations[c.registration];
        queued.remove(&(b.last_offset, b.after.load(Ordering::SeqCst), c.registration));
        if let Some(&(last, after, i)) = queued.first() {
            s.order_checked.fetch_add(1, Ordering::Relaxed);
            if last < b.last_offset || (last == b.last_offset && after < b.before) {
                failures.push(format!(
                    "the callback for the batch ending at {} (registration {}) ran while the one for the batch ending at {last} (registration {i}, registered before the previous call) was still queued",
                    b.last_offset, b.index
                ));
            }
        }
    }
    for f in failures.into_iter().take(20) {
        ctx.fail("durable-cb", f);
    }
}

/// A cursor made before the close: every call of it is `Closed` now.
fn check_closed_cursor(ctx: &Ctx, mut cursor: Cursor) {
    let first = cursor.next_batch(1 << 20).map(|b| b.len());
    let waited = cursor.next_batch_wait(1 << 20, Duration::from_millis(10)).map(|b| b.len());
    cursor.interrupter().interrupt();
    cursor.seek(cursor.position());
    let interrupted = cursor.next_batch_wait(1 << 20, Duration::from_millis(10)).map(|b| b.len());
    for result in [first, waited, interrupted] {
        if !matches!(result, Err(Error::Closed)) {
            ctx.fail("reopen", format!("a cursor of the closed log returned {result:?}, not Closed"));
            return;
        }
    }
}

fn compactor(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    while !ctx.stopped() && !skipped("compact") {
        ctx.beat(thread);
        ctx.ops.compact_started.fetch_add(1, Ordering::SeqCst);
        let result = log.compact();
        ctx.ops.compact_finished.fetch_add(1, Ordering::SeqCst);
        match result {
            Ok(Some(_)) => {
                ctx.stats.compactions.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None) | Err(Error::Cancelled(_)) => {}
            Err(error) => {
                ctx.fail("compactor", format!("compact(): {error:?}"));
                return;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..2_000)));
    }
}

fn flusher(ctx: &Ctx, log: &Log, thread: usize, mut rng: StdRng) {
    while !ctx.stopped() {
        ctx.beat(thread);
        std::thread::sleep(Duration::from_micros(rng.random_range(0..10_000)));
        match rng.random_range(0..10u32) {
            0..=4 if !skipped("flush") => {
                let seq = ctx.model.lock().seq;
                match log.flush() {
                    Ok(()) => {
                        let mut m = ctx.model.lock();
                        m.flushed_seq = m.flushed_seq.max(seq);
                        ctx.stats.flushes.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => {
                        ctx.fail("flusher", format!("flush(): {error:?}"));
                        return;
                    }
                }
            }
            5..=6 => {
                let ts = Clock::system().now_ms() - rng.random_range(0..3000);
                if let Err(error) = log.offset_for_timestamp(ts) {
                    ctx.fail("flusher", format!("offset_for_timestamp({ts}): {error:?}"));
                    return;
                }
            }
            0..=7 => {
                let _ = log.metrics();
                let _ = log.event_metrics();
                let _ = log.segment_count();
            }
            _ => {
                // Half the time under the content lock (no truncation can race it: every error is
                // false), half without (a truncation may remove the offset: `Truncated`, or a
                // timeout if it was removed just before the call and nothing is appended again).
                let locked = rng.random_bool(0.5).then(|| ctx.content.read());
                let before = Before::take(ctx, log);
                let next = log.next_offset();
                if next > log.start_offset() {
                    let offset = next - 1;
                    match log.wait_durable(offset, Duration::from_secs(5)) {
                        Ok(()) => {}
                        Err(Error::Truncated { .. } | Error::Timeout { .. })
                            if locked.is_none() && before.truncation_overlapped(ctx) => {}
                        Err(error) => {
                            ctx.fail(
                                "flusher",
                                format!(
                                    "wait_durable({offset}) (next was {next}, content lock held: {}): {error:?}",
                                    locked.is_some()
                                ),
                            );
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// The threads of a phase.
const THREADS: usize = 11;

/// Runs every thread for `length`, then stops them.
fn run_phase(ctx: &Ctx, log: &Log, length: Duration, rng: &mut StdRng) {
    type Body = fn(&Ctx, &Log, usize, StdRng);
    let bodies: [(&str, Body); THREADS] = [
        ("appender-0", appender),
        ("appender-1", appender),
        ("reader-0", reader),
        ("reader-1", reader),
        ("tailer", tailer),
        ("mutator", mutator),
        ("compactor", compactor),
        ("flusher", flusher),
        ("cursor", cursor_role),
        ("interrupter", interrupter),
        ("durable-cb", durable_role),
    ];
    let seeds: Vec<u64> = bodies.iter().map(|_| rng.random()).collect();
    ctx.stop.store(false, Ordering::SeqCst);
    for (i, _) in bodies.iter().enumerate() {
        ctx.beat(i);
    }
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, ((name, body), seed)) in bodies.iter().zip(&seeds).enumerate() {
            let rng = StdRng::seed_from_u64(*seed);
            let handle = std::thread::Builder::new()
                .name((*name).to_owned())
                .spawn_scoped(s, move || body(ctx, log, i, rng))
                .unwrap();
            handles.push((name, handle));
        }
        let end = Instant::now() + length;
        while Instant::now() < end && !ctx.stopped() {
            std::thread::sleep(Duration::from_millis(20));
        }
        ctx.stop.store(true, Ordering::SeqCst);
        // Watchdog: a thread that makes no progress for this long is hung.
        let hung_after = Duration::from_secs(60);
        let stopping = Instant::now();
        while !handles.iter().all(|(_, h)| h.is_finished()) {
            if stopping.elapsed() > hung_after {
                let now = ctx.started.elapsed().as_millis() as u64;
                let mut report = String::new();
                for (i, (name, h)) in handles.iter().enumerate() {
                    let last = ctx.heartbeats[i].load(Ordering::Relaxed);
                    let _ =
                        writeln!(report, "  {name}: finished {}, last progress {} ms ago", h.is_finished(), now - last);
                }
                eprintln!(
                    "HANG: threads did not stop within {hung_after:?} of the end of the phase:\n{report}log: {log:?}\nmetrics: {:?}",
                    log.metrics()
                );
                std::process::abort();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for (name, handle) in handles {
            if let Err(panic) = handle.join() {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()));
                ctx.fail(name, format!("panicked: {}", msg.unwrap_or_default()));
            }
        }
    });
}

fn check_failures(ctx: &Ctx, seed_note: &str) {
    let failures = ctx.failures.lock();
    if !failures.is_empty() {
        if let Some(root) = ctx.root.lock().take()
            && std::env::var_os("STRATA_STRESS_KEEP").is_some()
        {
            eprintln!("kept the log directories in {}", root.keep().display());
        }
        panic!(
            "{} failure(s) ({seed_note}):\n{}",
            failures.len(),
            failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// The checks that need every thread stopped: deferred id checks and skipped offsets.
fn check_observations(ctx: &Ctx) {
    let mut m = ctx.model.lock();
    let deferred = std::mem::take(&mut m.deferred);
    let gaps = std::mem::take(&mut m.gaps);
    let mut failures = Vec::new();
    for (o, id, who) in deferred {
        match m.assigned.get(&id) {
            Some(a) if a.offset == o => {}
            Some(a) => failures.push((who, format!("id {id} was read at offset {o}, but appended at {}", a.offset))),
            None => failures.push((who, format!("id {id} was read at offset {o}, but no append of it succeeded"))),
        }
    }
    for (from, to, epoch, who) in gaps {
        for x in from..to {
            if let Some(id) = m.holder_at(x, epoch)
                && !m.superseded.contains(&id)
            {
                failures.push((who, format!("a read from {from} skipped offset {x} (id {id}, not superseded) and returned {to} next; no truncation, reset or prefix removal overlapped it")));
                break;
            }
        }
    }
    drop(m);
    for (who, msg) in failures.into_iter().take(20) {
        ctx.fail(who, msg);
    }
}

/// Reads the whole log (nothing else running) and compares it with the model. `required(id)`:
/// must be there. A record the model has but the log lacks is dropped from the model if it may
/// be missing (superseded, or not required and at the tail).
fn check_contents(ctx: &Ctx, log: &Log, what: &str, required: &dyn Fn(&Model, u64) -> bool) {
    let mut m = ctx.model.lock();
    let mut got: Vec<(u64, u64)> = Vec::new();
    let mut next = log.start_offset();
    let end = log.visible_end();
    let mut errors = Vec::new();
    while next < end {
        let mut reader = match log.read(next, 1 << 16) {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{what}: read({next}) on a quiet log: {e:?}"));
                break;
            }
        };
        let before = got.len();
        for record in reader.by_ref() {
            match record {
                Ok(view) => {
                    let id = view.value().and_then(id_in);
                    match id {
                        Some(id) if view.value() == Some(&value_of(id)[..]) && view.key() == key_of(id).as_deref() => {
                            got.push((view.offset(), id))
                        }
                        _ => errors.push(format!("{what}: damaged record at {}", view.offset())),
                    }
                }
                Err(e) => {
                    errors.push(format!("{what}: reading from {next} on a quiet log: {e:?}"));
                    break;
                }
            }
        }
        if !errors.is_empty() {
            break;
        }
        let after = reader.next_offset();
        if got.len() == before && after <= next {
            errors.push(format!("{what}: read({next}) returned nothing and did not advance"));
            break;
        }
        next = after;
    }
    if got.windows(2).any(|w| w[0].0 >= w[1].0) {
        errors.push(format!("{what}: offsets not strictly increasing"));
    }
    // Every record read is in the model with that id.
    for &(o, id) in &got {
        if m.present.get(&o) != Some(&id) {
            let appended = m.assigned.get(&id).map(|a| a.offset);
            errors.push(format!("{what}: offset {o} holds id {id} (appended at {appended:?}), the model has {:?} there: a removed record came back or a record moved", m.present.get(&o)));
            break;
        }
    }
    // Every record of the model is there, unless it may be missing.
    let read: HashSet<u64> = got.iter().map(|&(o, _)| o).collect();
    let last_read = got.last().map(|&(o, _)| o);
    let missing: Vec<(u64, u64)> =
        m.present.iter().filter(|(o, _)| !read.contains(o)).map(|(&o, &id)| (o, id)).collect();
    let mut lost = Vec::new();
    for (o, id) in missing {
        let superseded = m.superseded.contains(&id);
        let tail = last_read.is_none_or(|l| o > l);
        if superseded || (!required(&m, id) && tail) {
            m.forget(o);
        } else {
            lost.push((o, id));
        }
    }
    if !lost.is_empty() {
        errors.push(format!(
            "{what}: {} acknowledged record(s) lost, first {:?} (log start {}, next {}, model start {}, next {})",
            lost.len(),
            &lost[..lost.len().min(5)],
            log.start_offset(),
            log.next_offset(),
            m.start,
            m.next
        ));
    }
    drop(m);
    for e in errors.into_iter().take(10) {
        ctx.fail("checker", e);
    }
}

/// Index lookups start exactly at a present offset; time lookups agree with a linear scan.
fn check_lookups(ctx: &Ctx, log: &Log, what: &str) {
    let mut all = Vec::new();
    let mut next = log.start_offset();
    while next < log.visible_end() {
        let Ok(mut reader) = log.read(next, 1 << 20) else { return };
        for record in reader.by_ref() {
            let Ok(record) = record else { return };
            all.push((record.offset(), record.timestamp_ms()));
        }
        next = reader.next_offset();
    }
    let step = (all.len() / 40).max(1);
    for &(offset, timestamp) in all.iter().step_by(step) {
        match log.read(offset, 1).map(|mut r| r.next().map(|r| r.map(|v| v.offset()))) {
            Ok(Some(Ok(first))) if first == offset => {}
            other => ctx.fail("checker", format!("{what}: index lookup of {offset}: {other:?}")),
        }
        if std::env::var("STRATA_STRESS_TOLERATE").is_ok_and(|s| s.split(',').any(|w| w.trim() == "time-lookups")) {
            continue;
        }
        let expected = all.iter().find(|(_, ts)| *ts >= timestamp).map(|(o, _)| *o);
        match log.offset_for_timestamp(timestamp) {
            Ok(found) if found == expected => {}
            other => {
                let near: Vec<(u64, i64)> =
                    all.iter().copied().filter(|&(_, ts)| ts >= timestamp - 2 && ts <= timestamp + 2).collect();
                ctx.fail("checker", format!("{what}: offset_for_timestamp({timestamp}) = {other:?}, a linear scan finds {expected:?}; (offset, timestamp) near it: {near:?}; files {:?}", common::file_names(log.dir())));
            }
        }
    }
}

fn random_config(rng: &mut StdRng, policy: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: [1024, 2048, 4096][rng.random_range(0..3)],
        index_bytes: [24, 48, 96, 256][rng.random_range(0..4)],
        index_interval_bytes: [0, 64, 200, 1024][rng.random_range(0..4)],
        file_delete_delay_ms: [0, 0, 5, 200][rng.random_range(0..4)],
        retention_bytes: Some(rng.random_range(16u64..256) << 10),
        // Retention runs only when the mutator calls it (the model must see every change).
        retention_check_ms: 365 * 24 * 3600 * 1000,
        checkpoint_interval_ms: [20, 60_000][rng.random_range(0..2)],
        preallocate: rng.random_bool(0.7),
        truncate_wait_ms: 2000,
        cleaner_dedupe_bytes: [64 << 10, 1 << 20][rng.random_range(0..2)],
        flush_policy: policy,
        map_budget: tight_budget(rng),
        ..LogConfig::default()
    }
}

/// Half the time a budget of few maps, so sealed files are unmapped and mapped again under the
/// readers all the time (the process's default budget is far too large to reclaim here).
/// `STRATA_STRESS_BUDGET=<maps>` forces one (`0`: none, the process's default).
fn tight_budget(rng: &mut StdRng) -> Option<MapBudget> {
    let forced = std::env::var("STRATA_STRESS_BUDGET").ok().and_then(|s| s.parse::<u64>().ok());
    // Drawn whether or not it is forced, so a seed replays the same configuration either way.
    let drawn = rng.random_bool(0.5).then_some([8, 32, 128][rng.random_range(0..3)]);
    let max_maps = match forced {
        Some(maps) => Some(maps).filter(|&maps| maps > 0),
        None => drawn,
    }?;
    let config = MapBudgetConfig {
        max_maps,
        max_mapped_bytes: max_maps * 4096,
        max_open_files: 1 << 20,
        ..MapBudgetConfig::default()
    };
    Some(MapBudget::new(config).unwrap())
}

fn open(ctx: &Ctx, dir: &Path, config: &LogConfig, what: &str) -> Log {
    match Log::open(dir, config.clone()) {
        Ok(log) => log,
        Err(e) => {
            ctx.fail("reopen", format!("{what}: Log::open failed: {e:?}"));
            check_failures(ctx, "see the seed above");
            unreachable!()
        }
    }
}

fn stress(test: &str, policy: FlushPolicy, default_secs: f64) {
    let mut rng = common::rng(test);
    let secs = stress_secs(default_secs);
    let config = random_config(&mut rng, policy);
    eprintln!("{test}: {secs} s, config {config:?}");
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().to_path_buf();
    let mut generation = 0;
    let mut dir: PathBuf = root_path.join("log-0");
    let ctx = Ctx {
        policy,
        model: Mutex::new(Model::default()),
        content: RwLock::new(()),
        ops: Arc::new(Ops::default()),
        durables: Arc::new(Durables { closing: AtomicU64::new(u64::MAX), ..Durables::default() }),
        cursor: CursorShared::default(),
        log_weak: Mutex::new(Weak::new()),
        stats: Stats::default(),
        next_id: AtomicU64::new(1),
        stop: AtomicBool::new(false),
        failures: Mutex::new(Vec::new()),
        started: Instant::now(),
        heartbeats: (0..THREADS).map(|_| AtomicU64::new(0)).collect(),
        root: Mutex::new(Some(root)),
    };
    let always = ctx.policy == FlushPolicy::Always;
    // Under `Always` every acknowledged record is required; under `Never` what a flush covered.
    // (Or, a durability callback said it was durable before the copy was taken.)
    let required =
        move |m: &Model, id: u64| always || m.assigned[&id].seq <= m.flushed_seq || m.durable_acked.contains(&id);
    // Shared as the brief of every user is: an `Arc<Log>`, every thread using it at once.
    let mut log = Arc::new(open(&ctx, &dir, &config, "first open"));
    *ctx.log_weak.lock() = Arc::downgrade(&log);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        let length = Duration::from_millis(rng.random_range(300..1500));
        run_phase(&ctx, &log, length, &mut rng);
        check_failures(&ctx, "see the seed above");
        check_observations(&ctx);
        // Under `Always`, what `append_nowait` stored last becomes visible with its round.
        quiet_offsets(&log);
        check_contents(&ctx, &log, "live log after a phase", &required);
        {
            let m = ctx.model.lock();
            let live = quiet_offsets(&log);
            if live != (m.start, m.next, m.next) {
                let msg = format!(
                    "quiet log: (start, next, visible end) = {live:?}, model ({}, {}, {})",
                    m.start, m.next, m.next
                );
                drop(m);
                ctx.fail("checker", msg);
            }
        }
        check_failures(&ctx, "see the seed above");
        let last = Instant::now() >= deadline;
        // Reopen: cleanly, or (as after a crash) from a copy taken while the log was open.
        let unclean = rng.random_bool(0.4) && !skipped("unclean");
        // Every call of it must be `Closed` once the log is.
        let left_open = match log.cursor(log.start_offset()) {
            Ok(cursor) => cursor,
            Err(e) => {
                ctx.fail("reopen", format!("log.cursor(start offset) on a quiet log: {e:?}"));
                check_failures(&ctx, "see the seed above");
                unreachable!()
            }
        };
        if unclean {
            // Let the syncer's seal and the event thread's work after the last roll finish.
            std::thread::sleep(Duration::from_millis(100));
            generation += 1;
            let copy = root_path.join(format!("log-{generation}"));
            // Durable before the copy, so in it.
            let acked = durable_acked_ids(&ctx);
            common::copy_dir(&dir, &copy);
            ctx.model.lock().durable_acked.extend(acked);
            ctx.durables.closing.store(ctx.durables.stamp(), Ordering::SeqCst);
            if let Err(e) = into_inner(log).close() {
                ctx.fail("reopen", format!("close: {e:?}"));
            }
            dir = copy;
        } else {
            ctx.durables.closing.store(ctx.durables.stamp(), Ordering::SeqCst);
            match into_inner(log).close() {
                Ok(()) => {
                    let mut m = ctx.model.lock();
                    m.flushed_seq = m.seq;
                }
                Err(e) => ctx.fail("reopen", format!("close: {e:?}")),
            }
        }
        check_closed_cursor(&ctx, left_open);
        check_callbacks(&ctx);
        check_failures(&ctx, "see the seed above");
        log = Arc::new(open(&ctx, &dir, &config, if unclean { "unclean reopen" } else { "clean reopen" }));
        *ctx.log_weak.lock() = Arc::downgrade(&log);
        ctx.stats.reopens.fetch_add(1, Ordering::Relaxed);
        let report = log.recovery_report().clone();
        if !unclean && !report.clean_shutdown {
            ctx.fail("reopen", format!("a clean close was not recognised: {report:?}"));
        }
        if report.acknowledged_records_lost != 0 {
            ctx.fail("reopen", format!("recovery lost acknowledged records: {report:?}"));
        }
        let what = if unclean { "after an unclean reopen" } else { "after a clean reopen" };
        {
            let m = ctx.model.lock();
            let (start, next) = (log.start_offset(), log.next_offset());
            let next_ok = if always || !unclean { next == m.next } else { next <= m.next };
            if start != m.start || !next_ok {
                let msg =
                    format!("{what}: start {start}, next {next}; the model has start {}, next {}", m.start, m.next);
                drop(m);
                ctx.fail("reopen", msg);
            }
        }
        check_failures(&ctx, "see the seed above");
        check_contents(&ctx, &log, what, &required);
        check_lookups(&ctx, &log, what);
        check_failures(&ctx, "see the seed above");
        {
            let mut m = ctx.model.lock();
            m.next = log.next_offset();
            m.flushed_seq = m.seq;
        }
        if last {
            break;
        }
    }
    let s = &ctx.stats;
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    eprintln!(
        "{test}: cursor: {} made, {} calls, {} records, {} legitimate errors, {} interrupts sent, {} Interrupted; callbacks: {} registered, {} Ok ({} with the durable offset checked), {} Truncated, {} Closed, {} order-checked",
        l(&s.cursors_made),
        l(&s.cursor_calls),
        l(&s.cursor_records),
        l(&s.cursor_errors),
        l(&s.interrupts),
        l(&s.interrupted),
        l(&s.callbacks),
        l(&s.callbacks_ok),
        l(&s.durable_checked),
        l(&s.callbacks_truncated),
        l(&s.callbacks_closed),
        l(&s.order_checked),
    );
    eprintln!(
        "{test}: {:.1} s: {} appends, {} reads ({} records), {} truncations, {} resets, {} prefix removals, {} compactions, {} flushes, {} reopens, {} legitimate read errors, {} tolerated; final {:?}",
        ctx.started.elapsed().as_secs_f64(),
        l(&s.appends),
        l(&s.reads),
        l(&s.records_read),
        l(&s.truncations),
        l(&s.resets),
        l(&s.prefix),
        l(&s.compactions),
        l(&s.flushes),
        l(&s.reopens),
        l(&s.legit_errors),
        l(&s.tolerated),
        log,
    );
    if let Some(budget) = &config.map_budget {
        eprintln!("{test}: map budget {:?}", budget.metrics());
    }
    into_inner(log).close().unwrap();
}

/// The log back from its `Arc` once every thread is done with it (a durability callback running
/// on a thread of the log may hold it for a moment).
fn into_inner(mut log: Arc<Log>) -> Log {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Arc::try_unwrap(log) {
            Ok(log) => return log,
            Err(shared) if Instant::now() < deadline => {
                log = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => panic!("a thread still holds the log"),
        }
    }
}

#[test]
fn stress_all_ops_always() {
    stress("stress_all_ops_always", FlushPolicy::Always, 8.0);
}

#[test]
fn stress_all_ops_never() {
    stress("stress_all_ops_never", FlushPolicy::Never, 5.0);
}

/// Known bug 1's scenario, which the model-based test above rarely hits (its prefix removals and
/// resets never overlap): `delete_records_before(start_offset())` and `compact()` in loops against
/// a thread appending six records and then `reset_at(next_offset())`, 1 KiB segments, `Never`.
/// Every call must succeed and nothing may panic; afterwards the log reopens and reads cleanly.
#[test]
fn stress_prefix_removal_and_compaction_vs_reset() {
    let mut rng = common::rng("stress_prefix_removal_and_compaction_vs_reset");
    let secs = stress_secs(8.0) / 4.0;
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1024,
        flush_policy: FlushPolicy::Never,
        file_delete_delay_ms: [0, 5][rng.random_range(0..2)],
        ..LogConfig::default()
    };
    let log = Arc::new(Log::open(dir.path(), config.clone()).unwrap());
    let stop = AtomicBool::new(false);
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let fail = |msg: String| {
        failures.lock().push(msg);
        stop.store(true, Ordering::SeqCst);
    };
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        handles.push(s.spawn(|| {
            let value = vec![b'v'; 300];
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..6 {
                    if let Err(e) = log.append(&[Record::new(&value)]) {
                        return fail(format!("append: {e:?}"));
                    }
                }
                if let Err(e) = log.reset_at(log.next_offset()) {
                    return fail(format!("reset_at: {e:?}"));
                }
            }
        }));
        handles.push(s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = log.delete_records_before(log.start_offset()) {
                    return fail(format!("delete_records_before(start_offset()): {e:?}"));
                }
            }
        }));
        handles.push(s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match log.compact() {
                    Ok(_) | Err(Error::Cancelled(_)) => {}
                    Err(e) => return fail(format!("compact: {e:?}")),
                }
            }
        }));
        let end = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < end && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::SeqCst);
        for (name, handle) in ["appender/reset", "delete_records_before", "compact"].iter().zip(handles) {
            if let Err(panic) = handle.join() {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()));
                failures.lock().push(format!("{name} panicked: {}", msg.unwrap_or_default()));
            }
        }
    });
    let failures = failures.into_inner();
    assert!(failures.is_empty(), "{failures:#?}");
    into_inner(log).close().unwrap();
    let log = Log::open(dir.path(), config).unwrap();
    assert!(log.start_offset() <= log.next_offset());
    let mut next = log.start_offset();
    while next < log.visible_end() {
        let mut reader = log.read(next, 1 << 20).unwrap();
        for record in reader.by_ref() {
            record.unwrap();
        }
        next = reader.next_offset();
    }
}
