//! Regression (review): a read-only view (`strata consume`, `verify`) opens files by name at each
//! read; when the writer compacted meanwhile, the name stood for the cleaned file, the view's
//! reader resumed at its old byte position there, found a cleaner batch with a later base offset
//! (which the format allows after a gap) and silently skipped 41 records compaction never
//! removes. A view now checks that a name still stands for the file it listed, and looks again
//! when it does not.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use strata_log::{FlushPolicy, Log, LogConfig, Record};

#[test]
fn a_view_reading_across_a_compaction_skips_nothing_compaction_kept() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes: 256 << 10, flush_policy: FlushPolicy::Never, ..LogConfig::default() };
    let writer = Log::open(dir.path(), config.clone()).unwrap();
    let value = [5u8; 100];
    for i in 0..6000u64 {
        // Every tenth record shares one key: compaction removes all but the last of those. Keys of
        // one length, so every batch has the same size and old positions fall on batch
        // boundaries of the cleaned file.
        let key = if i % 10 == 0 { "dup-000000".to_owned() } else { format!("k{i:09}") };
        writer.append(&[Record::new(&value).with_key(key.as_bytes())]).unwrap();
    }
    writer.flush().unwrap();
    assert!(writer.segment_count() >= 4);
    let view = Log::open_read_only(dir.path(), config.clone()).unwrap();
    let mut reader = view.read(0, 100 << 20).unwrap();
    let mut seen = BTreeSet::new();
    for record in reader.by_ref() {
        let offset = record.unwrap().offset();
        seen.insert(offset);
        if offset == 300 {
            break;
        }
    }
    writer.compact().unwrap().expect("sealed segments were dirty");
    for record in reader.by_ref() {
        seen.insert(record.unwrap().offset());
    }
    let upper = view.visible_end();
    let missing: Vec<u64> = (0..upper).filter(|o| o % 10 != 0 && !seen.contains(o)).collect();
    assert!(missing.is_empty(), "records compaction never removes, skipped by the view: {missing:?}");
}
