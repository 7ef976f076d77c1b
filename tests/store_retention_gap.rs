//! Retention that removes messages before dispatch reached them (the commit log's own retention,
//! by time or size, while dispatch lagged, or before a reopen) leaves a gap in a queue's
//! numbering: the queue goes on past it (placeholders a read skips), never refusing the messages
//! after it.
#![allow(clippy::unwrap_used)]

use strata_log::{FlushPolicy, GetStatus, Header, Log, LogConfig, Message, MessageStore, Record, StoreConfig};

fn config() -> StoreConfig {
    StoreConfig {
        log: LogConfig { segment_bytes: 8 << 10, flush_policy: FlushPolicy::Never, ..StoreConfig::default().log },
        ..StoreConfig::default()
    }
}

/// Appends to the commit log, behind the store's back, what a put of message `queue_offset` of
/// `t`/0 would have stored: as if the store crashed after storing them, before dispatching them.
fn append_undispatched(log: &Log, queue_offsets: std::ops::Range<u64>) {
    for queue_offset in queue_offsets {
        let (queue, offset) = (0u32.to_be_bytes(), queue_offset.to_be_bytes());
        let headers = [
            Header { key: "strata.topic", value: Some(b"t") },
            Header { key: "strata.queue", value: Some(&queue) },
            Header { key: "strata.qoffset", value: Some(&offset) },
        ];
        let body = format!("lost {queue_offset}");
        log.append(&[Record::new(body.as_bytes()).with_headers(&headers)]).unwrap();
    }
}

#[test]
fn a_queue_goes_on_past_messages_retention_removed_before_dispatch() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(dir.path(), config()).unwrap();
    for i in 0..10 {
        store.put(&Message::new("t", 0, format!("kept {i}"))).unwrap();
    }
    store.close().unwrap();

    // 300 messages stored and never dispatched, then removed by the log's retention (a prefix
    // deletion here) together with everything before them.
    let log = Log::open(dir.path().join("commitlog"), config().log).unwrap();
    append_undispatched(&log, 10..310);
    log.append(&[Record::new(b"filler")]).unwrap();
    let start = log.delete_records_before(305).unwrap();
    assert!(start > 10 && start <= 305, "whole segments went: start {start}");
    log.close().unwrap();
    // Message q of the queue is at log offset q: queue offsets below `start` are gone.

    let store = MessageStore::open(dir.path(), config()).unwrap();
    let next = store.put(&Message::new("t", 0, "after")).unwrap();
    assert_eq!(next.queue_offset, 310, "numbering goes on after the removed and the surviving messages");
    let below = store.get_messages("t", 0, 0, 1000, None).unwrap();
    assert_eq!((below.status, below.next_queue_offset), (GetStatus::OffsetTooSmall, start));
    let got = store.get_messages("t", 0, start, 1000, None).unwrap();
    assert_eq!(got.status, GetStatus::Found);
    let bodies: Vec<String> = got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
    let mut expected: Vec<String> = (start..310).map(|q| format!("lost {q}")).collect();
    expected.push("after".to_owned());
    assert_eq!(bodies, expected, "the messages still in the log, then the new one");
    assert_eq!(store.metrics().entries_refused, 0);
    store.close().unwrap();
}
