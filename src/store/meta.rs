//! `store.meta` (docs/FORMAT.md, docs/DESIGN.md §11): what a message store is. The format version
//! and features of the store's own files (consume queues, index files, its checkpoint), so a build
//! that does not know them refuses the store before it changes anything; and the parameters its
//! derived files are made with (`queue_entries_per_file`, `index_slots`, `index_entries`), which
//! belong to the store, not to whoever opens it: an open whose `StoreConfig` says otherwise adopts
//! the recorded values (logged), and tools read them instead of guessing from file sizes.
//!
//! Written atomically and durably at the first writer open: for a new store from its config,
//! before any derived file exists; for a store made before the file existed, from what its files
//! show ([`infer`]: a `.cq` file's size, an `.idx` file's header), else from the config. Rewritten
//! only to add the compact-messages feature bit (at a writer open, or at the first put if the
//! disk was full then: [`FormatGuard`]), never to change a parameter. A read-only open only reads
//! it ([`recorded_parameters`]).
//!
//! The commit log has its own guard (`log.meta`, checked by `Log::open`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use byteorder::{BigEndian, ByteOrder};
use parking_lot::Mutex;

use crate::error::{Corruption, Error, Result};
use crate::format::{
    CQ_ENTRY_LEN, CQ_SUFFIX, INDEX_FILE_MAX_SLOTS, INDEX_FILE_SUFFIX, STORE_COMMIT_LOG_DIR, STORE_CONSUME_QUEUE_DIR,
    STORE_FEATURE_COMPACT_MESSAGES, STORE_INDEX_DIR, STORE_META_CRC_POS, STORE_META_FEATURES_POS, STORE_META_FILE,
    STORE_META_INDEX_ENTRIES_POS, STORE_META_INDEX_SLOTS_POS, STORE_META_KNOWN_FEATURES, STORE_META_LEN,
    STORE_META_MAGIC, STORE_META_MIN_LEN, STORE_META_QUEUE_ENTRIES_POS, STORE_META_VERSION, STORE_META_VERSION_POS,
    parse_file_name,
};
use crate::storage;
use crate::store::config::StoreConfig;
use crate::store::index::read_header;

/// The parameters a store's derived files are made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StoreParameters {
    /// Entries of each new consume-queue file (`StoreConfig::queue_entries_per_file`).
    pub queue_entries_per_file: u64,
    /// Hash slots of each new index file (`StoreConfig::index_slots`).
    pub index_slots: u32,
    /// Entries of each new index file, entry 0 included (`StoreConfig::index_entries`).
    pub index_entries: u32,
}

impl StoreParameters {
    /// The parameters `config` asks for.
    pub(crate) fn of(config: &StoreConfig) -> StoreParameters {
        StoreParameters {
            queue_entries_per_file: config.queue_entries_per_file,
            index_slots: config.index_slots,
            index_entries: config.index_entries,
        }
    }

    /// `config` with these parameters.
    pub(crate) fn apply(self, config: StoreConfig) -> StoreConfig {
        StoreConfig {
            queue_entries_per_file: self.queue_entries_per_file,
            index_slots: self.index_slots,
            index_entries: self.index_entries,
            ..config
        }
    }

    /// Whether a store's files can be made with these (the ranges `StoreConfig::validate` allows).
    fn valid(&self) -> bool {
        (1..=u64::from(u32::MAX)).contains(&self.queue_entries_per_file)
            && (1..=INDEX_FILE_MAX_SLOTS).contains(&self.index_slots)
            && self.index_entries >= 2
    }

    /// `"queue_entries_per_file 10000 → 300000, ..."`: the fields in which `self` (a config's)
    /// differs from `recorded`, empty if none.
    fn replaced_by(&self, recorded: &StoreParameters) -> String {
        let fields = [
            ("queue_entries_per_file", self.queue_entries_per_file, recorded.queue_entries_per_file),
            ("index_slots", u64::from(self.index_slots), u64::from(recorded.index_slots)),
            ("index_entries", u64::from(self.index_entries), u64::from(recorded.index_entries)),
        ];
        let changed = fields.iter().filter(|(_, given, kept)| given != kept);
        changed.map(|(field, given, kept)| format!("{field} {given} → {kept}")).collect::<Vec<_>>().join(", ")
    }
}

/// The contents of `store.meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct StoreMeta {
    /// The format version of the store's own files.
    pub version: u16,
    /// Optional store format features in use, a bit each.
    pub features: u64,
    /// What the store's derived files are made with.
    pub parameters: StoreParameters,
}

impl StoreMeta {
    /// What a writer records for `parameters`: this build's version, and the compact message
    /// encoding its puts write.
    fn of(parameters: StoreParameters) -> StoreMeta {
        StoreMeta { version: STORE_META_VERSION, features: STORE_FEATURE_COMPACT_MESSAGES, parameters }
    }

    /// What a writer records to add the compact message encoding to the store in `root`: its
    /// recorded features kept (none else is defined yet, but a later one must not be dropped).
    fn with_compact(root: &Path, parameters: StoreParameters) -> Result<StoreMeta> {
        let mut meta = StoreMeta::of(parameters);
        if let Some(Ok(recorded)) = read(root)? {
            meta.features |= recorded.features;
        }
        Ok(meta)
    }

    /// The file's bytes.
    pub fn encode(&self) -> [u8; STORE_META_LEN] {
        let mut b = [0u8; STORE_META_LEN];
        b[..STORE_META_VERSION_POS].copy_from_slice(&STORE_META_MAGIC);
        BigEndian::write_u16(&mut b[STORE_META_VERSION_POS..], self.version);
        BigEndian::write_u64(&mut b[STORE_META_FEATURES_POS..], self.features);
        BigEndian::write_u64(&mut b[STORE_META_QUEUE_ENTRIES_POS..], self.parameters.queue_entries_per_file);
        BigEndian::write_u32(&mut b[STORE_META_INDEX_SLOTS_POS..], self.parameters.index_slots);
        BigEndian::write_u32(&mut b[STORE_META_INDEX_ENTRIES_POS..], self.parameters.index_entries);
        let crc = crc32fast::hash(&b[..STORE_META_CRC_POS]);
        BigEndian::write_u32(&mut b[STORE_META_CRC_POS..], crc);
        b
    }

    /// Parses the file's bytes. In every version the file starts with the magic and the version
    /// and ends with the CRC-32 of every byte before it, so a damaged file is told from a newer
    /// one: a newer version is returned with its version alone (its parameters zero), for
    /// [`StoreMeta::check_known`] to refuse. Version 0 and parameters no store can have are damage.
    pub fn decode(b: &[u8]) -> std::result::Result<StoreMeta, Corruption> {
        if b.len() < STORE_META_MIN_LEN || b[..STORE_META_VERSION_POS] != STORE_META_MAGIC {
            return Err(Corruption::BadFile("the file is too short or has the wrong magic"));
        }
        let crc_pos = b.len() - 4;
        if crc32fast::hash(&b[..crc_pos]) != BigEndian::read_u32(&b[crc_pos..]) {
            return Err(Corruption::BadFile("the file fails its CRC"));
        }
        let version = BigEndian::read_u16(&b[STORE_META_VERSION_POS..]);
        if version == 0 {
            return Err(Corruption::BadFile("the file has version 0, which is never written"));
        }
        if version > STORE_META_VERSION {
            let parameters = StoreParameters { queue_entries_per_file: 0, index_slots: 0, index_entries: 0 };
            return Ok(StoreMeta { version, features: 0, parameters });
        }
        if b.len() != STORE_META_LEN {
            return Err(Corruption::BadFile("the file has the wrong length for its version"));
        }
        let parameters = StoreParameters {
            queue_entries_per_file: BigEndian::read_u64(&b[STORE_META_QUEUE_ENTRIES_POS..]),
            index_slots: BigEndian::read_u32(&b[STORE_META_INDEX_SLOTS_POS..]),
            index_entries: BigEndian::read_u32(&b[STORE_META_INDEX_ENTRIES_POS..]),
        };
        let features = BigEndian::read_u64(&b[STORE_META_FEATURES_POS..]);
        // An unknown feature may give the parameters another meaning: refused by name, not judged.
        if features & !STORE_META_KNOWN_FEATURES == 0 && !parameters.valid() {
            return Err(Corruption::BadFile("the file records parameters no store can have"));
        }
        Ok(StoreMeta { version, features, parameters })
    }

    /// `Error::UnsupportedFormat` unless this build knows the version and every feature (`root`:
    /// the store root the file is in).
    pub(crate) fn check_known(&self, root: &Path) -> Result<()> {
        let unknown = |what: String| Err(Error::UnsupportedFormat { path: root.join(STORE_META_FILE), what });
        if self.version > STORE_META_VERSION {
            let newest = STORE_META_VERSION;
            return unknown(format!("store format version {} (this build reads 1 to {newest})", self.version));
        }
        let features = self.features & !STORE_META_KNOWN_FEATURES;
        if features != 0 {
            return unknown(format!("store format features {features:#x} (bits this build does not know)"));
        }
        Ok(())
    }
}

/// The `store.meta` in `root`: `None` if there is none, `Some(Err(why))` if it is damaged.
pub(crate) fn read(root: &Path) -> Result<Option<std::result::Result<StoreMeta, Corruption>>> {
    Ok(storage::read_if_exists(&root.join(STORE_META_FILE))?.map(|bytes| StoreMeta::decode(&bytes)))
}

/// The format guard, before anything in `root` is created or changed: `Error::UnsupportedFormat`
/// if `store.meta` names a version or feature this build does not know, `Error::Corrupt` if it is
/// damaged (it is replaced atomically, so no crash leaves it so, and a damaged one cannot vouch
/// for the format; it holds no message: deleting it lets the next writer open infer the
/// parameters from the store's files again). Returns what it read (`None`: there is none, or
/// `root` does not exist).
pub(crate) fn check(root: &Path) -> Result<Option<StoreMeta>> {
    if !root.is_dir() {
        return Ok(None);
    }
    match read(root)? {
        Some(Ok(meta)) => meta.check_known(root).map(|()| Some(meta)),
        Some(Err(reason)) => Err(Error::corrupt(root.join(STORE_META_FILE), 0, reason)),
        None => Ok(None),
    }
}

/// Where the parameters of a store came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    /// Its `store.meta`.
    Recorded {
        /// Its feature bits.
        features: u64,
    },
    /// Its files (the ones named), for a store made before `store.meta` existed; the config for
    /// what no file shows.
    Inferred(Vec<PathBuf>),
}

/// The parameters of the store in `root` as `store.meta` records them, else as its files show
/// them, else `config`'s; nothing is written (a read-only open, a tool). `Error::UnsupportedFormat`
/// or `Error::Corrupt` as [`check`].
pub(crate) fn recorded_parameters(root: &Path, config: &StoreConfig) -> Result<StoreParameters> {
    Ok(parameters(root, config)?.0)
}

fn parameters(root: &Path, config: &StoreConfig) -> Result<(StoreParameters, Origin)> {
    match check(root)? {
        Some(meta) => Ok((meta.parameters, Origin::Recorded { features: meta.features })),
        None => {
            let (parameters, from) = infer(root, StoreParameters::of(config))?;
            Ok((parameters, Origin::Inferred(from)))
        }
    }
}

/// A writer's open, under the commit log's lock and before any derived file is opened: `config`
/// with the parameters the store records (each value of `config` that differs replaced, in one
/// `info` line); a store without `store.meta` gets one, from its files or else from `config`
/// (logged), written atomically and durably, and one without the compact-messages feature gets it
/// (logged). Call [`check`] first, before anything is created. The guard says whether the feature
/// is recorded (a full disk postpones it: puts record it first).
pub(crate) fn settle(root: &Path, config: StoreConfig) -> Result<(StoreConfig, FormatGuard)> {
    let given = StoreParameters::of(&config);
    let (parameters, origin) = parameters(root, &config)?;
    let recorded = match origin {
        Origin::Recorded { features } if features & STORE_FEATURE_COMPACT_MESSAGES != 0 => true,
        Origin::Recorded { .. } => record_compact(root, parameters)?,
        Origin::Inferred(from) => record(root, parameters, &from)?,
    };
    let replaced = given.replaced_by(&parameters);
    if !replaced.is_empty() {
        tracing::info!(
            root = %root.display(),
            %replaced,
            "the store's files are made with other parameters than its config asks for: using the store's"
        );
    }
    let guard = FormatGuard { recorded: AtomicBool::new(recorded), writing: Mutex::new(()), parameters };
    Ok((parameters.apply(config), guard))
}

/// Whether `store.meta` records the compact message encoding, which every put writes: an older
/// build must refuse the store before it meets a record it would take for a foreign one.
pub(crate) struct FormatGuard {
    recorded: AtomicBool,
    writing: Mutex<()>,
    parameters: StoreParameters,
}

impl FormatGuard {
    /// Before a put: records the feature if the open could not (a full disk then fails the put,
    /// which needed the disk anyway). One atomic load once it is recorded.
    pub(crate) fn ensure(&self, root: &Path) -> Result<()> {
        if self.recorded.load(Ordering::Acquire) {
            return Ok(());
        }
        let _writing = self.writing.lock();
        if self.recorded.load(Ordering::Acquire) {
            return Ok(());
        }
        let meta = StoreMeta::with_compact(root, self.parameters)?;
        storage::write_atomically(root, STORE_META_FILE, &meta.encode())?;
        self.recorded.store(true, Ordering::Release);
        Ok(())
    }
}

/// Rewrites the `store.meta` of a store made by a build before the compact message encoding,
/// with the feature added; `false` if the disk is full (logged; puts try again).
fn record_compact(root: &Path, parameters: StoreParameters) -> Result<bool> {
    tracing::info!(
        root = %root.display(),
        "recording the compact message encoding in store.meta: builds that do not know it refuse this store from now on"
    );
    let meta = StoreMeta::with_compact(root, parameters)?;
    postpone_if_full(storage::write_atomically(root, STORE_META_FILE, &meta.encode()))
}

/// `Ok(true)` if written, `Ok(false)` if the disk is full (logged: a store on a full disk must
/// still open, so messages can be deleted to make room).
fn postpone_if_full(written: Result<()>) -> Result<bool> {
    match written {
        Ok(()) => Ok(true),
        Err(error @ Error::DiskFull { .. }) => {
            tracing::warn!(%error, "could not write store.meta; the next open (or put) tries again");
            Ok(false)
        }
        Err(other) => Err(other),
    }
}

/// Writes `store.meta` for `parameters` (inferred from `from`, or the config's if empty);
/// `false` if the disk is full.
fn record(root: &Path, parameters: StoreParameters, from: &[PathBuf]) -> Result<bool> {
    let StoreParameters { queue_entries_per_file, index_slots, index_entries } = parameters;
    let from: Vec<String> = from.iter().map(|p| p.display().to_string()).collect();
    let source = if from.is_empty() { "the config".to_owned() } else { from.join(", ") };
    tracing::info!(
        root = %root.display(), queue_entries_per_file, index_slots, index_entries, from = %source,
        "writing store.meta"
    );
    // On a full disk the next writer open infers the same parameters from the files this one makes.
    postpone_if_full(storage::write_atomically(root, STORE_META_FILE, &StoreMeta::of(parameters).encode()))
}

/// What a store made before `store.meta` existed was made with, as its files show, starting from
/// `fallback` (the config's) for what none shows: the queue files' size (the newest file of each
/// queue; if queues disagree, the size most of them have), and the newest readable index file's
/// slots and entries. Returns the files it went by.
pub(crate) fn infer(root: &Path, fallback: StoreParameters) -> Result<(StoreParameters, Vec<PathBuf>)> {
    let mut parameters = fallback;
    let mut from = Vec::new();
    if let Some((entries, file)) = queue_file_size(&root.join(STORE_CONSUME_QUEUE_DIR))? {
        parameters.queue_entries_per_file = entries;
        from.push(file);
    }
    if let Some((slots, entries, file)) = index_file_size(&root.join(STORE_INDEX_DIR))? {
        parameters.index_slots = slots;
        parameters.index_entries = entries;
        from.push(file);
    }
    debug_assert!(parameters.valid() || !fallback.valid(), "inferred only what a store can have");
    Ok((parameters, from))
}

/// Entries per file of the newest `.cq` file of each queue under `dir`: the count most queues'
/// newest files have (ties: the larger), with one file that has it. `None` if there is none.
fn queue_file_size(dir: &Path) -> Result<Option<(u64, PathBuf)>> {
    let mut found: BTreeMap<u64, (usize, PathBuf)> = BTreeMap::new();
    for topic in list_or_none(dir)? {
        for queue in list_or_none(&dir.join(&topic))? {
            let queue_dir = dir.join(&topic).join(&queue);
            let newest = list_or_none(&queue_dir)?
                .into_iter()
                .filter_map(|name| match parse_file_name(&name) {
                    Some((first, CQ_SUFFIX)) => Some((first, name)),
                    _ => None,
                })
                .max();
            let Some((_, name)) = newest else { continue };
            let path = queue_dir.join(name);
            let len = storage::file_len(&path)?;
            let entries = len / CQ_ENTRY_LEN as u64;
            if len % CQ_ENTRY_LEN as u64 == 0 && (1..=u64::from(u32::MAX)).contains(&entries) {
                found.entry(entries).or_insert((0, path)).0 += 1;
            }
        }
    }
    if found.len() > 1 {
        let sizes: Vec<String> = found.iter().map(|(entries, (queues, _))| format!("{entries} ({queues})")).collect();
        tracing::warn!(dir = %dir.display(), sizes = %sizes.join(", "), "queues' newest files differ in entries per file: taking the most common");
    }
    Ok(found.into_iter().max_by_key(|(entries, (queues, _))| (*queues, *entries)).map(|(e, (_, path))| (e, path)))
}

/// The slots and entries of the newest `.idx` file under `dir` whose header checks. `None` if
/// there is none.
fn index_file_size(dir: &Path) -> Result<Option<(u32, u32, PathBuf)>> {
    let mut names: Vec<(u64, String)> = list_or_none(dir)?
        .into_iter()
        .filter_map(|name| match parse_file_name(&name) {
            Some((first, INDEX_FILE_SUFFIX)) => Some((first, name)),
            _ => None,
        })
        .collect();
    names.sort();
    for (_, name) in names.into_iter().rev() {
        let path = dir.join(name);
        match read_header(&path) {
            Ok((header, _, entries)) => return Ok(Some((header.slot_count, entries, path))),
            Err(error) => tracing::warn!(%error, "an index file's header does not say its size; trying an older one"),
        }
    }
    Ok(None)
}

/// The names in `dir`; none if it does not exist (or is not a directory).
fn list_or_none(dir: &Path) -> Result<Vec<String>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    storage::list_dir(dir)
}

impl StoreConfig {
    /// This config with the parameters the store in `root` is made with: `queue_entries_per_file`,
    /// `index_slots` and `index_entries` as its `store.meta` records them (for a store made before
    /// that file existed, as its files show them), and the commit log's recorded parameters
    /// ([`LogConfig::with_recorded_parameters`](crate::LogConfig::with_recorded_parameters)).
    /// Unchanged where nothing is recorded (no store yet). Reads only. `MessageStore::open` adopts
    /// the store's parameters itself (see [`StoreConfig`]); a tool that inspects or reopens a
    /// store starts here so it does not guess them from file sizes.
    ///
    /// ```
    /// use strata_log::{MessageStore, StoreConfig};
    /// # let dir = tempfile::tempdir()?;
    /// let made = StoreConfig { queue_entries_per_file: 1_000, index_slots: 64, index_entries: 256, ..StoreConfig::default() };
    /// MessageStore::open(dir.path(), made)?.close()?;
    /// let config = StoreConfig::default().with_recorded_parameters(dir.path())?;
    /// assert_eq!((config.queue_entries_per_file, config.index_slots, config.index_entries), (1_000, 64, 256));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A store written by a newer build (a format version or feature this one does not know) is
    /// `Error::UnsupportedFormat`; a damaged `store.meta` is `Error::Corrupt`.
    pub fn with_recorded_parameters(self, root: impl AsRef<Path>) -> Result<StoreConfig> {
        let root = root.as_ref();
        let log = self.log.clone().with_recorded_parameters(root.join(STORE_COMMIT_LOG_DIR))?;
        let parameters = recorded_parameters(root, &self)?;
        Ok(parameters.apply(StoreConfig { log, ..self }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> StoreMeta {
        StoreMeta::of(StoreParameters { queue_entries_per_file: 10_000, index_slots: 50_000, index_entries: 200_000 })
    }

    fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
        let crc_pos = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..crc_pos]);
        BigEndian::write_u32(&mut bytes[crc_pos..], crc);
        bytes
    }

    #[test]
    fn round_trips_and_rejects_damage() {
        let bytes = meta().encode();
        assert_eq!(StoreMeta::decode(&bytes), Ok(meta()));
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 1;
            assert!(StoreMeta::decode(&bad).is_err(), "a flip at {i} is damage");
        }
        assert!(StoreMeta::decode(&bytes[..9]).is_err());
        let mut zero = bytes.to_vec();
        BigEndian::write_u16(&mut zero[STORE_META_VERSION_POS..], 0);
        assert!(StoreMeta::decode(&resealed(zero)).is_err(), "version 0 is never written");
        let mut no_slots = bytes.to_vec();
        BigEndian::write_u32(&mut no_slots[STORE_META_INDEX_SLOTS_POS..], 0);
        assert!(StoreMeta::decode(&resealed(no_slots)).is_err(), "no store has 0 index slots");
    }

    #[test]
    fn a_newer_version_or_an_unknown_feature_is_refused_by_name() {
        let root = Path::new("/x");
        let mut newer = meta().encode()[..20].to_vec();
        BigEndian::write_u16(&mut newer[STORE_META_VERSION_POS..], STORE_META_VERSION + 1);
        let newer = resealed(newer);
        let error = StoreMeta::decode(&newer).expect("magic and version read").check_known(root).expect_err("refused");
        assert!(error.to_string().contains("store format version 2"), "{error}");
        let featured = StoreMeta { features: 1 << 9, ..meta() };
        let error = StoreMeta::decode(&featured.encode()).expect("decodes").check_known(root).expect_err("refused");
        assert!(error.to_string().contains("0x200"), "{error}");
        meta().check_known(root).expect("this build's own");
    }

    #[test]
    fn a_config_that_differs_names_each_value_replaced() {
        let recorded = meta().parameters;
        assert_eq!(recorded.replaced_by(&recorded), "");
        let given = StoreParameters { queue_entries_per_file: 300_000, ..recorded };
        assert_eq!(given.replaced_by(&recorded), "queue_entries_per_file 300000 → 10000");
    }
}
