//! `log.meta`: a log directory records its format version and features and the parameters it
//! is made with. A directory whose `log.meta` names a version or a feature this build does not
//! know is refused before anything is touched (a newer format's data must never be taken for a
//! torn tail and cut); a log made before the file existed gets one at its first writer open; the
//! recorded parameters are what tools reopen a log with.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use strata_log::internals::format::{META_CRC_POS, META_FEATURES_POS, META_FILE, META_VERSION, META_VERSION_POS};
use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

/// Every file of `dir` with its bytes (but the lock file, which holds nothing).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let names = common::file_names(dir).into_iter().filter(|n| n != ".lock");
    names.map(|n| (n.clone(), std::fs::read(dir.join(&n)).unwrap())).collect()
}

/// A log of 50 records left as a crash leaves it: no clean-shutdown marker, a torn tail.
fn crashed_log(dir: &Path) {
    let config = LogConfig { segment_bytes: 1 << 20, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let log = Log::open(dir, config).unwrap();
    for i in 0..50u32 {
        log.append(&[Record::new(&i.to_be_bytes())]).unwrap();
    }
    log.close().unwrap();
    std::fs::remove_file(dir.join(".clean-shutdown")).unwrap();
    let segment = dir.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0x42; 30]); // half a batch after the last whole one
    std::fs::write(&segment, bytes).unwrap();
}

/// Rewrites `log.meta` with `edit` applied and its CRC recomputed.
fn edit_meta(dir: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(META_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    edit(&mut bytes);
    let crc = crc32fast::hash(&bytes[..META_CRC_POS]);
    bytes[META_CRC_POS..META_CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&path, bytes).unwrap();
}

#[test]
fn a_directory_of_a_newer_format_version_is_refused_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    edit_meta(dir.path(), |b| {
        b[META_VERSION_POS..META_VERSION_POS + 2].copy_from_slice(&(META_VERSION + 1).to_be_bytes())
    });
    let before = snapshot(dir.path());
    for opened in
        [Log::open(dir.path(), LogConfig::default()).err(), Log::open_read_only(dir.path(), LogConfig::default()).err()]
    {
        let error = opened.expect("refused");
        assert!(matches!(error, Error::UnsupportedFormat { .. }), "{error:?}");
        assert!(error.to_string().contains(&format!("format version {}", META_VERSION + 1)), "{error}");
    }
    assert_eq!(snapshot(dir.path()), before, "the torn tail was not cut, no file changed");
}

#[test]
fn a_format_feature_this_build_does_not_know_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    edit_meta(dir.path(), |b| b[META_FEATURES_POS + 7] = 0b100);
    let before = snapshot(dir.path());
    let error = Log::open(dir.path(), LogConfig::default()).expect_err("refused");
    assert!(error.to_string().contains("format features 0x4"), "{error}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_log_made_before_log_meta_gets_one_at_its_first_writer_open() {
    let dir = tempfile::tempdir().unwrap();
    let made = LogConfig { segment_bytes: 1 << 20, index_interval_bytes: 64, ..LogConfig::default() };
    let log = Log::open(dir.path(), made.clone()).unwrap();
    log.append(&[Record::new(b"a")]).unwrap();
    log.close().unwrap();
    std::fs::remove_file(dir.path().join(META_FILE)).unwrap();
    // Nothing recorded: the config is kept as given; a read-only open writes nothing.
    let config = LogConfig::default().with_recorded_parameters(dir.path()).unwrap();
    assert_eq!(config.segment_bytes, LogConfig::default().segment_bytes);
    drop(Log::open_read_only(dir.path(), LogConfig::default()).unwrap());
    assert!(!dir.path().join(META_FILE).exists());
    Log::open(dir.path(), made).unwrap().close().unwrap();
    let config = LogConfig::default().with_recorded_parameters(dir.path()).unwrap();
    assert_eq!((config.segment_bytes, config.index_interval_bytes), (1 << 20, 64));
}

/// A damaged `log.meta` cannot say whether the directory is of a newer format (a flipped version
/// byte must not read as "newer", nor a damaged newer file as "older"): every open refuses it,
/// naming the file, and changes nothing; deleting it (it holds no record) lets the next writer
/// open write it again.
#[test]
fn a_damaged_log_meta_is_refused_by_name_until_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    for damage in [&b"garbage"[..], &[0x53, 0x4c, 0x4d, 0x44, 0x80, 0x01, 0, 0, 0, 0, 1, 2]] {
        std::fs::write(dir.path().join(META_FILE), damage).unwrap();
        let before = snapshot(dir.path());
        let refusals = [
            Log::open(dir.path(), LogConfig::default()).err(),
            Log::open_read_only(dir.path(), LogConfig::default()).err(),
            LogConfig::default().with_recorded_parameters(dir.path()).err(),
        ];
        for refused in refusals {
            let error = refused.expect("refused");
            assert!(matches!(&error, Error::Corrupt { path, .. } if path.ends_with(META_FILE)), "{error:?}");
        }
        assert_eq!(snapshot(dir.path()), before, "nothing changed");
    }
    std::fs::remove_file(dir.path().join(META_FILE)).unwrap();
    let config = LogConfig { index_interval_bytes: 99, ..LogConfig::default() };
    Log::open(dir.path(), config).unwrap().close().unwrap();
    assert_eq!(LogConfig::default().with_recorded_parameters(dir.path()).unwrap().index_interval_bytes, 99);
}

/// Flipping the version's top bit is damage, not a newer version: the CRC covers it.
#[test]
fn a_flipped_version_byte_is_damage_not_a_newer_format() {
    let dir = tempfile::tempdir().unwrap();
    Log::open(dir.path(), LogConfig::default()).unwrap().close().unwrap();
    let path = dir.path().join(META_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[META_VERSION_POS] ^= 0x80;
    std::fs::write(&path, bytes).unwrap();
    let error = Log::open(dir.path(), LogConfig::default()).expect_err("refused");
    assert!(matches!(error, Error::Corrupt { .. }), "{error:?}");
}

/// The guard comes before the directory lock: a refused writer open leaves no lock file behind
/// (every name and byte of the directory as it was).
#[test]
fn a_refused_open_creates_not_even_the_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    crashed_log(dir.path());
    edit_meta(dir.path(), |b| b[META_FEATURES_POS] = 0x80);
    std::fs::remove_file(dir.path().join(".lock")).unwrap();
    let every_file = || {
        common::file_names(dir.path())
            .into_iter()
            .map(|n| {
                let bytes = std::fs::read(dir.path().join(&n)).unwrap();
                (n, bytes)
            })
            .collect::<Vec<_>>()
    };
    let before = every_file();
    let error = Log::open(dir.path(), LogConfig::default()).expect_err("refused");
    assert!(error.to_string().contains("format features 0x8000000000000000"), "{error}");
    assert_eq!(every_file(), before);
}
