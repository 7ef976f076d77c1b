//! An idle log costs no CPU: under `FlushPolicy::EveryInterval` the syncer sleeps between rounds
//! (a deadline already past once made it spin a core until the next append). Alone in its test
//! binary, so no other test's threads count in the process's CPU time.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use strata_log::{FlushPolicy, Log, LogConfig, Record};

/// The process's user + system CPU time so far, from `/proc/self/stat` (clock ticks).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn an_idle_log_does_not_spin() {
    let dir = tempfile::tempdir().unwrap();
    let policy = FlushPolicy::EveryInterval { ms: 10, messages: 1_000 };
    let log = Log::open(dir.path(), LogConfig { flush_policy: policy, ..LogConfig::default() }).unwrap();
    log.append(&[Record::new(b"a")]).unwrap();
    let started = Instant::now();
    while log.durable_offset() < 1 {
        assert!(started.elapsed() < Duration::from_secs(10), "never synced");
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = cpu_ticks();
    std::thread::sleep(Duration::from_millis(1_000));
    let used = cpu_ticks() - before;
    // A spinning syncer uses about a second (100 ticks at the usual 100 Hz); a sleeping one none.
    assert!(used < 30, "an idle log used {used} clock ticks of CPU in one second");
    // And it still syncs what comes after the idle time, by the interval.
    log.append(&[Record::new(b"b")]).unwrap();
    let started = Instant::now();
    while log.durable_offset() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "never synced after the idle time");
        std::thread::sleep(Duration::from_millis(1));
    }
    log.close().unwrap();
}
