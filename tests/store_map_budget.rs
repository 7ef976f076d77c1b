//! A message store with hundreds of queues under a small map budget: the sealed consume-queue and
//! index files are unmapped as readers move on, the store's files never hold more maps than the
//! cap plus the active files', and every message reads back right.
#![allow(clippy::unwrap_used)]

mod common;

use common::maps_under;
use strata_log::{FlushPolicy, LogConfig, MapBudget, MapBudgetConfig, Message, MessageStore, StoreConfig};

const MAX_MAPS: u64 = 48;
const QUEUES: u32 = 300;

#[test]
fn hundreds_of_queues_read_back_under_a_small_map_budget() {
    let dir = tempfile::tempdir().unwrap();
    let budget = MapBudget::new(MapBudgetConfig {
        max_maps: MAX_MAPS,
        max_mapped_bytes: 1 << 30,
        max_open_files: 1_000,
        ..MapBudgetConfig::default()
    })
    .unwrap();
    let config = StoreConfig {
        log: LogConfig {
            segment_bytes: 64 << 10,
            flush_policy: FlushPolicy::Never,
            map_budget: Some(budget.clone()),
            ..StoreConfig::default().log
        },
        queue_entries_per_file: 4,
        index_slots: 64,
        index_entries: 200,
        max_queues_per_topic: QUEUES,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(dir.path(), config.clone()).unwrap();
    for round in 0..10 {
        for queue in 0..QUEUES {
            store
                .put(&Message::new("t", queue, format!("{queue}-{round}")).with_keys([format!("k{queue}-{round}")]))
                .unwrap();
        }
    }
    store.close().unwrap();

    let store = MessageStore::open(dir.path(), config).unwrap();
    let active = QUEUES as usize + 4; // each queue's active file, the log's three, the active index file
    for pass in 0..2 {
        for queue in 0..QUEUES {
            let got = store.get_messages("t", queue, 0, 100, None).unwrap();
            let bodies: Vec<String> =
                got.messages.iter().map(|m| String::from_utf8(m.body().to_vec()).unwrap()).collect();
            let expected: Vec<String> = (0..10).map(|round| format!("{queue}-{round}")).collect();
            assert_eq!(bodies, expected, "pass {pass}, queue {queue}");
            if queue % 50 == 0 {
                let found = store.query_by_key("t", &format!("k{queue}-3"), 0, i64::MAX, 10).unwrap();
                assert_eq!(found.len(), 1);
            }
            let maps = maps_under(dir.path());
            assert!(maps <= MAX_MAPS as usize + active, "{maps} maps of the store's files");
        }
    }
    let metrics = budget.metrics();
    assert!(metrics.maps <= MAX_MAPS, "{metrics:?}");
    assert!(
        metrics.reclaimed_background + metrics.reclaimed_direct > 0,
        "sealed queue files were unmapped: {metrics:?}"
    );
    assert_eq!(metrics.refusals, 0);
    store.close().unwrap();
    assert_eq!((budget.metrics().maps, budget.metrics().open_files), (0, 0), "everything given back");
}
