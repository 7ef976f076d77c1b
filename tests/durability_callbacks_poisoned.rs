//! `Log::on_durable` on a log a failed fsync poisons: the pending callback gets `Poisoned`. Alone
//! in its test binary: the injected failure is process-wide.
#![cfg(feature = "failpoints")]
#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::time::Duration;

use strata_log::{Error, FlushPolicy, Log, LogConfig, Record};

#[test]
fn a_failed_fsync_reports_poisoned() {
    let scenario = fail::FailScenario::setup();
    let dir = tempfile::tempdir().unwrap();
    let lazy = FlushPolicy::EveryInterval { ms: 3_600_000, messages: u64::MAX };
    let log = Log::open(dir.path(), LogConfig { flush_policy: lazy, ..LogConfig::default() }).unwrap();
    let info = log.append_nowait(&[Record::new(b"lost")]).unwrap();
    let (tx, rx) = mpsc::channel();
    log.on_durable(&info, move |result| tx.send(result).unwrap());
    fail::cfg("fdatasync", "return").unwrap();
    assert!(log.flush().is_err());
    fail::remove("fdatasync");
    let result = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(result, Err(Error::Poisoned)), "{result:?}");
    scenario.teardown();
}
