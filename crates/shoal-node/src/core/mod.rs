//! What every service of a node shares: its configuration and identity, the cluster member and
//! transport, the runtime, the indices this node holds, the thread pools, and the waits on the
//! cluster state this node has applied.
//!
//! Services (reads today; writes, recovery and admin next) hold an `Arc<NodeCore>`, never the
//! [`Node`](crate::node::Node): a service can then only reach what is generic, and the node
//! only wires services together. Node-to-node calls are in [`crate::rpc`], the indices
//! registry in [`indices`].

pub mod indices;
pub mod node_selectors;
mod proposals;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use shoal_cluster::Cluster;
use shoal_state::ClusterState;
use shoal_transport::Transport;

use crate::config::NodeConfig;
use crate::index_service::IndexService;
use crate::metadata::NodePaths;
use crate::settings;

pub use indices::ResolveOptions;
pub use proposals::CopyKey;

pub struct NodeCore {
    pub config: NodeConfig,
    pub node_id: String,
    pub paths: NodePaths,
    pub started: Instant,
    /// The indices this node holds, by name.
    pub(crate) indices: RwLock<BTreeMap<String, Arc<IndexService>>>,
    /// Serializes index creation/deletion/rename so names stay unique.
    pub(crate) lifecycle_lock: Mutex<()>,
    pub(crate) cluster: Arc<Cluster>,
    pub transport: Arc<Transport>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Thread pools and indexing pressure.
    pub pressure: Arc<crate::pressure::Pressure>,
    /// The tasks running on this node (`_tasks`).
    pub tasks: Arc<crate::tasks::TaskManager>,
    /// The results of the document writes this node coordinated, by status class.
    pub doc_status: crate::node_stats::DocStatusCounts,
    /// The version of the last cluster state this node applied; `applied_cond` wakes waiters
    /// after each application.
    pub(crate) applied_version: Mutex<u64>,
    pub(crate) applied_cond: Condvar,
    /// Counts the wake-ups of `applied_cond`, for waits that must not hold a thread (a
    /// `_cluster/health` wait for green can last its whole timeout).
    applied_wakeups: tokio::sync::watch::Sender<u64>,
    /// Set by [`Node::kill_for_test`](crate::node::Node::kill_for_test): waits on the cluster
    /// state give up at once.
    pub(crate) killed: AtomicBool,
    /// The applier's per-copy tasks (set when the applier starts; see [`proposals`]).
    pub(crate) copy_tasks: std::sync::OnceLock<crate::pressure::shard_tasks::ShardTasks<CopyKey>>,
}

/// What a node's core is built from (the parts [`crate::node::Node::start`] starts first).
pub(crate) struct CoreParts {
    pub config: NodeConfig,
    pub node_id: String,
    pub paths: NodePaths,
    pub cluster: Arc<Cluster>,
    pub transport: Arc<Transport>,
    pub runtime: tokio::runtime::Handle,
    pub pressure: Arc<crate::pressure::Pressure>,
}

impl NodeCore {
    pub(crate) fn new(parts: CoreParts) -> NodeCore {
        NodeCore {
            config: parts.config,
            tasks: crate::tasks::TaskManager::new(parts.node_id.clone()),
            doc_status: Default::default(),
            node_id: parts.node_id,
            paths: parts.paths,
            started: Instant::now(),
            indices: RwLock::new(BTreeMap::new()),
            lifecycle_lock: Mutex::new(()),
            cluster: parts.cluster,
            transport: parts.transport,
            runtime: parts.runtime,
            pressure: parts.pressure,
            applied_version: Mutex::new(0),
            applied_cond: Condvar::new(),
            applied_wakeups: tokio::sync::watch::Sender::new(0),
            killed: AtomicBool::new(false),
            copy_tasks: Default::default(),
        }
    }

    /// The runtime the node's tasks run on.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The applied cluster state.
    pub fn cluster_state(&self) -> Arc<ClusterState> {
        self.cluster.state()
    }

    /// The uuid of the cluster this node belongs to (empty until bootstrapped).
    pub fn cluster_uuid(&self) -> String {
        self.cluster.state().cluster_uuid.clone()
    }

    /// The effective value of a cluster-level setting (transient > persistent > node > default).
    pub fn cluster_setting(&self, key: &str) -> Option<String> {
        self.cluster_state()
            .settings()
            .get(key)
            .or_else(|| self.config.get(key).map(str::to_string))
            .or_else(|| settings::registry().get(key).map(|d| d.default.clone()))
    }

    /// Whether [`Node::kill_for_test`](crate::node::Node::kill_for_test) stopped this node.
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Marks the node killed and wakes every wait on the cluster state, so threads waiting
    /// (a write waiting for its primary) let go of the node now rather than at their timeout.
    pub(crate) fn mark_killed(&self) {
        let _applied = self.applied_version.lock();
        self.killed.store(true, Ordering::Release);
        self.notify_applied_waiters();
    }

    /// Wakes every wait on the cluster state, blocking and async. The caller holds
    /// `applied_version`'s lock, so a blocking waiter cannot miss it between check and wait.
    pub(crate) fn notify_applied_waiters(&self) {
        self.applied_cond.notify_all();
        self.applied_wakeups.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes each time waits on the cluster state are woken: a state applied, a copy's
    /// work for one settled, the node stopped. A caller marks the current value seen, checks
    /// the state, and awaits `changed()` if the check failed; nothing applied after the mark
    /// is missed. The sender lives as long as the node's core.
    pub fn state_wakeups(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied_wakeups.subscribe()
    }

    /// Waits without polling: `check` runs now and again after every cluster state this node
    /// applies (it sees the state and the applied version), until it answers or `timeout`.
    pub(crate) fn wait_until_applied<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&ClusterState, u64) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        // Holding the lock while checking means no application can slip between a failed
        // check and the wait.
        let mut applied = self.applied_version.lock();
        loop {
            if self.is_killed() {
                return None;
            }
            if let Some(answer) = check(&self.cluster.state(), *applied) {
                return Some(answer);
            }
            if self
                .applied_cond
                .wait_until(&mut applied, deadline)
                .timed_out()
            {
                return check(&self.cluster.state(), *applied);
            }
        }
    }

    /// Waits without polling until `check` accepts the cluster state: it runs now and after
    /// every state this node applies. `None` when `timeout` passed first.
    pub fn wait_for_state<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&ClusterState) -> Option<T>,
    ) -> Option<T> {
        self.wait_until_applied(timeout, |state, _| check(state))
    }

    /// A single-node cluster elects itself and adds this process to its state within a
    /// second of starting: waiting for that (bounded) lets the first requests see the state
    /// of this run (transient settings cleared, say), not the one persisted before it.
    /// A node with peers never waits here (they may not be started yet).
    pub(crate) fn wait_for_single_node_join(&self, timeout: Duration) {
        if self.cluster.config().single_node {
            let local = self.cluster.local().ephemeral_id.clone();
            self.wait_for_state(timeout, |state| {
                state
                    .nodes
                    .get(&self.node_id)
                    .is_some_and(|n| n.ephemeral_id == local)
                    .then_some(())
            });
        }
    }

    /// Waits until every primary of `index` is started (create index answers after that,
    /// like OpenSearch's default `wait_for_active_shards=1`). Returns whether they did.
    pub fn wait_for_primaries(&self, index: &str, timeout: Duration) -> bool {
        self.wait_until_applied(timeout, |state, _| {
            state
                .routing
                .get(index)
                .is_some_and(|t| {
                    t.shards
                        .iter()
                        .all(|copies| copies.iter().any(|c| c.primary && c.is_active()))
                })
                .then_some(())
        })
        .is_some()
    }

    /// Waits for the primaries of restored indices; answers (shards, shards whose primary
    /// did not start in time), as a restore's `wait_for_completion` reports them.
    pub fn wait_for_restored(&self, indices: &[String], timeout: Duration) -> (usize, usize) {
        let (mut total, mut failed) = (0, 0);
        for name in indices {
            let shards = self
                .cluster_state()
                .metadata
                .indices
                .get(name)
                .map_or(0, |m| m.number_of_shards() as usize);
            total += shards;
            if !self.wait_for_primaries(name, timeout) {
                failed += shards;
            }
        }
        (total, failed)
    }
}

#[cfg(feature = "failpoints")]
impl crate::failpoints::Scope for NodeCore {
    fn node_name(&self) -> String {
        self.config.node_name.clone()
    }
}
