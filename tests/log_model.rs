//! Property test: the log behaves like a `Vec` of records over random appends, reads and reopens,
//! with tiny segments and indexes so rolls and index lookups happen constantly.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Owned, read_all, small_config};
use proptest::prelude::*;
use strata_log::{Log, LogConfig};

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Owned>),
    Read { from: usize, max_bytes: usize },
    Flush,
    Reopen,
}

fn record() -> impl Strategy<Value = Owned> {
    let bytes = proptest::collection::vec(any::<u8>(), 0..300);
    let header = ("[a-z]{0,6}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)));
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
        proptest::option::of(bytes),
        proptest::collection::vec(header, 0..3),
    )
        .prop_map(|(key, value, headers)| Owned { key, value, headers })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(record(), 1..12).prop_map(Op::Append),
        3 => (any::<usize>(), 1usize..3000).prop_map(|(from, max_bytes)| Op::Read { from, max_bytes }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn config() -> LogConfig {
    small_config()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_a_vec_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), config()).unwrap();
        let mut model: Vec<Owned> = Vec::new();
        for op in ops {
            match op {
                Op::Append(records) => {
                    let info = Owned::append_all(&log, &records).unwrap();
                    prop_assert_eq!(info.base_offset, model.len() as u64);
                    prop_assert_eq!(info.last_offset, (model.len() + records.len() - 1) as u64);
                    model.extend(records);
                }
                Op::Read { from, max_bytes } => {
                    if model.is_empty() {
                        prop_assert_eq!(log.read(0, max_bytes).unwrap().count(), 0);
                        prop_assert!(log.read(1, max_bytes).is_err());
                        continue;
                    }
                    let from = from % model.len();
                    let got = read_all(&log, from as u64, max_bytes);
                    let expected: Vec<(u64, Owned)> =
                        model[from..].iter().cloned().enumerate().map(|(i, r)| ((from + i) as u64, r)).collect();
                    prop_assert_eq!(got, expected);
                }
                Op::Flush => log.flush().unwrap(),
                Op::Reopen => {
                    log.close().unwrap();
                    log = Log::open(dir.path(), config()).unwrap();
                    prop_assert!(log.recovery_report().clean_shutdown);
                    prop_assert_eq!(log.recovery_report().segments_scanned, 0);
                }
            }
            prop_assert_eq!(log.next_offset(), model.len() as u64);
        }
        let all = read_all(&log, 0, 1 << 20);
        prop_assert_eq!(all.len(), model.len());
    }
}
