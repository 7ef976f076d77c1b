//! Regression: `truncate -s 0` (what backup and cleanup tools do) on a live log's active `.log`, a
//! sealed `.log` or an `.index`, then a read, killed the process with SIGBUS (a mapped read past a
//! file's end). Under `ReadPath::Pread` every such read is `Error::Corrupt` naming the file; under
//! the default `ReadPath::Mmap` a file is checked against the log's idea of its length whenever it
//! is mapped, so a sealed segment cut before its first read is `Error::Corrupt` too (a file cut
//! while mapped is the documented limit of `Mmap`). A SIGBUS here would kill the test binary.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use strata_log::{Error, FlushPolicy, Log, LogConfig, ReadPath, Record};

fn config(read_path: ReadPath) -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_bytes: 8 * 64,
        index_interval_bytes: 256,
        flush_policy: FlushPolicy::Never,
        read_path,
        ..LogConfig::default()
    }
}

fn fill(log: &Log) {
    for i in 0..100u32 {
        log.append(&[Record::new(format!("{i:05}-{}", "x".repeat(90)).as_bytes())]).unwrap();
    }
}

fn cut(path: &Path) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(0).unwrap();
}

/// Reads everything from `from`; the first error, if any.
fn read_error(log: &Log, from: u64) -> Option<Error> {
    let mut next = from;
    while next < log.visible_end() {
        let mut reader = match log.read(next, 1 << 20) {
            Ok(reader) => reader,
            Err(e) => return Some(e),
        };
        for record in reader.by_ref() {
            if let Err(e) = record {
                return Some(e);
            }
        }
        next = reader.next_offset();
    }
    None
}

fn corrupt_naming(error: Option<Error>, name: &str) {
    match error {
        Some(Error::Corrupt { path, .. }) => assert!(path.ends_with(name), "{} is not {name}", path.display()),
        other => panic!("expected Corrupt naming {name}, got {other:?}"),
    }
}

#[test]
fn pread_reads_of_files_cut_by_someone_else_are_corrupt_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(ReadPath::Pread)).unwrap();
    fill(&log);
    log.flush().unwrap();
    assert!(log.segment_count() > 3);
    assert_eq!(read_error(&log, 0).map(|e| e.to_string()), None, "a healthy log reads");

    cut(&dir.path().join("00000000000000000000.log"));
    corrupt_naming(read_error(&log, 0), "00000000000000000000.log");

    let active = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .max()
        .unwrap();
    let active_base: u64 = active.trim_end_matches(".log").parse().unwrap();
    cut(&dir.path().join(&active));
    corrupt_naming(read_error(&log, active_base), &active);
}

#[test]
fn pread_index_cut_by_someone_else_is_corrupt_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(ReadPath::Pread)).unwrap();
    fill(&log);
    let active = log.next_offset() - 1;
    let name = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".index"))
        .max()
        .unwrap();
    cut(&dir.path().join(&name));
    match log.read(active, 1).unwrap().next() {
        Some(Err(Error::Corrupt { path, .. })) => assert!(path.ends_with(&name)),
        // The active index holds no entry yet: nothing read from it.
        Some(Ok(record)) => assert_eq!(record.offset(), active),
        other => panic!("{other:?}"),
    }
}

#[test]
fn mmap_checks_a_sealed_segment_cut_before_its_first_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(ReadPath::Mmap)).unwrap();
    fill(&log);
    log.close().unwrap();
    let log = Log::open(dir.path(), config(ReadPath::Mmap)).unwrap();
    cut(&dir.path().join("00000000000000000000.log"));
    corrupt_naming(read_error(&log, 0), "00000000000000000000.log");
}

#[test]
fn both_read_paths_read_the_same_records() {
    let mut seen = Vec::new();
    for read_path in [ReadPath::Mmap, ReadPath::Pread] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), config(read_path)).unwrap();
        fill(&log);
        common::check_lookups(&log);
        seen.push(common::values(&log));
        log.close().unwrap();
        let log = Log::open(dir.path(), config(read_path)).unwrap();
        assert_eq!(common::values(&log), seen[seen.len() - 1], "{read_path:?} after reopening");
    }
    assert_eq!(seen[0], seen[1]);
}
