//! The cleaner's map from key to the offset of its latest record, with a memory bound
//! (`cleaner_dedupe_bytes`). Keys are stored whole, so two keys are never confused (Kafka stores a
//! 16-byte hash and accepts the collision risk; this map trades memory for exactness).

use std::collections::HashMap;

/// Bytes an entry costs besides its key: the boxed slice, the offset and the table's overhead.
const ENTRY_OVERHEAD: u64 = 48;

#[derive(Debug)]
pub(crate) struct KeyMap {
    latest: HashMap<Box<[u8]>, u64>,
    used: u64,
    limit: u64,
}

impl KeyMap {
    pub(crate) fn new(limit: u64) -> KeyMap {
        KeyMap { latest: HashMap::new(), used: 0, limit }
    }

    /// Records `offset` as the latest for `key`. Returns false (and changes nothing) if a new key
    /// would take the map past its bound; a key already present is always updated.
    pub(crate) fn insert(&mut self, key: &[u8], offset: u64) -> bool {
        if let Some(latest) = self.latest.get_mut(key) {
            debug_assert!(offset > *latest, "offsets are inserted in order");
            *latest = offset;
            return true;
        }
        let cost = key.len() as u64 + ENTRY_OVERHEAD;
        if self.used + cost > self.limit {
            return false;
        }
        self.used += cost;
        self.latest.insert(key.into(), offset);
        true
    }

    /// The offset of the latest record of `key` in the mapped range, if it has one there.
    pub(crate) fn get(&self, key: &[u8]) -> Option<u64> {
        self.latest.get(key).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.latest.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_offset_and_respects_its_bound() {
        let mut map = KeyMap::new(3 * (ENTRY_OVERHEAD + 1));
        assert!(map.insert(b"a", 1));
        assert!(map.insert(b"b", 2));
        assert!(map.insert(b"a", 5), "an update never needs room");
        assert!(map.insert(b"c", 6));
        assert!(!map.insert(b"d", 7), "a fourth key does not fit");
        assert_eq!((map.get(b"a"), map.get(b"b"), map.get(b"c"), map.get(b"d")), (Some(5), Some(2), Some(6), None));
        assert_eq!(map.len(), 3);
    }
}
