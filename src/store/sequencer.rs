//! The put sequencer: the one place a queue offset is decided. Under its lock (the put lock) a
//! batch for one queue gets the queue's next offsets and is appended to the commit log, so the
//! log holds every queue's messages in queue-offset order; the queue's next offset moves only once
//! the append succeeded.
//!
//! A queue's first put since open starts where its consume queue ends: `open` dispatched the
//! whole commit log before it returned, so that end follows every message stored before.

use parking_lot::Mutex;

use crate::error::Result;
use crate::store::queue_map::QueueMap;

/// The next queue offset of every queue put to since open, under the put lock.
#[derive(Default)]
pub(crate) struct PutSequencer {
    next: Mutex<QueueMap<u64>>,
}

impl PutSequencer {
    /// Runs `append` under the put lock with the first queue offset of a batch of `count`
    /// messages for the queue; `seed` is asked for the queue's end at its first put since open.
    /// An `append` that fails takes no offset.
    pub(crate) fn sequence<T>(
        &self,
        topic: &str,
        queue_id: u32,
        count: u64,
        seed: impl FnOnce() -> u64,
        append: impl FnOnce(u64) -> Result<T>,
    ) -> Result<T> {
        let mut next = self.next.lock();
        let slot = next.get_or_insert_with(topic, queue_id, seed);
        let appended = append(*slot)?;
        *slot += count;
        Ok(appended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn offsets_follow_on_from_the_seed_and_a_failed_append_takes_none() {
        let sequencer = PutSequencer::default();
        let first = sequencer.sequence("t", 0, 3, || 10, Ok).expect("appended");
        assert_eq!(first, 10);
        let refused = sequencer.sequence("t", 0, 2, || unreachable!("seeded once"), |_| Err::<u64, _>(Error::Closed));
        assert!(matches!(refused, Err(Error::Closed)));
        assert_eq!(sequencer.sequence("t", 0, 1, || 0, Ok).expect("appended"), 13, "the refused batch took nothing");
        assert_eq!(sequencer.sequence("t", 1, 1, || 0, Ok).expect("appended"), 0, "another queue, its own seed");
    }
}
