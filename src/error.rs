//! The crate's error type. Every variant carries the context a user needs to act on it: the file and
//! position of a corruption, the range an offset fell outside, the limit a value exceeded.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in strata.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, e.g. "fdatasync".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Stored data failed a validity check (a batch's CRC, structure or expected offset, an index's
    /// sanity check, a state file's checksum).
    #[error("corrupt {path} at position {position}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte position of the damage inside `path`.
        position: u64,
        /// What was wrong.
        reason: Corruption,
    },
    /// A read asked for an offset below the log start or past the next offset (a read anywhere
    /// from the visible end to the next offset is empty, not an error), or a truncation for one
    /// below the start.
    #[error("offset {requested} out of range [{start}, {next})")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: u64,
        /// The log start offset at the time of the call.
        start: u64,
        /// The log's next offset at the time of the call (for a read whose segment went away
        /// under it, the end it was reading to).
        next: u64,
    },
    /// Another `Log` (in this process or another) holds the directory lock. The lock is an
    /// `flock` on a descriptor opened close-on-exec: a child process this program starts from
    /// another thread holds a copy of it between its fork and its exec, so an open right after a
    /// close retries for 100 ms before it reports `Locked`.
    #[error("{path} is locked by another open log")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The path given as a log directory exists but is not a directory.
    #[error("{path} is not a directory")]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },
    /// The directory, or a file in it, was written by a newer build of strata: a `log.meta` or
    /// `store.meta` names a format version or a format feature this build does not know, or a
    /// stored batch whose CRC is valid has attributes this build does not know (a compression codec,
    /// a newer feature bit). Nothing was changed (no torn tail cut, no marker or lock file left by
    /// a store's open); open it with a build that knows the format (reading on would risk taking
    /// data it cannot decode for damage and cutting it).
    #[error("{path}: {what}; this build of strata does not know it and changed nothing (open it with a newer build)")]
    UnsupportedFormat {
        /// The file: the `log.meta` or `store.meta`, or the `.log` holding the batch.
        path: PathBuf,
        /// What is unknown, e.g. "format version 3 (this build reads up to 1)", or the batch's
        /// position and attribute bits.
        what: String,
    },
    /// A configuration value is out of range.
    #[error("invalid config {field}: {reason}")]
    InvalidConfig {
        /// The `LogConfig` field.
        field: &'static str,
        /// Why the value was refused.
        reason: String,
    },
    /// `append` was called with no records.
    #[error("cannot append an empty batch")]
    EmptyBatch,
    /// The encoded batch exceeds `max_batch_bytes`.
    #[error("batch of {size} bytes exceeds max_batch_bytes {max}")]
    BatchTooLarge {
        /// Encoded size of the batch (12 + batch_length).
        size: u64,
        /// The configured limit.
        max: u64,
    },
    /// A record timestamp is negative or further than `max_timestamp_skew_ms` from the log's clock.
    #[error("timestamp {timestamp_ms} is out of range (log clock {now_ms}, max skew {max_skew_ms} ms)")]
    InvalidTimestamp {
        /// The timestamp given.
        timestamp_ms: i64,
        /// The log's clock when it was checked.
        now_ms: i64,
        /// The configured skew limit.
        max_skew_ms: u64,
    },
    /// A caller-encoded batch given to `append_batch` is not acceptable.
    #[error("invalid batch: {reason}")]
    InvalidBatch {
        /// Why it was refused.
        reason: Corruption,
    },
    /// Another thread interrupted a cursor's wait (`CursorInterrupt::interrupt`); nothing was
    /// read and the cursor did not move.
    #[error("the wait was interrupted")]
    Interrupted,
    /// An earlier write or fsync failed; the on-disk state is unknown until the log is reopened.
    #[error("an earlier write or fsync failed; reopen the log")]
    Poisoned,
    /// The log has been closed.
    #[error("the log is closed")]
    Closed,
    /// A wait (for durability, for visibility, for the event thread to stop) reached its deadline.
    /// A producer waiting for buffer memory gets `BufferExhausted` instead.
    #[error("timed out after {waited:?}")]
    Timeout {
        /// How long the caller waited.
        waited: Duration,
    },
    /// The file system has no space (or quota) left for what a call needed. Nothing the failing
    /// call was storing is stored, and the log is not poisoned: appends work again once space
    /// returns. A log on a full disk still opens, so records can be deleted.
    #[error("disk full: {op} {path}: {}; {advice}", space_text(*.needed, *.available))]
    DiskFull {
        /// What needed the space, e.g. "fallocate".
        op: &'static str,
        /// The file (or directory) it was for.
        path: PathBuf,
        /// Bytes it needed, when known.
        needed: Option<u64>,
        /// Bytes free for unprivileged use on that file system then, when known.
        available: Option<u64>,
        /// What lowers the need, e.g. "lower segment_bytes (strata: --segment-bytes) or free space".
        advice: &'static str,
    },
    /// A map would pass the map budget's hard cap (`MapBudgetConfig::max_maps`) and nothing could
    /// be reclaimed at once (every mapped file is being read): this read fails, nothing else is
    /// affected; a retry usually succeeds.
    #[error("map budget exhausted: {maps} maps held, at most {max_maps}; every mapped file is in use")]
    MapBudget {
        /// Maps held.
        maps: u64,
        /// The hard cap.
        max_maps: u64,
    },
    /// Opening a file would pass the map budget's `max_open_files`.
    #[error("open-file budget exhausted: {open} files open, at most {max_open_files}")]
    OpenFileBudget {
        /// Files open under the budget.
        open: u64,
        /// The limit.
        max_open_files: u64,
    },
    /// Readers kept the segment a truncation must change busy past `truncate_wait_ms`; no record
    /// was removed and no segment changed (only the checkpoint's recovery point stays lowered to
    /// the cut, harmlessly, until the next checkpoint write raises it).
    #[error("readers kept the log busy for {waited:?}; nothing was truncated")]
    Busy {
        /// How long the truncation waited.
        waited: Duration,
    },
    /// The offset waited for or read was removed by a truncation; the log now ends at `next_offset`.
    #[error("truncated: the log now ends at offset {next_offset}")]
    Truncated {
        /// The log's next offset after the truncation.
        next_offset: u64,
    },
    /// A read looked for the segment holding an offset `attempts` times while the segments kept
    /// changing under it (truncation, retention, compaction) and gave up; nothing is wrong with
    /// the data. Retry the call.
    #[error("the log's segments changed {attempts} times during the call; retry it")]
    Unsettled {
        /// How many times the call looked.
        attempts: usize,
    },
    /// The log or message store was opened read-only (`Log::open_read_only`,
    /// `MessageStore::open_read_only`): it cannot be written.
    #[error("opened read-only: writes are refused")]
    ReadOnly,
    /// A background operation (a compaction pass) stopped before changing anything: the log is
    /// closing, or a truncation or retention changed the segments it was rewriting.
    #[error("cancelled: {0}")]
    Cancelled(&'static str),
    /// A bug: an operation or background thread panicked. The operation did not complete; a
    /// panic in the syncer poisons the log, a panicking compaction pass is abandoned before it
    /// changes any segment.
    #[error("{what} panicked: {message}")]
    Panicked {
        /// What panicked, e.g. "compaction pass".
        what: &'static str,
        /// The panic message.
        message: String,
    },
    /// A channel commit found no room for its puts (`capacity` events, or the byte limit) within
    /// `keep_alive_ms`; nothing was applied and the transaction is still open (commit again,
    /// or roll back).
    #[error(
        "channel full: {events} events and {bytes} bytes would exceed capacity {capacity} or byte limit \
         {byte_limit} (waited {waited:?}); take faster, or raise capacity or byte_capacity"
    )]
    ChannelFull {
        /// Events the channel would hold after the commit (committed, not take-committed).
        events: u64,
        /// Body bytes it would hold after the commit.
        bytes: u64,
        /// `ChannelConfig::capacity`.
        capacity: u64,
        /// `byte_capacity × (100 − byte_capacity_buffer_percentage) / 100`.
        byte_limit: u64,
        /// How long the commit waited for room.
        waited: Duration,
    },
    /// A channel transaction already holds `transaction_capacity` puts (or takes); the put or
    /// take was refused and the transaction stays open. Flume's advice holds: commit more often,
    /// or raise `transaction_capacity`.
    #[error(
        "{what} list of the transaction is full ({capacity} events): commit more often or raise transaction_capacity"
    )]
    TransactionCapacity {
        /// `"put"` or `"take"`.
        what: &'static str,
        /// `ChannelConfig::transaction_capacity`.
        capacity: u64,
    },
    /// A channel transaction's batch (its puts and its take record, committed as one batch of the
    /// log) would exceed the log's `max_batch_bytes`; the put or take was refused and the
    /// transaction stays open: commit what it holds first.
    #[error("the transaction's batch would be {size} bytes, more than max_batch_bytes {max}: commit more often")]
    TransactionTooLarge {
        /// The batch's encoded size with the refused event.
        size: u64,
        /// The log's `max_batch_bytes`.
        max: u64,
    },
    /// A record of a channel's log that the channel never writes (it was changed behind its
    /// back): the channel does not open.
    #[error("the record at offset {offset} of {path} is not a channel record: {reason}")]
    NotAChannelRecord {
        /// The channel's log directory.
        path: PathBuf,
        /// The record's offset.
        offset: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    // The message store's (`MessageStore`).
    /// A topic name the store does not accept (it names a directory).
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic {
        /// The name given.
        topic: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A queue id at or past `StoreConfig::max_queues_per_topic`.
    #[error("queue {queue_id} is out of range: a topic has queues 0..{max}")]
    InvalidQueue {
        /// The id given.
        queue_id: u32,
        /// Queues per topic.
        max: u32,
    },
    /// A message larger than `StoreConfig::max_message_bytes` once encoded.
    #[error("message of {size} bytes exceeds max_message_bytes {max}")]
    MessageTooLarge {
        /// Its encoded size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A property, tag or key the store cannot hold as given.
    #[error("invalid {what} {name:?}: {reason}")]
    InvalidField {
        /// `"property"`, `"tag"`, `"key"`, `"keys"` (too many), or `"queue"` (its numbering is
        /// exhausted).
        what: &'static str,
        /// The name or value given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A record of the commit log that is not a message of this store (a header is missing or
    /// malformed): never written by the store, so the log was changed behind its back.
    #[error("the record at log offset {log_offset} is not a message: {reason}")]
    NotAMessage {
        /// Where it is.
        log_offset: u64,
        /// What is missing or malformed.
        reason: &'static str,
    },
    /// The message was stored in the commit log at `log_offset`, but dispatch (writing its queue
    /// and index entries) is failing: `reason` says why. Dispatch retries; the message is in its
    /// queue once dispatch gets past it. If `reason` says the commit log failed (a poisoned log),
    /// the message may not be durable: reopen the store.
    #[error("message stored at log offset {log_offset} but not dispatched: {reason}")]
    DispatchFailed {
        /// The message's offset in the commit log.
        log_offset: u64,
        /// Why dispatch is stuck.
        reason: String,
    },
    /// A `put_batch` whose messages are not all for one topic and queue.
    #[error("a batch holds messages of one topic and queue; message {index} is for {topic:?} queue {queue_id}")]
    MixedBatch {
        /// The first message that differs from the first.
        index: usize,
        /// Its topic.
        topic: String,
        /// Its queue.
        queue_id: u32,
    },
    // The producer's (`Producer`, `BufferPool`).
    /// The buffer pool could not lend a buffer before the deadline (for `Producer::send`,
    /// `ProducerConfig::max_block_ms`): the records sent fill the pool faster than the log takes
    /// them. Nothing was sent.
    #[error("no buffer of {requested} bytes became available within {waited:?}")]
    BufferExhausted {
        /// Bytes asked for.
        requested: usize,
        /// How long the caller waited.
        waited: Duration,
    },
    /// A record sent through a `Producer` was not appended. The cause is the log's error, shared
    /// by every record of its batch.
    #[error("send failed: {0}")]
    SendFailed(#[source] Arc<Error>),
    // The Raft store's (`RaftLogStore`, feature `openraft`). openraft gets them inside its
    // `StorageError`, which stops the node; `RaftLogStore::open` and `close` return them as is.
    /// An append whose first entry does not continue the Raft log: not at the log's next index,
    /// and the log is not empty (an empty log restarts at the first entry, a follower after a
    /// snapshot, unless that is below the index after the last purged entry). Nothing was
    /// appended.
    #[error("append at index {index} to a Raft log holding [{start}, {next}): a gap")]
    RaftGap {
        /// The first entry's index.
        index: u64,
        /// The log's start offset (its first entry's index).
        start: u64,
        /// The log's next offset (the index its next entry must have).
        next: u64,
    },
    /// The entries of one append do not have consecutive indexes. Nothing was appended.
    #[error("append of Raft index {index} after {previous}: not consecutive")]
    RaftNotConsecutive {
        /// The entry out of line.
        index: u64,
        /// The index of the entry before it.
        previous: u64,
    },
    /// A Raft entry, or the meta file's vote or log ids, could not be encoded (postcard): the
    /// type config's types do not serialize. Nothing was written.
    #[error("cannot encode {what}: {reason}")]
    RaftEncode {
        /// What was encoded, e.g. "entry 17".
        what: String,
        /// The encoder's message.
        reason: String,
    },
    /// A record of the Raft store's log that does not decode as an entry of the store's type
    /// config: the log was written by something else, or with another type config.
    #[error("the record at offset {offset} of {path} is not a Raft entry: {reason}")]
    NotARaftEntry {
        /// The store's log directory.
        path: PathBuf,
        /// The record's offset.
        offset: u64,
        /// The decoder's message.
        reason: String,
    },
    /// A Raft entry not at the log offset equal to its index, where the store keeps every entry:
    /// found by a read or at open (the log was changed behind the store's back), or given by an
    /// append (something else appended to the log, e.g. through `RaftLogStore::log`).
    #[error("the Raft entry of index {index} is at offset {offset} of {path}")]
    RaftEntryMisplaced {
        /// The store's log directory.
        path: PathBuf,
        /// The entry's Raft index.
        index: u64,
        /// The log offset it is at.
        offset: u64,
    },
    /// At open, the log returned no entry at `index`, its first or its last, although its
    /// offsets cover it: its records are not one per offset (it was changed behind the store's
    /// back).
    #[error("the Raft log {path} holds no entry at index {index}, inside its offsets")]
    RaftEntryMissing {
        /// The store's log directory.
        path: PathBuf,
        /// The index looked for.
        index: u64,
    },
    /// A truncation of the Raft log did not end it exactly at the cut: its records are not one
    /// per batch (something else appended to the log). The entries from where it ended on are
    /// gone.
    #[error("truncating the Raft log at index {cut} ended it at {next}")]
    RaftTruncationInexact {
        /// The index of the first entry to remove.
        cut: u64,
        /// The log's next offset after the truncation.
        next: u64,
    },
}

/// Why a batch, record, index or checkpoint failed validation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The batch magic byte is not a supported version.
    #[error("unsupported magic {0}")]
    BadMagic(u8),
    /// Fewer bytes than a batch header's 43 are there: a header cut short (a torn tail, or a
    /// caller's batch too short to hold one).
    #[error("batch header cut short: {available} of {} bytes", crate::format::BATCH_HEADER_LEN)]
    ShortHeader {
        /// Bytes there.
        available: u64,
    },
    /// `12 + batch_length` is below the header size, above `MAX_BATCH_LEN`, or past the file end.
    #[error("batch length {length} invalid ({available} bytes available)")]
    BadLength {
        /// The stored batch_length + 12.
        length: u64,
        /// Bytes remaining in the file from the batch start.
        available: u64,
    },
    /// The stored CRC does not match the bytes it covers.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC read from the batch header.
        stored: u32,
        /// CRC computed over the covered bytes.
        computed: u32,
    },
    /// The batch does not start at the offset the previous batch (or the file name) implies.
    #[error("expected base offset {expected}, found {found}")]
    UnexpectedOffset {
        /// What the preceding data implies.
        expected: u64,
        /// What the batch says.
        found: u64,
    },
    /// Attribute bits that are reserved or not allowed here are set (a compression codec, or a
    /// bit this build does not know). In a caller's batch it is refused; in a stored batch it is
    /// found only once the CRC has matched, so the batch is whole and of a newer format: reading
    /// it is `Error::UnsupportedFormat`, never `Error::Corrupt`.
    #[error("unsupported attributes {0:#06x}")]
    BadAttributes(u16),
    /// A record inside the batch does not decode, or the records do not fill the batch exactly.
    #[error("bad record {index}: {what}")]
    BadRecord {
        /// Index of the record in its batch.
        index: u32,
        /// What was wrong.
        what: &'static str,
    },
    /// Record count, offset deltas and last_offset_delta disagree.
    #[error("bad offset deltas: {0}")]
    BadOffsetDeltas(&'static str),
    /// The batch's max_timestamp disagrees with its records.
    #[error("max_timestamp {stored} but records have {computed}")]
    BadMaxTimestamp {
        /// max_timestamp in the header.
        stored: i64,
        /// Largest record timestamp.
        computed: i64,
    },
    /// A cleaner batch was given where only producer batches are allowed.
    #[error("batches written by the cleaner cannot be appended")]
    CleanerBatch,
    /// An index file's length is not a whole number of entries.
    #[error("index is {len} bytes, not a whole number of {entry_len}-byte entries")]
    IndexLength {
        /// The file's length.
        len: u64,
        /// Bytes per entry.
        entry_len: u64,
    },
    /// An entry follows an all-zero one: zeros only ever fill the unused tail of an index.
    #[error("index entry {entry} follows an unused (all-zero) entry")]
    IndexEntryAfterUnused {
        /// Number of the entry in the file, from 0.
        entry: u64,
    },
    /// A sealed segment's index has unused entries at its end: it was not trimmed at seal.
    #[error("{unused} of the {entries} entries of a sealed segment's index are unused (it was not trimmed)")]
    IndexNotTrimmed {
        /// All-zero entries at the end.
        unused: u64,
        /// Entries in the file.
        entries: u64,
    },
    /// An offset index entry's relative offset is not above the previous entry's.
    #[error("index entry {entry}: relative offset {found} does not increase past {previous}")]
    IndexOffsetNotIncreasing {
        /// Number of the entry in the file, from 0.
        entry: u64,
        /// The previous entry's relative offset.
        previous: u32,
        /// This entry's relative offset.
        found: u32,
    },
    /// An offset index entry's position is not past the previous entry's.
    #[error("index entry {entry}: position {found} does not increase past {previous}")]
    IndexPositionNotIncreasing {
        /// Number of the entry in the file, from 0.
        entry: u64,
        /// The previous entry's position.
        previous: u32,
        /// This entry's position.
        found: u32,
    },
    /// A time index entry's timestamp is not above the previous entry's (time went backwards, or
    /// stood still: an entry is only added when the largest timestamp grew).
    #[error("time index entry {entry}: timestamp {found} ms does not increase past {previous} ms")]
    TimeNotIncreasing {
        /// Number of the entry in the file, from 0.
        entry: u64,
        /// The previous entry's timestamp.
        previous: i64,
        /// This entry's timestamp.
        found: i64,
    },
    /// A time index entry's relative offset is below the previous entry's.
    #[error("time index entry {entry}: relative offset {found} goes back from {previous}")]
    TimeOffsetBackwards {
        /// Number of the entry in the file, from 0.
        entry: u64,
        /// The previous entry's relative offset.
        previous: u32,
        /// This entry's relative offset.
        found: u32,
    },
    /// An offset index entry points at or past the end of the segment's data.
    #[error("index entry points at position {position}, at or past the end of the segment's data ({data_len} bytes)")]
    IndexPastData {
        /// The position in the entry.
        position: u64,
        /// Bytes of data in the segment.
        data_len: u64,
    },
    /// An offset index entry does not point at the start of a valid batch with its offset.
    #[error("index entry (offset {offset}, position {position}) does not point at a valid batch with that offset{}", because(.reason.as_deref()))]
    IndexEntryNotAtBatch {
        /// The offset in the entry (segment base + relative offset).
        offset: u64,
        /// The position in the entry.
        position: u64,
        /// What is there instead, when known.
        reason: Option<Box<Corruption>>,
    },
    /// A time index entry names an offset past the segment's last one.
    #[error("time index entry (timestamp {timestamp_ms} ms) names offset {offset}, past the segment's end {end}")]
    TimeEntryPastEnd {
        /// The entry's timestamp.
        timestamp_ms: i64,
        /// The offset it names (segment base + relative offset).
        offset: u64,
        /// The offset after the segment's last record.
        end: u64,
    },
    /// A sealed segment's time index does not end with an entry for the segment's largest
    /// timestamp (retention reads it; KAFKA-10207).
    #[error("the time index of a sealed segment lacks the final entry for its max timestamp {max_timestamp} ms")]
    MissingFinalTimeEntry {
        /// The largest timestamp in the segment.
        max_timestamp: i64,
    },
    /// A consume-queue (`.cq`) entry inside the queue is all zero: unused space where an entry
    /// must be (the queue ends at its first zero entry).
    #[error("queue entry {queue_offset} is unused (all zero)")]
    QueueEntryUnused {
        /// The entry's queue offset.
        queue_offset: u64,
    },
    /// A consume-queue entry of size 0: a record's encoded size never is, so the entry is torn.
    #[error("queue entry {queue_offset}: size 0 (a message has bytes; the entry is torn)")]
    QueueEntrySizeZero {
        /// The entry's queue offset.
        queue_offset: u64,
    },
    /// A consume-queue entry's log offset is not above the previous entry's (a queue's messages
    /// are in log order, each at its own offset).
    #[error("queue entry {queue_offset}: log offset {found} does not increase past {previous}")]
    QueueLogOffsetNotIncreasing {
        /// The entry's queue offset.
        queue_offset: u64,
        /// The previous entry's log offset.
        previous: u64,
        /// This entry's log offset.
        found: u64,
    },
    /// A consume-queue entry points at or past the commit log's next offset: at a message the log
    /// does not hold (it lost a torn tail the queue had seen).
    #[error(
        "queue entry {queue_offset} points at log offset {log_offset}, at or past the log's next offset {log_next}"
    )]
    QueueEntryPastLogEnd {
        /// The entry's queue offset.
        queue_offset: u64,
        /// The log offset in the entry.
        log_offset: u64,
        /// The commit log's next offset.
        log_next: u64,
    },
    /// A checkpoint or marker file failed its checks.
    #[error("{0}")]
    BadFile(&'static str),
    /// A file just written (the cleaner's output) could not be read back for its check.
    #[error("written, but could not be read back")]
    NotReadBack,
    /// A file is shorter than the data known to be in it.
    #[error("file is {len} bytes, expected at least {expected}")]
    ShortFile {
        /// The file's length.
        len: u64,
        /// The length it must have.
        expected: u64,
    },
    /// The valid data ends before the recovery point: acknowledged records are missing.
    #[error("the log ends at offset {end}, before the recovery point {recovery_point}")]
    EndsBeforeRecoveryPoint {
        /// The offset after the last valid batch.
        end: u64,
        /// The recovery point in the checkpoint.
        recovery_point: u64,
    },
    /// A segment's valid data ends before offsets the log holds after it (a gap: data is missing).
    #[error("the data ends at offset {end}, but the log holds offsets up to {upper}")]
    DataEndsEarly {
        /// The offset after the last valid batch of the segment.
        end: u64,
        /// The visible end of the log.
        upper: u64,
    },
    /// A `.log` file that does not belong to the log: empty but not the last segment, or starting
    /// inside the previous segment's offsets. `strata recover --force` renames it `.foreign`.
    #[error("foreign segment file ({0}); `strata recover --force` sets it aside as .foreign")]
    ForeignFile(&'static str),
    /// A segment's file-name base offset does not continue the previous segment.
    #[error("segment starts at {found}, previous segment ends at {expected}")]
    SegmentGap {
        /// The previous segment's end.
        expected: u64,
        /// This segment's base.
        found: u64,
    },
}

/// ": <reason>" if there is one.
fn because(reason: Option<&Corruption>) -> String {
    reason.map_or_else(String::new, |r| format!(": {r}"))
}

/// "N bytes needed, M available", with what is known.
fn space_text(needed: Option<u64>, available: Option<u64>) -> String {
    match (needed, available) {
        (Some(n), Some(a)) => format!("{n} bytes needed, {a} available"),
        (Some(n), None) => format!("{n} bytes needed"),
        (None, Some(a)) => format!("{a} bytes available"),
        (None, None) => "no space left".to_owned(),
    }
}

impl Error {
    /// An `Error::Panicked` from a caught panic's payload.
    pub(crate) fn panicked(what: &'static str, payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Error::Panicked { what, message }
    }

    /// Wraps an `io::Error` with the operation and path it came from; running out of space or
    /// quota is `Error::DiskFull` (the storage seam fills in the bytes needed and free where it
    /// knows them).
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| match source.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => {
                Error::DiskFull { op, path, needed: None, available: None, advice: "free space on that file system" }
            }
            _ => Error::Io { op, path, source },
        }
    }

    /// The error for bytes read from disk that failed a check: `Corrupt`, except a stored batch
    /// whose attributes this build does not know ([`Corruption::BadAttributes`], which batch
    /// validation reports only once the batch's CRC has matched): its bytes are whole, written by a
    /// build that knows a compression codec or a feature this one does not, so it is
    /// `UnsupportedFormat`, never damage, and nothing may cut it as a torn tail.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, position: u64, reason: Corruption) -> Error {
        match reason {
            Corruption::BadAttributes(attributes) => Error::unsupported_batch(path.into(), position, attributes),
            reason => Error::Corrupt { path: path.into(), position, reason },
        }
    }

    /// `UnsupportedFormat` for the batch at `position` of the `.log` at `path`, whose CRC matched
    /// and whose `attributes` hold bits this build does not know.
    pub(crate) fn unsupported_batch(path: PathBuf, position: u64, attributes: u16) -> Error {
        use crate::format::{ATTR_COMPRESSION_MASK, ATTR_KNOWN};
        let codec = attributes & ATTR_COMPRESSION_MASK;
        let unknown = attributes & !ATTR_KNOWN;
        let what = match (codec, unknown) {
            (0, bits) => format!("attribute bits {bits:#06x} this build does not know"),
            (codec, 0) => format!("compression codec {codec}, which this build does not read"),
            (codec, bits) => {
                format!("compression codec {codec} and attribute bits {bits:#06x} this build does not know")
            }
        };
        let what = format!(
            "the batch at position {position} has attributes {attributes:#06x} ({what}); its CRC is valid, so \
             it is data written by a newer build, not damage"
        );
        Error::UnsupportedFormat { path, what }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_space_or_quota_is_disk_full() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            let error = Error::io("write", "/x/f")(io::Error::from_raw_os_error(errno));
            assert!(matches!(error, Error::DiskFull { op: "write", .. }), "{error:?}");
            assert!(error.to_string().starts_with("disk full: write /x/f: no space left; free space"), "{error}");
        }
        let other = Error::io("write", "/x/f")(io::Error::from_raw_os_error(libc::EIO));
        assert!(matches!(other, Error::Io { .. }));
        let full = Error::DiskFull {
            op: "fallocate",
            path: "/x/00000000000000000000.log".into(),
            needed: Some(1 << 30),
            available: Some(4096),
            advice: "lower segment_bytes (strata: --segment-bytes) or free space",
        };
        assert_eq!(
            full.to_string(),
            "disk full: fallocate /x/00000000000000000000.log: 1073741824 bytes needed, 4096 available; \
             lower segment_bytes (strata: --segment-bytes) or free space"
        );
    }
}
