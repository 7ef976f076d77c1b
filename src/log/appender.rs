//! The state only the appender uses, under the append lock: the active segment, the reused
//! encoding buffers, the append clock's floor.

use std::sync::Arc;

use crate::clock::Clock;
use crate::log::batch::BatchEncoder;
use crate::log::segment::LogSegment;

/// Rolled segments that may wait for the syncer to seal them before an appender seals them itself:
/// each holds three descriptors and three writable maps until it is sealed.
pub(crate) const MAX_UNSEALED_SEGMENTS: usize = 4;

/// State only the appender uses, under the append lock.
pub(crate) struct Appender {
    pub active: Arc<LogSegment>,
    pub(super) encoder: BatchEncoder,
    pub(super) timestamps: Vec<i64>,
    /// Append time never goes backwards within an open log.
    clock_floor_ms: i64,
    /// The active segment whose successor was asked of the preallocator (once it is half full).
    pub(super) prealloc_requested_for: Option<u64>,
}

impl Appender {
    pub(crate) fn new(active: Arc<LogSegment>) -> Appender {
        Appender {
            active,
            encoder: BatchEncoder::default(),
            timestamps: Vec::new(),
            clock_floor_ms: 0,
            prealloc_requested_for: None,
        }
    }

    /// The append time: `clock`'s, never below an earlier one.
    pub(super) fn now_ms(&mut self, clock: &Clock) -> i64 {
        self.clock_floor_ms = self.clock_floor_ms.max(clock.now_ms());
        self.clock_floor_ms
    }
}
