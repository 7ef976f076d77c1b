//! The put sequencer: the one place a queue offset is decided. Under its lock (the put lock) a
//! batch for one queue gets the queue's next offsets and is appended to the commit log, so the
//! log holds every queue's messages in queue-offset order; the queue's next offset moves only once
//! the append succeeded.
//!
//! A queue's first put since open starts where its consume queue ends — `open` dispatched the
//! whole commit log before it returned, so that end follows every message stored before — or at
//! its floor, if higher: the next queue offset the store checkpoint recorded for it (its records
//! removed by retention and its files lost, a rebuilt queue ends below the offsets it handed
//! out). So a queue offset is never handed out twice.

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::store::checkpoint::QueueSummary;
use crate::store::queue_map::QueueMap;

/// The next queue offset of every queue put to since open, under the put lock.
#[derive(Default)]
pub(crate) struct PutSequencer {
    next: Mutex<QueueMap<u64>>,
    /// What the checkpoint the store opened with recorded of each queue (checked against the
    /// log): no queue offset below a floor's `next_queue_offset` is handed out again. Fixed at open.
    floors: QueueMap<QueueSummary>,
}

impl PutSequencer {
    /// A sequencer that hands out no queue offset below `floors`.
    pub(crate) fn with_floors(floors: QueueMap<QueueSummary>) -> PutSequencer {
        PutSequencer { next: Mutex::default(), floors }
    }

    /// The floors it was made with.
    pub(crate) fn floors(&self) -> &QueueMap<QueueSummary> {
        &self.floors
    }

    /// The lowest queue offset the queue's next message may get.
    pub(crate) fn floor(&self, topic: &str, queue_id: u32) -> u64 {
        self.floors.get(topic, queue_id).map_or(0, |floor| floor.next_queue_offset)
    }

    /// Runs `append` under the put lock with the first queue offset of a batch of `count`
    /// messages for the queue; `seed` is asked for the queue's end at its first put since open
    /// (raised to the queue's floor). An `append` that fails takes no offset.
    pub(crate) fn sequence<T>(
        &self,
        topic: &str,
        queue_id: u32,
        count: u64,
        seed: impl FnOnce() -> u64,
        append: impl FnOnce(u64) -> Result<T>,
    ) -> Result<T> {
        let mut next = self.next.lock();
        let slot = next.get_or_insert_with(topic, queue_id, || seed().max(self.floor(topic, queue_id)));
        let Some(after) = slot.checked_add(count) else {
            return Err(Error::InvalidField {
                what: "queue",
                name: topic.to_owned(),
                reason: "its queue offsets are exhausted",
            });
        };
        let appended = append(*slot)?;
        *slot = after;
        Ok(appended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_floor_raises_the_seed() {
        let mut floors = QueueMap::default();
        let floor = |next| QueueSummary {
            topic: "t".into(),
            queue_id: 0,
            min_queue_offset: 0,
            first_log_offset: None,
            next_queue_offset: next,
            last_log_offset: None,
        };
        floors.insert("t", 0, floor(40));
        let sequencer = PutSequencer::with_floors(floors);
        assert_eq!(sequencer.sequence("t", 0, 1, || 3, Ok).expect("appended"), 40, "below the floor: the floor");
        let mut floors = QueueMap::default();
        floors.insert("t", 0, floor(2));
        let sequencer = PutSequencer::with_floors(floors);
        assert_eq!(sequencer.sequence("t", 0, 1, || 3, Ok).expect("appended"), 3, "above the floor: the queue's end");
    }
}
