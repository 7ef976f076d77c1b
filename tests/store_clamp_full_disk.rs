//! A consumer offset clamped at open on a full disk (the checkpoint lowered in place, so puts are
//! taken): puts wait until the clamp is on disk, since a put past the cut erases what tells the
//! next open the queue was cut, and a crash would then bring the old offset back (committed 40,
//! the new messages 30..40 skipped).
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

mod common;

use common::store_derived::{Shutdown, shut_down, store_with_a_cut_queue};
use strata_log::internals::format::STORE_ABORT_FILE;
use strata_log::{Error, Message, MessageStore, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig { flush_interval_ms: 3_600_000, offsets_flush_ms: 3_600_000, ..StoreConfig::default() }
}

fn run(new_body: fn(u64) -> String, puts: u64) -> (Option<u64>, u64, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    store_with_a_cut_queue(dir.path(), config());
    // A lost log tail comes with a run that did not close (and `abort` needs no new file then).
    std::fs::write(dir.path().join(STORE_ABORT_FILE), b"").unwrap();

    fail::cfg("new_file_enospc", "return").unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    assert_eq!(store.committed_offset("g", "t", 0), Some(30), "clamped at open (in memory)");
    let refused = store.put(&Message::new("t", 0, "refused"));
    fail::remove("new_file_enospc");
    assert!(matches!(refused, Err(Error::DiskFull { .. })), "a put waits for the clamp on disk: {refused:?}");
    for i in 30..30 + puts {
        assert_eq!(store.put(&Message::new("t", 0, new_body(i))).unwrap().queue_offset, i);
    }
    let crashed = shut_down(store, dir.path(), Shutdown::Crash);
    let store = MessageStore::open(&crashed, config()).unwrap();
    let committed = store.committed_offset("g", "t", 0);
    let max = store.max_queue_offset("t", 0).unwrap();
    let from = committed.unwrap_or(0);
    let got = store.get_messages("t", 0, from, 100, None).unwrap();
    let bodies = got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
    store.close().unwrap();
    (committed, max, bodies)
}

#[test]
fn a_clamp_on_a_full_disk_survives_puts_and_a_crash() {
    // Same sizes as the lost messages: the new ones land at the same log offsets.
    let (committed, max, bodies) = run(|i| format!("n{i}"), 10);
    eprintln!("same size: committed {committed:?}, queue end {max}, consumer would read {bodies:?}");
    // Longer: the log grows past the lost tail.
    let (committed2, max2, bodies2) = run(|i| format!("new-longer-body-{i}"), 12);
    eprintln!("longer: committed {committed2:?}, queue end {max2}, consumer would read {bodies2:?}");
    assert_eq!(committed, Some(30), "same size: new messages 30..40 skipped");
    assert_eq!((max, bodies.first().map(String::as_str)), (40, Some("n30")));
    assert_eq!(committed2, Some(30), "longer: new messages skipped");
    assert_eq!((max2, bodies2.first().map(String::as_str)), (42, Some("new-longer-body-30")));
}
