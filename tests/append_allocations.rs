//! The append hot path allocates nothing per record: after warm-up, appending batches of 100
//! records allocates nothing, with or without an fsync per append (the encoder's buffer and the timestamp vector are reused, the
//! batch is written with one `pwrite`) — but for the segment's position table, which takes a
//! chunk for every 4096 offsets appended (one allocation per 4096 records), and the zero-ahead
//! request (one boxed event per MiB appended under a durable policy). Checked with a counting
//! global allocator.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // A counting global allocator needs it; it only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use strata_log::{FlushPolicy, Log, LogConfig, Record};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_per_append(flush_policy: FlushPolicy, zero_ahead_bytes: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 256 << 20,
        preallocate: false,
        flush_policy,
        zero_ahead_bytes,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    let value = vec![7u8; 100];
    let records: Vec<Record<'_>> = (0..100).map(|_| Record::new(&value)).collect();
    for _ in 0..200 {
        log.append(&records).unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        log.append(&records).unwrap();
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / 1000.0
}

#[test]
fn appends_allocate_nothing_after_warm_up() {
    let never = allocations_per_append(FlushPolicy::Never, 8 << 20);
    // The position table's chunks: 100,000 offsets in the window start at most 25 new chunks of
    // 4096 (one more if the window starts just before a chunk's end). Nothing else.
    let table_chunks = (100_000 / 4096 + 1) as f64 / 1000.0;
    assert!(never <= table_chunks, "allocations per append of 100 records, no fsync: {never}");
    // With an fsync per append (a sync round each, led by the appender) too.
    let always = allocations_per_append(FlushPolicy::Always, 0);
    assert!(always <= table_chunks, "allocations per durable append of 100 records: {always}");
    // Zeroing ahead asks for 1 MiB at a time: 1000 appends of ~11 KB ask about 11 times, each
    // one boxed event (and the event thread's own bookkeeping).
    let zeroing = allocations_per_append(FlushPolicy::Always, 8 << 20);
    assert!(zeroing <= 0.05 + table_chunks, "allocations per durable append while zeroing ahead: {zeroing}");
}
