//! `QueueMap<T>`: one `T` per queue, keyed by topic, then queue id — how the store keeps anything
//! per queue (the consume queues, the next queue offset of each, the long polls' signals).

use std::collections::HashMap;

/// The maps' hasher: foldhash, seeded per process. A put looks a queue up several times (its
/// sequencer, its consume queue); SipHash, the standard one, cost about 0.1 µs of each put.
type Hasher = foldhash::fast::RandomState;

/// topic → queue id → `T`. A lookup by `&str` allocates nothing; only a new topic allocates its
/// name.
#[derive(Debug)]
pub(crate) struct QueueMap<T> {
    topics: HashMap<String, HashMap<u32, T, Hasher>, Hasher>,
}

impl<T> Default for QueueMap<T> {
    fn default() -> QueueMap<T> {
        QueueMap { topics: HashMap::default() }
    }
}

impl<T> QueueMap<T> {
    pub(crate) fn get(&self, topic: &str, queue_id: u32) -> Option<&T> {
        self.topics.get(topic).and_then(|queues| queues.get(&queue_id))
    }

    pub(crate) fn get_mut(&mut self, topic: &str, queue_id: u32) -> Option<&mut T> {
        self.topics.get_mut(topic).and_then(|queues| queues.get_mut(&queue_id))
    }

    /// The queue's value, made by `make` if it has none.
    pub(crate) fn get_or_insert_with(&mut self, topic: &str, queue_id: u32, make: impl FnOnce() -> T) -> &mut T {
        let Ok(value) = self.get_or_try_insert(topic, queue_id, || Ok::<T, std::convert::Infallible>(make()));
        value
    }

    /// The queue's value, made by `make` if it has none; `make`'s error leaves the map unchanged.
    pub(crate) fn get_or_try_insert<E>(
        &mut self,
        topic: &str,
        queue_id: u32,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<&mut T, E> {
        if self.get(topic, queue_id).is_none() {
            let value = make()?;
            self.topics.entry(topic.to_owned()).or_default().insert(queue_id, value);
        }
        Ok(self.get_mut(topic, queue_id).expect("present or just inserted"))
    }

    pub(crate) fn insert(&mut self, topic: &str, queue_id: u32, value: T) {
        match self.topics.get_mut(topic) {
            Some(queues) => queues.insert(queue_id, value),
            None => self.topics.entry(topic.to_owned()).or_default().insert(queue_id, value),
        };
    }

    /// Removes the queue's value if `remove` says so, and its topic once it has no queue left.
    pub(crate) fn remove_if(&mut self, topic: &str, queue_id: u32, remove: impl FnOnce(&T) -> bool) {
        let Some(queues) = self.topics.get_mut(topic) else { return };
        if queues.get(&queue_id).is_some_and(remove) {
            queues.remove(&queue_id);
            if queues.is_empty() {
                self.topics.remove(topic);
            }
        }
    }

    /// Whether no queue has a value.
    pub(crate) fn is_empty(&self) -> bool {
        self.topics.values().all(HashMap::is_empty)
    }

    /// How many queues have a value.
    pub(crate) fn len(&self) -> usize {
        self.topics.values().map(HashMap::len).sum()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.topics.values().flat_map(HashMap::values)
    }

    /// Every queue's value, sorted by topic, then queue id.
    pub(crate) fn sorted(&self) -> Vec<(&str, u32, &T)> {
        let mut all: Vec<_> = self
            .topics
            .iter()
            .flat_map(|(topic, queues)| queues.iter().map(move |(&id, value)| (topic.as_str(), id, value)))
            .collect();
        all.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_by_topic_and_queue_and_listed_in_order() {
        let mut map = QueueMap::default();
        map.insert("b", 1, 'x');
        map.insert("a", 2, 'y');
        map.insert("a", 0, 'z');
        assert_eq!((map.get("a", 2), map.get("a", 1), map.get("c", 0)), (Some(&'y'), None, None));
        assert_eq!(map.sorted(), [("a", 0, &'z'), ("a", 2, &'y'), ("b", 1, &'x')]);
        assert_eq!(map.len(), 3);
        *map.get_mut("b", 1).expect("there") = 'w';
        assert_eq!(map.values().filter(|&&v| v == 'w').count(), 1);
        map.remove_if("b", 1, |&v| v == 'x');
        assert_eq!(map.len(), 3, "kept: the value is not 'x'");
        map.remove_if("b", 1, |&v| v == 'w');
        assert_eq!((map.len(), map.topics.len()), (2, 1), "the value and its empty topic went");
    }

    #[test]
    fn a_failed_insert_leaves_nothing_behind() {
        let mut map: QueueMap<u64> = QueueMap::default();
        assert_eq!(map.get_or_try_insert("t", 0, || Err("no")), Err("no"));
        assert_eq!(map.len(), 0);
        assert_eq!(map.get_or_try_insert("t", 0, || Ok::<_, &str>(7)), Ok(&mut 7));
        assert_eq!(map.get_or_try_insert("t", 0, || Err("not called")), Ok(&mut 7));
    }
}
