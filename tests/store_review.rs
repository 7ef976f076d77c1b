//! Regressions found in review of the message store: hostile inputs that panicked or wedged the
//! store, and a deletion racing dispatch that left a queue refusing every later message.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use strata_log::{GetStatus, Message, MessageStore, StoreConfig};

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
