//! rocketmq-store's side of a round: its `LocalFileMessageStore`, opened as a broker opens it
//! (`StoreFactory`, then init, load, start), with the same workload.
//!
//! Messages are put through `StorePorts::put_message_shared`: the `&self` write path that
//! `BrokerWriteStore::put_message` (`&mut self`) calls and that a broker's concurrent send
//! handlers share, so several producer threads can put at once. Each message is what a broker
//! hands its store: topic, queue, body, tag and key properties, the properties string and the
//! tag's hash filled in (the broker's send processor does that, not the store).

use std::error::Error;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cheetah_string::CheetahString;
use dashmap::DashMap;
use rocketmq_model::codec::message_properties_to_string;
use rocketmq_model::common::config::TopicConfig;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_ext_broker_inner::MessageExtBrokerInner;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::utils::crc32_utils::crc32;
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};
use rocketmq_store::{
    BrokerReadStore, BrokerStorePort, CommitLogRecordBodyMode, CommitLogRecordChecksum, CommitLogRecordOutcome,
    FlushDiskType, GetMessageStatus, LocalFileMessageStore, MessageStoreConfig, PutMessageStatus, StoreFactory,
    StoreFactoryConfig, StorePorts, StoreRuntimeConfig, StoreTelemetry, inspect_commit_log_record,
};

use crate::measure::{RoundResult, per_second, quantile_us};
use crate::workload::{
    BATCH, QUEUES, TAG, TOPIC, Workload, body_of, expected_index, index_in, key_of, query_indexes, queue_of, share,
};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The consumer group named in `get_message` (the store only records it in statistics).
const GROUP: &str = "bench-group";
/// How long the store may take to dispatch what was put before the round fails.
const DISPATCH_TIMEOUT: Duration = Duration::from_secs(120);

/// How rocketmq-store is configured, beyond its defaults.
pub struct Peer {
    /// `MessageStoreConfig::mapped_file_size_commit_log` (default 1 GiB).
    commit_log_file_size: usize,
    /// `MessageStoreConfig::commit_log_micro_batch_enabled` (the store's default is on; the
    /// `--peer-micro-batch` flag).
    micro_batch: bool,
}

/// One open store and the Tokio runtime (rocketmq-runtime's owner of it) its services run on:
/// each store gets its own, as in a broker process, so no store's tasks outlive it into the next.
struct Opened {
    owner: RuntimeOwner,
    ports: StorePorts,
}

impl Peer {
    /// The commit log's file size and whether it micro-batches (the flags).
    pub fn new(commit_log_file_size: usize, micro_batch: bool) -> Peer {
        Peer { commit_log_file_size, micro_batch }
    }

    /// Runs every phase on fresh stores under `dir`.
    pub fn run_round(&self, dir: &Path, work: &Workload) -> Result<RoundResult> {
        let mut result = RoundResult::default();

        let store = self.open(&dir.join("async"), FlushDiskType::AsyncFlush)?;
        let messages = build(0..work.messages);
        result.put_async = self.put(&store, messages)?;
        result.dispatch_wait = self.wait_dispatched(&store, work.messages)?;
        result.bytes_per_message = local(&store.ports).get_max_phy_offset() as f64 / work.messages as f64;
        result.consume = self.consume(&store, work.messages)?;
        (result.query_rate, result.query_p99_us) = self.query(&store, work)?;
        self.close(store, &dir.join("async"))?;

        let store = self.open(&dir.join("sync-1"), FlushDiskType::SyncFlush)?;
        result.put_sync = self.put(&store, build(0..work.sync_messages))?;
        self.close(store, &dir.join("sync-1"))?;

        let store = self.open(&dir.join("sync-many"), FlushDiskType::SyncFlush)?;
        result.put_sync_many = Some(self.put_many(&store, work)?);
        self.close(store, &dir.join("sync-many"))?;
        Ok(result)
    }

    /// Opens a store in `root` with the defaults but for the flush mode, the commit log's file
    /// size and micro-batching (the flags), and the HA listener (loopback, any free port: no
    /// replica connects).
    fn open(&self, root: &Path, flush_disk_type: FlushDiskType) -> Result<Opened> {
        let owner = RuntimeOwner::plan(RuntimeConfig::server_default("rocketmq-peer"))
            .map_err(|e| format!("rocketmq-runtime refused its default configuration: {e:?}"))?
            .build()?;
        let config = MessageStoreConfig {
            store_path_root_dir: CheetahString::from_string(root.to_string_lossy().into_owned()),
            flush_disk_type,
            mapped_file_size_commit_log: self.commit_log_file_size,
            commit_log_micro_batch_enabled: self.micro_batch,
            ha_listen_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ha_listen_port: 0,
            ..MessageStoreConfig::default()
        };
        let factory = StoreFactoryConfig::try_new(
            Arc::new(config),
            Arc::new(StoreRuntimeConfig::default()),
            Arc::new(DashMap::<CheetahString, Arc<TopicConfig>>::new()),
            None,
            false,
            StoreTelemetry::default(),
        )
        .ok_or("rocketmq-store refused its configuration")?;
        let opened = StoreFactory::open(factory, owner.root_context().component("rocketmq-peer-store"))?;
        let (StorePorts::LocalFileStore(mut store), _timer) = opened.into_parts();
        owner.block_on(async {
            store.init().await?;
            if !store.load().await {
                return Err("rocketmq-store: load failed".into());
            }
            store.start().await?;
            Ok::<_, Box<dyn Error>>(())
        })?;
        Ok(Opened { owner, ports: StorePorts::LocalFileStore(store) })
    }

    /// Shuts `store` down and removes its directory `root`: a round's stores never take the
    /// disk together.
    fn close(&self, store: Opened, root: &Path) -> Result<()> {
        let StorePorts::LocalFileStore(mut ports) = store.ports;
        store.owner.block_on(ports.shutdown());
        store.owner.shutdown_runtime_blocking()?;
        std::fs::remove_dir_all(root)?;
        Ok(())
    }

    /// Puts `messages` one at a time, each awaited; returns messages per second.
    fn put(&self, store: &Opened, messages: Vec<MessageExtBrokerInner>) -> Result<f64> {
        let count = messages.len() as u64;
        let start = Instant::now();
        store.owner.block_on(put_all(&store.ports, messages))?;
        Ok(per_second(count, start.elapsed()))
    }

    /// `work.producers` threads put `work.sync_messages` between them, each awaiting each put.
    fn put_many(&self, store: &Opened, work: &Workload) -> Result<f64> {
        let shares: Vec<Vec<MessageExtBrokerInner>> =
            (0..work.producers).map(|p| build(share(p, work.producers, work.sync_messages))).collect();
        let runtime = store.owner.block_on(async { tokio_handle() });
        let ports = &store.ports;
        let start = Instant::now();
        let outcomes: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = shares
                .into_iter()
                .map(|messages| {
                    let runtime = runtime.clone();
                    scope.spawn(move || runtime.block_on(put_all(ports, messages)).map_err(|e| e.to_string()))
                })
                .collect();
            threads.into_iter().map(|t| t.join()).collect()
        });
        let elapsed = start.elapsed();
        for outcome in outcomes {
            outcome.map_err(|_| "rocketmq: a producer thread panicked")??;
        }
        Ok(per_second(work.sync_messages, elapsed))
    }

    /// Waits until the store's reput has dispatched every message to its consume queue and the
    /// index (RocketMQ's put returns before that; a consumer sees a message only after it).
    fn wait_dispatched(&self, store: &Opened, messages: u64) -> Result<Duration> {
        let (owner, store) = (&store.owner, local(&store.ports));
        let start = Instant::now();
        let last_key = CheetahString::from_string(key_of(messages - 1));
        loop {
            let queued: i64 = (0..QUEUES).map(|q| store.get_max_offset_in_queue(&topic(), q as i32)).sum();
            if store.dispatch_behind_bytes() == 0 && queued as u64 == messages {
                let indexed = owner.block_on(store.query_message(&topic(), &last_key, 1, 0, i64::MAX));
                if indexed.is_some_and(|r| !r.message_maped_list.is_empty()) {
                    return Ok(start.elapsed());
                }
            }
            if start.elapsed() > DISPATCH_TIMEOUT {
                return Err(
                    format!("rocketmq: {queued} of {messages} messages dispatched after {DISPATCH_TIMEOUT:?}").into()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Reads every message back, queue by queue, `BATCH` at a time, decoding each record and
    /// checking it is the message the queue should hold at that offset; returns messages per
    /// second.
    fn consume(&self, store: &Opened, messages: u64) -> Result<f64> {
        let (owner, store) = (&store.owner, local(&store.ports));
        let (group, topic) = (CheetahString::from_static_str(GROUP), topic());
        let start = Instant::now();
        let count = owner.block_on(async {
            let mut count = 0u64;
            for queue in 0..QUEUES {
                let end = store.get_max_offset_in_queue(&topic, queue as i32);
                let mut offset = 0i64;
                while offset < end {
                    let got = store.get_message(&group, &topic, queue as i32, offset, BATCH as i32, None).await;
                    let got = got.ok_or_else(|| format!("rocketmq: queue {queue} at {offset}: no result"))?;
                    if got.status() != Some(GetMessageStatus::Found) {
                        return Err(format!("rocketmq: queue {queue} at {offset}: {:?}", got.status()).into());
                    }
                    let next = got.next_begin_offset();
                    for (i, selected) in got.message_mapped_vec().into_iter().enumerate() {
                        let want = expected_index(queue, offset as u64 + i as u64);
                        if record_index(&selected.into_owner_bytes()) != Some(want) {
                            return Err(format!(
                                "rocketmq: queue {queue} offset {} is not message {want}",
                                offset + i as i64
                            )
                            .into());
                        }
                        count += 1;
                    }
                    offset = next;
                }
            }
            Ok::<_, Box<dyn Error>>(count)
        })?;
        let elapsed = start.elapsed();
        if count != messages {
            return Err(format!("rocketmq: consumed {count} messages, put {messages}").into());
        }
        Ok(per_second(count, elapsed))
    }

    /// Queries the seeded keys one by one (`query_message`, the store's query by key), checking
    /// each finds its message; returns queries per second and the p99 latency in µs.
    fn query(&self, store: &Opened, work: &Workload) -> Result<(f64, f64)> {
        let (owner, store) = (&store.owner, local(&store.ports));
        let topic = topic();
        let keys: Vec<(u64, CheetahString)> = query_indexes(work.seed, work.queries, work.messages)
            .into_iter()
            .map(|i| (i, CheetahString::from_string(key_of(i))))
            .collect();
        let mut latencies = Vec::with_capacity(keys.len());
        let start = Instant::now();
        owner.block_on(async {
            for (i, key) in &keys {
                let one = Instant::now();
                let found = store.query_message(&topic, key, BATCH as i32, 0, i64::MAX).await;
                latencies.push(one.elapsed());
                // The index is a hash index: a query may also return other keys' messages.
                let records = found.map(|r| r.message_maped_list).unwrap_or_default();
                let count = records.len();
                if !records.into_iter().any(|s| record_index(&s.into_owner_bytes()) == Some(*i)) {
                    return Err(format!("rocketmq: key {key} did not find its message ({count} found)"));
                }
            }
            Ok(())
        })?;
        let elapsed = start.elapsed();
        Ok((per_second(keys.len() as u64, elapsed), quantile_us(&mut latencies, 0.99)))
    }
}

/// The current Tokio runtime's handle (called inside the owner's runtime), for producer
/// threads to block on.
fn tokio_handle() -> tokio::runtime::Handle {
    tokio::runtime::Handle::current()
}

async fn put_all(store: &StorePorts, messages: Vec<MessageExtBrokerInner>) -> Result<()> {
    for message in messages {
        let put = store.put_message_shared(message).await;
        match put.put_message_status() {
            PutMessageStatus::PutOk => {}
            PutMessageStatus::ServiceNotAvailable => {
                return Err("rocketmq: put refused (ServiceNotAvailable): the store fences writes, e.g. \
                            while its filesystem is over 90% full, reserved blocks counted as used \
                            (try --dir on a filesystem with more room)"
                    .into());
            }
            status => return Err(format!("rocketmq: put: {status:?}").into()),
        }
    }
    Ok(())
}

fn local(store: &StorePorts) -> &LocalFileMessageStore {
    let StorePorts::LocalFileStore(store) = store;
    store
}

fn topic() -> CheetahString {
    CheetahString::from_static_str(TOPIC)
}

fn build(range: impl Iterator<Item = u64>) -> Vec<MessageExtBrokerInner> {
    let born = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    range.map(|i| message(i, born)).collect()
}

/// Message `i` as a broker hands it to its store.
fn message(i: u64, born_timestamp: i64) -> MessageExtBrokerInner {
    let mut message = Message::builder().topic(topic()).body(body_of(i)).build_unchecked();
    message.set_tags(CheetahString::from_static_str(TAG));
    message.set_keys(CheetahString::from_string(key_of(i)));
    let mut inner =
        MessageExtBrokerInner { message_ext_inner: MessageExt { message, ..Default::default() }, ..Default::default() };
    inner.message_ext_inner.set_queue_id(queue_of(i) as i32);
    inner.message_ext_inner.set_born_timestamp(born_timestamp);
    inner.properties_string = message_properties_to_string(inner.message_ext_inner.properties());
    inner.tags_code = MessageExtBrokerInner::tags_string_to_tags_code(TAG);
    inner
}

/// The store's body checksum (what its commit log writes in each record), so reads verify it:
/// strata's reads check each batch's CRC, and each side's consume and query do their checking.
struct BodyCrc;

impl CommitLogRecordChecksum for BodyCrc {
    fn checksum(&self, bytes: &[u8]) -> u32 {
        crc32(bytes)
    }
}

/// The message number in a stored record's body, its checksum verified (`None` if it is not a
/// message of the workload, or is damaged).
fn record_index(record: &Bytes) -> Option<u64> {
    match inspect_commit_log_record(record, CommitLogRecordBodyMode::ReadAndVerify, &BodyCrc) {
        CommitLogRecordOutcome::Message(record) => index_in(record.body.as_deref()?),
        _ => None,
    }
}
