//! A log of 25,000 small segments read in full under the default config. Every sealed segment
//! maps its files at their first read (the `.log` for records, the `.index` to find an offset, the
//! `.timeindex` to find a time), and 3 × 25,000 maps are more than a process may hold
//! (`vm.max_map_count`, 65,530 by default): without a budget the reads failed with an `mmap`
//! error part-way. A log opened without `LogConfig::map_budget` now shares the process's default
//! budget, which unmaps least-recently-read files to stay under half of `vm.max_map_count`.
//!
//! `STRATA_MANY_SEGMENTS` sets another count.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use strata_log::{FlushPolicy, Log, LogConfig, MapBudget, Record};

fn segments() -> u64 {
    std::env::var("STRATA_MANY_SEGMENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(25_000)
}

/// Maps this process holds now.
fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

#[test]
// About two and a half minutes in a debug build: `.ci/run` runs it once, in its plain `cargo test`.
#[cfg_attr(feature = "failpoints", ignore = "run by the plain `cargo test` (it is slow; once is enough)")]
fn a_log_of_25000_segments_reads_in_full_under_the_default_config() {
    let dir = tempfile::tempdir().unwrap();
    let count = segments();
    let started = Instant::now();
    {
        // One record per segment (a batch of ~130 bytes fills one), written quickly.
        let small = LogConfig {
            segment_bytes: 128,
            index_bytes: 64,
            flush_policy: FlushPolicy::Never,
            preallocate: false,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), small).unwrap();
        for _ in 0..count {
            log.append(&[Record::new(&[7u8; 80])]).unwrap();
        }
        log.close().unwrap();
    }
    eprintln!("wrote {count} segments in {:?}", started.elapsed());

    let started = Instant::now();
    let config = LogConfig::default().with_recorded_parameters(dir.path()).unwrap();
    assert!(config.map_budget.is_none(), "the default config names no budget");
    let log = Log::open(dir.path(), config).unwrap();
    assert_eq!(log.segment_count() as u64, count);
    let mut read = 0;
    for record in log.records(..).unwrap() {
        assert_eq!(record.unwrap().offset(), read);
        read += 1;
    }
    assert_eq!(read, count);
    for offset in 0..count {
        let mut reader = log.read(offset, 1).unwrap();
        assert_eq!(reader.next().unwrap().unwrap().offset(), offset);
    }
    assert_eq!(log.offset_for_timestamp(i64::MAX).unwrap(), None, "every time index looked at");
    let budget = MapBudget::process_default();
    let held = budget.metrics().maps;
    eprintln!(
        "read {count} segments in {:?}: the default budget holds {held} maps (at most {}); the process {}",
        started.elapsed(),
        budget.config().max_maps,
        maps()
    );
    assert!(held <= budget.config().max_maps);
    // Without the budget the log alone held two maps per segment read (50,000 here): the rest of
    // the process (libraries, thread stacks, the allocator) needs far fewer than 1,000.
    assert!(maps() <= budget.config().max_maps as usize + 1_000, "{} maps", maps());
    log.close().unwrap();
}
