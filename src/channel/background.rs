//! The channel's background work, on its `EventManager`: every `delete_interval_ms` the log's
//! records below the low watermark W (every event below it taken) are deleted with
//! `Log::delete_records_before(W)` — whole segments, the active one never. A failure is logged
//! and counted, and the work runs again at its next turn. The event holds the channel weakly, so
//! it ends when the channel does.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::events::EventHandle;

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
