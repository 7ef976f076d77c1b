//! A consume-queue entry's size is only a hint for how much a get reads: a damaged one (sizes are
//! checked against their message only at the queue's tail, at open, and by `strata verify`) must
//! not make a get allocate what the sizes add up to. Alone in its test binary: before the fix, the
//! allocation failed and aborted the process.
#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileExt;

use strata_log::{GetStatus, Message, MessageStore, StoreConfig};

#[test]
fn huge_damaged_entry_sizes_do_not_size_a_get() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), StoreConfig::default()).unwrap();
    for i in 0..32 {
        store.put(&Message::new("t", 0, format!("m{i}"))).unwrap();
    }
    store.close().unwrap();
    // Entry layout: [log_offset u64][size u32][tag_hash u64]; the last entry is left whole (an open
    // checks it against its message).
    let path = dir.path().join("consumequeue/t/0").join(format!("{:020}.cq", 0));
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for entry in 0..31u64 {
        file.write_all_at(&u32::MAX.to_be_bytes(), entry * 20 + 8).unwrap();
    }
    drop(file);
    let store = MessageStore::open(dir.path(), StoreConfig::default()).unwrap();
    let got = store.get_messages("t", 0, 0, 32, None).unwrap();
    assert_eq!(got.status, GetStatus::Found);
    let bodies: Vec<&[u8]> = got.messages.iter().map(|m| m.body()).collect();
    let expected: Vec<Vec<u8>> = (0..32).map(|i| format!("m{i}").into_bytes()).collect();
    assert_eq!(bodies, expected.iter().map(Vec::as_slice).collect::<Vec<_>>());
    store.close().unwrap();
}
