//! Starting, crashing and restarting the nodes of a [`TestCluster`], and waiting on them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard, RwLock};
use serde_json::{json, Value};
use shoal_engine::Engine;
use shoal_node::settings::FlatSettings;
use shoal_node::{Node, NodeConfig};
use shoal_state::{ClusterState, ShardState};
use shoal_transport::{DelayFilter, DropActionFilter, FilterDecision, PartitionFilter, Transport};

use crate::http::Client;

/// One cluster per process at a time (see the crate docs).
static SERIAL: Mutex<()> = Mutex::new(());
/// Numbers the clusters of a process, so node names (and failpoint names) never repeat.
static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

/// How long a killed node's threads may take to let go of it and its engines. A thread of
/// a killed node may be in a node-to-node call whose timeout is a minute (a replica's ops, a
/// segment copy's round): it lets go when that call ends, which a full cluster restart's
/// "still held after 30 s" once caught in CI.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(90);

/// What [`TestCluster::start_with`] starts.
#[derive(Debug, Clone)]
pub struct Options {
    pub nodes: usize,
    /// The first `k` nodes are the initial cluster-manager nodes (default: `min(nodes, 3)`).
    pub cluster_managers: Option<usize>,
    /// Start only the first `k` nodes; [`TestCluster::start_node`] starts the others later.
    pub start: Option<usize>,
    /// Extra node settings, `-E key=value` style, for every node.
    pub settings: Vec<(String, String)>,
    /// Extra settings of one node: (node, key, value), e.g. `node.roles`.
    pub node_settings: Vec<(usize, String, String)>,
}

impl Options {
    pub fn nodes(nodes: usize) -> Options {
        Options {
            nodes,
            cluster_managers: None,
            start: None,
            settings: Vec::new(),
            node_settings: Vec::new(),
        }
    }
}

/// One node of the cluster: its fixed identity and, while it runs, the node itself.
pub struct NodeSlot {
    pub name: String,
    pub data: PathBuf,
    pub transport_address: String,
    settings: FlatSettings,
    running: Option<Running>,
    /// What a killed node leaves behind until its threads let go of it.
    killed: Option<Killed>,
}

struct Running {
    node: Arc<Node>,
    http: SocketAddr,
}

struct Killed {
    node: Weak<Node>,
    engines: Vec<(String, Weak<Engine>)>,
}

pub struct TestCluster {
    slots: Vec<NodeSlot>,
    /// Clients of the running nodes (`None`: down), shared with [`crate::Load`]'s writers.
    pub(crate) clients: Arc<RwLock<Vec<Option<Client>>>>,
    /// Drives the HTTP clients (the nodes run on runtimes of their own).
    client_runtime: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    _serial: MutexGuard<'static, ()>,
}

impl TestCluster {
    /// Starts `n` nodes that discover each other and waits until they form one cluster.
    pub fn start(n: usize) -> TestCluster {
        TestCluster::start_with(Options::nodes(n))
    }

    pub fn start_with(options: Options) -> TestCluster {
        let serial = SERIAL.lock();
        init_logging();
        let cluster_no = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir = tempfile::tempdir().expect("temp dir");
        let n = options.nodes;
        let names: Vec<String> = (0..n).map(|i| format!("c{cluster_no}-node-{i}")).collect();
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let seeds: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let managers = options.cluster_managers.unwrap_or(n.min(3));
        let slots = (0..n)
            .map(|i| {
                let data = dir.path().join(&names[i]);
                let mut settings = base_settings(&names[i], &data, ports[i], cluster_no);
                settings.insert("discovery.seed_hosts".into(), json!(seeds.join(",")));
                settings.insert(
                    "cluster.initial_cluster_manager_nodes".into(),
                    json!(names[..managers].join(",")),
                );
                for (key, value) in &options.settings {
                    settings.insert(key.clone(), json!(value));
                }
                for (_, key, value) in options.node_settings.iter().filter(|(n, ..)| *n == i) {
                    settings.insert(key.clone(), json!(value));
                }
                NodeSlot {
                    name: names[i].clone(),
                    data,
                    transport_address: seeds[i].clone(),
                    settings,
                    running: None,
                    killed: None,
                }
            })
            .collect();
        let client_runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-client")
            .enable_all()
            .build()
            .expect("client runtime");
        let mut cluster = TestCluster {
            slots,
            clients: Arc::new(RwLock::new(vec![None; n])),
            client_runtime,
            dir,
            _serial: serial,
        };
        let first = options.start.unwrap_or(n);
        cluster.start_nodes(&(0..first).collect::<Vec<_>>());
        cluster.wait_for_nodes(first, Duration::from_secs(60));
        cluster
    }

    /// Starts stopped nodes at once (initial cluster-manager nodes wait for each other).
    pub fn start_nodes(&mut self, which: &[usize]) {
        for &i in which {
            assert!(self.slots[i].running.is_none(), "node {i} is running");
            self.wait_released(i);
        }
        let booted: Vec<(usize, Running)> = std::thread::scope(|scope| {
            let handles: Vec<_> = which
                .iter()
                .map(|&i| {
                    let settings = self.slots[i].settings.clone();
                    scope.spawn(move || (i, boot(settings)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("node start panicked"))
                .collect()
        });
        for (i, running) in booted {
            self.clients.write()[i] = Some(Client::new(
                running.http,
                self.client_runtime.handle().clone(),
            ));
            self.slots[i].running = Some(running);
        }
    }

    /// Starts one stopped node (a node added later, or a killed one: see [`Self::restart`]).
    pub fn start_node(&mut self, i: usize) {
        self.start_nodes(&[i]);
    }

    /// Crashes node `i`: its transport server and connections close at once, its Raft member
    /// stops, its engines fail without a flush and its runtime (with the HTTP server) stops.
    pub fn kill(&mut self, i: usize) {
        let running = self.slots[i]
            .running
            .take()
            .unwrap_or_else(|| panic!("node {i} is not running"));
        self.clients.write()[i] = None;
        let engines = local_engines(&running.node);
        running.node.kill_for_test();
        for other in self.running() {
            // Like a peer that noticed the crash: its next call opens a fresh connection.
            self.node(other)
                .core()
                .transport
                .disconnect(&self.slots[i].transport_address);
        }
        self.slots[i].killed = Some(Killed {
            node: Arc::downgrade(&running.node),
            engines,
        });
    }

    /// Restarts killed node `i` on the same data directory and transport address.
    pub fn restart(&mut self, i: usize) {
        self.start_node(i);
    }

    /// Waits until the threads of killed node `i` let go of it and of its engines (so a new
    /// node can lock the same stores); panics naming what is still held.
    fn wait_released(&mut self, i: usize) {
        let Some(killed) = self.slots[i].killed.take() else {
            return;
        };
        let deadline = Instant::now() + RELEASE_TIMEOUT;
        loop {
            let held: Vec<&str> = killed
                .engines
                .iter()
                .filter(|(_, e)| e.strong_count() > 0)
                .map(|(name, _)| name.as_str())
                .collect();
            let node_held = killed.node.strong_count() > 0;
            if held.is_empty() && !node_held {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "killed node {i} is still held after {RELEASE_TIMEOUT:?} (node: {node_held}, engines: {held:?})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn slot(&self, i: usize) -> &NodeSlot {
        &self.slots[i]
    }

    /// The indexes of the running nodes.
    pub fn running(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i].running.is_some())
            .collect()
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.slots[i].running.is_some()
    }

    /// The running node `i` (panics when it is down).
    pub fn node(&self, i: usize) -> &Arc<Node> {
        &self.slots[i]
            .running
            .as_ref()
            .unwrap_or_else(|| panic!("node {i} is not running"))
            .node
    }

    pub fn transport(&self, i: usize) -> &Arc<Transport> {
        &self.node(i).core().transport
    }

    /// An HTTP client of running node `i`.
    pub fn client(&self, i: usize) -> Client {
        self.clients.read()[i]
            .clone()
            .unwrap_or_else(|| panic!("node {i} is not running"))
    }

    /// The slot of the node with this id, among the running ones.
    pub fn index_of_node_id(&self, node_id: &str) -> Option<usize> {
        self.running()
            .into_iter()
            .find(|&i| self.node(i).core().node_id == node_id)
    }

    /// The cluster state node `i` applied last.
    pub fn state(&self, i: usize) -> Arc<ClusterState> {
        self.node(i).core().cluster_state()
    }

    /// The node-local engine of `index`'s `shard` on node `i`, if it holds an open copy.
    pub fn engine(&self, i: usize, index: &str, shard: usize) -> Option<Arc<Engine>> {
        self.node(i).core().index(index)?.shard(shard).ok()
    }

    /// The started copies of `index` as (shard, node slot, primary), by the state of the
    /// first running node.
    pub fn started_copies(&self, index: &str) -> Vec<(usize, usize, bool)> {
        let observer = *self.running().first().expect("a running node");
        let state = self.state(observer);
        state
            .all_copies()
            .filter(|c| c.index == index && c.state == ShardState::Started)
            .filter_map(|c| {
                let slot = self.index_of_node_id(c.node.as_deref()?)?;
                Some((c.shard as usize, slot, c.primary))
            })
            .collect()
    }

    /// The slot of the elected cluster manager (waits for one, up to a minute).
    pub fn cluster_manager(&self) -> usize {
        self.wait_for(Duration::from_secs(60), "an elected cluster manager", |c| {
            c.running()
                .into_iter()
                .find(|&i| c.node(i).core().cluster().is_cluster_manager())
                .ok_or_else(|| "no running node leads".to_string())
        })
    }

    /// The slot of the started primary of `index`'s `shard`.
    pub fn primary_of(&self, index: &str, shard: usize) -> Option<usize> {
        self.started_copies(index)
            .into_iter()
            .find(|(s, _, primary)| *s == shard && *primary)
            .map(|(_, slot, _)| slot)
    }

    /// The slots of the started replicas of `index`'s `shard`.
    pub fn replicas_of(&self, index: &str, shard: usize) -> Vec<usize> {
        self.started_copies(index)
            .into_iter()
            .filter(|(s, _, primary)| *s == shard && !*primary)
            .map(|(_, slot, _)| slot)
            .collect()
    }

    // ------------------------------------------------------------------ transport faults

    /// Drops every message between nodes `a` and `b`, both ways.
    pub fn partition(&self, a: usize, b: usize) {
        let (addr_a, addr_b) = (
            self.slots[a].transport_address.clone(),
            self.slots[b].transport_address.clone(),
        );
        self.transport(a)
            .add_filter(Arc::new(PartitionFilter::new([addr_b])));
        self.transport(b)
            .add_filter(Arc::new(PartitionFilter::new([addr_a])));
    }

    /// Cuts node `i` off from every other node, both ways.
    pub fn isolate(&self, i: usize) {
        for j in self.running().into_iter().filter(|&j| j != i) {
            self.partition(i, j);
        }
    }

    /// Freezes node `i` on the network as SIGSTOP would: every message to or from it hangs
    /// until the call's timeout, where [`Self::isolate`] fails calls at once.
    pub fn freeze(&self, i: usize) {
        const HANG: Duration = Duration::from_secs(24 * 3600);
        let frozen = self.slots[i].transport_address.clone();
        for j in self.running().into_iter().filter(|&j| j != i) {
            let frozen = frozen.clone();
            self.transport(j)
                .add_filter(Arc::new(move |to: &str, _: &str| match to == frozen {
                    true => FilterDecision::Delay(HANG),
                    false => FilterDecision::Pass,
                }));
        }
        self.transport(i)
            .add_filter(Arc::new(|_: &str, _: &str| FilterDecision::Delay(HANG)));
    }

    /// Node `i` drops every message it sends whose action starts with `prefix`.
    pub fn drop_action(&self, i: usize, prefix: &str) {
        self.transport(i)
            .add_filter(Arc::new(DropActionFilter::new(prefix)));
    }

    /// Node `i` drops the next `count` messages it sends whose action starts with `prefix`,
    /// then lets them through: a link that loses a burst of messages, not every one (a
    /// filter that drops forever also fails every replacement copy, until
    /// `index.allocation.max_retries` stops allocating it).
    pub fn drop_next(&self, i: usize, prefix: &str, count: usize) {
        self.transport(i)
            .add_filter(Arc::new(DropActionFilter::next(prefix, count)));
    }

    /// Node `i` delays every message it sends (whose action starts with `prefix`, if given).
    pub fn delay(&self, i: usize, delay: Duration, prefix: Option<&str>) {
        let filter = match prefix {
            Some(prefix) => DelayFilter::for_action_prefix(delay, prefix),
            None => DelayFilter::new(delay),
        };
        self.transport(i).add_filter(Arc::new(filter));
    }

    /// Removes every transport filter of every running node.
    pub fn heal(&self) {
        for i in self.running() {
            self.transport(i).clear_filters();
        }
    }

    // ------------------------------------------------------------------ waiting

    /// Polls `check` until it answers, or panics after `timeout` with `what` and the last
    /// `Err` it gave.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&TestCluster) -> Result<T, String>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            match check(self) {
                Ok(answer) => return answer,
                Err(last) if Instant::now() >= deadline => {
                    panic!("{what}: not reached within {timeout:?}; last: {last}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Waits until every running node's state lists `n` nodes.
    pub fn wait_for_nodes(&self, n: usize, timeout: Duration) {
        self.wait_for(timeout, &format!("{n} nodes"), |c| {
            let counts: Vec<usize> = c
                .running()
                .iter()
                .map(|&i| c.state(i).nodes.len())
                .collect();
            if counts.iter().all(|&k| k == n) {
                Ok(())
            } else {
                Err(format!("nodes seen by each running node: {counts:?}"))
            }
        })
    }

    /// Waits until every running node applied the same cluster state and answers
    /// `_cluster/health` green with nothing initializing or relocating, twice in a row.
    pub fn wait_green(&self, timeout: Duration) {
        self.wait_for(timeout, "an agreed green cluster", |c| {
            let first = c.agreed_green()?;
            std::thread::sleep(Duration::from_millis(300));
            let second = c.agreed_green()?;
            if first == second {
                Ok(())
            } else {
                Err(format!("state moved from version {first} to {second}"))
            }
        })
    }

    fn agreed_green(&self) -> Result<u64, String> {
        let running = self.running();
        let versions: Vec<u64> = running.iter().map(|&i| self.state(i).version).collect();
        if versions.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("state versions differ: {versions:?}"));
        }
        for &i in &running {
            let health = self.client(i).health()?;
            let green = health["status"] == "green"
                && health["initializing_shards"] == 0
                && health["relocating_shards"] == 0;
            if !green {
                return Err(format!(
                    "node {i}: {health}{}",
                    self.why_unassigned(i, &health)
                ));
            }
        }
        Ok(versions.first().copied().unwrap_or_default())
    }

    /// What `_cluster/allocation/explain` says about the first unassigned copy, when there is
    /// one: a wait for green that times out should say why the copy stayed where it is.
    fn why_unassigned(&self, i: usize, health: &Value) -> String {
        if health["unassigned_shards"].as_u64().unwrap_or(0) == 0 {
            return String::new();
        }
        match self.client(i).get("/_cluster/allocation/explain") {
            Ok(explain) => format!("; allocation explain: {}", explain.body),
            Err(e) => format!("; allocation explain failed: {e}"),
        }
    }

    /// The temp directory holding every node's data.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // A thread still paused at a failpoint would hold its node forever.
        for (name, _) in fail::list() {
            fail::remove(name);
        }
        for i in self.running() {
            self.kill(i);
        }
        for i in 0..self.slots.len() {
            if std::thread::panicking() {
                break;
            }
            self.wait_released(i);
        }
    }
}

/// Starts one node and serves its HTTP API on a free port, on the node's own runtime (so a
/// kill stops it too).
fn boot(mut settings: FlatSettings) -> Running {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind http");
    let http = listener.local_addr().expect("http address");
    settings.insert("http.port".into(), json!(http.port().to_string()));
    let config = NodeConfig::from_settings(settings).unwrap_or_else(|e| panic!("{}", e.reason));
    let name = config.node_name.clone();
    let node = Node::start(config).unwrap_or_else(|e| panic!("{name} cannot start: {}", e.reason));
    listener.set_nonblocking(true).expect("nonblocking");
    let runtime = node.core().runtime().clone();
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener).expect("http listener")
    };
    runtime.spawn(shoal_rest::serve(
        node.clone(),
        listener,
        std::future::pending::<()>(),
    ));
    Running { node, http }
}

fn base_settings(name: &str, data: &std::path::Path, port: u16, cluster_no: usize) -> FlatSettings {
    let mut settings = FlatSettings::new();
    let mut set = |key: &str, value: &str| {
        settings.insert(key.to_string(), Value::String(value.to_string()));
    };
    set("node.name", name);
    set("cluster.name", &format!("shoal-test-cluster-{cluster_no}"));
    set("path.data", &data.display().to_string());
    set("transport.port", &port.to_string());
    // A test must not depend on how full the host's disk is.
    set("cluster.routing.allocation.disk.threshold_enabled", "false");
    // Fast fault detection, with the slack a loaded 2-core machine needs.
    set("cluster.fault_detection.follower_check.interval", "300ms");
    set("cluster.fault_detection.follower_check.timeout", "1000ms");
    set("cluster.fault_detection.leader_check.interval", "1000ms");
    set("cluster.fault_detection.leader_check.timeout", "1000ms");
    settings
}

/// The engines open on a node, by a printable name.
fn local_engines(node: &Node) -> Vec<(String, Weak<Engine>)> {
    node.core()
        .all_indices()
        .iter()
        .flat_map(|index| {
            index
                .local_shards()
                .into_iter()
                .map(move |(shard, engine)| {
                    (
                        format!("[{}][{shard}]", index.name()),
                        Arc::downgrade(&engine),
                    )
                })
        })
        .collect()
}

/// A port free a moment ago, for a node's transport (it binds it at every start). Taken below
/// the kernel's ephemeral range (32768 and up here): a port from that range, free while its
/// node is stopped, can become the source port of any outgoing connection, and the restart
/// then fails with "address already in use". Each process starts at a random place and counts
/// up, so the clusters of one test binary never share a port.
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 12_000;
    const SPAN: u32 = 20_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        rand::random_range(0..SPAN),
        Ordering::AcqRel,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::AcqRel) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + SPAN);
}

fn init_logging() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        quiet_killed_runtime_panics();
        if let Ok(level) = std::env::var("SHOAL_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(level))
                .with_test_writer()
                .try_init();
        }
    });
}

/// A killed node's leftover threads (its applier, blocking tasks) die when they next touch
/// its stopped runtime, as a crashed process's would: their panics are expected, not
/// failures, and are not printed.
fn quiet_killed_runtime_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if message.contains("context was found, but it is being shutdown")
            || message.contains("runtime is shutting down")
        {
            return;
        }
        default(info);
    }));
}
