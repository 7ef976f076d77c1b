//! The log's four offsets, in one place: start ≤ next, durable ≤ next, visible ≤ next
//! (docs/DESIGN.md §2).
//!
//! - `start`: the first offset a read may return (moved up by prefix deletion and retention,
//!   anywhere by a reset). It may pass `durable` under a lazy flush policy: deleting records
//!   nobody synced yet is allowed.
//! - `next`: the offset the next record gets; published after its batch is stored.
//! - `durable`: every offset below it is fsynced, data and directory entries.
//! - `visible`: readers see offsets below it: `durable` under `FlushPolicy::Always`, else `next`.
//!
//! **One ordering argument.** Every load and store is `SeqCst`: the four values form one total
//! order with every other `SeqCst` access in the crate (the truncation epoch, the segment map's
//! version), so a thread that sees a truncation's new epoch also sees its lowered offsets, and a
//! reader that sees a `next` sees the bytes stored before it (a `SeqCst` store is also a
//! release). The cost is one locked instruction per store on x86, a few per append: noise next to
//! the pwrite (measured on the project's 2-core VM).
//!
//! **Who writes.** `next` changes only under the append lock (appends raise it; truncation and
//! reset also hold the sync rounds), or, in a read-only view, under the structure lock when the
//! view is read again from the files. `durable` rises in a sync round, from a target read before
//! the round began, so never past `next`, and in a reset past the end (after the reset's
//! truncation is noted, so no waiter takes a removed batch for durable); it falls only in
//! truncation or reset, which hold the rounds. `visible` rises after `next` (same lock) or with `durable`. Every store
//! checks the invariant in debug builds; moves that lower and raise several values order their
//! stores so that it holds after each one.

use std::sync::atomic::{AtomicU64, Ordering};

/// The log's offsets (see the module documentation for the invariant and who writes them).
#[derive(Debug)]
pub(crate) struct Offsets {
    start: AtomicU64,
    durable: AtomicU64,
    visible: AtomicU64,
    next: AtomicU64,
}

/// The three upper offsets before a truncation moved them, to put back if it gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Saved {
    next: u64,
    durable: u64,
    visible: u64,
}

impl Offsets {
    /// A log from `start` whose records below `next` are all stored, durable and visible.
    pub(crate) fn new(start: u64, next: u64) -> Offsets {
        let offsets = Offsets {
            start: AtomicU64::new(start),
            durable: AtomicU64::new(next),
            visible: AtomicU64::new(next),
            next: AtomicU64::new(next),
        };
        offsets.check();
        offsets
    }

    pub(crate) fn start(&self) -> u64 {
        self.start.load(Ordering::SeqCst)
    }

    pub(crate) fn next(&self) -> u64 {
        self.next.load(Ordering::SeqCst)
    }

    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    pub(crate) fn visible(&self) -> u64 {
        self.visible.load(Ordering::SeqCst)
    }

    /// A batch ending at `next` is stored (under the append lock).
    pub(crate) fn store_next(&self, next: u64) {
        debug_assert!(next >= self.next(), "appends only raise the next offset");
        self.next.store(next, Ordering::SeqCst);
        self.check();
    }

    /// Readers may see everything below `to` (never lowers it).
    pub(crate) fn raise_visible(&self, to: u64) {
        self.visible.fetch_max(to, Ordering::SeqCst);
        self.check();
    }

    /// Everything below `to` is durable (never lowers it); under `FlushPolicy::Always` readers may
    /// now see it too.
    pub(crate) fn raise_durable(&self, to: u64, and_visible: bool) {
        self.durable.fetch_max(to, Ordering::SeqCst);
        if and_visible {
            self.visible.fetch_max(to, Ordering::SeqCst);
        }
        self.check();
    }

    /// The log now starts at `start` (the checkpoint saying so is durable).
    pub(crate) fn store_start(&self, start: u64) {
        self.start.store(start, Ordering::SeqCst);
        self.check();
    }

    /// Moves next, durable and visible to `to` (a truncation, or a reset) and returns what they
    /// were. Lowering moves visible and durable before next, raising next first, so the invariant
    /// holds after each store.
    pub(crate) fn move_end(&self, to: u64) -> Saved {
        let saved = Saved { next: self.next(), durable: self.durable(), visible: self.visible() };
        if to <= saved.next {
            self.visible.store(to, Ordering::SeqCst);
            self.durable.store(to, Ordering::SeqCst);
            self.next.store(to, Ordering::SeqCst);
        } else {
            self.next.store(to, Ordering::SeqCst);
            self.durable.store(to, Ordering::SeqCst);
            self.visible.store(to, Ordering::SeqCst);
        }
        self.check();
        saved
    }

    /// Puts back what [`Offsets::move_end`] returned (a truncation that gave up before changing a
    /// file).
    pub(crate) fn restore_end(&self, saved: Saved) {
        debug_assert!(saved.next >= self.next(), "a truncation only lowers the end");
        self.next.store(saved.next, Ordering::SeqCst);
        self.durable.store(saved.durable, Ordering::SeqCst);
        self.visible.store(saved.visible, Ordering::SeqCst);
        self.check();
    }

    /// All four at once (a reset, or a read-only view taken again from the files); start and
    /// end are stored in the order that keeps start ≤ next.
    pub(crate) fn set_all(&self, start: u64, next: u64) {
        if start > self.next() {
            self.move_end(next);
            self.start.store(start, Ordering::SeqCst);
        } else {
            self.start.store(start, Ordering::SeqCst);
            self.move_end(next);
        }
        self.check();
    }

    /// The invariant, in debug builds. Loads `next` last: it is the value others may raise
    /// concurrently, and a raise cannot break the invariant.
    fn check(&self) {
        if cfg!(debug_assertions) {
            let (start, durable, visible) = (self.start(), self.durable(), self.visible());
            let next = self.next();
            debug_assert!(
                start <= next && durable <= next && visible <= next,
                "offsets out of order: start {start}, durable {durable}, visible {visible}, next {next}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncation_lowers_the_end_and_can_put_it_back() {
        let offsets = Offsets::new(0, 10);
        offsets.store_next(12);
        offsets.raise_visible(12);
        let saved = offsets.move_end(5);
        assert_eq!((offsets.next(), offsets.durable(), offsets.visible()), (5, 5, 5));
        offsets.restore_end(saved);
        assert_eq!((offsets.next(), offsets.durable(), offsets.visible()), (12, 10, 12));
    }

    #[test]
    fn a_reset_past_the_end_raises_every_offset() {
        let offsets = Offsets::new(3, 10);
        offsets.move_end(100);
        offsets.store_start(100);
        assert_eq!((offsets.start(), offsets.durable(), offsets.next()), (100, 100, 100));
        offsets.set_all(0, 4);
        assert_eq!((offsets.start(), offsets.visible(), offsets.next()), (0, 4, 4));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "offsets out of order")]
    fn a_start_past_the_end_is_a_bug() {
        Offsets::new(0, 10).store_start(11);
    }
}
