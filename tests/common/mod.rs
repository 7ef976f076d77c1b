//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod child;
pub mod ext4;
pub mod ops_child;
pub mod store_child;
pub mod store_derived;

use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;
use strata_log::{Header, Log, LogConfig, Record, RecordView};

/// A config with tiny segments and indexes, so a few hundred records roll many segments and add
/// many index entries.
/// Durability is not what these tests are about: no fsync per append (`FlushPolicy::Never`).
/// `Log::open`, retried while it fails with `Error::Locked` (up to 5 s): a test binary that starts
/// children from several threads hands each child, between its fork and its exec, a copy of
/// every descriptor open at that moment — a `Log` this process just closed included — so its
/// directory lock outlives the close by a moment. Only tests that spawn children need this.
#[allow(dead_code)]
pub fn open_unlocked(dir: &Path, config: LogConfig) -> strata_log::Result<Log> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match Log::open(dir, config.clone()) {
            Err(strata_log::Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_bytes: 8 * 32,
        index_interval_bytes: 200,
        flush_policy: strata_log::FlushPolicy::Never,
        ..LogConfig::default()
    }
}

/// A record that owns its bytes, for models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Owned {
    pub fn value(v: impl Into<Vec<u8>>) -> Owned {
        Owned { key: None, value: Some(v.into()), headers: Vec::new() }
    }

    pub fn of(view: &RecordView) -> Owned {
        Owned {
            key: view.key().map(<[u8]>::to_vec),
            value: view.value().map(<[u8]>::to_vec),
            headers: view.headers().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec))).collect(),
        }
    }

    /// Appends `records` to `log` as one batch.
    pub fn append_all(log: &Log, records: &[Owned]) -> strata_log::Result<strata_log::AppendInfo> {
        let headers: Vec<Vec<Header<'_>>> = records
            .iter()
            .map(|r| r.headers.iter().map(|(k, v)| Header { key: k, value: v.as_deref() }).collect())
            .collect();
        let borrowed: Vec<Record<'_>> = records
            .iter()
            .zip(&headers)
            .map(|(r, h)| Record { key: r.key.as_deref(), value: r.value.as_deref(), headers: h, timestamp_ms: None })
            .collect();
        log.append(&borrowed)
    }
}

/// Every visible record from `from` on, read in calls of `max_bytes`, with their offsets.
pub fn read_all(log: &Log, from: u64, max_bytes: usize) -> Vec<(u64, Owned)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.visible_end() {
        let mut reader = log.read(next, max_bytes).unwrap();
        let before = out.len();
        for record in reader.by_ref() {
            let record = record.unwrap();
            out.push((record.offset(), Owned::of(&record)));
        }
        assert!(out.len() > before, "a read at {next} returned nothing");
        next = reader.next_offset();
    }
    out
}

/// `records` encoded as one batch for `Log::append_batch`, records without a timestamp at `now_ms`.
pub fn encode(records: &[Record<'_>], now_ms: i64) -> strata_log::Result<Vec<u8>> {
    let mut batch = strata_log::BatchBuilder::new(now_ms);
    for record in records {
        batch.append(record)?;
    }
    batch.finish()?;
    Ok(batch.into_buffer())
}

/// The values of every visible record, in order.
pub fn values(log: &Log) -> Vec<Vec<u8>> {
    read_all(log, log.start_offset(), 1 << 20).into_iter().map(|(_, r)| r.value.unwrap_or_default()).collect()
}

/// A seeded RNG: the seed comes from `STRATA_SEED` if set, is printed either way, and replays the run.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("{test}: seed {seed} (replay with STRATA_SEED={seed})");
    StdRng::seed_from_u64(seed)
}

/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The value written at `offset` by the crash tests: its length varies with the offset, and any
/// byte of it identifies the offset, so a record returned at the wrong offset or with damaged
/// bytes is caught.
pub fn value_of(offset: u64) -> Vec<u8> {
    let mut v = format!("value-{offset}-").into_bytes();
    v.resize(v.len() + (offset % 37) as usize, b'a' + (offset % 26) as u8);
    v
}

/// What every crash check asserts after reopening a log in `dir`: every offset below `acked` is
/// present with `value_of(offset)`; offsets are dense from the start, in order, without duplicates,
/// and every record returned (acknowledged or not) has the value written at its offset; index and
/// time-index lookups agree with a linear scan; no temporary files are left. Returns the log.
pub fn check_recovered(dir: &Path, config: LogConfig, acked: u64) -> Log {
    let log = Log::open(dir, config).unwrap();
    let records = read_all(&log, log.start_offset(), 1 << 16);
    assert!(log.next_offset() >= acked, "acknowledged offsets up to {acked} but the log ends at {}", log.next_offset());
    for (i, (offset, record)) in records.iter().enumerate() {
        assert_eq!(*offset, log.start_offset() + i as u64, "offsets are dense and in order");
        assert_eq!(record.value.as_deref(), Some(&value_of(*offset)[..]), "value at offset {offset}");
    }
    assert_eq!(records.len() as u64, log.next_offset() - log.start_offset());
    check_lookups(&log);
    let temporary = [".tmp", ".cleaned", ".swap", ".deleted"];
    let names = file_names(dir);
    for name in &names {
        assert!(!temporary.iter().any(|s| name.ends_with(s)), "temporary file left: {name}");
    }
    // The open log's own next segment may be preallocated (one set of three files), nothing else.
    assert!(names.iter().filter(|n| n.ends_with(".prealloc")).count() <= 3, "prealloc leftovers: {names:?}");
    log
}

/// Index lookups (a read from an offset starts exactly there) and time lookups
/// (`offset_for_timestamp`) agree with a linear scan, for a sample of offsets and timestamps.
pub fn check_lookups(log: &Log) {
    let mut all = Vec::new();
    let mut next = log.start_offset();
    while next < log.visible_end() {
        let mut reader = log.read(next, 1 << 20).unwrap();
        for record in reader.by_ref() {
            let record = record.unwrap();
            all.push((record.offset(), record.timestamp_ms()));
        }
        next = reader.next_offset();
    }
    let step = (all.len() / 50).max(1);
    for &(offset, timestamp) in all.iter().step_by(step) {
        let first = log.read(offset, 1).unwrap().next().unwrap().unwrap();
        assert_eq!(first.offset(), offset, "index lookup of {offset}");
        let expected = all.iter().find(|(_, ts)| *ts >= timestamp).map(|(o, _)| *o);
        assert_eq!(log.offset_for_timestamp(timestamp).unwrap(), expected, "time lookup of {timestamp}");
    }
}

/// Copies `from` into `to` (created if needed), subdirectories too, except lock files: a live
/// directory copied as a crash would leave it (the page cache intact).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (name, target) = (entry.file_name(), to.join(entry.file_name()));
        // A live log may remove a file between the listing and the copy (a temporary file, a
        // deleted segment): the copy then is what a crash a moment later would leave.
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => copy_dir(&entry.path(), &target),
            Ok(_) if name == ".lock" => {}
            Ok(_) => match std::fs::copy(entry.path(), &target) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => {
                    other.unwrap();
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("{}: {e}", entry.path().display()),
        }
    }
}

/// Lines of /proc/self/maps naming a file under `dir`: the maps this process holds of them.
pub fn maps_under(dir: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let dir = dir.to_string_lossy();
    maps.lines().filter(|line| line.contains(&*dir)).count()
}

/// The contents of every file in `dir` except the lock, by name: to prove an operation changed
/// nothing.
pub fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    file_names(dir)
        .into_iter()
        .filter(|n| n != ".lock")
        .map(|n| (n.clone(), std::fs::read(dir.join(n)).unwrap()))
        .collect()
}

/// Every file and directory under `root` (itself included), by path relative to it, with its
/// modification time and, for a file, its bytes: to prove that an operation changed, created and
/// removed nothing anywhere in a tree (a store's root).
pub fn tree_snapshot(root: &Path) -> Vec<(String, std::time::SystemTime, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let name = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            found.push((name, meta.modified().unwrap(), Vec::new()));
        } else {
            found.push((name, meta.modified().unwrap(), std::fs::read(&path).unwrap()));
        }
    }
    found.sort();
    found
}

/// Makes every file and directory under `root` read-only for everyone (`chmod -R a-w`), or
/// writable by its owner again (`chmod -R u+w`).
pub fn set_read_only_tree(root: &Path, read_only: bool) {
    use std::os::unix::fs::PermissionsExt as _;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
        let mode = meta.permissions().mode();
        let mode = if read_only { mode & !0o222 } else { mode | 0o200 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}
