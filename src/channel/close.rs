//! Closing a channel: `ChannelState::close`, and `Handle`, the counted reference to the state
//! that `Channel`s and `Transaction`s hold, whose last drop closes the channel.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::Result;
use crate::log::Log;

use super::state::ChannelState;

/// What the user's handles (`Channel`s and `Transaction`s) hold: the state, counted in
/// `ChannelState::handles`, so that the last one dropped closes the channel there and then and
/// the directory can be opened again at once. The background event holds the state only weakly
/// and for a moment, so the state itself may outlive the handles briefly (closed).
pub(crate) struct Handle {
    state: Arc<ChannelState>,
}

impl Handle {
    /// The first handle of a channel just opened.
    pub(crate) fn first(state: Arc<ChannelState>) -> Handle {
        let before = state.handles.fetch_add(1, Ordering::Relaxed);
        debug_assert_eq!(before, 0, "a channel's first handle is made once, at open");
        Handle { state }
    }
}

impl Clone for Handle {
    fn clone(&self) -> Handle {
        // Relaxed, as `Arc::clone`: a handle is only made from a live one.
        self.state.handles.fetch_add(1, Ordering::Relaxed);
        Handle { state: Arc::clone(&self.state) }
    }
}

impl std::ops::Deref for Handle {
    type Target = ChannelState;

    fn deref(&self) -> &ChannelState {
        &self.state
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // AcqRel, as `Arc`'s drop: every other handle's last use happens before the close.
        if self.state.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && let Err(error) = self.state.close()
        {
            tracing::error!(dir = %self.state.dir.display(), %error, "closing the channel on drop failed");
        }
    }
}

impl ChannelState {
    /// Closes the channel (see `Channel::close`); a second call does nothing.
    pub(crate) fn close(&self) -> Result<()> {
        if !self.mark_closed() {
            return Ok(());
        }
        let manager = self.events.lock().take();
        if let Some(manager) = manager
            && let Err(error) = manager.shutdown(Duration::from_secs(30))
        {
            tracing::error!(%error, "the channel's event thread did not stop");
        }
        let deleted = self.delete_taken();
        // Waits for the commits holding the log's slot (appending, or waiting for durability).
        let log = self.log.write().take();
        let closed = log.map_or(Ok(()), Log::close);
        deleted.and(closed)?;
        tracing::info!(dir = %self.dir.display(), "channel closed");
        Ok(())
    }
}

impl Drop for ChannelState {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            tracing::error!(dir = %self.dir.display(), %error, "closing the channel on drop failed");
        }
    }
}
