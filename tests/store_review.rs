//! Regressions found in review of the message store: hostile inputs that panicked or wedged the
//! store, and a deletion racing dispatch that left a queue refusing every later message.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use strata_log::{GetStatus, Message, MessageStore, StoreConfig, StoreError};

#[test]
fn an_unbounded_timeout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), StoreConfig::default()).unwrap();
    let handle = store.put_nowait(&Message::new("t", 0, "m0")).unwrap();
    assert!(handle.wait_timeout(Duration::MAX).unwrap().is_some());
    let got = store.get_messages_wait("t", 0, 0, 10, None, Duration::MAX).unwrap();
    assert_eq!(got.status, GetStatus::Found);
    store.close().unwrap();
}

#[test]
fn a_message_with_more_keys_than_an_index_file_holds_is_refused_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig { index_entries: 8, ..StoreConfig::default() };
    let store = MessageStore::open(dir.path(), config.clone()).unwrap();
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let refused = store.put(&Message::new("t", 0, "many keys").with_keys(keys));
    assert!(matches!(refused, Err(StoreError::InvalidField { what: "keys", .. })), "{refused:?}");
    // The store goes on: the next put is numbered 0 and dispatched, and the store reopens.
    let put = store.put(&Message::new("t", 0, "after").with_keys(["a"])).unwrap();
    assert_eq!(put.queue_offset, 0);
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), config).unwrap();
    assert_eq!(store.get_messages("t", 0, 0, 10, None).unwrap().messages.len(), 1);
    store.close().unwrap();
}
