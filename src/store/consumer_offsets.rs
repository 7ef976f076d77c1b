//! Consumer-group offsets (docs/DESIGN.md §11): for each group, topic and queue, the next queue
//! offset the group will consume. Kept in memory, written to `offsets.json` every
//! `offsets_flush_ms`, at `flush_offsets()` and at close. A write replaces the file atomically and
//! keeps the previous one as `offsets.json.bak`, so a torn or garbage `offsets.json` falls back to
//! the last good copy.
//!
//! ```text
//! {"version": 1, "offsets": {"<group>": {"<topic>": {"<queue id>": <next queue offset>}}}}
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};

use crate::error::{Corruption, Error, Result};
use crate::format::{OFFSETS_BACKUP_FILE, OFFSETS_FILE, OFFSETS_VERSION};
use crate::storage;

/// A consumer group's committed offset in one queue, as
/// [`MessageStore::committed_offsets`](crate::MessageStore::committed_offsets) lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct CommittedOffset {
    /// The consumer group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The queue.
    pub queue_id: u32,
    /// The next queue offset the group consumes.
    pub next_offset: u64,
}
/// (group, topic, queue id).
pub(crate) type Key = (String, String, u32);

/// See the module documentation.
pub(crate) struct ConsumerOffsets {
    dir: PathBuf,
    state: Mutex<State>,
}

struct State {
    offsets: BTreeMap<Key, u64>,
    /// Changed since the last write.
    dirty: bool,
}

impl ConsumerOffsets {
    /// Loads `dir/offsets.json`, or its backup if it is torn or unreadable (logged), or starts
    /// empty if neither exists. `Error::Corrupt` if both exist and neither can be read.
    pub(crate) fn load(dir: &Path) -> Result<ConsumerOffsets> {
        let (main, backup) = (dir.join(OFFSETS_FILE), dir.join(OFFSETS_BACKUP_FILE));
        let offsets = match read(&main) {
            Ok(Some(offsets)) => offsets,
            Ok(None) => read(&backup)?.unwrap_or_default(),
            Err(error) => {
                tracing::warn!(%error, file = %main.display(), "consumer offsets unreadable; using the backup");
                read(&backup)?.ok_or(error)?
            }
        };
        Ok(ConsumerOffsets { dir: dir.to_path_buf(), state: Mutex::new(State { offsets, dirty: false }) })
    }

    /// Records that `group` will next consume `offset` of `topic`'s queue `queue_id`.
    pub(crate) fn commit(&self, group: &str, topic: &str, queue_id: u32, offset: u64) {
        let mut state = self.state.lock();
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        if state.offsets.insert(key, offset) != Some(offset) {
            state.dirty = true;
        }
    }

    /// The offset `group` committed for the queue, if any.
    pub(crate) fn committed(&self, group: &str, topic: &str, queue_id: u32) -> Option<u64> {
        let key = (group.to_owned(), topic.to_owned(), queue_id);
        self.state.lock().offsets.get(&key).copied()
    }

    /// Every committed offset: (group, topic, queue id, offset), sorted.
    pub(crate) fn all(&self) -> Vec<CommittedOffset> {
        let state = self.state.lock();
        let committed = |((group, topic, queue_id), next_offset): (&(String, String, u32), &u64)| CommittedOffset {
            group: group.clone(),
            topic: topic.clone(),
            queue_id: *queue_id,
            next_offset: *next_offset,
        };
        state.offsets.iter().map(committed).collect()
    }

    /// Lowers every group's offset for the queue to at most `end` (after recovery the queue may
    /// be shorter than what was committed); returns how many were lowered (each logged).
    pub(crate) fn clamp(&self, topic: &str, queue_id: u32, end: u64) -> usize {
        let mut state = self.state.lock();
        let mut lowered = 0;
        for ((group, t, q), offset) in state.offsets.iter_mut() {
            if t == topic && *q == queue_id && *offset > end {
                tracing::warn!(
                    group,
                    topic,
                    queue_id,
                    committed = *offset,
                    end,
                    "consumer offset past the queue's end; lowered to it"
                );
                *offset = end;
                lowered += 1;
            }
        }
        state.dirty |= lowered > 0;
        lowered
    }

    /// Writes the offsets if they changed since the last write: the current file becomes the
    /// backup, then the new one replaces it (both atomically and durably).
    pub(crate) fn flush(&self) -> Result<()> {
        let mut state = self.state.lock();
        if !state.dirty {
            return Ok(());
        }
        let bytes = encode(&state.offsets);
        if let Some(current) = storage::read_if_exists(&self.dir.join(OFFSETS_FILE))? {
            storage::write_atomically(&self.dir, OFFSETS_BACKUP_FILE, &current)?;
            crate::failpoint::crash_point!("store_offsets_after_backup");
        }
        storage::write_atomically(&self.dir, OFFSETS_FILE, &bytes)?;
        state.dirty = false;
        Ok(())
    }
}

/// The offsets in `path`; `None` if it does not exist.
pub(crate) fn read(path: &Path) -> Result<Option<BTreeMap<Key, u64>>> {
    let Some(bytes) = storage::read_if_exists(path)? else { return Ok(None) };
    decode(&bytes).map(Some).map_err(|why| Error::corrupt(path, 0, Corruption::BadFile(why)))
}

fn encode(offsets: &BTreeMap<Key, u64>) -> Vec<u8> {
    let mut groups = Map::new();
    for ((group, topic, queue_id), offset) in offsets {
        let topics = groups.entry(group.clone()).or_insert_with(|| Value::Object(Map::new()));
        let queues = topics
            .as_object_mut()
            .and_then(|t| t.entry(topic.clone()).or_insert_with(|| Value::Object(Map::new())).as_object_mut());
        if let Some(queues) = queues {
            queues.insert(queue_id.to_string(), json!(offset));
        }
    }
    let mut bytes =
        serde_json::to_vec_pretty(&json!({ "version": OFFSETS_VERSION, "offsets": groups })).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn decode(bytes: &[u8]) -> std::result::Result<BTreeMap<Key, u64>, &'static str> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| "offsets.json is not valid JSON")?;
    if value.get("version").and_then(Value::as_u64) != Some(OFFSETS_VERSION) {
        return Err("offsets.json has no version 1");
    }
    let groups = value.get("offsets").and_then(Value::as_object).ok_or("offsets.json has no offsets object")?;
    let mut offsets = BTreeMap::new();
    for (group, topics) in groups {
        for (topic, queues) in topics.as_object().ok_or("a group is not an object")? {
            for (queue, offset) in queues.as_object().ok_or("a topic is not an object")? {
                let queue_id = queue.parse().map_err(|_| "a queue id is not a number")?;
                let offset = offset.as_u64().ok_or("an offset is not a number")?;
                offsets.insert((group.clone(), topic.clone(), queue_id), offset);
            }
        }
    }
    Ok(offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_a_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = ConsumerOffsets::load(dir.path()).expect("empty");
        offsets.commit("billing", "orders", 3, 42);
        offsets.commit("billing", "orders", 0, 7);
        offsets.commit("audit", "orders", 3, 1);
        offsets.flush().expect("flush");
        let again = ConsumerOffsets::load(dir.path()).expect("reload");
        assert_eq!(again.committed("billing", "orders", 3), Some(42));
        assert_eq!(again.committed("audit", "orders", 3), Some(1));
        assert_eq!(again.committed("audit", "orders", 0), None);
        assert_eq!(again.all().len(), 3);
    }

    #[test]
    fn a_torn_file_falls_back_to_the_backup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = ConsumerOffsets::load(dir.path()).expect("empty");
        offsets.commit("g", "t", 0, 1);
        offsets.flush().expect("first");
        offsets.commit("g", "t", 0, 2);
        offsets.flush().expect("second: the first becomes the backup");
        let main = dir.path().join(OFFSETS_FILE);
        let bytes = std::fs::read(&main).expect("read");
        std::fs::write(&main, &bytes[..bytes.len() / 2]).expect("tear");
        let recovered = ConsumerOffsets::load(dir.path()).expect("backup");
        assert_eq!(recovered.committed("g", "t", 0), Some(1), "the last good copy");
        std::fs::write(dir.path().join(OFFSETS_BACKUP_FILE), b"garbage").expect("garbage");
        assert!(matches!(ConsumerOffsets::load(dir.path()), Err(Error::Corrupt { .. })), "both unreadable");
    }

    #[test]
    fn clamping_lowers_only_offsets_past_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = ConsumerOffsets::load(dir.path()).expect("empty");
        offsets.commit("a", "t", 0, 10);
        offsets.commit("b", "t", 0, 3);
        offsets.commit("a", "t", 1, 10);
        assert_eq!(offsets.clamp("t", 0, 5), 1);
        assert_eq!(offsets.committed("a", "t", 0), Some(5));
        assert_eq!(offsets.committed("b", "t", 0), Some(3));
        assert_eq!(offsets.committed("a", "t", 1), Some(10));
    }

    #[test]
    fn nothing_is_written_until_something_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let offsets = ConsumerOffsets::load(dir.path()).expect("empty");
        offsets.flush().expect("flush");
        assert!(!dir.path().join(OFFSETS_FILE).exists());
        offsets.commit("g", "t", 0, 1);
        offsets.flush().expect("flush");
        assert!(dir.path().join(OFFSETS_FILE).exists());
    }
}
