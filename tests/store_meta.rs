//! `store.meta`: a message store records its format and the parameters its files are made with.
//! A store (or its commit log) of a format this build does not know is refused with every file of
//! the directory as it was (no `abort`, no lock file, no log opened); a store made before the file
//! existed gets one inferred from its files; a config that disagrees is adopted and logged; a
//! damaged `store.meta` is a clear error until it is deleted (it holds no message). A whole batch of
//! a newer format at the commit log's tail is refused, not cut.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use byteorder::{BigEndian, ByteOrder};
use strata_log::internals::format::{
    ATTRIBUTES_POS, BATCH_LENGTH_POS, CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE, CRC_POS, LOG_OVERHEAD, META_CRC_POS,
    META_FEATURES_POS, META_FILE, STORE_FEATURE_COMPACT_MESSAGES, STORE_META_CRC_POS, STORE_META_FEATURES_POS,
    STORE_META_FILE, STORE_META_INDEX_ENTRIES_POS, STORE_META_INDEX_SLOTS_POS, STORE_META_QUEUE_ENTRIES_POS,
    STORE_META_VERSION, STORE_META_VERSION_POS,
};
use strata_log::{Error, FlushPolicy, LogConfig, Message, MessageStore, StoreConfig};

/// A small store: 100-entry queue files, 64-slot index files of 256 entries.
fn small() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 1 << 20, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        queue_entries_per_file: 100,
        index_slots: 64,
        index_entries: 256,
        ..StoreConfig::default()
    }
}

/// A closed store of `n` messages in `orders` queue 0, made with `config`.
fn store_of(root: &Path, n: u64, config: StoreConfig) {
    let store = MessageStore::open(root, config).unwrap();
    for i in 0..n {
        store.put(&Message::new("orders", 0, format!("m{i}")).with_keys([format!("k{i}")])).unwrap();
    }
    store.close().unwrap();
}

/// Every file and directory under `root`, by path, with the bytes of each file.
fn tree(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                stack.push(path);
                found.insert(relative, None);
            } else {
                found.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    found
}

/// Rewrites a meta file with `edit` applied and its CRC (at `crc_pos`) recomputed.
fn edit(path: &Path, crc_pos: usize, edit: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(path).unwrap();
    edit(&mut bytes);
    let crc = crc32fast::hash(&bytes[..crc_pos]);
    bytes[crc_pos..crc_pos + 4].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// The store's lock file goes too, so a refusal that created it would show.
fn without_lock(root: &Path) {
    std::fs::remove_file(root.join("commitlog/.lock")).unwrap();
}

fn recorded(root: &Path) -> (u64, u32, u32) {
    let bytes = std::fs::read(root.join(STORE_META_FILE)).unwrap();
    (
        BigEndian::read_u64(&bytes[STORE_META_QUEUE_ENTRIES_POS..]),
        BigEndian::read_u32(&bytes[STORE_META_INDEX_SLOTS_POS..]),
        BigEndian::read_u32(&bytes[STORE_META_INDEX_ENTRIES_POS..]),
    )
}

#[test]
fn a_new_store_records_its_parameters() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 3, small());
    assert_eq!(recorded(root.path()), (100, 64, 256));
    let config = StoreConfig::default().with_recorded_parameters(root.path()).unwrap();
    assert_eq!((config.queue_entries_per_file, config.index_slots, config.index_entries), (100, 64, 256));
    assert_eq!(config.log.segment_bytes, 1 << 20, "the commit log's recorded parameters too");
}

fn features(root: &Path) -> u64 {
    BigEndian::read_u64(&std::fs::read(root.join(STORE_META_FILE)).unwrap()[STORE_META_FEATURES_POS..])
}

/// Builds before the compact message encoding knew no feature bit and refuse a store whose
/// `store.meta` has one: a new store records the encoding at once, and a store those builds made
/// gets it at its first writer open (not at a read-only one), before any put.
#[test]
fn the_compact_message_encoding_is_recorded_before_any_put() {
    let root = tempfile::tempdir().unwrap();
    MessageStore::open(root.path(), small()).unwrap().close().unwrap();
    assert_eq!(features(root.path()), STORE_FEATURE_COMPACT_MESSAGES, "a new store, before any put");
    store_of(root.path(), 3, small());
    let path = root.path().join(STORE_META_FILE);
    edit(&path, STORE_META_CRC_POS, |b| b[STORE_META_FEATURES_POS + 7] = 0);
    let read_only = MessageStore::open_read_only(root.path(), small()).unwrap();
    assert_eq!(read_only.get_messages("orders", 0, 0, 10, None).unwrap().messages.len(), 3);
    drop(read_only);
    assert_eq!(features(root.path()), 0, "a read-only open writes nothing");
    let store = MessageStore::open(root.path(), small()).unwrap();
    assert_eq!(features(root.path()), STORE_FEATURE_COMPACT_MESSAGES, "recorded at the writer open");
    assert_eq!(recorded(root.path()), (100, 64, 256), "the parameters kept");
    store.put(&Message::new("orders", 0, "m3")).unwrap();
    assert_eq!(store.get_messages("orders", 0, 0, 10, None).unwrap().messages.len(), 4);
}

#[test]
fn a_store_of_an_unknown_feature_or_version_is_refused_with_nothing_changed() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 3, small());
    without_lock(root.path());
    let path = root.path().join(STORE_META_FILE);
    edit(&path, STORE_META_CRC_POS, |b| b[STORE_META_FEATURES_POS + 7] = 0b1000);
    let before = tree(root.path());
    let error = MessageStore::open(root.path(), small()).err().expect("refused");
    assert!(matches!(&error, Error::UnsupportedFormat { path: p, .. } if *p == path), "{error:?}");
    assert!(error.to_string().contains("store format features 0x8"), "{error}");
    assert_eq!(tree(root.path()), before, "no abort, no lock file, no log opened");
    assert!(StoreConfig::default().with_recorded_parameters(root.path()).is_err(), "tools refuse it too");
    edit(&path, STORE_META_CRC_POS, |b| {
        b[STORE_META_FEATURES_POS + 7] = 0;
        BigEndian::write_u16(&mut b[STORE_META_VERSION_POS..], STORE_META_VERSION + 1);
    });
    let before = tree(root.path());
    let error = MessageStore::open(root.path(), small()).err().expect("refused");
    assert!(error.to_string().contains(&format!("store format version {}", STORE_META_VERSION + 1)), "{error}");
    assert_eq!(tree(root.path()), before);
}

#[test]
fn a_commit_log_of_an_unknown_feature_is_refused_with_nothing_changed() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 3, small());
    without_lock(root.path());
    edit(&root.path().join("commitlog").join(META_FILE), META_CRC_POS, |b| b[META_FEATURES_POS + 7] = 0b10);
    let before = tree(root.path());
    let error = MessageStore::open(root.path(), small()).err().expect("refused");
    assert!(matches!(error, Error::UnsupportedFormat { .. }), "{error:?}");
    assert_eq!(tree(root.path()), before);
}

#[test]
fn a_newer_batch_at_the_commit_logs_tail_is_refused_not_cut() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 5, small());
    let log = root.path().join("commitlog");
    // As a crash before the log's first checkpoint leaves it: every batch past the recovery point.
    std::fs::remove_file(log.join(CLEAN_SHUTDOWN_FILE)).unwrap();
    std::fs::remove_file(log.join(CHECKPOINT_FILE)).unwrap();
    let segment = log.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let mut last = 0;
    let mut at = 0;
    while at + 12 <= bytes.len() && bytes[at..at + 12].iter().any(|&b| b != 0) {
        last = at;
        at += LOG_OVERHEAD + BigEndian::read_u32(&bytes[at + BATCH_LENGTH_POS..]) as usize;
    }
    bytes[last + ATTRIBUTES_POS] |= 0x40; // bit 14: no build defines it
    let crc = crc32fast::hash(&bytes[last + ATTRIBUTES_POS..at]);
    BigEndian::write_u32(&mut bytes[last + CRC_POS..], crc);
    std::fs::write(&segment, bytes).unwrap();
    let before = tree(root.path());
    let error = MessageStore::open(root.path(), small()).err().expect("refused");
    assert!(matches!(&error, Error::UnsupportedFormat { path, .. } if *path == segment), "{error:?}");
    assert!(error.to_string().contains(&format!("position {last}")), "{error}");
    assert_eq!(tree(root.path()), before, "nothing cut");
}

#[test]
fn a_store_made_before_store_meta_gets_one_inferred_from_its_files() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 150, small());
    std::fs::remove_file(root.path().join(STORE_META_FILE)).unwrap();
    // A read-only look infers the same and writes nothing.
    let config = StoreConfig::default().with_recorded_parameters(root.path()).unwrap();
    assert_eq!((config.queue_entries_per_file, config.index_slots, config.index_entries), (100, 64, 256));
    assert!(!root.path().join(STORE_META_FILE).exists());
    let store = MessageStore::open(root.path(), StoreConfig::default()).unwrap();
    let config = store.config();
    assert_eq!((config.queue_entries_per_file, config.index_slots, config.index_entries), (100, 64, 256));
    store.close().unwrap();
    assert_eq!(recorded(root.path()), (100, 64, 256));
}

#[test]
fn a_store_without_store_meta_or_derived_files_records_its_config() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 0, small());
    std::fs::remove_file(root.path().join(STORE_META_FILE)).unwrap();
    let config = StoreConfig { queue_entries_per_file: 7, ..small() };
    MessageStore::open(root.path(), config).unwrap().close().unwrap();
    assert_eq!(recorded(root.path()), (7, 64, 256));
}

#[test]
fn a_config_that_disagrees_is_adopted_and_logged() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 150, small());
    let lines = Lines::default();
    let config = StoreConfig { queue_entries_per_file: 1_000, index_slots: 64, ..small() };
    let store = tracing::subscriber::with_default(lines.clone(), || MessageStore::open(root.path(), config)).unwrap();
    assert_eq!(store.config().queue_entries_per_file, 100);
    let said = lines.0.lock().unwrap().clone();
    let adopted: Vec<&String> = said.iter().filter(|l| l.contains("queue_entries_per_file 1000 → 100")).collect();
    assert_eq!(adopted.len(), 1, "one line names the value replaced: {said:?}");
    assert!(!adopted[0].contains("index_slots"), "only what differed: {}", adopted[0]);
    for i in 150..250 {
        store.put(&Message::new("orders", 0, format!("m{i}"))).unwrap();
    }
    store.close().unwrap();
    let queue = root.path().join("consumequeue/orders/0");
    for first in [0, 100, 200] {
        let len = std::fs::metadata(queue.join(format!("{first:020}.cq"))).unwrap().len();
        assert_eq!(len, 100 * 20, "file {first} has the recorded size");
    }
    assert_eq!(recorded(root.path()), (100, 64, 256), "the record is unchanged");
}

/// A damaged `store.meta` cannot vouch for the format: every open refuses it, naming it, and
/// changes nothing. It holds no message: once deleted, the next writer open infers the same
/// parameters from the store's files.
#[test]
fn a_damaged_store_meta_is_refused_until_deleted() {
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 150, small());
    without_lock(root.path());
    let path = root.path().join(STORE_META_FILE);
    for damage in [&b"junk"[..], &[0x53, 0x53, 0x4d, 0x44, 0x80, 0x01, 0, 0, 0, 0, 1, 2]] {
        std::fs::write(&path, damage).unwrap();
        let before = tree(root.path());
        let refusals = [
            MessageStore::open(root.path(), small()).err(),
            StoreConfig::default().with_recorded_parameters(root.path()).err(),
        ];
        for refused in refusals {
            let error = refused.expect("refused");
            assert!(matches!(&error, Error::Corrupt { path: p, .. } if *p == path), "{error:?}");
        }
        assert_eq!(tree(root.path()), before, "nothing changed");
    }
    std::fs::remove_file(&path).unwrap();
    let store = MessageStore::open(root.path(), StoreConfig::default()).unwrap();
    assert_eq!(store.config().queue_entries_per_file, 100);
    assert_eq!(store.get_messages("orders", 0, 0, 1_000, None).unwrap().messages.len(), 150);
    store.close().unwrap();
}

/// The messages of `info` and higher events, with their fields, one line each.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl tracing::Subscriber for Lines {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// `strata verify` and `dump` of a store: the recorded parameters are reported; a missing
/// `store.meta` is a note, a damaged one an error, an unknown feature refuses the check.
#[test]
fn verify_and_dump_report_store_meta() {
    use strata_log::internals::inspect::store::{StoreDump, dump_store, verify_store};
    let root = tempfile::tempdir().unwrap();
    store_of(root.path(), 10, small());
    let report = verify_store(root.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.findings);
    let parameters = report.parameters.expect("recorded");
    assert_eq!((parameters.queue_entries_per_file, parameters.index_slots, parameters.index_entries), (100, 64, 256));
    let dump = dump_store(root.path()).unwrap();
    let meta = dump.files.iter().find_map(|f| match f {
        StoreDump::StoreMeta(d) => d.meta,
        _ => None,
    });
    assert_eq!(meta.map(|m| m.parameters), Some(parameters));
    let path = root.path().join(STORE_META_FILE);
    std::fs::write(&path, b"junk").unwrap();
    let report = verify_store(root.path()).unwrap();
    assert!(!report.is_clean());
    assert!(report.findings.iter().any(|f| f.file == path && f.problem.contains("holds no message")), "{report:?}");
    std::fs::remove_file(&path).unwrap();
    let report = verify_store(root.path()).unwrap();
    assert!(report.is_clean() && report.findings.iter().any(|f| f.file == path), "a note: {:?}", report.findings);
    MessageStore::open(root.path(), small()).unwrap().close().unwrap();
    edit(&path, STORE_META_CRC_POS, |b| b[STORE_META_FEATURES_POS] = 1);
    assert!(matches!(verify_store(root.path()), Err(Error::UnsupportedFormat { .. })));
    assert!(matches!(dump_store(root.path()), Err(Error::UnsupportedFormat { .. })));
}
