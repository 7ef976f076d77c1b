//! Three openraft nodes in one process, each with its own strata directory as its Raft log
//! (`RaftLogStore`) and a small in-memory key-value state machine, talking over an in-process
//! network: write through the leader, stop the leader, let the others elect a new one, keep
//! writing, restart the old node from its directory and watch it catch up.
//!
//! ```text
//! cargo run --release --features openraft --example raft_cluster [-- <directory>]
//! ```
//!
//! Without a directory it works in a temporary one. Each step is printed, with the commits per
//! second of the writes (one client at a time, then 64 in flight).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Config, Entry, EntryPayload, LogId, OptionalSend, Raft, RaftSnapshotBuilder, SnapshotMeta,
    SnapshotPolicy, StorageError, StoredMembership,
};
use strata_log::{LogConfig, RaftLogStore};

openraft::declare_raft_types!(
    /// Commands are `key=value` strings; a response is the key's previous value.
    pub Kv: D = String, R = String
);

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let temporary = tempfile::tempdir()?;
    let root = std::env::args_os().nth(1).map_or_else(|| temporary.path().to_path_buf(), PathBuf::from);
    let router = Router::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, Node::start(id, &root, &router).await?);
        println!("node {id}: started on {}", root.join(format!("node-{id}")).display());
    }
    nodes[&1].raft.initialize(BTreeSet::from([1, 2, 3])).await?;
    let leader = wait_for_leader(&nodes, None).await?;
    println!("node {leader} is the leader");

    write(&nodes[&leader], 0..2000, 1).await?;
    write(&nodes[&leader], 2000..10_000, 64).await?;

    println!("stopping the leader, node {leader}");
    let old = nodes.remove(&leader).expect("the leader is a node");
    router.remove(leader);
    old.raft.shutdown().await?;
    drop(old);
    let new_leader = wait_for_leader(&nodes, Some(leader)).await?;
    println!("node {new_leader} is the new leader");
    write(&nodes[&new_leader], 10_000..12_000, 64).await?;

    println!("restarting node {leader} from its directory");
    let restarted = Node::start(leader, &root, &router).await?;
    let target = nodes[&new_leader].raft.metrics().borrow().last_log_index;
    let started = Instant::now();
    restarted
        .raft
        .wait(Some(Duration::from_secs(30)))
        .metrics(|m| m.last_applied.map(|id| id.index) >= target, "caught up")
        .await?;
    let keys = restarted.state.len();
    println!("node {leader}: caught up to index {target:?} in {:?}, {keys} keys", started.elapsed());
    assert_eq!(restarted.state.get("key11999").as_deref(), Some("value11999"));
    nodes.insert(leader, restarted);
    for (id, node) in nodes {
        node.raft.shutdown().await?;
        println!("node {id}: stopped, log {:?}", node.raft.metrics().borrow().last_log_index);
    }
    Ok(())
}

/// Writes `key<i>=value<i>` for every `i` in `range` through `leader`, `in_flight` at a time,
/// and prints the commits per second.
async fn write(leader: &Node, range: std::ops::Range<u64>, in_flight: u64) -> Result<()> {
    let started = Instant::now();
    let count = range.end - range.start;
    let mut next = range.start;
    while next < range.end {
        let wave = (next..(next + in_flight).min(range.end)).map(|i| {
            let raft = leader.raft.clone();
            tokio::spawn(async move { raft.client_write(format!("key{i}=value{i}")).await })
        });
        for handle in wave.collect::<Vec<_>>() {
            handle.await??;
        }
        next = (next + in_flight).min(range.end);
    }
    let seconds = started.elapsed().as_secs_f64();
    let rate = count as f64 / seconds;
    println!("node {}: {count} writes committed, {in_flight} in flight: {rate:.0} commits/s", leader.id);
    Ok(())
}

async fn wait_for_leader(nodes: &BTreeMap<u64, Node>, not: Option<u64>) -> Result<u64> {
    let any = nodes.values().next().expect("a node is running");
    let metrics = any
        .raft
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.current_leader.is_some() && m.current_leader != not, "a leader")
        .await?;
    Ok(metrics.current_leader.expect("waited for one"))
}

/// One node: its Raft, with its own strata directory, and its state machine.
struct Node {
    id: u64,
    raft: Raft<Kv>,
    state: KvStateMachine,
}

impl Node {
    async fn start(id: u64, root: &Path, router: &Router) -> Result<Node> {
        let config = Config {
            heartbeat_interval: 100,
            election_timeout_min: 300,
            election_timeout_max: 600,
            // The state machine is in memory and starts empty: a restarted node rebuilds it by
            // applying its whole log again, so no snapshot may purge the log. (An application
            // whose state machine keeps its state, or its snapshots, on disk lets openraft
            // snapshot and purge: `RaftLogStore::purge` then deletes whole segments.)
            snapshot_policy: SnapshotPolicy::Never,
            ..Config::default()
        };
        let log_config = LogConfig { segment_bytes: 16 << 20, ..LogConfig::default() };
        let store = open(&root.join(format!("node-{id}")), log_config).await?;
        let state = KvStateMachine::default();
        let raft = Raft::new(id, Arc::new(config.validate()?), router.clone(), store, state.clone()).await?;
        router.nodes.lock().expect("not poisoned").insert(id, raft.clone());
        Ok(Node { id, raft, state })
    }
}

/// Opens a node's store, retrying while the store of its previous run still holds the
/// directory lock (a dropped store closes its log on tokio's blocking pool).
async fn open(dir: &Path, config: LogConfig) -> Result<RaftLogStore<Kv>> {
    for _ in 0..500 {
        match RaftLogStore::open(dir, config.clone()).await {
            Err(strata_log::Error::Locked { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            other => return Ok(other?),
        }
    }
    Err(format!("{} stayed locked", dir.display()).into())
}

/// The in-process network: every running node's `Raft`, by id.
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, Raft<Kv>>>>,
}

impl Router {
    fn remove(&self, id: u64) {
        self.nodes.lock().expect("not poisoned").remove(&id);
    }
}

/// A connection from one node to `target`.
struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    /// The target's `Raft`, if it is running.
    fn target(&self) -> Option<Raft<Kv>> {
        self.router.nodes.lock().expect("not poisoned").get(&self.target).cloned()
    }

    /// The error of a call to a stopped node.
    fn down<E: std::error::Error>(&self) -> RPCError<u64, BasicNode, E> {
        let down = std::io::Error::new(std::io::ErrorKind::NotConnected, format!("node {} is down", self.target));
        RPCError::Network(NetworkError::new(&down))
    }

    fn remote<E: std::error::Error>(
        &self,
    ) -> impl FnOnce(RaftError<u64, E>) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
        let target = self.target;
        move |error| RPCError::RemoteError(RemoteError::new(target, error))
    }
}

impl RaftNetworkFactory<Kv> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection {
        Connection { router: self.clone(), target }
    }
}

impl RaftNetwork<Kv> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Kv>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.target().ok_or_else(|| self.down())?.append_entries(rpc).await.map_err(self.remote())
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Kv>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        self.target().ok_or_else(|| self.down())?.install_snapshot(rpc).await.map_err(self.remote())
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        self.target().ok_or_else(|| self.down())?.vote(rpc).await.map_err(self.remote())
    }
}

/// What the state machine holds.
#[derive(Default)]
struct KvState {
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    data: BTreeMap<String, String>,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
}

/// A small in-memory key-value state machine (it starts empty at each start; openraft applies
/// the log to it again, from the strata directory).
#[derive(Clone, Default)]
struct KvStateMachine {
    state: Arc<Mutex<KvState>>,
}

impl KvStateMachine {
    fn get(&self, key: &str) -> Option<String> {
        self.state.lock().expect("not poisoned").data.get(key).cloned()
    }

    fn len(&self) -> usize {
        self.state.lock().expect("not poisoned").data.len()
    }
}

impl RaftSnapshotBuilder<Kv> for KvStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<Kv>, StorageError<u64>> {
        let mut state = self.state.lock().expect("not poisoned");
        let last = state.last_applied;
        let snapshot_id = format!("snapshot-{}", last.map_or(0, |id| id.index));
        let meta = SnapshotMeta { last_log_id: last, last_membership: state.membership.clone(), snapshot_id };
        let bytes = serde_json::to_vec(&state.data).expect("strings serialize");
        state.snapshot = Some((meta.clone(), bytes.clone()));
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<Kv> for KvStateMachine {
    type SnapshotBuilder = KvStateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let state = self.state.lock().expect("not poisoned");
        Ok((state.last_applied, state.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<Kv>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut state = self.state.lock().expect("not poisoned");
        let mut replies = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let reply = match entry.payload {
                EntryPayload::Blank => String::new(),
                EntryPayload::Normal(command) => {
                    let (key, value) = command.split_once('=').unwrap_or((&command, ""));
                    state.data.insert(key.to_owned(), value.to_owned()).unwrap_or_default()
                }
                EntryPayload::Membership(membership) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), membership);
                    String::new()
                }
            };
            replies.push(reply);
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> KvStateMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let bytes = snapshot.into_inner();
        let data = serde_json::from_slice(&bytes).map_err(|e| {
            StorageError::from_io_error(
                openraft::ErrorSubject::Snapshot(Some(meta.signature())),
                openraft::ErrorVerb::Read,
                std::io::Error::other(e),
            )
        })?;
        let mut state = self.state.lock().expect("not poisoned");
        state.data = data;
        state.last_applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        state.snapshot = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<Kv>>, StorageError<u64>> {
        let state = self.state.lock().expect("not poisoned");
        Ok(state.snapshot.clone().map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}
