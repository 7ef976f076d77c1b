//! A child process that runs the log operations its parent sends, one line each, and prints a
//! line once each returned, for the power-loss test with mixed operations
//! (`tests/crash_power_loss_mixed.rs`). The parent sends one operation at a time and waits for its
//! reply, so at a power cut at most one operation is in flight: every other one either was
//! acknowledged before it or never started.
//!
//! Records carry an id chosen by the parent (ids only grow, offsets do not: a truncation or a
//! reset reuses them): the value is `value_of(id)` and the key `key_of(id)`, so a compaction can
//! remove a record only once a later id of its key was acknowledged.
//!
//! | line        | operation                      | reply               |
//! |-------------|--------------------------------|---------------------|
//! | `a ID N`    | append ids ID..ID+N as a batch | `ok a BASE t=NS`    |
//! | `t OFFSET`  | `truncate_to(OFFSET)`          | `ok t NEW_END t=NS` |
//! | `r OFFSET`  | `reset_at(OFFSET)`             | `ok r t=NS`         |
//! | `d OFFSET`  | `delete_records_before`        | `ok d NEW_START t=NS` |
//! | `c`         | `compact()`                    | `ok c t=NS`         |
//!
//! `NS`: when the operation returned, in nanoseconds since the Unix epoch.
//!
//! A failed operation (the cut) ends the child with a panic, so nothing after it is acknowledged.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use strata_log::{CleanupPolicy, LogConfig, Record};

use super::child::CHILD_DIR;
use super::value_of;

/// Distinct keys: the last `KEYS` ids can never be compacted away.
pub const KEYS: u64 = 50;

/// The log configuration of the test: small segments so that rolls, seals, preallocation and
/// compaction swaps happen every few hundred appends; the default `FlushPolicy::Always`.
pub fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 10,
        index_interval_bytes: 1024,
        cleanup_policy: CleanupPolicy::Compact,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// The key of record `id`.
pub fn key_of(id: u64) -> Vec<u8> {
    format!("key-{}", id % KEYS).into_bytes()
}

/// The child's side: runs the operations read on stdin against the log in `$STRATA_CHILD_DIR`.
pub fn main() {
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else {
        return alone();
    };
    run(&dir, std::io::stdin().lock(), &mut std::io::stdout().lock());
}

fn run(dir: &Path, input: impl BufRead, out: &mut impl Write) {
    let log = super::open_unlocked(dir, config()).unwrap();
    for line in input.lines() {
        let line = line.unwrap();
        let fields: Vec<&str> = line.split(' ').collect();
        let arg = |i: usize| fields[i].parse::<u64>().unwrap();
        let reply = match fields[0] {
            "a" => {
                let ids = arg(1)..arg(1) + arg(2);
                let (keys, values): (Vec<_>, Vec<_>) = ids.map(|id| (key_of(id), value_of(id))).unzip();
                let records: Vec<Record<'_>> =
                    keys.iter().zip(&values).map(|(k, v)| Record::new(v).with_key(k)).collect();
                format!("ok a {}", log.append(&records).unwrap().base_offset)
            }
            "t" => format!("ok t {}", log.truncate_to(arg(1)).unwrap()),
            "r" => {
                log.reset_at(arg(1)).unwrap();
                "ok r".to_owned()
            }
            "d" => format!("ok d {}", log.delete_records_before(arg(1)).unwrap()),
            "c" => {
                log.compact().unwrap();
                "ok c".to_owned()
            }
            other => panic!("unknown operation {other:?}"),
        };
        // When it returned: the parent counts an operation that returned after the cut began as
        // in flight (after a real power cut it would never have returned).
        let at_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        writeln!(out, "{reply} t={at_ns}").unwrap();
        out.flush().unwrap();
    }
    log.close().unwrap();
}

/// Without a parent: a few of each operation on a log of its own, so the child runs rather than
/// passing without doing anything.
fn alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = "a 0 3\na 3 2\nt 3\nd 1\nc\nr 10\na 5 1\n";
    let mut out = Vec::new();
    run(dir.path(), input.as_bytes(), &mut out);
    let replies: Vec<String> =
        String::from_utf8(out).unwrap().lines().map(|l| l.split(" t=").next().unwrap().to_owned()).collect();
    assert_eq!(replies, ["ok a 0", "ok a 3", "ok t 3", "ok d 1", "ok c", "ok r", "ok a 10"]);
}
