//! Regressions found in review of the message store: hostile inputs that panicked or wedged the
//! store, and a deletion racing dispatch that left a queue refusing every later message.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_log::{Dispatch, DispatchRequest, Error, GetStatus, Message, MessageStore, Result, StoreConfig};

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
    assert!(matches!(refused, Err(Error::InvalidField { what: "keys", .. })), "{refused:?}");
    // The store goes on: the next put is numbered 0 and dispatched, and the store reopens.
    let put = store.put(&Message::new("t", 0, "after").with_keys(["a"])).unwrap();
    assert_eq!(put.queue_offset, 0);
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), config).unwrap();
    assert_eq!(store.get_messages("t", 0, 0, 10, None).unwrap().messages.len(), 1);
    store.close().unwrap();
}

/// A user dispatcher that blocks on the first message it sees until told to go on.
struct Blocker {
    reached: Option<mpsc::Sender<()>>,
    go: Arc<Mutex<Option<mpsc::Receiver<()>>>>,
}

impl Dispatch for Blocker {
    fn dispatch(&mut self, _request: &DispatchRequest<'_>) -> Result<()> {
        if let Some(reached) = self.reached.take() {
            reached.send(()).unwrap();
            let go = self.go.lock().take().unwrap();
            go.recv().unwrap();
        }
        Ok(())
    }
}

#[test]
fn deleting_messages_dispatch_has_not_reached_keeps_their_queue_usable() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), StoreConfig::default()).unwrap();
    let (reached_tx, reached_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    store.register_dispatcher(Box::new(Blocker { reached: Some(reached_tx), go: Arc::new(Mutex::new(Some(go_rx))) }));
    // The dispatcher thread takes message 0 and blocks in the user dispatcher (holding dispatch).
    let first = store.put_nowait(&Message::new("t", 0, "m0")).unwrap();
    reached_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = store.put_nowait(&Message::new("t", 0, "m1")).unwrap();
    assert_eq!(second.result().queue_offset, 1);
    std::thread::scope(|scope| {
        let deleting = scope.spawn(|| store.delete_messages_before(2));
        std::thread::sleep(Duration::from_millis(100));
        go_tx.send(()).unwrap();
        deleting.join().unwrap().unwrap();
    });
    first.wait().unwrap();
    second.wait().unwrap();
    // Every later put to the queue is acknowledged and readable at its offset.
    for i in 2..5u64 {
        let put = store.put(&Message::new("t", 0, format!("m{i}"))).unwrap();
        assert_eq!(put.queue_offset, i);
        let got = store.get_messages("t", 0, i, 1, None).unwrap();
        assert_eq!(got.status, GetStatus::Found, "put {put:?} is not readable: {got:?}");
        assert_eq!(got.messages[0].body(), format!("m{i}").as_bytes());
    }
    assert_eq!(store.metrics().entries_refused, 0);
    store.close().unwrap();
}

/// Panics the first time it is handed a message.
struct PanicsOnce(bool);

impl strata_log::Dispatch for PanicsOnce {
    fn dispatch(&mut self, _: &strata_log::DispatchRequest<'_>) -> strata_log::Result<()> {
        if !self.0 {
            self.0 = true;
            panic!("a user dispatcher's bug");
        }
        Ok(())
    }
}

#[test]
fn a_panicking_user_dispatcher_fails_the_dispatch_without_losing_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = strata_log::MessageStore::open(dir.path(), strata_log::StoreConfig::default()).unwrap();
    store.register_dispatcher(Box::new(PanicsOnce(false)));
    let put = store.put(&strata_log::Message::new("t", 0, "m0"));
    assert!(matches!(put, Err(strata_log::Error::DispatchFailed { log_offset: 0, .. })), "{put:?}");
    // The dispatcher thread retries; the message reaches its queue, and the next put works.
    let next = store.put(&strata_log::Message::new("t", 0, "m1")).unwrap();
    assert_eq!(next.queue_offset, 1);
    let got = store.get_messages("t", 0, 0, 10, None).unwrap();
    assert_eq!(got.messages.len(), 2, "{got:?}");
    store.close().unwrap();
}
