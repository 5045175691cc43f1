//! An in-process multi-member cluster for scenario tests, in the spirit of TiKV's
//! `test_raftstore::Cluster`: every member has its own [`Transport`], gRPC server on an
//! ephemeral 127.0.0.1 port, Raft directory and [`Cluster`], all inside one test process.
//! Faults are injected with the transport's send-side filters (partitions, hangs) or by killing a
//! member's server and Raft node (a crash), and restarting it from the same Raft directory.
//!
//! The harness also keeps a history of who was cluster manager in which term — both from the
//! applied cluster states (`ClusterManagerElected`) and from sampling every member's Raft
//! status — and the first state every member applied under each version, so a test can
//! assert that no term had two managers and that no two members ever diverged.
//!
//! Set `SHOAL_TEST_LOG=info` (or `debug`, `warn`) to print the cluster layer's tracing events.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::Value;
use shoal_cluster::{CheckSettings, Cluster, ClusterConfig, ClusterError, RaftStatus};
use shoal_state::{ClusterState, Command, DiscoveryNode, Role};
use shoal_transport::{
    ActionRegistry, FilterDecision, Handler, PartitionFilter, ProtocolVersion, RemoteError,
    Request, ServerHandle, Transport, PROTOCOL_VERSION,
};
use tokio::task::JoinHandle;

/// Fast fault detection for tests. The leader check interval drives the Raft election timeout
/// (`Cluster::start`: election timeout = interval/2 .. interval, heartbeat = interval/8), so
/// 1s gives 500–1000ms elections and 125ms heartbeats: fast, but with enough slack that a
/// loaded 2-core machine running several clusters at once does not hold spurious elections.
pub const LEADER_CHECK: CheckSettings = CheckSettings {
    interval: Duration::from_millis(1000),
    timeout: Duration::from_millis(500),
    retry_count: 3,
};

/// A follower is checked every 300ms and removed after 3 failed checks of 300ms each, or at
/// once when its connection is refused (a crashed process).
pub const FOLLOWER_CHECK: CheckSettings = CheckSettings {
    interval: Duration::from_millis(300),
    timeout: Duration::from_millis(300),
    retry_count: 3,
};

/// Default timeout of [`TestCluster::propose_on`].
pub const PROPOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves one member's transport: every action goes to its [`Cluster`].
struct MemberHandler {
    cluster: OnceLock<ActionRegistry>,
}

impl Handler for MemberHandler {
    fn handle(&self, req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> {
        match self.cluster.get() {
            Some(actions) => actions.handle(req),
            None => Box::pin(async {
                Err(RemoteError::new(
                    503,
                    "node_closed_exception",
                    "node is starting",
                ))
            }),
        }
    }
}

/// One running member.
pub struct Member {
    pub transport: Arc<Transport>,
    pub cluster: Arc<Cluster>,
    server: ServerHandle,
    recorder: JoinHandle<()>,
}

/// Who was cluster manager in which term, as seen during a test.
#[derive(Default)]
pub struct History {
    /// Term → node ids named cluster manager by an applied state.
    applied: Mutex<BTreeMap<u64, BTreeSet<String>>>,
    /// Term → node ids whose Raft node was leader in that term (sampled every 5ms).
    raft_leaders: Mutex<BTreeMap<u64, BTreeSet<String>>>,
    /// Version → the first state applied with that version, and by whom.
    by_version: Mutex<BTreeMap<u64, (String, Arc<ClusterState>)>>,
    /// Two members applied different states under the same version (split brain).
    divergences: Mutex<Vec<String>>,
}

pub struct TestCluster {
    /// The identity of each slot (its node id, name and address survive restarts).
    pub nodes: Vec<DiscoveryNode>,
    members: Vec<Option<Member>>,
    raft_dirs: Vec<PathBuf>,
    initial_cluster_manager_nodes: Vec<String>,
    /// Members the sampler looks at (None when killed).
    live: Arc<Mutex<Vec<Option<Arc<Cluster>>>>>,
    history: Arc<History>,
    sampler: JoinHandle<()>,
    /// Member index → the addresses its transport currently drops messages to.
    partitioned: BTreeMap<usize, BTreeSet<String>>,
    /// Addresses of members that look hung: messages to them are delayed past any deadline.
    hung: BTreeSet<String>,
    pub started: Instant,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    /// Starts `n` members that discover each other through their seed hosts; the first
    /// `min(n, 3)` are the initial cluster-manager nodes, the others join the elected one.
    pub async fn start(n: usize) -> TestCluster {
        TestCluster::start_with_protocols(&vec![PROTOCOL_VERSION; n]).await
    }

    /// [`TestCluster::start`] with one member per protocol range (version skew scenarios).
    pub async fn start_with_protocols(protocols: &[ProtocolVersion]) -> TestCluster {
        let n = protocols.len();
        init_logging();
        let dir = tempfile::tempdir().expect("temp dir");
        // Bind every server first: the configurations need every address as a seed host.
        let mut bound = Vec::new();
        for protocol in protocols {
            let id = shoal_cluster::new_id();
            let transport = Transport::with_protocol(id.clone(), *protocol);
            let handler = Arc::new(MemberHandler {
                cluster: OnceLock::new(),
            });
            let server = transport
                .serve("127.0.0.1:0".parse().unwrap(), handler.clone())
                .await
                .expect("bind transport");
            let addr = server.local_addr();
            bound.push((id, transport, handler, server, addr));
        }
        let nodes: Vec<DiscoveryNode> = bound
            .iter()
            .enumerate()
            .map(|(i, (id, _, _, _, addr))| discovery_node(id, &format!("node-{i}"), *addr))
            .collect();
        let raft_dirs: Vec<PathBuf> = (0..n)
            .map(|i| dir.path().join(format!("node-{i}")).join("raft"))
            .collect();
        let live = Arc::new(Mutex::new(vec![None; n]));
        let history = Arc::new(History::default());
        let sampler = tokio::spawn(sample_leaders(live.clone(), history.clone()));
        let mut cluster = TestCluster {
            initial_cluster_manager_nodes: nodes.iter().take(3).map(|n| n.name.clone()).collect(),
            nodes,
            members: (0..n).map(|_| None).collect(),
            raft_dirs,
            live,
            history,
            sampler,
            partitioned: BTreeMap::new(),
            hung: BTreeSet::new(),
            started: Instant::now(),
            _dir: dir,
        };
        for (i, (_, transport, handler, server, _)) in bound.into_iter().enumerate() {
            cluster.start_member(i, transport, handler, server).await;
        }
        cluster
    }

    fn config(&self, i: usize) -> ClusterConfig {
        ClusterConfig {
            cluster_name: "scenarios".into(),
            local: self.nodes[i].clone(),
            raft_dir: self.raft_dirs[i].clone(),
            seed_hosts: self
                .nodes
                .iter()
                .map(|n| n.transport_address.clone())
                .collect(),
            initial_cluster_manager_nodes: self.initial_cluster_manager_nodes.clone(),
            single_node: false,
            follower_check: FOLLOWER_CHECK,
            leader_check: LEADER_CHECK,
            cluster_settings: Default::default(),
        }
    }

    async fn start_member(
        &mut self,
        i: usize,
        transport: Arc<Transport>,
        handler: Arc<MemberHandler>,
        server: ServerHandle,
    ) {
        let cluster = Cluster::start(self.config(i), transport.clone())
            .await
            .unwrap_or_else(|e| panic!("node-{i} failed to start: {e}"));
        let _ = handler.cluster.set(cluster.actions());
        let recorder = tokio::spawn(record_applied(
            self.nodes[i].name.clone(),
            cluster.subscribe(),
            self.history.clone(),
        ));
        self.live.lock()[i] = Some(cluster.clone());
        self.members[i] = Some(Member {
            transport,
            cluster,
            server,
            recorder,
        });
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The running member `i`; panics when it is killed.
    pub fn member(&self, i: usize) -> &Member {
        self.members[i]
            .as_ref()
            .unwrap_or_else(|| panic!("node-{i} is not running"))
    }

    pub fn cluster(&self, i: usize) -> &Arc<Cluster> {
        &self.member(i).cluster
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.members[i].is_some()
    }

    pub fn running(&self) -> Vec<usize> {
        (0..self.len()).filter(|i| self.is_running(*i)).collect()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// The slot of a node id or Raft id.
    pub fn index_of_id(&self, node_id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == node_id)
    }

    pub fn index_of_raft_id(&self, raft_id: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.raft_id() == raft_id)
    }

    pub fn state(&self, i: usize) -> Arc<ClusterState> {
        self.cluster(i).state()
    }

    /// Every slot's last applied state (None for killed members).
    pub fn states(&self) -> Vec<Option<Arc<ClusterState>>> {
        self.members
            .iter()
            .map(|m| m.as_ref().map(|m| m.cluster.state()))
            .collect()
    }

    /// Whether member `i` is the cluster manager in both senses: its Raft node leads, and its
    /// own applied state names it manager for that very term.
    pub fn is_manager(&self, i: usize) -> bool {
        let Some(member) = &self.members[i] else {
            return false;
        };
        let status = member.cluster.raft_status();
        let state = member.cluster.state();
        status.is_leader
            && state.cluster_manager.as_deref() == Some(self.nodes[i].id.as_str())
            && state.term == status.term
    }

    /// The one running member that is cluster manager, if exactly one is.
    pub fn leader_index(&self) -> Option<usize> {
        self.single_manager_among(&self.running())
    }

    fn single_manager_among(&self, among: &[usize]) -> Option<usize> {
        let managers: Vec<usize> = among
            .iter()
            .copied()
            .filter(|i| self.is_manager(*i))
            .collect();
        match managers.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Waits until exactly one running member is cluster manager, and returns it.
    pub async fn wait_for_leader(&self, timeout: Duration) -> usize {
        self.wait_for_leader_among(&self.running(), timeout).await
    }

    /// Waits until exactly one of `among` is cluster manager (others may still believe they
    /// are, e.g. an isolated former manager).
    pub async fn wait_for_leader_among(&self, among: &[usize], timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.single_manager_among(among) {
                return i;
            }
            if Instant::now() >= deadline {
                panic!(
                    "no single cluster manager among {among:?} within {timeout:?}\n{}",
                    self.dump()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls the running members' applied states until `check` holds, or panics with a dump
    /// of every member after `timeout`. Returns how long it took.
    pub async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&[Option<Arc<ClusterState>>]) -> bool,
    ) -> Duration {
        let start = Instant::now();
        loop {
            if check(&self.states()) {
                return start.elapsed();
            }
            if start.elapsed() >= timeout {
                panic!(
                    "timed out after {timeout:?} waiting until {what}\n{}",
                    self.dump()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until every running member has applied the same state as `reference` (same
    /// uuid, version, manager, term, nodes and settings).
    pub async fn wait_for_convergence(&self, timeout: Duration) -> Duration {
        self.wait_until(
            "all running members apply the same state",
            timeout,
            |states| {
                let live: Vec<&Arc<ClusterState>> = states.iter().flatten().collect();
                live.windows(2).all(|w| same_state(w[0], w[1]))
                    && live.first().is_some_and(|s| !s.cluster_uuid.is_empty())
            },
        )
        .await
    }

    /// Proposes through member `i` (forwarded to the manager when `i` is not it).
    pub async fn propose_on(
        &self,
        i: usize,
        command: Command,
    ) -> Result<Arc<ClusterState>, ClusterError> {
        self.propose_on_with_timeout(i, command, PROPOSE_TIMEOUT)
            .await
    }

    /// Like [`TestCluster::propose_on`] with a given timeout. The call itself is bounded by the
    /// timeout plus 5s of slack, so a proposal that ignores its timeout fails the test with a
    /// clear message instead of hanging it.
    pub async fn propose_on_with_timeout(
        &self,
        i: usize,
        command: Command,
        timeout: Duration,
    ) -> Result<Arc<ClusterState>, ClusterError> {
        let cluster = self.cluster(i).clone();
        let slack = timeout + Duration::from_secs(5);
        match tokio::time::timeout(slack, cluster.propose(command, timeout)).await {
            Ok(result) => result,
            Err(_) => panic!(
                "propose on node-{i} with a {timeout:?} timeout did not return within {slack:?}"
            ),
        }
    }

    /// Crashes member `i`: its server and connections close at once, then its Raft node stops.
    pub async fn kill(&mut self, i: usize) {
        let member = self.members[i]
            .take()
            .unwrap_or_else(|| panic!("node-{i} is not running"));
        self.live.lock()[i] = None;
        self.partitioned.remove(&i);
        member.server.kill().await;
        member.cluster.shutdown().await;
        member.recorder.abort();
        for other in self.members.iter().flatten() {
            // Like a peer that noticed the crash: its next call opens a fresh connection.
            other.transport.disconnect(&self.nodes[i].transport_address);
        }
    }

    /// Restarts killed member `i` as the same node (same id, name and Raft directory) on the
    /// same transport address.
    pub async fn restart(&mut self, i: usize) {
        let addr: SocketAddr = self.nodes[i].transport_address.parse().unwrap();
        self.restart_at(i, addr).await;
    }

    /// Restarts killed member `i` as the same node and Raft directory on a new ephemeral port.
    pub async fn restart_on_new_port(&mut self, i: usize) {
        self.restart_at(i, "127.0.0.1:0".parse().unwrap()).await;
    }

    async fn restart_at(&mut self, i: usize, addr: SocketAddr) {
        assert!(!self.is_running(i), "node-{i} is running");
        let node = self.nodes[i].clone();
        let transport = Transport::new(node.id.clone());
        let handler = Arc::new(MemberHandler {
            cluster: OnceLock::new(),
        });
        let server = transport
            .serve(addr, handler.clone())
            .await
            .unwrap_or_else(|e| panic!("node-{i} cannot bind {addr}: {e}"));
        let bound = server.local_addr();
        if bound.to_string() != node.transport_address {
            self.nodes[i] = discovery_node(&node.id, &node.name, bound);
        }
        self.start_member(i, transport, handler, server).await;
    }

    /// Isolates member `i` from every other member, in both directions.
    pub fn partition(&mut self, i: usize) {
        let others: Vec<usize> = (0..self.len()).filter(|j| *j != i).collect();
        self.partition_groups(&[i], &others);
    }

    /// Cuts every link between a member of `a` and a member of `b`, in both directions.
    pub fn partition_groups(&mut self, a: &[usize], b: &[usize]) {
        for (from, to) in a
            .iter()
            .flat_map(|x| b.iter().map(move |y| (*x, *y)))
            .flat_map(|(x, y)| [(x, y), (y, x)])
        {
            let addr = self.nodes[to].transport_address.clone();
            self.partitioned.entry(from).or_default().insert(addr);
        }
        self.install_filters();
    }

    /// Makes member `i` look hung (a GC pause, a stuck disk): it is still connected, but
    /// nothing sent to it is answered before the sender's deadline. It can still send.
    pub fn hang(&mut self, i: usize) {
        self.hung.insert(self.nodes[i].transport_address.clone());
        self.install_filters();
    }

    /// Removes every partition and hang.
    pub fn heal(&mut self) {
        self.partitioned.clear();
        self.hung.clear();
        self.install_filters();
    }

    fn install_filters(&self) {
        for (i, member) in self.members.iter().enumerate() {
            let Some(member) = member else { continue };
            member.transport.clear_filters();
            if let Some(addrs) = self.partitioned.get(&i) {
                member
                    .transport
                    .add_filter(Arc::new(PartitionFilter::new(addrs.iter().cloned())));
            }
            let own = &self.nodes[i].transport_address;
            let hung: BTreeSet<String> = self.hung.iter().filter(|a| *a != own).cloned().collect();
            if !hung.is_empty() {
                member
                    .transport
                    .add_filter(Arc::new(move |to: &str, _: &str| {
                        if hung.contains(to) {
                            FilterDecision::Delay(Duration::from_secs(3600))
                        } else {
                            FilterDecision::Pass
                        }
                    }));
            }
        }
    }

    /// Term → managers seen so far in applied states and in sampled Raft leadership.
    pub fn manager_history(
        &self,
    ) -> (
        BTreeMap<u64, BTreeSet<String>>,
        BTreeMap<u64, BTreeSet<String>>,
    ) {
        let names = |m: &BTreeMap<u64, BTreeSet<String>>| {
            m.iter()
                .map(|(term, ids)| {
                    let names = ids
                        .iter()
                        .map(|id| {
                            self.index_of_id(id)
                                .map(|i| self.nodes[i].name.clone())
                                .unwrap_or_else(|| id.clone())
                        })
                        .collect();
                    (*term, names)
                })
                .collect()
        };
        (
            names(&self.history.applied.lock()),
            names(&self.history.raft_leaders.lock()),
        )
    }

    /// Asserts the safety properties the scenarios care about, and prints the history:
    ///
    /// - no two members ever applied different states under the same version (no split brain:
    ///   every member applies the same committed history);
    /// - no term had two cluster managers in applied states (`ClusterManagerElected`);
    /// - the manager an applied state names for a term was a Raft leader in that term.
    ///
    /// Not asserted: one Raft leader per term number. openraft's default leader ids are
    /// `(term, node id)` ("advanced" mode), so two members can lead one after the other in the
    /// same term number — e.g. at bootstrap, when all initial members campaign at once, `(1,
    /// node-1)` is elected and then superseded by `(1, node-2)`. Raft safety holds (votes are
    /// ordered by the whole leader id); such terms are printed.
    pub fn assert_one_manager_per_term(&self) {
        let (applied, raft) = self.manager_history();
        println!("managers by term: applied states {applied:?}, raft leaders {raft:?}");
        let divergences = self.history.divergences.lock().clone();
        assert!(
            divergences.is_empty(),
            "members applied different states under the same version:\n{}",
            divergences.join("\n")
        );
        for (term, managers) in &applied {
            assert_eq!(
                managers.len(),
                1,
                "term {term} has several managers in applied states: {managers:?}"
            );
        }
        for (term, leaders) in &raft {
            if leaders.len() > 1 {
                println!(
                    "note: raft term {term} had several successive leaders {leaders:?} \
                     (openraft leader ids are (term, node id))"
                );
            }
        }
        for (term, managers) in &applied {
            if let Some(leaders) = raft.get(term) {
                assert!(
                    managers.is_subset(leaders),
                    "term {term}: applied manager {managers:?} was never raft leader {leaders:?}"
                );
            }
        }
    }

    /// The voting configuration as member `i`'s Raft sees it, as node names.
    pub fn voters(&self, i: usize) -> BTreeSet<String> {
        self.raft_names(&self.cluster(i).raft_status().voters)
    }

    pub fn raft_names(&self, ids: &BTreeSet<u64>) -> BTreeSet<String> {
        ids.iter()
            .map(|id| {
                self.index_of_raft_id(*id)
                    .map(|i| self.nodes[i].name.clone())
                    .unwrap_or_else(|| format!("raft#{id}"))
            })
            .collect()
    }

    pub fn raft_status(&self, i: usize) -> RaftStatus {
        self.cluster(i).raft_status()
    }

    /// A one-line-per-member description of what every member believes.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for i in 0..self.len() {
            let Some(member) = &self.members[i] else {
                let _ = writeln!(out, "  {}: killed", self.name(i));
                continue;
            };
            let s = member.cluster.state();
            let r = member.cluster.raft_status();
            let _ = writeln!(
                out,
                "  {} ({}): state v{} uuid={:?} manager={:?} term={} nodes={:?} settings={} exclusions={:?} | raft term={} leader={} leader_id={:?} voters={:?} learners={:?} filters={:?}",
                self.name(i),
                self.nodes[i].transport_address,
                s.version,
                s.cluster_uuid,
                s.cluster_manager.as_deref().and_then(|id| self.index_of_id(id)).map(|j| self.name(j).to_string()),
                s.term,
                s.nodes.values().map(|n| n.name.as_str()).collect::<Vec<_>>(),
                serde_json::to_string(&s.metadata.persistent_settings).unwrap(),
                s.metadata.voting_config_exclusions.iter().map(|e| e.node_name.as_str()).collect::<Vec<_>>(),
                r.term,
                r.is_leader,
                r.leader.map(|id| self.raft_names(&BTreeSet::from([id]))),
                self.raft_names(&r.voters),
                self.raft_names(&r.learners),
                self.partitioned.get(&i),
            );
        }
        out
    }

    /// Elapsed time since the cluster started, for log lines.
    pub fn t(&self) -> String {
        format!("{:>6.2}s", self.started.elapsed().as_secs_f64())
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.sampler.abort();
        for member in self.members.iter().flatten() {
            member.recorder.abort();
        }
        // Dropping the server handles closes the servers; the Raft tasks end with the runtime.
    }
}

/// How long forming may take.
const FORM: Duration = Duration::from_secs(15);
const FORM_CONVERGE: Duration = Duration::from_secs(10);

/// Starts `n` members and waits for one manager and for every member to have joined and
/// applied the same state.
pub async fn formed(n: usize) -> (TestCluster, usize) {
    let cluster = TestCluster::start(n).await;
    let leader = cluster.wait_for_leader(FORM).await;
    cluster
        .wait_until(
            &format!("all {n} members are in every state"),
            FORM,
            |states| states.iter().flatten().all(|s| s.nodes.len() == n),
        )
        .await;
    cluster.wait_for_convergence(FORM_CONVERGE).await;
    println!(
        "{} {n} members formed a cluster managed by {}",
        cluster.t(),
        cluster.name(leader)
    );
    (cluster, leader)
}

/// Flags any state applied by any running member that matches `bad`.
pub fn watch_for(
    cluster: &TestCluster,
    bad: impl Fn(&ClusterState) -> bool + Send + Sync + 'static,
) -> Arc<AtomicBool> {
    let seen = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(bad);
    for i in cluster.running() {
        let mut rx = cluster.cluster(i).subscribe();
        let (seen, bad) = (seen.clone(), bad.clone());
        tokio::spawn(async move {
            loop {
                if bad(&rx.borrow_and_update()) {
                    seen.store(true, Ordering::SeqCst);
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        });
    }
    seen
}

/// Two states agree on everything the scenarios look at.
pub fn same_state(a: &ClusterState, b: &ClusterState) -> bool {
    a.cluster_uuid == b.cluster_uuid
        && a.version == b.version
        && a.cluster_manager == b.cluster_manager
        && a.term == b.term
        && a.nodes == b.nodes
        && a.metadata.persistent_settings == b.metadata.persistent_settings
        && a.metadata.transient_settings == b.metadata.transient_settings
        && a.metadata.voting_config_exclusions == b.metadata.voting_config_exclusions
}

/// `PUT _cluster/settings` with one persistent setting.
pub fn put_setting(key: &str, value: impl Into<Value>) -> Command {
    Command::PutClusterSettings {
        persistent: BTreeMap::from([(key.to_string(), value.into())]),
        transient: BTreeMap::new(),
    }
}

pub fn discovery_node(id: &str, name: &str, addr: SocketAddr) -> DiscoveryNode {
    DiscoveryNode {
        id: id.to_string(),
        ephemeral_id: String::new(),
        name: name.to_string(),
        transport_address: addr.to_string(),
        http_address: format!("127.0.0.1:{}", 9200),
        host: "127.0.0.1".into(),
        ip: "127.0.0.1".into(),
        roles: Role::all(),
        attributes: BTreeMap::new(),
        version: "2.18.0".into(),
    }
}

async fn record_applied(
    member: String,
    mut rx: tokio::sync::watch::Receiver<Arc<ClusterState>>,
    history: Arc<History>,
) {
    loop {
        {
            let state = rx.borrow_and_update().clone();
            if let Some(manager) = &state.cluster_manager {
                history
                    .applied
                    .lock()
                    .entry(state.term)
                    .or_default()
                    .insert(manager.clone());
            }
            let mut by_version = history.by_version.lock();
            match by_version.get(&state.version) {
                None => {
                    by_version.insert(state.version, (member.clone(), state));
                }
                Some((first, seen)) if **seen != *state => {
                    history.divergences.lock().push(format!(
                        "version {}: {first} applied {seen:?}\n  but {member} applied {state:?}",
                        state.version
                    ));
                }
                Some(_) => {}
            }
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn sample_leaders(live: Arc<Mutex<Vec<Option<Arc<Cluster>>>>>, history: Arc<History>) {
    loop {
        let clusters: Vec<Arc<Cluster>> = live.lock().iter().flatten().cloned().collect();
        for cluster in clusters {
            let status = cluster.raft_status();
            if status.is_leader {
                history
                    .raft_leaders
                    .lock()
                    .entry(status.term)
                    .or_default()
                    .insert(cluster.local().id.clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `f` and returns its output with how long it took.
pub async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

// --- a tiny tracing subscriber (the crate has no tracing-subscriber dependency) ---

fn init_logging() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let Ok(level) = std::env::var("SHOAL_TEST_LOG") else {
            return;
        };
        let max = match level.to_ascii_lowercase().as_str() {
            "trace" => tracing::Level::TRACE,
            "debug" => tracing::Level::DEBUG,
            "warn" => tracing::Level::WARN,
            "error" => tracing::Level::ERROR,
            _ => tracing::Level::INFO,
        };
        let _ = tracing::subscriber::set_global_default(PrintSubscriber {
            max,
            start: Instant::now(),
            next_span: std::sync::atomic::AtomicU64::new(1),
        });
    });
}

struct PrintSubscriber {
    max: tracing::Level,
    start: Instant,
    next_span: std::sync::atomic::AtomicU64,
}

impl tracing::Subscriber for PrintSubscriber {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        // Only shoal's own events, plus openraft warnings and errors.
        let target = metadata.target();
        if target.starts_with("shoal") {
            *metadata.level() <= self.max
        } else {
            *metadata.level() <= tracing::Level::WARN
        }
    }

    fn new_span(&self, _span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(
            self.next_span
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        )
    }

    fn record(&self, _span: &tracing::span::Id, _values: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    let _ = write!(self.0, " {value:?}");
                } else {
                    let _ = write!(self.0, " {}={value:?}", field.name());
                }
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let meta = event.metadata();
        eprintln!(
            "{:>8.3}s {:5} {}:{}",
            self.start.elapsed().as_secs_f64(),
            meta.level(),
            meta.target(),
            fields.0
        );
    }

    fn enter(&self, _span: &tracing::span::Id) {}

    fn exit(&self, _span: &tracing::span::Id) {}
}
