//! The cleaner checks its own output (every batch valid, ending where its sources ended) before it
//! swaps it in. Output failing that check is `Error::Corrupt` naming the `.cleaned` file (it used
//! to be possible for it to end as `Error::Cancelled`, which the cleaner thread drops without a log
//! line), logged and counted in `compaction_failures`, and the pass is abandoned before any rename:
//! the old segments stay and the output is deleted. The damage is injected with the
//! `cleaner_output_damaged` failpoint.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use fail::FailScenario;
use strata_log::{CleanupPolicy, Error, FlushPolicy, Log, LogConfig, Record};

fn config(cleanup_policy: CleanupPolicy) -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        flush_policy: FlushPolicy::Never,
        cleanup_policy,
        cleaner_backoff_ms: 10,
        min_cleanable_dirty_percent: 0,
        // The test compares directory listings: no background preallocation may add a file
        // between them.
        preallocate: false,
        ..LogConfig::default()
    }
}

fn fill(log: &Log) {
    for i in 0..300u32 {
        log.append(&[Record::new(&i.to_be_bytes()).with_key(format!("k{}", i % 5).as_bytes())]).unwrap();
    }
}

/// Error-level log lines, as "message: error" (a minimal global `tracing` subscriber: the cleaner
/// thread logs from its own thread).
static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct ErrorLines;

impl tracing::Subscriber for ErrorLines {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String, String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                match field.name() {
                    "message" => self.0 = format!("{value:?}"),
                    "error" => self.1 = format!("{value:?}"),
                    _ => {}
                }
            }
        }
        let mut fields = Fields(String::new(), String::new());
        event.record(&mut fields);
        ERRORS.lock().unwrap().push(format!("{}: {}", fields.0, fields.1));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn leftovers(dir: &std::path::Path) -> Vec<String> {
    common::file_names(dir).into_iter().filter(|n| n.contains(".cleaned") || n.contains(".swap")).collect()
}

#[test]
fn damaged_cleaner_output_is_corrupt_counted_and_changes_nothing() {
    let scenario = FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(CleanupPolicy::Delete)).unwrap();
    fill(&log);
    let (names, values) = (common::file_names(dir.path()), common::values(&log));

    fail::cfg("cleaner_output_damaged", "return").unwrap();
    let pass = log.compact();
    let Err(Error::Corrupt { path, .. }) = &pass else { panic!("expected Error::Corrupt, got {pass:?}") };
    assert!(path.to_string_lossy().ends_with(".log.cleaned"), "names the output: {pass:?}");
    let metrics = log.metrics();
    assert_eq!((metrics.compaction_failures, metrics.compaction_passes), (1, 0));
    assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "the output is deleted");
    assert_eq!(common::file_names(dir.path()), names, "no segment was renamed");
    assert_eq!(common::values(&log), values);

    fail::remove("cleaner_output_damaged");
    assert!(log.compact().unwrap().is_some(), "the next pass runs");
    assert!(common::values(&log).len() < values.len(), "compacted");
    log.close().unwrap();
    scenario.teardown();
}

#[test]
fn the_cleaner_thread_counts_damaged_output_and_keeps_the_log() {
    let scenario = FailScenario::setup();
    tracing::subscriber::set_global_default(ErrorLines).unwrap();
    let dir = tempfile::tempdir().unwrap();
    fail::cfg("cleaner_output_damaged", "return").unwrap();
    let log = Log::open(dir.path(), config(CleanupPolicy::Compact)).unwrap();
    fill(&log);
    let deadline = Instant::now() + Duration::from_secs(20);
    while log.metrics().compaction_failures < 2 {
        assert!(Instant::now() < deadline, "the cleaner thread's failed passes are counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    let logged = ERRORS.lock().unwrap().clone();
    assert!(
        logged.iter().any(|line| line.starts_with("compaction pass failed") && line.contains(".log.cleaned")),
        "each failed pass is logged with the damaged file: {logged:?}"
    );
    assert_eq!(log.metrics().compaction_passes, 0);
    assert_eq!(common::values(&log).len(), 300, "nothing was swapped in");
    log.append(&[Record::new(b"still writable")]).unwrap();
    log.close().unwrap();
    fail::remove("cleaner_output_damaged");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    scenario.teardown();
}
