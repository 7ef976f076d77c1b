//! The append hot path allocates nothing per record: after warm-up, appending batches of 100
//! records allocates nothing, with or without an fsync per append (the encoder's buffer and the timestamp vector are reused, the
//! batch is written with one `pwrite`) — but for the segment's position table, which takes a
//! chunk for every 4096 offsets appended (one allocation per 4096 records), and the zero-ahead
//! request (one boxed event per MiB appended under a durable policy). Checked with a counting
//! global allocator.
#![allow(clippy::unwrap_used)]

mod counting_alloc;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

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
    let before = counting_alloc::allocations();
    for _ in 0..1000 {
        log.append(&records).unwrap();
    }
    (counting_alloc::allocations() - before) as f64 / 1000.0
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
