//! Every magic number, version, size, field position and file suffix of the on-disk format
//! (docs/DESIGN.md §3–§6, docs/FORMAT.md). All integers on disk are big-endian. Positions are
//! derived from the previous field so a change to one field cannot silently misplace the others.

// ---- Record batch (docs/DESIGN.md §4) ------------------------------------------------------------

/// Position of `base_offset u64`.
pub const BASE_OFFSET_POS: usize = 0;
/// Position of `batch_length u32` (bytes after this field).
pub const BATCH_LENGTH_POS: usize = BASE_OFFSET_POS + 8;
/// Bytes before the part that `batch_length` counts: base_offset and batch_length.
pub const LOG_OVERHEAD: usize = BATCH_LENGTH_POS + 4;
/// Position of `magic u8`.
pub const MAGIC_POS: usize = LOG_OVERHEAD;
/// Position of `crc u32`, the CRC-32 of bytes `[ATTRIBUTES_POS, end of batch)`.
pub const CRC_POS: usize = MAGIC_POS + 1;
/// Position of `attributes u16`: the first byte the CRC covers.
pub const ATTRIBUTES_POS: usize = CRC_POS + 4;
/// Position of `last_offset_delta u32`.
pub const LAST_OFFSET_DELTA_POS: usize = ATTRIBUTES_POS + 2;
/// Position of `base_timestamp i64`.
pub const BASE_TIMESTAMP_POS: usize = LAST_OFFSET_DELTA_POS + 4;
/// Position of `max_timestamp i64`.
pub const MAX_TIMESTAMP_POS: usize = BASE_TIMESTAMP_POS + 8;
/// Position of `record_count u32`.
pub const RECORD_COUNT_POS: usize = MAX_TIMESTAMP_POS + 8;
/// Size of the batch header; the records start here.
pub const BATCH_HEADER_LEN: usize = RECORD_COUNT_POS + 4;
const _: () = assert!(BATCH_HEADER_LEN == 43);

/// The only batch format version.
pub const BATCH_MAGIC: u8 = 1;
/// Upper bound of an encoded batch (`12 + batch_length`) accepted anywhere, whatever the config.
pub const MAX_BATCH_LEN: usize = 64 << 20;

/// Attribute bits 0–2: compression codec. Only 0 (none) is defined.
pub const ATTR_COMPRESSION_MASK: u16 = 0b111;
/// Attribute bit 3: timestamps are the creator's (1) or the log's append time (0).
pub const ATTR_CREATE_TIME: u16 = 1 << 3;
/// Attribute bit 4: the batch was rewritten by the cleaner (offset gaps allowed).
pub const ATTR_CLEANER: u16 = 1 << 4;
/// Every attribute bit with a meaning; the rest must be 0.
pub const ATTR_KNOWN: u16 = ATTR_COMPRESSION_MASK | ATTR_CREATE_TIME | ATTR_CLEANER;

/// A record's own attributes byte; no bits are defined, so it must be 0.
pub const RECORD_ATTRIBUTES: u8 = 0;
/// Length value meaning "no key" / "no value".
pub const NULL_LENGTH: i64 = -1;
/// The longest zig-zag varint (a 64-bit value).
pub const MAX_VARINT_LEN: usize = 10;

// ---- Segments (docs/DESIGN.md §5) ----------------------------------------------------------------

/// Largest segment: positions inside a segment are u32 and must stay below 2³¹ + 1.
pub const MAX_SEGMENT_BYTES: u64 = 2 << 30;
/// Smallest segment the config accepts (tests use tiny segments to force many rolls).
pub const MIN_SEGMENT_BYTES: u64 = 128;

// ---- Sparse indexes (docs/DESIGN.md §6) ----------------------------------------------------------

/// `.index` entry: `[relative_offset u32][position u32]`.
pub const OFFSET_INDEX_ENTRY_LEN: usize = 4 /* relative_offset */ + 4 /* position */;
const _: () = assert!(OFFSET_INDEX_ENTRY_LEN == 8);
/// `.timeindex` entry: `[timestamp_ms i64][relative_offset u32]`.
pub const TIME_INDEX_ENTRY_LEN: usize = 8 /* timestamp_ms */ + 4 /* relative_offset */;
const _: () = assert!(TIME_INDEX_ENTRY_LEN == 12);

// ---- checkpoint (docs/DESIGN.md §3) --------------------------------------------------------------

/// Magic of the `checkpoint` file (each slot of version 2; the whole file of version 1).
pub const CHECKPOINT_MAGIC: [u8; 4] = *b"SLCP";
/// Version of the `checkpoint` file: two slots written alternately, so a write needs no new
/// blocks (a log on a full disk can still checkpoint, open and delete records).
pub const CHECKPOINT_VERSION: u16 = 2;
/// Position of `version u16` in a slot.
pub const CHECKPOINT_VERSION_POS: usize = CHECKPOINT_MAGIC.len();
/// Position of `sequence u64` in a slot: the slot with the larger valid sequence wins.
pub const CHECKPOINT_SEQUENCE_POS: usize = CHECKPOINT_VERSION_POS + 2;
/// Position of `log_start_offset u64` in a slot.
pub const CHECKPOINT_LOG_START_POS: usize = CHECKPOINT_SEQUENCE_POS + 8;
/// Position of `recovery_point u64` in a slot.
pub const CHECKPOINT_RECOVERY_POINT_POS: usize = CHECKPOINT_LOG_START_POS + 8;
/// Position of `pending_reset u64` in a slot: a `reset_at` in progress to that offset (`u64::MAX`:
/// none). Written before the reset changes any file; an open finding it completes the reset.
pub const CHECKPOINT_PENDING_RESET_POS: usize = CHECKPOINT_RECOVERY_POINT_POS + 8;
/// Position of `crc u32` (of the slot's bytes before it) in a slot.
pub const CHECKPOINT_CRC_POS: usize = CHECKPOINT_PENDING_RESET_POS + 8;
/// Bytes of a slot that carry data (the rest of the slot is zero).
pub const CHECKPOINT_SLOT_DATA_LEN: usize = CHECKPOINT_CRC_POS + 4;
const _: () = assert!(CHECKPOINT_CRC_POS == 38 && CHECKPOINT_SLOT_DATA_LEN == 42);
/// `pending_reset` when no reset is in progress.
pub const CHECKPOINT_NO_RESET: u64 = u64::MAX;
/// Bytes of a slot: a page each, so writing one slot never rewrites the other's page.
pub const CHECKPOINT_SLOT_LEN: usize = 4096;
/// Slots in the file; sequence `n` is written to slot `n % CHECKPOINT_SLOTS`.
pub const CHECKPOINT_SLOTS: usize = 2;
/// Size of the `checkpoint` file.
pub const CHECKPOINT_LEN: usize = CHECKPOINT_SLOT_LEN * CHECKPOINT_SLOTS;
const _: () = assert!(CHECKPOINT_SLOT_DATA_LEN <= CHECKPOINT_SLOT_LEN);

/// Version 1 of the `checkpoint` file (read, never written): magic, version u16 = 1,
/// log_start_offset u64, recovery_point u64, crc u32, replaced atomically.
pub const CHECKPOINT_V1_VERSION: u16 = 1;
/// Position of `log_start_offset` in a version 1 file.
pub const CHECKPOINT_V1_LOG_START_POS: usize = CHECKPOINT_VERSION_POS + 2;
/// Position of `recovery_point` in a version 1 file.
pub const CHECKPOINT_V1_RECOVERY_POINT_POS: usize = CHECKPOINT_V1_LOG_START_POS + 8;
/// Position of `crc u32` in a version 1 file.
pub const CHECKPOINT_V1_CRC_POS: usize = CHECKPOINT_V1_RECOVERY_POINT_POS + 8;
/// Size of a version 1 file.
pub const CHECKPOINT_V1_LEN: usize = CHECKPOINT_V1_CRC_POS + 4;
const _: () = assert!(CHECKPOINT_V1_CRC_POS == 22 && CHECKPOINT_V1_LEN == 26);

// ---- .clean-shutdown (docs/DESIGN.md §3) ---------------------------------------------------------

/// Position of `next_offset u64` in `.clean-shutdown`.
pub const CLEAN_NEXT_OFFSET_POS: usize = 0;
/// Position of `active segment base u64` in `.clean-shutdown`.
pub const CLEAN_ACTIVE_BASE_POS: usize = CLEAN_NEXT_OFFSET_POS + 8;
/// Position of `active segment length u32` in `.clean-shutdown`.
pub const CLEAN_ACTIVE_LEN_POS: usize = CLEAN_ACTIVE_BASE_POS + 8;
/// Position of `crc u32` (of the bytes before it) in `.clean-shutdown`.
pub const CLEAN_CRC_POS: usize = CLEAN_ACTIVE_LEN_POS + 4;
/// Size of the `.clean-shutdown` file.
pub const CLEAN_SHUTDOWN_LEN: usize = CLEAN_CRC_POS + 4;
const _: () = assert!(CLEAN_SHUTDOWN_LEN == 24);

// ---- cleaner-checkpoint (docs/DESIGN.md §3) ------------------------------------------------------

/// Magic of the `cleaner-checkpoint` file.
pub const CLEANER_CHECKPOINT_MAGIC: [u8; 4] = *b"SLCC";
/// Version of the `cleaner-checkpoint` file.
pub const CLEANER_CHECKPOINT_VERSION: u16 = 1;
/// Size of a file of one `u64` (the `cleaner-checkpoint`, `store.checkpoint`): magic, version,
/// value u64, crc u32.
pub const VALUE_FILE_LEN: usize = 4 + 2 + 8 + 4;
const _: () = assert!(VALUE_FILE_LEN == 18);

// ---- log.meta (docs/DESIGN.md §3) ----------------------------------------------------------------

/// The file that records what a log directory is: the format version and features its files use,
/// and the parameters its segments and indexes are made with (segment size, index size, index
/// interval), so every tool that rebuilds a file builds it as the log would.
pub const META_FILE: &str = "log.meta";
/// Magic of `log.meta`.
pub const META_MAGIC: [u8; 4] = *b"SLMD";
/// The format version this build writes and the newest it reads. A directory whose `log.meta`
/// names a newer version was written by a newer build: it is refused at open, never guessed at.
pub const META_VERSION: u16 = 1;
/// Position of `version u16`.
pub const META_VERSION_POS: usize = META_MAGIC.len();
/// Position of `features u64`: a bit per optional format feature in use. A bit this build does not
/// know refuses the directory at open. No feature is defined yet.
pub const META_FEATURES_POS: usize = META_VERSION_POS + 2;
/// Position of `segment_bytes u64`.
pub const META_SEGMENT_BYTES_POS: usize = META_FEATURES_POS + 8;
/// Position of `index_bytes u64`.
pub const META_INDEX_BYTES_POS: usize = META_SEGMENT_BYTES_POS + 8;
/// Position of `index_interval_bytes u64`.
pub const META_INDEX_INTERVAL_POS: usize = META_INDEX_BYTES_POS + 8;
/// Position of `crc u32` of the bytes before it. In every version the CRC is the file's last four
/// bytes, over all the bytes before it (so a build can tell a damaged file from a newer one).
pub const META_CRC_POS: usize = META_INDEX_INTERVAL_POS + 8;
/// Size of `log.meta`.
pub const META_LEN: usize = META_CRC_POS + 4;
const _: () = assert!(META_CRC_POS == 38 && META_LEN == 42);
/// The shortest `log.meta` of any version: magic, version, CRC.
pub const META_MIN_LEN: usize = META_VERSION_POS + 2 + 4;
/// The format features this build knows (`features` bits): none yet.
pub const META_KNOWN_FEATURES: u64 = 0;

// ---- Message store files (docs/DESIGN.md §11) ----------------------------------------------------

/// Position of `log_offset u64` in a ConsumeQueue (`.cq`) entry: the commit-log offset of the
/// message (an offset, not a byte position: it stays valid across retention and compaction).
pub const CQ_LOG_OFFSET_POS: usize = 0;
/// Position of `size u32` in a `.cq` entry: the record's encoded size, never 0 (so an all-zero
/// entry is never data: it marks the unused tail of a file).
pub const CQ_SIZE_POS: usize = CQ_LOG_OFFSET_POS + 8;
/// Position of `tag_hash u64` in a `.cq` entry: FNV-1a 64 of the message's tag, or
/// [`CQ_TAG_HASH_NONE`].
pub const CQ_TAG_HASH_POS: usize = CQ_SIZE_POS + 4;
/// ConsumeQueue entry: `[log_offset u64][size u32][tag_hash u64]`.
pub const CQ_ENTRY_LEN: usize = CQ_TAG_HASH_POS + 8;
const _: () = assert!(CQ_ENTRY_LEN == 20);
/// Entries per ConsumeQueue file, the default of the store's `queue_entries_per_file`. A file's
/// capacity is fixed when it is created (its length / [`CQ_ENTRY_LEN`]), so files of a queue
/// created under different settings can sit side by side.
pub const CQ_ENTRIES_PER_FILE: u64 = 300_000;
/// `tag_hash` of a message without a tag.
pub const CQ_TAG_HASH_NONE: u64 = 0;
/// `tag_hash` stored for a tag whose FNV-1a 64 is 0 ([`CQ_TAG_HASH_NONE`] means "no tag").
pub const CQ_TAG_HASH_OF_ZERO: u64 = 1;
const _: () = assert!(CQ_TAG_HASH_OF_ZERO != CQ_TAG_HASH_NONE);
/// IndexFile header position of `begin_timestamp i64`: the creating put's timestamp (ms).
pub const INDEX_FILE_BEGIN_TIMESTAMP_POS: usize = 0;
/// IndexFile header position of `end_timestamp i64`: the largest timestamp put (ms).
pub const INDEX_FILE_END_TIMESTAMP_POS: usize = INDEX_FILE_BEGIN_TIMESTAMP_POS + 8;
/// IndexFile header position of `begin_log_offset u64` (also the file's name).
pub const INDEX_FILE_BEGIN_LOG_OFFSET_POS: usize = INDEX_FILE_END_TIMESTAMP_POS + 8;
/// IndexFile header position of `end_log_offset u64`: the largest log offset put.
pub const INDEX_FILE_END_LOG_OFFSET_POS: usize = INDEX_FILE_BEGIN_LOG_OFFSET_POS + 8;
/// IndexFile header position of `hash_slot_count u32`.
pub const INDEX_FILE_SLOT_COUNT_POS: usize = INDEX_FILE_END_LOG_OFFSET_POS + 8;
/// IndexFile header position of `index_count u32`: entries used (numbered from 1).
pub const INDEX_FILE_INDEX_COUNT_POS: usize = INDEX_FILE_SLOT_COUNT_POS + 4;
/// IndexFile header: begin/end timestamps, begin/end log offsets, slot count, index count.
pub const INDEX_FILE_HEADER_LEN: usize = INDEX_FILE_INDEX_COUNT_POS + 4;
/// The most hash slots an index file may have (2^28: a 1 GiB slot table, held in memory while the
/// file is active); a header claiming more is damage.
pub const INDEX_FILE_MAX_SLOTS: u32 = 1 << 28;
const _: () = assert!(INDEX_FILE_HEADER_LEN == 40);
/// IndexFile hash slot: the latest entry number for the slot (0: none).
pub const INDEX_FILE_SLOT_LEN: usize = 4;
/// IndexFile entry position of `key_hash u32` (low 32 bits of FNV-1a 64 of `topic#key`).
pub const INDEX_ENTRY_KEY_HASH_POS: usize = 0;
/// IndexFile entry position of `log_offset u64`.
pub const INDEX_ENTRY_LOG_OFFSET_POS: usize = INDEX_ENTRY_KEY_HASH_POS + 4;
/// IndexFile entry position of `time_diff_s u32`: whole seconds since `begin_timestamp`.
pub const INDEX_ENTRY_TIME_DIFF_POS: usize = INDEX_ENTRY_LOG_OFFSET_POS + 8;
/// IndexFile entry position of `prev_entry u32`: the slot's previous entry (0 ends the chain).
pub const INDEX_ENTRY_PREV_POS: usize = INDEX_ENTRY_TIME_DIFF_POS + 4;
/// IndexFile entry: `[key_hash u32][log_offset u64][time_diff_s u32][prev_entry u32]`.
pub const INDEX_FILE_ENTRY_LEN: usize = INDEX_ENTRY_PREV_POS + 4;
const _: () = assert!(INDEX_FILE_ENTRY_LEN == 20);
/// IndexFile name suffix: `<root>/index/<20-digit begin_log_offset>.idx`.
pub const INDEX_FILE_SUFFIX: &str = ".idx";

// ---- File names (docs/DESIGN.md §3) --------------------------------------------------------------

/// Segment data file suffix.
pub const LOG_SUFFIX: &str = ".log";
/// Offset index suffix.
pub const INDEX_SUFFIX: &str = ".index";
/// Time index suffix.
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
/// Appended to a file waiting for deletion.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Appended to compaction output being written.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Appended to complete compaction output waiting to be swapped in.
pub const SWAP_SUFFIX: &str = ".swap";
/// Appended to a damaged segment kept for inspection.
pub const CORRUPT_SUFFIX: &str = ".corrupt";
/// Suffix of a healthy segment `recover --force` removed from the log because it followed damage
/// (its records are lost from the log): kept for a human, never read, never deleted.
pub const REMOVED_SUFFIX: &str = ".removed";
/// Suffix of a `.log` file found not to belong to the log (an empty one that is not the last, or
/// one whose base falls inside the previous segment's offsets), set aside by `recover --force`:
/// kept, never read, never deleted.
pub const FOREIGN_SUFFIX: &str = ".foreign";
/// The next segment, preallocated in the background.
pub const PREALLOC_SUFFIX: &str = ".prealloc";
/// Suffix of a file being replaced atomically.
pub const TMP_SUFFIX: &str = ".tmp";
/// The message store's checkpoint file (`<root>/store.checkpoint`, docs/FORMAT.md): how far
/// dispatch is durable, and a summary of each queue and index file at that point.
pub const STORE_CHECKPOINT_FILE: &str = "store.checkpoint";
/// Its magic.
pub const STORE_CHECKPOINT_MAGIC: [u8; 4] = *b"SSCP";
/// The version this build writes: 2, `dispatched_up_to` and the summaries.
pub const STORE_CHECKPOINT_VERSION: u16 = 2;
/// The version older builds wrote, still read: a value file ([`VALUE_FILE_LEN`]) of
/// `dispatched_up_to` alone.
pub const STORE_CHECKPOINT_VERSION_1: u16 = 1;
/// In a summary, a queue's `last_log_offset` when it has no entry.
pub const STORE_CHECKPOINT_NO_ENTRY: u64 = u64::MAX;
/// Exists while a message store is open: present at open means the last run did not close.
pub const STORE_ABORT_FILE: &str = "abort";
/// The file that records what a message store is (`<root>/store.meta`, docs/FORMAT.md
/// "`store.meta`"): the format version and features of the store's own files, and the parameters
/// its consume queues and index files are made with.
pub const STORE_META_FILE: &str = "store.meta";
/// Magic of `store.meta`.
pub const STORE_META_MAGIC: [u8; 4] = *b"SSMD";
/// The store format version this build writes and the newest it reads.
pub const STORE_META_VERSION: u16 = 1;
/// Position of `version u16`.
pub const STORE_META_VERSION_POS: usize = STORE_META_MAGIC.len();
/// Position of `features u64`: a bit per optional store format feature in use. A bit this build
/// does not know refuses the store at open. Bit 0: [`STORE_FEATURE_COMPACT_MESSAGES`].
pub const STORE_META_FEATURES_POS: usize = STORE_META_VERSION_POS + 2;
/// Position of `queue_entries_per_file u64`: entries of each new `.cq` file.
pub const STORE_META_QUEUE_ENTRIES_POS: usize = STORE_META_FEATURES_POS + 8;
/// Position of `index_slots u32`: hash slots of each new `.idx` file.
pub const STORE_META_INDEX_SLOTS_POS: usize = STORE_META_QUEUE_ENTRIES_POS + 8;
/// Position of `index_entries u32`: entries (entry 0 included) of each new `.idx` file.
pub const STORE_META_INDEX_ENTRIES_POS: usize = STORE_META_INDEX_SLOTS_POS + 4;
/// Position of `crc u32` of the bytes before it. In every version the CRC is the file's last four
/// bytes, over all the bytes before it.
pub const STORE_META_CRC_POS: usize = STORE_META_INDEX_ENTRIES_POS + 4;
/// Size of `store.meta`.
pub const STORE_META_LEN: usize = STORE_META_CRC_POS + 4;
const _: () = assert!(STORE_META_CRC_POS == 30 && STORE_META_LEN == 34);
/// The shortest `store.meta` of any version: magic, version, CRC.
pub const STORE_META_MIN_LEN: usize = STORE_META_VERSION_POS + 2 + 4;
/// `store.meta` feature bit: the store's messages may be in the compact encoding
/// ([`MESSAGE_FIELDS_HEADER`]); a build that does not know it must not read the store's records.
/// Set at the first writer open of this encoding's builds, before any message is put.
pub const STORE_FEATURE_COMPACT_MESSAGES: u64 = 1 << 0;
/// The store format features this build knows (`features` bits).
pub const STORE_META_KNOWN_FEATURES: u64 = STORE_FEATURE_COMPACT_MESSAGES;
/// The message store's commit log directory (`<root>/commitlog/`).
pub const STORE_COMMIT_LOG_DIR: &str = "commitlog";
/// The message store's consume queues (`<root>/consumequeue/<topic>/<queue_id>/`).
pub const STORE_CONSUME_QUEUE_DIR: &str = "consumequeue";
/// The message store's index files (`<root>/index/`).
pub const STORE_INDEX_DIR: &str = "index";
/// The message store's consumer-group offsets (`<root>/offsets.json`, docs/FORMAT.md
/// "`offsets.json`").
pub const OFFSETS_FILE: &str = "offsets.json";
/// The previous good copy of [`OFFSETS_FILE`], its fallback when it is torn.
pub const OFFSETS_BACKUP_FILE: &str = "offsets.json.bak";
/// The `version` field [`OFFSETS_FILE`] is written with, and the only one read.
pub const OFFSETS_VERSION: u64 = 1;
/// The name of the first header of a message record in the compact encoding (docs/FORMAT.md
/// "Message records"): empty, which no user property can have. Its value holds the store's fields.
pub const MESSAGE_FIELDS_HEADER: &str = "";
/// The first byte of the compact fields: their version (1 is the named-header encoding below).
pub const MESSAGE_FIELDS_VERSION: u8 = 2;
/// Compact fields flag: a tag follows the topic.
pub const MESSAGE_FIELDS_TAG: u8 = 1 << 0;
/// Compact fields flag: a born timestamp follows (the tag).
pub const MESSAGE_FIELDS_BORN: u8 = 1 << 1;
/// Compact fields: bytes before the topic (version, flags, queue id u32, queue offset u64,
/// topic length u8).
pub const MESSAGE_FIELDS_FIXED_LEN: usize = 1 + 1 + 4 + 8 + 1;
/// Record headers of the named-header encoding (fields version 1), which stores wrote before the
/// compact one and which is still read. A user property may not take a name with this prefix.
pub const MESSAGE_HEADER_PREFIX: &str = "strata.";
/// The topic, UTF-8.
pub const MESSAGE_TOPIC_HEADER: &str = "strata.topic";
/// The queue id, `u32` big-endian.
pub const MESSAGE_QUEUE_HEADER: &str = "strata.queue";
/// The queue offset, `u64` big-endian: a consume queue rebuilt from the log numbers the same.
pub const MESSAGE_QUEUE_OFFSET_HEADER: &str = "strata.qoffset";
/// The tag, UTF-8 (absent: no tag).
pub const MESSAGE_TAG_HEADER: &str = "strata.tag";
/// One per key, UTF-8, in the order given (the record key is the first).
pub const MESSAGE_KEY_HEADER: &str = "strata.key";
/// The producer's timestamp, `i64` big-endian milliseconds (absent: none given).
pub const MESSAGE_BORN_HEADER: &str = "strata.born";
/// The longest topic name, in bytes (a topic names a directory).
pub const MAX_TOPIC_LEN: usize = 127;
const _: () = assert!(MESSAGE_TOPIC_HEADER.len() > MESSAGE_HEADER_PREFIX.len());
/// A channel's log directory (`<dir>/log/`, docs/DESIGN.md §12).
pub const CHANNEL_LOG_DIR: &str = "log";
/// The record key of a channel's take record (docs/FORMAT.md "Channel records"); a put event's
/// record has no key.
pub const CHANNEL_TAKE_KEY: &[u8] = b"strata.take";
/// The first byte of a take record's value: its version.
pub const CHANNEL_TAKE_VERSION: u8 = 1;
/// A take record's value: the version byte, then ranges of taken offsets.
pub const CHANNEL_TAKE_HEADER_LEN: usize = 1 /* version */;
/// One taken range: `start u64` (first taken offset), `end u64` (one past the last), big-endian.
pub const CHANNEL_TAKE_RANGE_LEN: usize = 8 /* start */ + 8 /* end */;
const _: () = assert!(CHANNEL_TAKE_RANGE_LEN == 16);
/// A Raft store's log directory (`<dir>/log/`, docs/FORMAT.md "Raft store"; like every `RAFT_`
/// constant, with the feature `openraft` only).
#[cfg(feature = "openraft")]
pub const RAFT_LOG_DIR: &str = "log";
/// A Raft store's meta file (`<dir>/raft-meta`): the vote, the last committed and the last purged
/// log id. Little-endian, unlike every other file:
/// `[magic][version u16][payload_len u32][payload: postcard][crc32 u32 of every byte before]`.
#[cfg(feature = "openraft")]
pub const RAFT_META_FILE: &str = "raft-meta";
/// The meta file's temporary name while it is replaced (and its reserved space between writes).
#[cfg(feature = "openraft")]
pub const RAFT_META_TMP_FILE: &str = "raft-meta.tmp";
/// Magic of the Raft meta file.
#[cfg(feature = "openraft")]
pub const RAFT_META_MAGIC: [u8; 4] = *b"SRFT";
/// Version of the Raft meta file.
#[cfg(feature = "openraft")]
pub const RAFT_META_VERSION: u16 = 1;
/// Position of `version u16` in the Raft meta file.
#[cfg(feature = "openraft")]
pub const RAFT_META_VERSION_POS: usize = RAFT_META_MAGIC.len();
/// Position of `payload_len u32` in the Raft meta file.
#[cfg(feature = "openraft")]
pub const RAFT_META_LEN_POS: usize = RAFT_META_VERSION_POS + 2;
/// Position of the payload in the Raft meta file; the CRC follows it.
#[cfg(feature = "openraft")]
pub const RAFT_META_PAYLOAD_POS: usize = RAFT_META_LEN_POS + 4;
#[cfg(feature = "openraft")]
const _: () = assert!(RAFT_META_PAYLOAD_POS == 10);
/// Bytes of the Raft meta file's CRC, its last field.
#[cfg(feature = "openraft")]
pub const RAFT_META_CRC_LEN: usize = 4;
/// ConsumeQueue file suffix: `<consumequeue>/<topic>/<queue_id>/<first queue offset, 20 digits>.cq`.
pub const CQ_SUFFIX: &str = ".cq";
/// The directory lock file.
pub const LOCK_FILE: &str = ".lock";
/// The checkpoint file.
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// The clean-shutdown marker.
pub const CLEAN_SHUTDOWN_FILE: &str = ".clean-shutdown";
/// The cleaner checkpoint file.
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-checkpoint";
/// Digits of the zero-padded number in a file name: a segment's base offset, a `.cq` file's first
/// queue offset.
pub const FILE_NAME_DIGITS: usize = 20;

/// `00000000000000368769.log` for `(368769, LOG_SUFFIX)`.
pub fn file_name(base_offset: u64, suffix: &str) -> String {
    format!("{base_offset:0FILE_NAME_DIGITS$}{suffix}")
}

/// The base offset and the rest of a name such as `00000000000000368769.log.deleted`, if it has the
/// 20-digit form.
pub fn parse_file_name(name: &str) -> Option<(u64, &str)> {
    let digits = name.get(..FILE_NAME_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().ok()?, &name[FILE_NAME_DIGITS..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        let name = file_name(368_769, LOG_SUFFIX);
        assert_eq!(name, "00000000000000368769.log");
        assert_eq!(parse_file_name(&name), Some((368_769, ".log")));
        assert_eq!(parse_file_name("00000000000000000007.log.deleted"), Some((7, ".log.deleted")));
        assert_eq!(parse_file_name(&file_name(u64::MAX, INDEX_SUFFIX)), Some((u64::MAX, ".index")));
        assert_eq!(file_name(300_000, CQ_SUFFIX), "00000000000000300000.cq");
    }

    #[test]
    fn odd_names_are_not_segments() {
        assert_eq!(parse_file_name("checkpoint"), None);
        assert_eq!(parse_file_name("0000000000000000000x.log"), None);
        assert_eq!(parse_file_name("99999999999999999999.log"), None, "overflows u64");
    }
}
