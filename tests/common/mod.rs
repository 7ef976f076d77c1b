//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;
use strata_log::{Header, Log, LogConfig, Record, RecordView};

/// A config with tiny segments and indexes, so a few hundred records roll many segments and add
/// many index entries.
pub fn small_config() -> LogConfig {
    LogConfig { segment_bytes: 4096, index_bytes: 8 * 32, index_interval_bytes: 200, ..LogConfig::default() }
}

/// A record that owns its bytes, for models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Owned {
    pub fn value(v: impl Into<Vec<u8>>) -> Owned {
        Owned { key: None, value: Some(v.into()), headers: Vec::new() }
    }

    pub fn of(view: &RecordView) -> Owned {
        Owned {
            key: view.key().map(<[u8]>::to_vec),
            value: view.value().map(<[u8]>::to_vec),
            headers: view.headers().map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec))).collect(),
        }
    }

    /// Appends `records` to `log` as one batch.
    pub fn append_all(log: &Log, records: &[Owned]) -> strata_log::Result<strata_log::AppendInfo> {
        let headers: Vec<Vec<Header<'_>>> = records
            .iter()
            .map(|r| r.headers.iter().map(|(k, v)| Header { key: k, value: v.as_deref() }).collect())
            .collect();
        let borrowed: Vec<Record<'_>> = records
            .iter()
            .zip(&headers)
            .map(|(r, h)| Record { key: r.key.as_deref(), value: r.value.as_deref(), headers: h, timestamp_ms: None })
            .collect();
        log.append(&borrowed)
    }
}

/// Every visible record from `from` on, read in calls of `max_bytes`, with their offsets.
pub fn read_all(log: &Log, from: u64, max_bytes: usize) -> Vec<(u64, Owned)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.visible_end() {
        let mut reader = log.read(next, max_bytes).unwrap();
        let before = out.len();
        for record in reader.by_ref() {
            let record = record.unwrap();
            out.push((record.offset(), Owned::of(&record)));
        }
        assert!(out.len() > before, "a read at {next} returned nothing");
        next = reader.next_offset();
    }
    out
}

/// The values of every visible record, in order.
pub fn values(log: &Log) -> Vec<Vec<u8>> {
    read_all(log, log.start_offset(), 1 << 20).into_iter().map(|(_, r)| r.value.unwrap_or_default()).collect()
}

/// A seeded RNG: the seed comes from `STRATA_SEED` if set, is printed either way, and replays the run.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("STRATA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("{test}: seed {seed} (replay with STRATA_SEED={seed})");
    StdRng::seed_from_u64(seed)
}

/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}
