//! The channel's configuration, with documented defaults, validated once at open.

use crate::config::{CleanupPolicy, LogConfig, check};
use crate::error::{Error, Result};

/// How a [`Channel`](crate::Channel) behaves. The defaults are Flume `MemoryChannel`'s where it
/// has one, and a log sized for a staging buffer.
///
/// ```
/// use strata_log::ChannelConfig;
/// let config = ChannelConfig { capacity: 10_000, transaction_capacity: 1_000, ..ChannelConfig::default() };
/// assert_eq!(config.keep_alive_ms, 3_000);
/// assert_eq!(config.log.segment_bytes, 64 << 20);
/// assert_eq!(config.byte_limit(), (64 << 20) * 80 / 100); // 20% left for headers
/// ```
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Events the channel holds at most: committed puts whose take is not committed (events taken
    /// by an open transaction still count). Default 100 (Flume's).
    pub capacity: u64,
    /// Puts, and separately takes, one transaction holds at most. Default 100 (Flume's); at most
    /// `capacity`.
    pub transaction_capacity: u64,
    /// Bytes of event bodies the channel holds at most, before the buffer share below is taken
    /// off. Default 64 MiB (Flume's default is 80% of the JVM heap: events are held in memory
    /// here too).
    pub byte_capacity: u64,
    /// The share of `byte_capacity`, in percent, left for headers (which are not counted): the
    /// limit on bodies is `byte_capacity × (100 − this) / 100`. Default 20 (Flume's); below 100.
    pub byte_capacity_buffer_percentage: u8,
    /// How long a commit waits for room, and a take on an empty channel for an event. Default
    /// 3,000 ms (Flume's `keep-alive` of 3 s).
    pub keep_alive_ms: u64,
    /// How often events taken below the oldest live one are deleted from the log (whole
    /// segments, `Log::delete_records_before`). Default 1,000 ms.
    pub delete_interval_ms: u64,
    /// The channel's log (`<dir>/log/`). Default `LogConfig::default()` with 64 MiB segments
    /// instead of 128 MiB: a staging buffer holds little and its taken segments are deleted, so a
    /// large preallocated segment is mostly empty disk. Durability is promised under
    /// `FlushPolicy::Always` (the default); see [`Channel`](crate::Channel) for what the others
    /// risk. Its cleanup policy must be `Delete` and it must have no retention: the channel
    /// decides what is deleted.
    pub log: LogConfig,
}

impl Default for ChannelConfig {
    fn default() -> ChannelConfig {
        ChannelConfig {
            capacity: 100,
            transaction_capacity: 100,
            byte_capacity: 64 << 20,
            byte_capacity_buffer_percentage: 20,
            keep_alive_ms: 3_000,
            delete_interval_ms: 1_000,
            log: LogConfig { segment_bytes: 64 << 20, ..LogConfig::default() },
        }
    }
}

impl ChannelConfig {
    /// The limit on the bytes of event bodies the channel holds:
    /// `byte_capacity × (100 − byte_capacity_buffer_percentage) / 100`.
    pub fn byte_limit(&self) -> u64 {
        let share = 100 - u128::from(self.byte_capacity_buffer_percentage.min(100));
        (u128::from(self.byte_capacity) * share / 100) as u64
    }

    /// Checks every field (and the log's configuration): `Error::InvalidConfig` names the first
    /// one at fault.
    pub fn validate(&self) -> Result<()> {
        self.log.validate()?;
        check("capacity", self.capacity, 1, u64::from(u32::MAX))?;
        check("transaction_capacity", self.transaction_capacity, 1, self.capacity)?;
        check("byte_capacity", self.byte_capacity, 1, u64::MAX)?;
        check("byte_capacity_buffer_percentage", u64::from(self.byte_capacity_buffer_percentage), 0, 99)?;
        check("keep_alive_ms", self.keep_alive_ms, 0, u64::from(u32::MAX))?;
        check("delete_interval_ms", self.delete_interval_ms, 1, u64::from(u32::MAX))?;
        let refuse = |field: &'static str, reason: &str| Err(Error::InvalidConfig { field, reason: reason.to_owned() });
        if self.log.cleanup_policy != CleanupPolicy::Delete {
            return refuse("log.cleanup_policy", "a channel's log cannot be compacted: its take records share a key");
        }
        if self.log.retention_bytes.is_some() || self.log.retention_ms.is_some() {
            return refuse(
                "log.retention_bytes",
                "a channel deletes what was taken itself: retention would lose events",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_bad_values_name_their_field() {
        ChannelConfig::default().validate().expect("defaults");
        assert_eq!(ChannelConfig::default().byte_limit(), (64 << 20) * 80 / 100);
        let cases = [
            (ChannelConfig { capacity: 0, ..ChannelConfig::default() }, "capacity"),
            (ChannelConfig { transaction_capacity: 101, ..ChannelConfig::default() }, "transaction_capacity"),
            (ChannelConfig { transaction_capacity: 0, ..ChannelConfig::default() }, "transaction_capacity"),
            (ChannelConfig { byte_capacity: 0, ..ChannelConfig::default() }, "byte_capacity"),
            (
                ChannelConfig { byte_capacity_buffer_percentage: 100, ..ChannelConfig::default() },
                "byte_capacity_buffer_percentage",
            ),
            (
                ChannelConfig {
                    log: LogConfig { cleanup_policy: CleanupPolicy::Compact, ..ChannelConfig::default().log },
                    ..ChannelConfig::default()
                },
                "log.cleanup_policy",
            ),
            (
                ChannelConfig {
                    log: LogConfig { retention_ms: Some(1), ..ChannelConfig::default().log },
                    ..ChannelConfig::default()
                },
                "log.retention_bytes",
            ),
        ];
        for (config, field) in cases {
            let refused = config.validate();
            assert!(
                matches!(refused, Err(Error::InvalidConfig { field: f, .. }) if f == field),
                "{field}: {refused:?}"
            );
        }
    }

    #[test]
    fn the_byte_limit_leaves_the_buffer_share() {
        let config =
            ChannelConfig { byte_capacity: 1000, byte_capacity_buffer_percentage: 0, ..ChannelConfig::default() };
        assert_eq!(config.byte_limit(), 1000);
        let config = ChannelConfig { byte_capacity_buffer_percentage: 99, ..config };
        assert_eq!(config.byte_limit(), 10);
        let config = ChannelConfig { byte_capacity: u64::MAX, byte_capacity_buffer_percentage: 0, ..config };
        assert_eq!(config.byte_limit(), u64::MAX);
    }
}
