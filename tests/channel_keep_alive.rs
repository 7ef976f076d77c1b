//! Keep-alive both ways, and the limits a transaction meets:
//! - a take on an empty channel waits `keep_alive_ms`, then returns `None`; a commit from another
//!   thread (or a rollback returning a take) wakes it at once, long before the keep-alive ends;
//! - a commit that would pass `capacity` (or the byte limit) waits `keep_alive_ms`, then fails
//!   with `ChannelFull`, nothing applied and the transaction still open; a take commit from
//!   another thread during the wait lets it through at once;
//! - more than `transaction_capacity` puts or takes, and a batch larger than `max_batch_bytes`,
//!   are refused with the transaction left open; `transaction_capacity > capacity` is refused at
//!   open.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strata_log::{Channel, ChannelConfig, Error, Event, LogConfig};

const KEEP_ALIVE: Duration = Duration::from_millis(300);

fn config() -> ChannelConfig {
    ChannelConfig {
        capacity: 4,
        transaction_capacity: 4,
        byte_capacity: 1_000,
        keep_alive_ms: KEEP_ALIVE.as_millis() as u64,
        ..ChannelConfig::default()
    }
}

fn put(channel: &Channel, bodies: &[&str]) {
    let mut tx = channel.transaction();
    for body in bodies {
        tx.put(Event::new(*body)).unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn a_take_on_an_empty_channel_waits_the_keep_alive_then_returns_none() {
    let dir = tempfile::tempdir().unwrap();
    let channel = Channel::open(dir.path(), config()).unwrap();
    let mut tx = channel.transaction();
    let started = Instant::now();
    assert!(tx.take().unwrap().is_none());
    let waited = started.elapsed();
    assert!(waited >= KEEP_ALIVE, "returned after {waited:?}");
    assert!(waited < KEEP_ALIVE * 5, "returned after {waited:?}");
    assert_eq!(channel.metrics().unwrap().take_attempts, 1);
}

#[test]
fn a_waiting_take_wakes_at_a_commit_and_at_a_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let config = ChannelConfig { keep_alive_ms: 20_000, ..config() };
    let channel = Channel::open(dir.path(), config).unwrap();
    let mut taker = channel.transaction();
    let started = Instant::now();
    let (got, waited) = std::thread::scope(|s| {
        let waiting = s.spawn(|| (taker.take().unwrap(), started.elapsed()));
        std::thread::sleep(Duration::from_millis(100));
        put(&channel, &["late"]);
        waiting.join().unwrap()
    });
    assert_eq!(got.unwrap().body(), b"late");
    assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5), "woke after {waited:?}");

    // `taker` holds "late": another taker waits until the rollback returns it.
    let mut other = channel.transaction();
    let started = Instant::now();
    let (got, waited) = std::thread::scope(|s| {
        let waiting = s.spawn(|| (other.take().unwrap(), started.elapsed()));
        std::thread::sleep(Duration::from_millis(100));
        taker.rollback().unwrap();
        waiting.join().unwrap()
    });
    assert_eq!(got.unwrap().body(), b"late", "the rollback returned it");
    assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5), "woke after {waited:?}");
}

#[test]
fn a_commit_past_capacity_waits_the_keep_alive_then_fails_with_nothing_applied() {
    let dir = tempfile::tempdir().unwrap();
    let channel = Channel::open(dir.path(), config()).unwrap();
    put(&channel, &["a", "b", "c"]);
    let mut tx = channel.transaction();
    tx.put(Event::new("d")).unwrap();
    tx.put(Event::new("e")).unwrap();
    let started = Instant::now();
    let refused = tx.commit();
    let waited = started.elapsed();
    assert!(matches!(refused, Err(Error::ChannelFull { events: 5, capacity: 4, .. })), "{refused:?}");
    assert!(waited >= KEEP_ALIVE && waited < KEEP_ALIVE * 5, "failed after {waited:?}");
    assert_eq!((channel.size(), channel.remaining_capacity(), tx.puts()), (3, 1, 2), "nothing applied, still open");
    assert_eq!(channel.metrics().unwrap().channel_full, 1);

    // A take commit from another thread makes room while the commit waits: it goes through then.
    let started = Instant::now();
    let waited = std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            tx.commit().unwrap();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(100));
        let mut taker = channel.transaction();
        assert_eq!(taker.take().unwrap().unwrap().body(), b"a");
        taker.commit().unwrap();
        waiting.join().unwrap()
    });
    // Had it not woken, it would have failed with `ChannelFull` at the keep-alive.
    assert!(waited >= Duration::from_millis(100), "went through after {waited:?}, before the take committed");
    let mut taker = channel.transaction();
    let bodies: Vec<Vec<u8>> = (0..4).map(|_| taker.take().unwrap().unwrap().body().to_vec()).collect();
    assert_eq!(bodies, [b"b", b"c", b"d", b"e"]);
}

#[test]
fn taken_events_count_until_their_take_commits() {
    let dir = tempfile::tempdir().unwrap();
    let channel = Channel::open(dir.path(), config()).unwrap();
    put(&channel, &["a", "b", "c", "d"]);
    let mut taker = channel.transaction();
    taker.take().unwrap().unwrap();
    assert_eq!((channel.size(), channel.remaining_capacity()), (3, 0), "a take hides it but it still counts");
    let mut putter = channel.transaction();
    putter.put(Event::new("e")).unwrap();
    assert!(matches!(putter.commit(), Err(Error::ChannelFull { .. })));
    taker.commit().unwrap();
    assert_eq!(channel.remaining_capacity(), 1);
    putter.commit().unwrap();
}

#[test]
fn a_commit_past_the_byte_limit_waits_then_fails() {
    let dir = tempfile::tempdir().unwrap();
    // Bodies may hold 100 × 80% = 80 bytes; headers do not count.
    let config = ChannelConfig { byte_capacity: 100, keep_alive_ms: 50, ..config() };
    let channel = Channel::open(dir.path(), config).unwrap();
    let mut tx = channel.transaction();
    tx.put(Event::new(vec![b'x'; 60]).with_header("big", vec![b'h'; 500])).unwrap();
    tx.commit().unwrap();
    tx.put(Event::new(vec![b'y'; 21])).unwrap();
    let refused = tx.commit();
    assert!(matches!(refused, Err(Error::ChannelFull { bytes: 81, byte_limit: 80, .. })), "{refused:?}");
    assert_eq!(channel.metrics().unwrap().bytes, 60);
    tx.rollback().unwrap();
    tx.put(Event::new(vec![b'z'; 20])).unwrap();
    tx.commit().unwrap();
    assert_eq!(channel.metrics().unwrap().bytes, 80);
    // Bytes are released when the take commits, not when it takes.
    let mut taker = channel.transaction();
    taker.take().unwrap().unwrap();
    assert_eq!(channel.metrics().unwrap().bytes, 80);
    taker.commit().unwrap();
    assert_eq!(channel.metrics().unwrap().bytes, 20);
}

#[test]
fn transaction_limits_refuse_and_leave_the_transaction_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = ChannelConfig {
        capacity: 100,
        transaction_capacity: 3,
        keep_alive_ms: 0,
        log: LogConfig { max_batch_bytes: 400, ..ChannelConfig::default().log },
        ..ChannelConfig::default()
    };
    let channel = Channel::open(dir.path(), config).unwrap();
    let mut tx = channel.transaction();
    for body in ["a", "b", "c"] {
        tx.put(Event::new(body)).unwrap();
    }
    let refused = tx.put(Event::new("d"));
    assert!(matches!(refused, Err(Error::TransactionCapacity { what: "put", capacity: 3 })), "{refused:?}");
    assert!(refused.unwrap_err().to_string().contains("commit more often"));
    tx.commit().unwrap();
    for _ in 0..3 {
        tx.take().unwrap().unwrap();
    }
    put(&channel, &["e"]);
    assert!(matches!(tx.take(), Err(Error::TransactionCapacity { what: "take", capacity: 3 })));
    assert_eq!(tx.takes(), 3);
    tx.commit().unwrap();
    assert_eq!(channel.size(), 1, "e is still there");

    // A batch of the log is at most 400 bytes: a 300-byte event fits, a second does not.
    tx.put(Event::new(vec![0; 300])).unwrap();
    let refused = tx.put(Event::new(vec![1; 300]));
    assert!(matches!(refused, Err(Error::TransactionTooLarge { max: 400, .. })), "{refused:?}");
    assert_eq!(tx.puts(), 1);
    tx.commit().unwrap();
    let mut taker = channel.transaction();
    assert_eq!(taker.take().unwrap().unwrap().body(), b"e");
    assert_eq!(taker.take().unwrap().unwrap().body(), [0; 300]);
    taker.commit().unwrap();
}

#[test]
fn a_transaction_capacity_above_the_capacity_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = ChannelConfig { capacity: 10, transaction_capacity: 11, ..ChannelConfig::default() };
    let refused = Channel::open(dir.path(), config);
    assert!(matches!(refused, Err(Error::InvalidConfig { field: "transaction_capacity", .. })), "{refused:?}");
}

#[test]
fn close_wakes_waiters_and_every_later_call_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let config = ChannelConfig { keep_alive_ms: 20_000, ..config() };
    let channel = Channel::open(dir.path(), config).unwrap();
    let mut taker = channel.transaction();
    let started = Instant::now();
    let (took, waited) = std::thread::scope(|s| {
        let waiting = s.spawn(|| (taker.take(), started.elapsed()));
        std::thread::sleep(Duration::from_millis(100));
        channel.clone().close().unwrap();
        waiting.join().unwrap()
    });
    assert!(matches!(took, Err(Error::Closed)), "{took:?}");
    assert!(waited < Duration::from_secs(5), "woke after {waited:?}");
    assert!(matches!(taker.put(Event::new("x")), Err(Error::Closed)));
    assert!(matches!(channel.metrics(), Err(Error::Closed)));
    // The directory is free again.
    drop((taker, channel));
    Channel::open(dir.path(), ChannelConfig::default()).unwrap().close().unwrap();
}
