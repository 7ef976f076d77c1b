//! The channel's background work, on its `EventManager`: every `delete_interval_ms` the log's
//! records below the low watermark W (every event below it taken) are deleted with
//! `Log::delete_records_before(W)` — whole segments, the active one never. A failure is logged
//! and counted, and the work runs again at its next turn. The event holds the channel weakly, so
//! it ends when the channel does. The close deletes once more.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::error::Result;
use crate::events::EventHandle;

use super::metrics::Counters;
use super::state::ChannelState;

/// Schedules the periodic deletion.
pub(crate) fn schedule(state: &Arc<ChannelState>, events: &EventHandle) {
    every(Arc::downgrade(state), events.clone(), Duration::from_millis(state.config.delete_interval_ms));
}

fn every(state: Weak<ChannelState>, events: EventHandle, period: Duration) {
    let again = events.clone();
    let scheduled = events.put_after(period, "channel deletes taken events", move || {
        let Some(strong) = state.upgrade() else { return Ok(()) };
        let result = strong.delete_taken();
        drop(strong);
        every(state, again, period);
        if let Err(error) = result {
            tracing::warn!(%error, "deleting a channel's taken events failed; it runs again at its next turn");
        }
        Ok(())
    });
    if scheduled.is_err() {
        tracing::debug!("the channel's event thread stopped; periodic deletion ends");
    }
}

impl ChannelState {
    /// Deletes the log's records below W, if W moved past the log's start (the background work,
    /// and the close). W only grows: new events get offsets past the log's next offset, which is
    /// past every event held.
    ///
    /// The take records that moved W are below the log's next offset as it was with W, and they
    /// are made durable first: the deletion writes the new start to the checkpoint at once, so a
    /// crash that then lost a take record (stored, its fsync not yet done, or never under a
    /// weaker flush policy) would lose the events it took instead of delivering them again.
    pub(crate) fn delete_taken(&self) -> Result<()> {
        let deleted = self.low_watermark().and_then(|(low_watermark, next)| {
            self.with_log(|log| {
                if low_watermark <= log.start_offset() {
                    return Ok(false);
                }
                if log.durable_offset() < next {
                    log.flush()?;
                }
                log.delete_records_before(low_watermark)?;
                Ok(true)
            })
        });
        match deleted {
            Ok(deleted) => {
                Counters::add(&self.counters.deletions, u64::from(deleted));
                Ok(())
            }
            Err(error) => {
                Counters::add(&self.counters.background_failures, 1);
                Err(error)
            }
        }
    }

    /// The low watermark W, the offset of the oldest event held, or the log's next offset if none
    /// is (every event appended was taken); and the log's next offset. Read under the channel
    /// lock, which every append holds, so they agree.
    pub(crate) fn low_watermark(&self) -> Result<(u64, u64)> {
        let queue = self.queue.lock();
        let next = self.with_log(|log| Ok(log.next_offset()))?;
        Ok((queue.live.first().copied().unwrap_or(next), next))
    }
}
