//! `RaftLogStore`: openraft's `RaftLogStorage` and `RaftLogReader` over a strata `Log`, and
//! `RaftLogStoreReader`, the reader openraft's replication tasks use.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{AnyError, LogId, OptionalSend, RaftLogId, RaftTypeConfig, StorageError, StorageIOError, Vote};

use crate::config::{CleanupPolicy, FlushPolicy, LogConfig};
use crate::error::{Error, Result};
use crate::failpoint::crash_point;
use crate::format::RAFT_LOG_DIR;
use crate::log::Log;
use crate::raft::meta::{self, Meta};
use crate::raft::state::{RaftState, RawEntry};

/// `save_committed` writes the meta file itself at most this often; a vote or a purge writes
/// the latest committed log id with it anyway.
const COMMITTED_WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// At most this many entries per `limited_get_log_entries` (a follower far behind is sent its
/// entries in several requests, not all at once).
const LIMITED_READ_ENTRIES: u64 = 1024;

type NodeIdOf<C> = <C as RaftTypeConfig>::NodeId;
type LogIdOf<C> = LogId<NodeIdOf<C>>;

/// A strata [`Log`] as the Raft log storage of an [openraft](https://docs.rs/openraft/0.9.25)
/// node (feature `openraft`): hand it to `openraft::Raft::new` as its `RaftLogStorage`.
///
/// The directory holds the log (`<dir>/log`, one Raft entry per record and per batch, log offset
/// == Raft index, entries encoded with postcard) and the meta file `<dir>/raft-meta` (the vote,
/// the last committed and the last purged log id, replaced atomically). Appends are durable under
/// `FlushPolicy::Always` and reported to openraft by the log's durability callback, so no thread
/// waits for an fsync; truncations are exact and durable; a purge is recorded in the meta file
/// before any entry is deleted. Every blocking call of the log runs on tokio's blocking pool
/// (`spawn_blocking`), never on a runtime worker, so the store must be used inside a tokio
/// runtime (openraft's default `TokioRuntime`).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use strata_log::openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt};
/// use strata_log::openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
/// use strata_log::{LogConfig, RaftLogStore};
///
/// use std::io::Cursor; // openraft's default snapshot data, named by the macro
/// strata_log::openraft::declare_raft_types!(pub Config: D = String, R = String);
///
/// let dir = tempfile::tempdir()?;
/// let runtime = tokio::runtime::Runtime::new()?;
/// runtime.block_on(async {
///     let mut store = RaftLogStore::<Config>::open(dir.path(), LogConfig::default()).await?;
///     store.save_vote(&Vote::new_committed(1, 1)).await?;
///     let entry = |index| Entry::<Config> {
///         log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
///         payload: EntryPayload::Normal(format!("command {index}")),
///     };
///     store.blocking_append([entry(0), entry(1), entry(2)]).await?;
///     store.truncate(LogId::new(CommittedLeaderId::new(1, 1), 2)).await?;
///     let entries = store.try_get_log_entries(0..).await?;
///     assert_eq!(entries.len(), 2);
///     assert_eq!(store.get_log_state().await?.last_log_id.map(|id| id.index), Some(1));
///     store.close().await?;
///     Ok::<_, Box<dyn std::error::Error>>(())
/// })?;
/// # Ok(()) }
/// ```
pub struct RaftLogStore<C: RaftTypeConfig> {
    state: Arc<RaftState>,
    dir: PathBuf,
    /// The meta as last written.
    meta: Meta<C::NodeId>,
    /// The committed log id openraft gave last; written with the next meta write.
    committed: Option<LogIdOf<C>>,
    meta_written_at: Instant,
    /// The id of the entry at the log's next offset - 1, if the log holds entries.
    last_log_id: Option<LogIdOf<C>>,
    /// `close` is under way: dropping the store leaves the log to it.
    closing: bool,
}

/// The reader openraft's replication tasks use ([`RaftLogStorage::get_log_reader`]): it shares
/// the store's log, sees every entry `append` stored (also before it is durable), and may read
/// while the store appends.
pub struct RaftLogStoreReader<C: RaftTypeConfig> {
    state: Arc<RaftState>,
    _config: PhantomData<fn() -> C>,
}

impl<C: RaftTypeConfig> RaftLogStore<C> {
    /// Opens (or creates) the store in `dir`: the log in `<dir>/log`, recovered as
    /// [`Log::open`] does, and the meta file. Refuses a `config` whose log could lose or delete
    /// entries on its own: a flush policy other than `Always` (openraft is told an entry is
    /// flushed only once it is durable), retention (`retention_bytes`, `retention_ms`) or
    /// compaction (Raft alone decides what is deleted). Re-applies the last purge if a crash
    /// stopped it between the meta write and the deletion, and checks that the first and last
    /// entries sit at their own index (else `Error::NotARaftEntry`, `Error::RaftEntryMisplaced`
    /// or `Error::RaftEntryMissing`). The blocking work runs on tokio's blocking pool.
    pub async fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<RaftLogStore<C>> {
        let dir = dir.as_ref().to_path_buf();
        let (state, meta, last_log_id) = blocking("opening the Raft store", {
            let dir = dir.clone();
            move || open_blocking::<C>(&dir, config)
        })
        .await?;
        let committed = meta.committed.clone();
        Ok(RaftLogStore {
            state: Arc::new(state),
            dir,
            meta,
            committed,
            meta_written_at: Instant::now(),
            last_log_id,
            closing: false,
        })
    }

    /// The log under the store, for metrics and reads (never append to it or cut it: the store
    /// keeps its index bookkeeping in step with its own calls).
    pub fn log(&self) -> &Log {
        &self.state.log
    }

    /// Writes the latest committed log id, then closes the log cleanly (once the last reader
    /// from [`RaftLogStorage::get_log_reader`] is dropped too; until then it only makes every
    /// entry durable). Dropping the store closes the log as well, on the blocking pool, without
    /// the committed log id, which openraft does not need durable.
    pub async fn close(mut self) -> Result<()> {
        if self.committed != self.meta.committed {
            self.write_meta(self.meta.clone()).await?;
        }
        let state = Arc::clone(&self.state);
        self.closing = true;
        drop(self);
        blocking("closing the Raft store", move || match Arc::try_unwrap(state) {
            Ok(state) => state.log.close(),
            Err(state) => state.log.flush(),
        })
        .await
    }

    /// Writes `meta` with the latest committed log id, durably, after every entry stored so far
    /// is durable (vote and log writes reach the disk in the order openraft made them).
    async fn write_meta(&mut self, mut meta: Meta<C::NodeId>) -> Result<()> {
        meta.committed = self.committed.clone();
        let (state, dir, written) = (Arc::clone(&self.state), self.dir.clone(), meta.clone());
        blocking("writing the Raft meta", move || {
            state.wait_stored_durable()?;
            written.write(&dir)
        })
        .await?;
        self.meta = meta;
        self.meta_written_at = Instant::now();
        Ok(())
    }

    /// The log id of the entry at `index`, read from the log.
    async fn log_id_at(&self, index: u64) -> Result<Option<LogIdOf<C>>> {
        let entries = read_entries::<C>(&self.state, index, index + 1).await?;
        Ok(entries.first().map(|entry| entry.get_log_id().clone()))
    }
}

impl<C: RaftTypeConfig> Drop for RaftLogStore<C> {
    fn drop(&mut self) {
        if !self.closing {
            drop_off_worker(&self.state);
        }
    }
}

impl<C: RaftTypeConfig> Drop for RaftLogStoreReader<C> {
    fn drop(&mut self) {
        drop_off_worker(&self.state);
    }
}

/// The last holder of the log closes it (fsyncs, a checkpoint): moved to the blocking pool when
/// dropped inside a runtime, so that no worker thread waits for the disk.
fn drop_off_worker(state: &Arc<RaftState>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let state = Arc::clone(state);
        drop(runtime.spawn_blocking(move || drop(state)));
    }
}

/// What opening found: the log, the meta, the id of the last entry.
type Opened<C> = (RaftState, Meta<NodeIdOf<C>>, Option<LogIdOf<C>>);

fn open_blocking<C: RaftTypeConfig>(dir: &Path, config: LogConfig) -> Result<Opened<C>> {
    check_config(&config)?;
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            op: "create directory",
            path: dir.into(),
            source,
        })?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            meta::sync_dir(parent)?;
        }
    }
    // The log first: its directory lock keeps a second open of a live store from touching the
    // meta files (reading makes `raft-meta.tmp` if it is missing, which in a live store may be
    // between its write and its rename).
    let state = RaftState::new(Log::open(dir.join(RAFT_LOG_DIR), config)?);
    let meta = Meta::<C::NodeId>::read(dir)?;
    // A crash between the meta write and the deletion of a purge: finish the purge.
    if let Some(purged) = &meta.last_purged
        && state.log.start_offset() <= purged.index
    {
        tracing::info!(dir = %dir.display(), index = purged.index, "re-applying the last purge of the Raft log");
        state.purge_before(purged.index.saturating_add(1))?;
    }
    let (start, next) = (state.log.start_offset(), state.log.next_offset());
    let mut last_log_id = None;
    if start < next {
        for index in [start, next - 1] {
            let entries = state.read(index, index + 1)?;
            let Some(raw) = entries.first() else {
                return Err(Error::RaftEntryMissing { path: state.log.dir().to_path_buf(), index });
            };
            last_log_id = Some(decode::<C>(state.log.dir(), raw)?.get_log_id().clone());
        }
    }
    Ok((state, meta, last_log_id))
}

/// Refuses a configuration under which the log could lose or delete entries by itself.
fn check_config(config: &LogConfig) -> Result<()> {
    let refuse = |field, reason: &str| Err(Error::InvalidConfig { field, reason: reason.to_owned() });
    if config.flush_policy != FlushPolicy::Always {
        return refuse("flush_policy", "a Raft log needs every append durable: use FlushPolicy::Always");
    }
    if config.retention_bytes.is_some() || config.retention_ms.is_some() {
        return refuse("retention_bytes/retention_ms", "Raft decides what leaves its log (purge): no retention");
    }
    if config.cleanup_policy != CleanupPolicy::Delete {
        return refuse("cleanup_policy", "compaction would remove Raft entries: use CleanupPolicy::Delete");
    }
    Ok(())
}

/// Runs blocking `work` on tokio's blocking pool; a panic in it is `Error::Panicked`.
async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => Err(Error::Panicked { what, message: join.to_string() }),
    }
}

/// Entries `[from, to)` decoded, in order, without a hole (entries below the log start skipped).
async fn read_entries<C: RaftTypeConfig>(state: &Arc<RaftState>, from: u64, to: u64) -> Result<Vec<C::Entry>> {
    if from >= to {
        return Ok(Vec::new());
    }
    let state = Arc::clone(state);
    blocking("reading Raft entries", move || {
        let raw = state.read(from, to)?;
        raw.iter().map(|raw| decode::<C>(state.log.dir(), raw)).collect()
    })
    .await
}

/// The entry read at a log offset of the log in `path`: `Error::NotARaftEntry` if it does not
/// decode, `Error::RaftEntryMisplaced` if it is not the entry of that index.
fn decode<C: RaftTypeConfig>(path: &Path, (offset, bytes): &RawEntry) -> Result<C::Entry> {
    let entry: C::Entry = postcard::from_bytes(bytes).map_err(|e| Error::NotARaftEntry {
        path: path.to_path_buf(),
        offset: *offset,
        reason: e.to_string(),
    })?;
    let index = entry.get_log_id().index;
    if index != *offset {
        return Err(Error::RaftEntryMisplaced { path: path.to_path_buf(), index, offset: *offset });
    }
    Ok(entry)
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let from = match range.start_bound() {
        Bound::Included(&start) => start,
        Bound::Excluded(&start) => start.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&end) => end.saturating_add(1),
        Bound::Excluded(&end) => end,
        Bound::Unbounded => u64::MAX,
    };
    (from, to)
}

/// A store failure as openraft's error (any `StorageError` stops the node): the boundary where
/// strata's `Error` becomes openraft's, its message and sources kept (`AnyError` records the
/// chain).
fn storage_error<NID: openraft::NodeId>(
    make: fn(AnyError) -> StorageIOError<NID>,
) -> impl FnOnce(Error) -> StorageError<NID> {
    move |error| StorageError::IO { source: make(AnyError::new(&error)) }
}

/// A strata error as the `io::Error` openraft's flush callback takes: the kind of an I/O failure
/// kept, and the error itself inside it (its message, `get_ref`, `into_inner`).
fn into_io(error: Error) -> std::io::Error {
    let kind = match &error {
        Error::Io { source, .. } => source.kind(),
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, error)
}

impl<C: RaftTypeConfig> RaftLogReader<C> for RaftLogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let (from, to) = bounds(&range);
        read_entries::<C>(&self.state, from, to).await.map_err(storage_error(StorageIOError::read_logs))
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let end = end.min(start.saturating_add(LIMITED_READ_ENTRIES));
        read_entries::<C>(&self.state, start, end).await.map_err(storage_error(StorageIOError::read_logs))
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for RaftLogStoreReader<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let (from, to) = bounds(&range);
        read_entries::<C>(&self.state, from, to).await.map_err(storage_error(StorageIOError::read_logs))
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        let end = end.min(start.saturating_add(LIMITED_READ_ENTRIES));
        read_entries::<C>(&self.state, start, end).await.map_err(storage_error(StorageIOError::read_logs))
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for RaftLogStore<C> {
    type LogReader = RaftLogStoreReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let holds_entries = self.state.log.next_offset() > self.state.log.start_offset();
        let last = if holds_entries { self.last_log_id.clone() } else { None };
        let last_purged_log_id = self.meta.last_purged.clone();
        Ok(LogState { last_log_id: last.or_else(|| last_purged_log_id.clone()), last_purged_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        RaftLogStoreReader { state: Arc::clone(&self.state), _config: PhantomData }
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let meta = Meta { vote: Some(vote.clone()), ..self.meta.clone() };
        self.write_meta(meta).await.map_err(storage_error(StorageIOError::write_vote))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.meta.vote.clone())
    }

    async fn save_committed(&mut self, committed: Option<LogIdOf<C>>) -> Result<(), StorageError<C::NodeId>> {
        self.committed = committed;
        if self.committed != self.meta.committed && self.meta_written_at.elapsed() >= COMMITTED_WRITE_INTERVAL {
            self.write_meta(self.meta.clone()).await.map_err(storage_error(StorageIOError::write))?;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<C>>, StorageError<C::NodeId>> {
        Ok(self.committed.clone())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let failed = storage_error(StorageIOError::write_logs);
        let min_first = self.meta.last_purged.as_ref().map_or(0, |purged| purged.index.saturating_add(1));
        // Encoded here: the entries need not be 'static, the bytes moved to the pool are.
        let mut encoded = Vec::new();
        let mut last: Option<LogIdOf<C>> = None;
        for entry in entries {
            let id = entry.get_log_id().clone();
            // At or below the last purged entry: purged already (applied, in a snapshot), and
            // storing it would leave a hole before the log start. openraft's suite appends one.
            if id.index < min_first {
                continue;
            }
            if let Some(previous) = &last
                && id.index != previous.index + 1
            {
                return Err(failed(Error::RaftNotConsecutive { index: id.index, previous: previous.index }));
            }
            let bytes = postcard::to_stdvec(&entry)
                .map_err(|e| Error::RaftEncode { what: format!("entry {}", id.index), reason: e.to_string() })
                .map_err(storage_error(StorageIOError::write_logs))?;
            encoded.push(bytes);
            last = Some(id);
        }
        let Some(last) = last else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        let first = last.index + 1 - encoded.len() as u64;
        let state = Arc::clone(&self.state);
        blocking("appending Raft entries", move || {
            let info = state.store(first, encoded, min_first)?;
            // Called once the last entry (and so every one before it) is durable, or with the
            // error that stopped it; from the thread that finished the sync round, never blocking.
            state.log.on_durable(&info, move |result| callback.log_io_completed(result.map_err(into_io)));
            Ok(())
        })
        .await
        .map_err(failed)?;
        self.last_log_id = Some(last);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogIdOf<C>) -> Result<(), StorageError<C::NodeId>> {
        let cut = log_id.index;
        if cut >= self.state.log.next_offset() {
            // Nothing at or past the cut: nothing to remove, and the last log id stays.
            return Ok(());
        }
        let state = Arc::clone(&self.state);
        blocking("truncating the Raft log", move || state.truncate(cut))
            .await
            .map_err(storage_error(StorageIOError::write_logs))?;
        let start = self.state.log.start_offset();
        self.last_log_id = match cut.max(start).checked_sub(1) {
            Some(index) if index >= start => {
                self.log_id_at(index).await.map_err(storage_error(StorageIOError::read_logs))?
            }
            _ => None,
        };
        Ok(())
    }

    async fn purge(&mut self, log_id: LogIdOf<C>) -> Result<(), StorageError<C::NodeId>> {
        if self.meta.last_purged.as_ref().is_some_and(|purged| *purged >= log_id) {
            return Ok(());
        }
        // The purge is recorded first: an open after a crash that stopped it finishes it.
        let meta = Meta { last_purged: Some(log_id.clone()), ..self.meta.clone() };
        self.write_meta(meta).await.map_err(storage_error(StorageIOError::write_logs))?;
        let state = Arc::clone(&self.state);
        blocking("purging the Raft log", move || {
            crash_point!("raft_purge_after_meta");
            state.purge_before(log_id.index.saturating_add(1))
        })
        .await
        .map_err(storage_error(StorageIOError::write_logs))?;
        if self.state.log.next_offset() == self.state.log.start_offset() {
            self.last_log_id = None;
        }
        Ok(())
    }
}
