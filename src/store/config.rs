//! The message store's configuration, with documented defaults, validated once at open.

use crate::config::{CleanupPolicy, LogConfig, check};
use crate::error::{Error, Result};
use crate::format::{BATCH_HEADER_LEN, CQ_ENTRIES_PER_FILE, INDEX_FILE_MAX_SLOTS};
use crate::store::message::validate_topic;

/// How a `MessageStore` is laid out and behaves. `StoreConfig::default()` is RocketMQ's
/// defaults where they apply.
///
/// **The store's parameters are part of the store.** `queue_entries_per_file`, `index_slots` and
/// `index_entries` size the files the store makes; they are recorded in the store's `store.meta`
/// when it is created (a store made before that file existed gets one at its next writer open,
/// from what its files show). Opening an existing store with a config that says otherwise does
/// not change them: the store *adopts* the recorded values and logs one `info` line naming each
/// value of the config it replaced. The existing files were made with them, and consume-queue
/// files are named by queue offsets in steps of `queue_entries_per_file`: a queue whose files
/// change size midway no longer has the layout recovery and the admin tools assume.
/// [`MessageStore::config`](crate::MessageStore::config) shows the values in effect;
/// [`StoreConfig::with_recorded_parameters`] reads them without opening the store.
///
/// What a store made with the defaults allocates: each consume queue's file 6,000,000 bytes
/// (300,000 entries of 20 bytes, made at full size), each index file 420,000,040 bytes
/// (5,000,000 slots of 4 bytes and 20,000,000 entries of 20 bytes after a 40-byte header), and the
/// commit log what `LogConfig` reserves (a 128 MiB active segment, its indexes, the next segment
/// once it is half full). A small store: `queue_entries_per_file: 10_000, index_slots: 50_000,
/// index_entries: 200_000` makes 200,000-byte queue files and 4,200,040-byte index files.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The commit log's configuration (flush policy, segment size, retention; by default
    /// `LogConfig::default()` with 16 MiB batches). Its cleanup policy
    /// must be `Delete`: compaction keeps the latest record per record key, and a message's key
    /// is not unique across topics.
    pub log: LogConfig,
    /// Entries per consume-queue file (20 bytes each). Default 300,000 (6 MB files). A store
    /// keeps the value it was created with (see above).
    pub queue_entries_per_file: u64,
    /// Hash slots per index file (4 bytes each). Default 5,000,000. A store keeps the value it
    /// was created with.
    pub index_slots: u32,
    /// Entries per index file (20 bytes each; each key of each message is one, entry 0 is never
    /// used). Default 20,000,000. A store keeps the value it was created with.
    pub index_entries: u32,
    /// Queues a topic may have (queue ids `0..max_queues_per_topic`). Default 1,024.
    pub max_queues_per_topic: u32,
    /// The largest message, encoded (body, keys, tag, properties and the store's headers).
    /// Default 4 MiB (RocketMQ's).
    pub max_message_bytes: u64,
    /// How often committed consumer offsets are written to `offsets.json`. Default 5,000 ms.
    pub offsets_flush_ms: u64,
    /// How often the consume queues and index files are flushed and the store checkpoint
    /// written. Default 1,000 ms.
    pub flush_interval_ms: u64,
    /// Entries `get_messages` examines at most in one call (RocketMQ's 16,000).
    pub max_entries_examined: u64,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            // Room for a batch of a few messages of the largest size.
            log: LogConfig { max_batch_bytes: 16 << 20, ..LogConfig::default() },
            queue_entries_per_file: CQ_ENTRIES_PER_FILE,
            index_slots: 5_000_000,
            index_entries: 20_000_000,
            max_queues_per_topic: 1_024,
            max_message_bytes: 4 << 20,
            offsets_flush_ms: 5_000,
            flush_interval_ms: 1_000,
            max_entries_examined: 16_000,
        }
    }
}

impl StoreConfig {
    /// Checks every field (and the log's configuration).
    pub fn validate(&self) -> Result<()> {
        self.log.validate()?;
        if self.log.cleanup_policy != CleanupPolicy::Delete {
            let reason = "the store's commit log cannot be compacted: a message key is not unique across topics".into();
            return Err(Error::InvalidConfig { field: "log.cleanup_policy", reason });
        }
        check("queue_entries_per_file", self.queue_entries_per_file, 1, u64::from(u32::MAX))?;
        check("index_slots", u64::from(self.index_slots), 1, u64::from(INDEX_FILE_MAX_SLOTS))?;
        check("index_entries", u64::from(self.index_entries), 2, u64::from(u32::MAX))?;
        check("max_queues_per_topic", u64::from(self.max_queues_per_topic), 1, u64::from(u32::MAX))?;
        // One message alone in its batch must fit the log's batch limit.
        let largest = self.log.max_batch_bytes.saturating_sub(BATCH_HEADER_LEN as u64);
        check("max_message_bytes", self.max_message_bytes, 1, largest)?;
        check("offsets_flush_ms", self.offsets_flush_ms, 1, u64::MAX)?;
        check("flush_interval_ms", self.flush_interval_ms, 1, u64::MAX)?;
        check("max_entries_examined", self.max_entries_examined, 1, u64::MAX)?;
        Ok(())
    }

    /// `Ok` if `topic` and `queue_id` can name a queue of a store with this configuration.
    pub(crate) fn check_queue(&self, topic: &str, queue_id: u32) -> Result<()> {
        validate_topic(topic)?;
        let max = self.max_queues_per_topic;
        if queue_id >= max {
            return Err(Error::InvalidQueue { queue_id, max });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_compaction_is_refused() {
        StoreConfig::default().validate().expect("defaults");
        let compacted = StoreConfig {
            log: LogConfig { cleanup_policy: CleanupPolicy::Compact, ..LogConfig::default() },
            ..StoreConfig::default()
        };
        assert!(matches!(compacted.validate(), Err(Error::InvalidConfig { field: "log.cleanup_policy", .. })));
        let too_big = StoreConfig { max_message_bytes: u64::MAX, ..StoreConfig::default() };
        assert!(matches!(too_big.validate(), Err(Error::InvalidConfig { field: "max_message_bytes", .. })));
    }
}
