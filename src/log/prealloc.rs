//! Background preallocation of the next segment (RocketMQ's `AllocateMappedFileService`): once the
//! active segment is half full, an event on the log's `EventManager` creates `<n>.log.prealloc` (and
//! its two indexes) with fallocate, so a roll only renames three files and maps them instead of
//! waiting for the allocation. Leftover `.prealloc` files are deleted at open.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use parking_lot::Mutex;

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::events::EventHandle;
use crate::format::{INDEX_SUFFIX, LOG_SUFFIX, PREALLOC_SUFFIX, TIME_INDEX_SUFFIX, file_name};
use crate::log::segment::{LogSegment, SegmentPaths};
use crate::storage;

/// The preallocation service's state; the work runs as events.
pub(crate) struct Preallocator {
    dir: PathBuf,
    config: LogConfig,
    events: Option<EventHandle>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Files ready to become the next segment: the number in their names and the `.log` capacity.
    ready: Option<(u64, u64)>,
    /// A preparation is queued or running.
    preparing: bool,
    shutdown: bool,
}

const SUFFIXES: [&str; 3] = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX];

impl Preallocator {
    pub(crate) fn new(dir: &Path, config: &LogConfig, events: Option<EventHandle>) -> Preallocator {
        Preallocator { dir: dir.to_path_buf(), config: config.clone(), events, state: Mutex::default() }
    }

    fn prealloc_path(&self, n: u64, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}{PREALLOC_SUFFIX}", file_name(n, suffix)))
    }

    /// Asks for the segment after the one at `active_base` to be prepared, by an event.
    pub(crate) fn request(self: &Arc<Self>, active_base: u64) {
        let Some(events) = self.events.as_ref().filter(|_| self.config.preallocate) else { return };
        {
            let mut state = self.state.lock();
            if state.ready.is_some() || state.preparing || state.shutdown {
                return;
            }
            state.preparing = true;
        }
        let this = Arc::clone(self);
        if events.put("preallocate segment", move || this.prepare_now(active_base)).is_err() {
            self.state.lock().preparing = false;
        }
    }

    /// The prepared segment renamed to base `base`, if one is ready and can hold `size` bytes.
    /// Called under the append lock.
    pub(crate) fn take(&self, base: u64, size: u64) -> Result<Option<LogSegment>> {
        let ready = {
            let mut state = self.state.lock();
            match state.ready {
                Some((_, capacity)) if capacity >= size => state.ready.take(),
                _ => None,
            }
        };
        let Some((n, _)) = ready else { return Ok(None) };
        let paths = SegmentPaths::new(&self.dir, base);
        let targets = [&paths.log, &paths.index, &paths.time_index];
        for (suffix, target) in SUFFIXES.iter().zip(targets) {
            if let Err(e) = storage::rename(&self.prealloc_path(n, suffix), target) {
                // Leave no half-renamed segment behind: the next roll creates the same names.
                for path in targets {
                    let _ = storage::remove_if_exists(path);
                }
                self.remove(n);
                return Err(e);
            }
        }
        // Opening can fail (no descriptor left): the renamed files hold nothing, and left in place
        // they would make the next roll's create of the same names fail.
        LogSegment::open_fresh(&self.dir, base, &self.config).map(Some).inspect_err(|_| {
            for path in targets {
                let _ = storage::remove_if_exists(path);
            }
        })
    }

    /// The event: prepares the files named `n` and offers them to the next roll.
    fn prepare_now(&self, n: u64) -> Result<()> {
        let prepared = self.prepare(n);
        let mut state = self.state.lock();
        state.preparing = false;
        match prepared {
            Ok(capacity) if !state.shutdown => {
                state.ready = Some((n, capacity));
                Ok(())
            }
            Ok(_) => {
                drop(state);
                self.remove(n);
                Ok(())
            }
            Err(error) => {
                drop(state);
                self.remove(n);
                tracing::warn!(%error, "preallocating the next segment failed; the roll will create it");
                Err(error)
            }
        }
    }

    /// Creates and fallocates the three files; returns the `.log` capacity.
    fn prepare(&self, n: u64) -> Result<u64> {
        let capacity = self.config.segment_bytes;
        if self.config.min_free_bytes > 0 {
            let available = storage::available_space(&self.dir)?;
            let needed = capacity + self.config.min_free_bytes;
            if available < needed {
                let advice = "free space, or lower segment_bytes or min_free_bytes";
                let path = self.dir.clone();
                return Err(Error::DiskFull {
                    op: "preallocate",
                    path,
                    needed: Some(needed),
                    available: Some(available),
                    advice,
                });
            }
        }
        let index_capacity = |entry: u64| self.config.index_bytes / entry * entry;
        let sizes = [capacity, index_capacity(8), index_capacity(12)];
        for (suffix, size) in SUFFIXES.iter().zip(sizes) {
            let path = self.prealloc_path(n, suffix);
            let file = storage::create_new(&path)?;
            let advice = if *suffix == LOG_SUFFIX { storage::SEGMENT_ADVICE } else { storage::INDEX_ADVICE };
            storage::allocate(&file, &path, size, advice)?;
        }
        Ok(capacity)
    }

    fn remove(&self, n: u64) {
        for suffix in SUFFIXES {
            let _ = storage::remove_if_exists(&self.prealloc_path(n, suffix));
        }
    }

    /// Stops preparing and deletes a prepared segment nobody took.
    pub(crate) fn shutdown(&self) {
        let ready = {
            let mut state = self.state.lock();
            state.shutdown = true;
            state.ready.take()
        };
        if let Some((n, _)) = ready {
            self.remove(n);
        }
    }
}
