//! `Transaction`: puts and takes that commit or roll back together (Flume's `Transaction`).

use std::fmt;

use crate::error::{Error, Result};

use super::close::Handle;
use super::commit::Lists;
use super::event::Event;
use super::metrics::Counters;

/// Puts and takes on a [`Channel`](crate::Channel) that commit or roll back together. Made by
/// [`Channel::transaction`](crate::Channel::transaction); it holds its channel (so it is
/// `'static`) and is `Send`, so it can move to another thread.
///
/// - [`put`](Transaction::put) stages an event: takers see it only once the transaction commits,
///   with the transaction's other puts, all at once.
/// - [`take`](Transaction::take) takes the event at the head of the channel (waiting up to
///   `keep_alive_ms` for one): no other taker sees it from then on; it is gone for good when the
///   transaction commits.
/// - [`commit`](Transaction::commit) makes both durable in one batch of the log (under
///   `FlushPolicy::Always`, before it returns); [`rollback`](Transaction::rollback) drops the
///   puts and returns the takes to the head of the channel in their order. Dropping a
///   transaction that holds anything rolls it back.
///
/// After a commit or a rollback the transaction is empty and may be used again.
///
/// ```
/// # fn main() -> strata_log::Result<()> {
/// use strata_log::{Channel, ChannelConfig, Event};
/// let dir = tempfile::tempdir().unwrap();
/// let channel = Channel::open(dir.path(), ChannelConfig::default())?;
/// let mut source = channel.transaction();
/// source.put(Event::new("a"))?;
/// source.put(Event::new("b"))?;
/// source.commit()?;
///
/// // A sink on another thread takes one event and fails: the rollback puts it back.
/// let mut sink = channel.transaction();
/// let failed = std::thread::spawn(move || -> strata_log::Result<()> {
///     assert_eq!(sink.take()?.expect("an event").body(), b"a");
///     sink.rollback()
/// });
/// failed.join().unwrap()?;
///
/// let mut sink = channel.transaction();
/// assert_eq!(sink.take()?.expect("redelivered").body(), b"a");
/// assert_eq!(sink.take()?.expect("next").body(), b"b");
/// sink.commit()?;
/// assert_eq!(channel.size(), 0);
/// channel.close()?;
/// # Ok(()) }
/// ```
pub struct Transaction {
    state: Handle,
    lists: Lists,
}

const _: () = {
    const fn send_static<T: Send + 'static>() {}
    send_static::<Transaction>();
};

impl Transaction {
    pub(crate) fn new(state: Handle) -> Transaction {
        Transaction { state, lists: Lists::default() }
    }

    /// Stages `event`: it is put when the transaction commits.
    ///
    /// Errors, with the transaction still open and the event not staged:
    /// `Error::TransactionCapacity` if it holds `transaction_capacity` puts already,
    /// `Error::TransactionTooLarge` if its batch (its puts and its take record) would exceed the
    /// log's `max_batch_bytes` (counted at the most the take record can need), `Error::Closed`.
    pub fn put(&mut self, event: Event) -> Result<()> {
        let state = &self.state;
        Counters::add(&state.counters.put_attempts, 1);
        state.check_open()?;
        let capacity = state.config.transaction_capacity;
        if self.lists.puts.len() as u64 >= capacity {
            return Err(Error::TransactionCapacity { what: "put", capacity });
        }
        let record_len = event.record_len(self.lists.puts.len());
        self.check_batch(record_len, 0)?;
        self.lists.put_records_len += record_len;
        self.lists.put_bytes += event.cost();
        self.lists.puts.push(event);
        Ok(())
    }

    /// Takes the event at the head of the channel, waiting up to `keep_alive_ms` for one if the
    /// channel is empty: `None` if none came. The event is hidden from other takers at once and
    /// gone for good once the transaction commits; a rollback returns it.
    ///
    /// Errors, with nothing taken: `Error::TransactionCapacity` if the transaction holds
    /// `transaction_capacity` takes already, `Error::TransactionTooLarge` if its take record
    /// could not fit its batch any more, `Error::Closed`.
    pub fn take(&mut self) -> Result<Option<Event>> {
        Counters::add(&self.state.counters.take_attempts, 1);
        self.state.check_open()?;
        let capacity = self.state.config.transaction_capacity;
        if self.lists.takes.len() as u64 >= capacity {
            return Err(Error::TransactionCapacity { what: "take", capacity });
        }
        self.check_batch(0, 1)?;
        let Some((offset, event)) = self.state.take()? else { return Ok(None) };
        self.lists.take_bytes += event.cost();
        self.lists.takes.push((offset, event.clone()));
        Ok(Some(event))
    }

    /// Commits the puts and takes: one batch of the log holding the put events and a take record
    /// listing the offsets taken, so the two are atomic. Under `FlushPolicy::Always` it returns
    /// once the batch is durable, and the puts are visible to takers from then on. If the puts
    /// would take the channel past `capacity` or the byte limit, it waits up to `keep_alive_ms`
    /// for takers to make room.
    ///
    /// Errors before anything is applied, with the transaction still open (commit again, or roll
    /// back): `Error::ChannelFull`, `Error::Closed`, the log refusing the batch (a full disk),
    /// `Error::DiskFull` for puts that would leave less free space than one segment and its
    /// indexes (kept so take commits, and with them the deletion of taken segments, still work
    /// on a full disk).
    /// If the log fails to make the stored batch durable (it is poisoned), the transaction is
    /// empty and the commit's fate is decided at the next open.
    pub fn commit(&mut self) -> Result<()> {
        self.state.commit(&mut self.lists)
    }

    /// Drops the puts and returns the takes to the head of the channel, in the order they were
    /// taken. Nothing of the transaction is in the log, so this never fails.
    pub fn rollback(&mut self) -> Result<()> {
        self.state.rollback(&mut self.lists);
        Ok(())
    }

    /// Puts staged.
    pub fn puts(&self) -> usize {
        self.lists.puts.len()
    }

    /// Events taken.
    pub fn takes(&self) -> usize {
        self.lists.takes.len()
    }

    /// `Error::TransactionTooLarge` unless the batch with one more put record of `put_len`
    /// bytes, or `takes` more takes, fits the log's `max_batch_bytes`.
    fn check_batch(&self, put_len: usize, takes: usize) -> Result<()> {
        let size = self.lists.batch_len(put_len, takes);
        let max = self.state.config.log.max_batch_bytes;
        if size > max { Err(Error::TransactionTooLarge { size, max }) } else { Ok(()) }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.state.rollback(&mut self.lists);
    }
}

impl fmt::Debug for Transaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction").field("puts", &self.puts()).field("takes", &self.takes()).finish()
    }
}
