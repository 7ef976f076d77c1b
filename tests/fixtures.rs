//! Checked-in fixtures: small log directories in known bad states (a torn tail, a damaged batch, a
//! missing or corrupt index, an orphan index, compaction and retention leftovers, a zero tail, a stale
//! batch), the code that generates each one, and what `Log::open` must do with it.
//!
//! Every fixture starts as the same clean log (fixed config, manual clock, fixed records), closed,
//! then damaged with `std::fs`. `fixtures_match_their_generator` regenerates them all and compares
//! them byte for byte with `fixtures/<name>/`, so a checked-in fixture cannot drift from the code
//! that made it; rewrite them with
//! `STRATA_REGENERATE_FIXTURES=1 cargo test -p strata-log --test fixtures`.
//! The other tests open a copy in a temporary directory, never the checked-in one.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use strata_log::internals::Checkpoint;
use strata_log::internals::format::{
    BATCH_HEADER_LEN, CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CLEANED_SUFFIX, CORRUPT_SUFFIX, DELETED_SUFFIX,
    INDEX_SUFFIX, LOCK_FILE, LOG_SUFFIX, OFFSET_INDEX_ENTRY_LEN, SWAP_SUFFIX, TIME_INDEX_SUFFIX, file_name,
    parse_file_name,
};
use strata_log::internals::inspect::{BatchInfo, Dump, dump_file, verify};
use strata_log::{Corruption, Error, Log, LogConfig, ManualClock, Record, RecoveryMode};
use tempfile::TempDir;

/// Set to `1` to rewrite `fixtures/<name>/` from the generators instead of comparing.
const REGENERATE_VAR: &str = "STRATA_REGENERATE_FIXTURES";
const REGENERATE_HINT: &str = "if the change is intended, run \
    `STRATA_REGENERATE_FIXTURES=1 cargo test -p strata-log --test fixtures` and review the diff";

/// The manual clock's start; it advances 1 ms per batch.
const START_MS: i64 = 1_700_000_000_000;
/// Records in the clean log every fixture starts from, with values `record-0000`, `record-0001`, ….
const RECORDS: u64 = 100;
/// Records per append, cycled, so batch boundaries fall at irregular offsets.
const BATCH_SIZES: [u64; 4] = [3, 1, 4, 2];
/// Segments in the clean log (the last one active).
const SEGMENTS: usize = 4;
/// The sealed segment whose index the index fixtures damage: neither the first nor the active one.
const SEALED: usize = 1;
/// Base offset of the orphan index files (no segment has it).
const ORPHAN_BASE: u64 = 99_999;
/// Garbage `.index` entries (relative offset, position): whole entries, not strictly increasing.
const GARBAGE_INDEX: [(u32, u32); 4] = [(9, 700), (4, 300), (4, 300), (1, 900)];

type Generator = fn(&Path);

/// Fixtures whose generator and check live in another test: `store_named_headers`
/// (`tests/store_named_headers.rs`, a message store's commit log).
const GENERATED_ELSEWHERE: [&str; 1] = ["store_named_headers"];

/// Every fixture: its directory under `fixtures/` and its generator.
const FIXTURES: [(&str, Generator); 10] = [
    ("torn_tail", torn_tail),
    ("bad_crc_mid_segment", bad_crc_mid_segment),
    ("missing_index", missing_index),
    ("corrupt_index", corrupt_index),
    ("orphan_index", orphan_index),
    ("leftover_swap", leftover_swap),
    ("leftover_cleaned", leftover_cleaned),
    ("leftover_deleted", leftover_deleted),
    ("zero_filled_tail", zero_filled_tail),
    ("stale_batch_after_end", stale_batch_after_end),
];

// ---- The clean log -------------------------------------------------------------------------------

fn config_with(clock: &ManualClock) -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_bytes: 1024,
        index_interval_bytes: 100,
        clock: clock.clock(),
        ..LogConfig::default()
    }
}

/// The config the tests open fixtures with: the generator's, at the generator's start time.
fn config() -> LogConfig {
    config_with(&ManualClock::new(START_MS))
}

/// The value written at `offset`.
fn value(offset: u64) -> Vec<u8> {
    format!("record-{offset:04}").into_bytes()
}

/// `(offset, value)` of every record written in `offsets`.
fn written(offsets: Range<u64>) -> Vec<(u64, Vec<u8>)> {
    offsets.map(|offset| (offset, value(offset))).collect()
}

/// A segment of the clean log and its batches.
#[derive(Debug, Clone)]
struct Segment {
    base: u64,
    batches: Vec<BatchInfo>,
}

impl Segment {
    fn name(&self, suffix: &str) -> String {
        file_name(self.base, suffix)
    }

    /// Bytes of batches (the file length of a sealed or closed segment).
    fn len(&self) -> u64 {
        self.batches.last().map_or(0, |b| b.position + b.size)
    }

    /// The offset after its last record.
    fn end(&self) -> u64 {
        self.batches.last().map_or(self.base, |b| b.last_offset + 1)
    }
}

/// Writes the clean log every fixture starts from into `dir` and closes it (checkpoint and
/// `.clean-shutdown` written); returns its segments.
fn write_clean_log(dir: &Path) -> Vec<Segment> {
    let clock = ManualClock::new(START_MS);
    let log = Log::open(dir, config_with(&clock)).unwrap();
    let mut offset = 0;
    for &size in BATCH_SIZES.iter().cycle() {
        if offset == RECORDS {
            break;
        }
        let values: Vec<Vec<u8>> = (offset..(offset + size).min(RECORDS)).map(value).collect();
        let records: Vec<Record<'_>> = values.iter().map(|v| Record::new(v)).collect();
        assert_eq!(log.append(&records).unwrap().base_offset, offset);
        offset += values.len() as u64;
        clock.advance(1);
    }
    log.close().unwrap();
    // How many checkpoints the log wrote (its slots' sequence numbers) depends on thread timing:
    // the fixture keeps what the last one says, as sequence 1.
    write_checkpoint(dir, 0, RECORDS);
    let segments = layout(dir);
    let shape: Vec<(u64, usize)> = segments.iter().map(|s| (s.base, s.batches.len())).collect();
    assert_eq!(segments.len(), SEGMENTS, "the fixtures assume {SEGMENTS} segments; (base, batches): {shape:?}");
    assert!(active(&segments).batches.len() >= 3, "the active segment needs a batch in its middle");
    assert_eq!(active(&segments).end(), RECORDS);
    segments
}

/// The segments of an undamaged log directory, from `dump_file`.
fn layout(dir: &Path) -> Vec<Segment> {
    let mut segments = Vec::new();
    for name in common::file_names(dir) {
        let Some((base, LOG_SUFFIX)) = parse_file_name(&name) else { continue };
        match dump_file(&dir.join(&name), false).unwrap() {
            Dump::Log { batches, damage: None, .. } => segments.push(Segment { base, batches }),
            other => panic!("{name} is not a clean segment: {other:?}"),
        }
    }
    segments
}

/// The clean log, built once per test run: its segments and the bytes of each file.
struct Clean {
    segments: Vec<Segment>,
    files: BTreeMap<String, Vec<u8>>,
}

fn clean() -> &'static Clean {
    static CLEAN: OnceLock<Clean> = OnceLock::new();
    CLEAN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let segments = write_clean_log(dir.path());
        Clean { segments, files: snapshot(dir.path()) }
    })
}

fn active(segments: &[Segment]) -> &Segment {
    segments.last().unwrap()
}

/// The batch `torn_tail` cuts in half: the last one.
fn torn_batch(segments: &[Segment]) -> &BatchInfo {
    active(segments).batches.last().unwrap()
}

/// The batch `bad_crc_mid_segment` damages: the middle one of the active segment.
fn damaged_batch(segments: &[Segment]) -> &BatchInfo {
    let batches = &active(segments).batches;
    &batches[batches.len() / 2]
}

/// The byte `bad_crc_mid_segment` flips: in the last record's value, covered by the CRC only.
fn damaged_byte(segments: &[Segment]) -> u64 {
    let batch = damaged_batch(segments);
    batch.position + batch.size - 2
}

/// The batch `stale_batch_after_end` copies after the end: the active segment's first.
fn stale_batch(segments: &[Segment]) -> &BatchInfo {
    &active(segments).batches[0]
}

// ---- Generators ----------------------------------------------------------------------------------

/// The active segment's last batch cut in half; recovery point at that batch's base offset.
fn torn_tail(dir: &Path) {
    let segments = write_clean_log(dir);
    let torn = torn_batch(&segments);
    set_len(&dir.join(active(&segments).name(LOG_SUFFIX)), torn.position + torn.size / 2);
    write_checkpoint(dir, 0, torn.base_offset);
    remove(dir, CLEAN_SHUTDOWN_FILE);
}

/// One byte flipped in the middle batch of the active segment, below the recovery point (the end).
fn bad_crc_mid_segment(dir: &Path) {
    let segments = write_clean_log(dir);
    let path = dir.join(active(&segments).name(LOG_SUFFIX));
    let mut bytes = fs::read(&path).unwrap();
    bytes[damaged_byte(&segments) as usize] ^= 0xff;
    fs::write(&path, bytes).unwrap();
    write_checkpoint(dir, 0, RECORDS);
    remove(dir, CLEAN_SHUTDOWN_FILE);
}

/// A sealed segment's `.index` deleted after a clean close.
fn missing_index(dir: &Path) {
    let segments = write_clean_log(dir);
    remove(dir, &segments[SEALED].name(INDEX_SUFFIX));
}

/// A sealed segment's `.index` replaced by whole entries that do not strictly increase.
fn corrupt_index(dir: &Path) {
    let segments = write_clean_log(dir);
    let bytes: Vec<u8> =
        GARBAGE_INDEX.iter().flat_map(|&(offset, position)| [offset, position]).flat_map(u32::to_be_bytes).collect();
    fs::write(dir.join(segments[SEALED].name(INDEX_SUFFIX)), bytes).unwrap();
}

/// `.index` and `.timeindex` files (copies of the first segment's) for a segment that does not exist.
fn orphan_index(dir: &Path) {
    let segments = write_clean_log(dir);
    for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        fs::copy(dir.join(segments[0].name(suffix)), dir.join(file_name(ORPHAN_BASE, suffix))).unwrap();
    }
}

/// A complete compaction output covering the first two segments (their bytes concatenated), with
/// both originals still present.
fn leftover_swap(dir: &Path) {
    let segments = write_clean_log(dir);
    let swap = concat_logs(dir, &segments[0..2]);
    fs::write(dir.join(swap_name(&segments[0])), swap).unwrap();
}

/// An incomplete compaction output at the first segment (cut inside a batch) and a complete-looking
/// swap at the second covering the second and third: a rename pass interrupted before it began.
fn leftover_cleaned(dir: &Path) {
    let segments = write_clean_log(dir);
    let mut cleaned = concat_logs(dir, &segments[0..2]);
    let cut = segments[0].len() + segments[1].batches[1].position + 20;
    cleaned.truncate(cut as usize);
    fs::write(dir.join(format!("{}{CLEANED_SUFFIX}", segments[0].name(LOG_SUFFIX))), cleaned).unwrap();
    fs::write(dir.join(swap_name(&segments[1])), concat_logs(dir, &segments[1..3])).unwrap();
}

/// The first segment renamed to `.deleted` by retention (the log start moved past it), not yet
/// unlinked.
fn leftover_deleted(dir: &Path) {
    let segments = write_clean_log(dir);
    for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
        let name = segments[0].name(suffix);
        fs::rename(dir.join(&name), dir.join(format!("{name}{DELETED_SUFFIX}"))).unwrap();
    }
    write_checkpoint(dir, segments[1].base, RECORDS);
}

/// The active segment extended with zeros to its preallocated size, as after a crash.
fn zero_filled_tail(dir: &Path) {
    let segments = write_clean_log(dir);
    let preallocated = config().segment_bytes;
    assert!(
        active(&segments).len() + BATCH_HEADER_LEN as u64 <= preallocated,
        "the zero tail must hold a whole header of zeros"
    );
    set_len(&dir.join(active(&segments).name(LOG_SUFFIX)), preallocated);
    write_checkpoint(dir, 0, RECORDS);
    remove(dir, CLEAN_SHUTDOWN_FILE);
}

/// A copy of the active segment's first batch (valid CRC, stale base offset) after its last batch.
fn stale_batch_after_end(dir: &Path) {
    let segments = write_clean_log(dir);
    let path = dir.join(active(&segments).name(LOG_SUFFIX));
    let mut bytes = fs::read(&path).unwrap();
    let stale = stale_batch(&segments);
    let copy = bytes[stale.position as usize..(stale.position + stale.size) as usize].to_vec();
    bytes.extend_from_slice(&copy);
    fs::write(&path, bytes).unwrap();
    write_checkpoint(dir, 0, RECORDS);
    remove(dir, CLEAN_SHUTDOWN_FILE);
}

fn swap_name(segment: &Segment) -> String {
    format!("{}{SWAP_SUFFIX}", segment.name(LOG_SUFFIX))
}

fn concat_logs(dir: &Path, segments: &[Segment]) -> Vec<u8> {
    segments.iter().flat_map(|s| fs::read(dir.join(s.name(LOG_SUFFIX))).unwrap()).collect()
}

fn write_checkpoint(dir: &Path, log_start_offset: u64, recovery_point: u64) {
    fs::write(dir.join(CHECKPOINT_FILE), Checkpoint { log_start_offset, recovery_point }.encode_file(1)).unwrap();
}

fn set_len(path: &Path, len: u64) {
    fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

fn remove(dir: &Path, name: &str) {
    fs::remove_file(dir.join(name)).unwrap();
}

// ---- Checked-in copies and regeneration ----------------------------------------------------------

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn regenerating() -> bool {
    std::env::var(REGENERATE_VAR).is_ok_and(|v| v == "1")
}

/// Every file of `dir` but the lock, by name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    assert!(dir.is_dir(), "{} is missing; {REGENERATE_HINT}", dir.display());
    common::file_names(dir)
        .into_iter()
        .filter(|name| name != LOCK_FILE)
        .map(|name| {
            let bytes = fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

/// What `generate` writes, file by file.
fn generated(generate: Generator) -> BTreeMap<String, Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path());
    snapshot(dir.path())
}

/// Rewrites every `fixtures/<name>/` from its generator, once per test run, before any test reads a
/// fixture (only with `STRATA_REGENERATE_FIXTURES=1`).
fn regenerate_if_asked() {
    static REGENERATED: OnceLock<()> = OnceLock::new();
    if !regenerating() {
        return;
    }
    REGENERATED.get_or_init(|| {
        for (name, generate) in FIXTURES {
            let target = fixtures_root().join(name);
            if target.exists() {
                fs::remove_dir_all(&target).unwrap();
            }
            fs::create_dir_all(&target).unwrap();
            for (file, bytes) in generated(generate) {
                fs::write(target.join(file), bytes).unwrap();
            }
            eprintln!("regenerated fixtures/{name}");
        }
    });
}

/// A copy of `fixtures/<name>/` in a temporary directory, to open and change.
fn copy_fixture(name: &str) -> TempDir {
    regenerate_if_asked();
    let dir = tempfile::tempdir().unwrap();
    for (file, bytes) in snapshot(&fixtures_root().join(name)) {
        fs::write(dir.path().join(file), bytes).unwrap();
    }
    dir
}

#[test]
fn fixtures_match_their_generator() {
    regenerate_if_asked();
    for (name, generate) in FIXTURES {
        let expected = generated(generate);
        let actual = snapshot(&fixtures_root().join(name));
        assert_eq!(
            actual.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>(),
            "fixtures/{name} has other files than its generator writes; {REGENERATE_HINT}"
        );
        for (file, bytes) in &expected {
            assert!(
                actual[file] == *bytes,
                "fixtures/{name}/{file} differs from what its generator writes; {REGENERATE_HINT}"
            );
        }
    }
    let dirs: BTreeSet<String> = fs::read_dir(fixtures_root())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let known: BTreeSet<String> =
        FIXTURES.iter().map(|(name, _)| *name).chain(GENERATED_ELSEWHERE).map(str::to_owned).collect();
    assert_eq!(
        dirs, known,
        "fixtures/ must hold exactly one directory per generator: delete a stray one, regenerate a missing one"
    );
}

// ---- What open does with each fixture ------------------------------------------------------------

/// `(offset, value)` of every record the log returns, read in small calls.
fn read_back(log: &Log) -> Vec<(u64, Vec<u8>)> {
    common::read_all(log, log.start_offset(), 300).into_iter().map(|(offset, r)| (offset, r.value.unwrap())).collect()
}

/// The offset index entries `(relative_offset, position)` of an `.index` file.
fn index_entries(path: &Path) -> Vec<(u32, u32)> {
    let bytes = fs::read(path).unwrap();
    assert_eq!(bytes.len() % OFFSET_INDEX_ENTRY_LEN, 0, "{} is not whole entries", path.display());
    let word = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    bytes.chunks_exact(OFFSET_INDEX_ENTRY_LEN).map(|e| (word(&e[..4]), word(&e[4..]))).collect()
}

fn names_ending_with(dir: &Path, suffix: &str) -> Vec<String> {
    common::file_names(dir).into_iter().filter(|name| name.ends_with(suffix)).collect()
}

#[test]
fn torn_tail_is_cut_to_the_whole_batches_before_it() {
    let dir = copy_fixture("torn_tail");
    let torn = torn_batch(&clean().segments);
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown, "{report:?}");
    assert!(report.bytes_truncated > 0 && report.bytes_truncated <= torn.size / 2, "{report:?}");
    assert_eq!(report.acknowledged_records_lost, 0, "the torn batch was above the recovery point");
    assert_eq!(log.next_offset(), torn.base_offset);
    assert_eq!(read_back(&log), written(0..torn.base_offset));
}

#[test]
fn bad_crc_mid_segment_fails_a_strict_open_and_changes_nothing() {
    let dir = copy_fixture("bad_crc_mid_segment");
    let segments = &clean().segments;
    let damaged = damaged_batch(segments);
    let log_path = dir.path().join(active(segments).name(LOG_SUFFIX));
    let kept = |name: &String| name.ends_with(LOG_SUFFIX) || name == CHECKPOINT_FILE;
    let before: BTreeMap<_, _> = snapshot(dir.path()).into_iter().filter(|(name, _)| kept(name)).collect();

    let error = Log::open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&error, Error::Corrupt { path, position, reason: Corruption::CrcMismatch { .. } }
            if *path == log_path && *position == damaged.position),
        "expected a CRC mismatch in {} at {}, got {error:?}",
        log_path.display(),
        damaged.position
    );
    let after: BTreeMap<_, _> = snapshot(dir.path()).into_iter().filter(|(name, _)| kept(name)).collect();
    assert!(after == before, "a strict open that fails must not change the segments or the checkpoint");
}

#[test]
fn bad_crc_mid_segment_is_cut_with_truncate_corrupt() {
    let dir = copy_fixture("bad_crc_mid_segment");
    let segments = &clean().segments;
    let damaged = damaged_batch(segments);
    let log_name = active(segments).name(LOG_SUFFIX);
    let damaged_bytes = fs::read(dir.path().join(&log_name)).unwrap();

    let log = Log::open(dir.path(), LogConfig { recovery: RecoveryMode::TruncateCorrupt, ..config() }).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.acknowledged_records_lost, RECORDS - damaged.base_offset, "{report:?}");
    assert_eq!(log.next_offset(), damaged.base_offset);
    assert_eq!(read_back(&log), written(0..damaged.base_offset));
    let corrupt = dir.path().join(format!("{log_name}{CORRUPT_SUFFIX}"));
    assert!(report.files_kept_corrupt.contains(&corrupt), "{report:?}");
    assert!(fs::read(&corrupt).unwrap() == damaged_bytes, "the .corrupt copy is the damaged segment as it was");
}

#[test]
fn bad_crc_mid_segment_is_found_by_verify() {
    let dir = copy_fixture("bad_crc_mid_segment");
    let segments = &clean().segments;
    let damaged = damaged_batch(segments);
    let log_path = dir.path().join(active(segments).name(LOG_SUFFIX));
    let report = verify(dir.path(), &config()).unwrap();
    assert!(
        report.findings.iter().any(|f| f.file == log_path && f.position == damaged.position),
        "expected a finding in {} at {}: {report:?}",
        log_path.display(),
        damaged.position
    );
}

#[test]
fn missing_index_is_rebuilt_at_open() {
    let dir = copy_fixture("missing_index");
    let name = clean().segments[SEALED].name(INDEX_SUFFIX);
    let index = dir.path().join(&name);
    assert!(!index.exists());
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert!(report.clean_shutdown, "a sealed segment's index does not make the shutdown unclean: {report:?}");
    assert!(report.indexes_rebuilt >= 1, "{report:?}");
    assert!(fs::read(&index).unwrap() == clean().files[&name], "the rebuilt index is the one the log wrote");
    assert_eq!(read_back(&log), written(0..RECORDS));
}

#[test]
fn corrupt_index_is_named_by_verify_with_the_entry_that_breaks_the_order() {
    let dir = copy_fixture("corrupt_index");
    let index = dir.path().join(clean().segments[SEALED].name(INDEX_SUFFIX));
    let report = verify(dir.path(), &config()).unwrap();
    // GARBAGE_INDEX's entry 1 (8 bytes in) goes back from relative offset 9 to 4.
    let problem = "index entry 1: relative offset 4 does not increase past 9";
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.file == index && f.position == OFFSET_INDEX_ENTRY_LEN as u64 && f.problem == problem),
        "{report:#?}"
    );
    let entry_0 = "index entry (offset 37, position 700) does not point at a valid batch with that offset";
    assert!(report.findings.iter().any(|f| f.file == index && f.position == 0 && f.problem == entry_0), "{report:#?}");
}

#[test]
fn corrupt_index_is_rebuilt_at_first_read() {
    let dir = copy_fixture("corrupt_index");
    let name = clean().segments[SEALED].name(INDEX_SUFFIX);
    let index = dir.path().join(&name);
    assert_eq!(index_entries(&index), GARBAGE_INDEX);
    let log = Log::open(dir.path(), config()).unwrap();
    assert!(log.recovery_report().clean_shutdown, "{:?}", log.recovery_report());
    assert_eq!(read_back(&log), written(0..RECORDS));

    let entries = index_entries(&index);
    assert!(!entries.is_empty());
    assert!(
        entries.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
        "the index still fails its check after a read: {entries:?}"
    );
    assert!(fs::read(&index).unwrap() == clean().files[&name], "the rebuilt index is the one the log wrote");
}

#[test]
fn orphan_index_is_deleted_at_open() {
    let dir = copy_fixture("orphan_index");
    let orphans: Vec<PathBuf> = [INDEX_SUFFIX, TIME_INDEX_SUFFIX]
        .iter()
        .map(|suffix| dir.path().join(file_name(ORPHAN_BASE, suffix)))
        .collect();
    assert!(orphans.iter().all(|path| path.exists()));
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    for orphan in &orphans {
        assert!(!orphan.exists(), "{} survived the open", orphan.display());
        assert!(report.files_deleted.contains(orphan), "{} not reported: {report:?}", orphan.display());
    }
    assert!(report.clean_shutdown, "{report:?}");
    assert_eq!(read_back(&log), written(0..RECORDS));
}

#[test]
fn leftover_swap_replaces_the_segments_it_covers() {
    let dir = copy_fixture("leftover_swap");
    let segments = &clean().segments;
    let first = segments[0].name(LOG_SUFFIX);
    let swap = fs::read(dir.path().join(swap_name(&segments[0]))).unwrap();
    let log = Log::open(dir.path(), config()).unwrap();
    assert_eq!(names_ending_with(dir.path(), SWAP_SUFFIX), Vec::<String>::new());
    assert!(!dir.path().join(segments[1].name(LOG_SUFFIX)).exists(), "the second original survived the swap");
    assert!(fs::read(dir.path().join(&first)).unwrap() == swap, "{first} is the swap's data");
    assert_eq!(log.segment_count(), SEGMENTS - 1);
    assert_eq!(read_back(&log), written(0..RECORDS));
}

#[test]
fn leftover_cleaned_and_the_swap_above_it_are_discarded() {
    let dir = copy_fixture("leftover_cleaned");
    let segments = &clean().segments;
    let leftovers: Vec<PathBuf> = names_ending_with(dir.path(), CLEANED_SUFFIX)
        .into_iter()
        .chain(names_ending_with(dir.path(), SWAP_SUFFIX))
        .map(|name| dir.path().join(name))
        .collect();
    assert_eq!(leftovers.len(), 2);
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    for leftover in &leftovers {
        assert!(!leftover.exists(), "{} survived the open", leftover.display());
        assert!(report.files_deleted.contains(leftover), "{} not reported: {report:?}", leftover.display());
    }
    assert_eq!(
        names_ending_with(dir.path(), LOG_SUFFIX),
        segments.iter().map(|s| s.name(LOG_SUFFIX)).collect::<Vec<_>>()
    );
    for sealed in &segments[..SEGMENTS - 1] {
        let name = sealed.name(LOG_SUFFIX);
        assert!(fs::read(dir.path().join(&name)).unwrap() == clean().files[&name], "{name} changed");
    }
    assert_eq!(read_back(&log), written(0..RECORDS));
}

#[test]
fn leftover_deleted_is_removed_at_open() {
    let dir = copy_fixture("leftover_deleted");
    let segments = &clean().segments;
    let leftovers: Vec<PathBuf> =
        names_ending_with(dir.path(), DELETED_SUFFIX).into_iter().map(|name| dir.path().join(name)).collect();
    assert_eq!(leftovers.len(), 3);
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    for leftover in &leftovers {
        assert!(!leftover.exists(), "{} survived the open", leftover.display());
        assert!(report.files_deleted.contains(leftover), "{} not reported: {report:?}", leftover.display());
    }
    assert!(report.clean_shutdown, "{report:?}");
    assert_eq!(log.start_offset(), segments[1].base);
    assert_eq!(read_back(&log), written(segments[1].base..RECORDS));
}

#[test]
fn zero_filled_tail_is_the_end_of_the_data_not_a_truncation() {
    let dir = copy_fixture("zero_filled_tail");
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown, "{report:?}");
    assert_eq!(report.bytes_truncated, 0, "zeros after the last batch are not data: {report:?}");
    assert_eq!(report.records_truncated, 0, "{report:?}");
    assert_eq!(log.next_offset(), RECORDS);
    assert_eq!(read_back(&log), written(0..RECORDS));
}

#[test]
fn stale_batch_after_end_is_cut_and_never_returned() {
    let dir = copy_fixture("stale_batch_after_end");
    let log = Log::open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert!(!report.clean_shutdown, "{report:?}");
    assert!(report.bytes_truncated > 0, "the stale batch is data after the end: {report:?}");
    assert_eq!(report.acknowledged_records_lost, 0, "{report:?}");
    assert_eq!(log.next_offset(), RECORDS);
    assert_eq!(read_back(&log), written(0..RECORDS));
    assert_eq!(log.read(RECORDS, 1 << 20).unwrap().count(), 0, "the end, not the stale batch");
    assert!(
        matches!(log.read(RECORDS + 1, 1 << 20), Err(Error::OffsetOutOfRange { requested, .. }) if requested == RECORDS + 1)
    );
    // The next append takes the stale batch's place; reading it returns the new record.
    let next = value(RECORDS);
    assert_eq!(log.append(&[Record::new(&next)]).unwrap().base_offset, RECORDS);
    assert_eq!(read_back(&log), written(0..RECORDS + 1));
}
