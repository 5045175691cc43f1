//! The cluster service of one node: starts the Raft group member, finds the cluster (seed
//! hosts, bootstrap), joins it, and — on the elected cluster manager — keeps the voting
//! configuration right and removes nodes that stop answering.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use openraft::async_runtime::watch::WatchReceiver;
use openraft::BasicNode;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use shoal_state::{ClusterState, Command, DiscoveryNode, Proposal};
use shoal_transport::{Action, ActionContext, ErrorKind, RemoteError, Transport};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::actions::{Ack, FollowerCheckAction, JoinAction, PeersAction, ProposeAction};
use crate::config::ClusterConfig;
use crate::error::ClusterError;
use crate::raft::log_store::LogStore;
use crate::raft::network::Network;
use crate::raft::state_machine::StateMachine;
use crate::raft::types::{ApplyResult, LogId, Raft, RaftId};

pub const ACTION_PEERS: &str = PeersAction::NAME;
pub const ACTION_JOIN: &str = JoinAction::NAME;
pub const ACTION_PROPOSE: &str = ProposeAction::NAME;
pub const ACTION_FOLLOWER_CHECK: &str = FollowerCheckAction::NAME;

/// How long a metadata change waits for a cluster manager to appear before answering 503.
const NO_LEADER_GRACE: Duration = Duration::from_secs(3);

/// What a node tells a peer that probes it during discovery.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerInfo {
    pub node: DiscoveryNode,
    pub cluster_uuid: String,
    /// Transport address of the cluster manager this node follows, if any.
    pub leader_address: Option<String>,
    pub initialized: bool,
}

/// A member's view of the Raft group (see [`Cluster::raft_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftStatus {
    pub term: u64,
    /// This member is the Raft leader (the cluster manager) in `term`.
    pub is_leader: bool,
    pub leader: Option<RaftId>,
    /// The voting configuration (both halves of a joint configuration while it changes).
    pub voters: BTreeSet<RaftId>,
    pub learners: BTreeSet<RaftId>,
    /// Raft id → transport address, as the membership configuration records it.
    pub addresses: std::collections::BTreeMap<RaftId, String>,
}

/// `_nodes/stats` `discovery`: how this node receives cluster states (see
/// [`crate::raft::state_machine::ReceivedStates`]) and what of the Raft log it holds but has
/// not applied yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DiscoveryStats {
    /// Log entries this node holds that are not committed yet.
    pub pending: u64,
    /// Committed entries not applied to its cluster state yet.
    pub committed: u64,
    pub full_states: u64,
    pub diffs: u64,
}

pub struct Cluster {
    config: ClusterConfig,
    transport: Arc<Transport>,
    raft: Raft,
    state_machine: StateMachine,
    initialized_log: Mutex<bool>,
    last_join_attempt: Mutex<Option<Instant>>,
    pub(crate) checks_in_flight: Mutex<BTreeSet<String>>,
    /// Set once this process has acted as cluster manager (see `leader::leader_duties`).
    pub(crate) led_before: std::sync::atomic::AtomicBool,
    /// Picks the replicas to promote when a node holding primaries is removed.
    pub(crate) promotion_advisor: std::sync::OnceLock<Arc<dyn PromotionAdvisor>>,
    /// Set by [`Cluster::leave`]: the node is shutting down and must not join again.
    pub(crate) leaving: std::sync::atomic::AtomicBool,
}

/// Chooses, for each shard whose primary is on a node about to be removed, the in-sync copy to
/// promote (the data layer asks the copies for their local checkpoints). Whatever it leaves
/// out is promoted by the state machine's default order.
pub trait PromotionAdvisor: Send + Sync {
    fn choose(
        &self,
        state: Arc<ClusterState>,
        leaving_node: String,
    ) -> futures::future::BoxFuture<'static, Vec<shoal_state::PromotionChoice>>;
}

/// A random 22-character url-safe id (node ids, cluster uuid, index uuids), like OpenSearch's.
pub fn new_id() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Cluster {
    /// Opens the Raft log and state machine and starts the coordination loop. The transport
    /// server must route cluster actions to [`Cluster::handle`].
    pub async fn start(
        config: ClusterConfig,
        transport: Arc<Transport>,
    ) -> Result<Arc<Cluster>, ClusterError> {
        let io = |e: std::io::Error| ClusterError::Internal(format!("raft storage: {e}"));
        let log_store = LogStore::open(&config.raft_dir).map_err(io)?;
        let committed = log_store.committed_index();
        let initialized = log_store.has_state();
        let state_machine =
            StateMachine::open(&config.raft_dir, &config.cluster_name, log_store.reserve())
                .map_err(io)?;
        let election_min = (config.leader_check.interval.as_millis() as u64 / 2).max(300);
        let raft_config = openraft::Config {
            cluster_name: config.cluster_name.clone(),
            heartbeat_interval: (election_min / 4).max(50),
            election_timeout_min: election_min,
            election_timeout_max: election_min * 2,
            // A node whose disk was lost and replaced comes back with the same raft id and an
            // empty log: the leader must start replicating to it from scratch, not stop
            // (without this its raft core panics and the whole cluster loses its manager).
            allow_log_reversion: Some(true),
            ..Default::default()
        }
        .validate()
        .map_err(|e| ClusterError::Internal(format!("raft config: {e}")))?;
        let network = Network::new(transport.clone());
        let raft = Raft::new(
            config.local.raft_id(),
            Arc::new(raft_config),
            network.clone(),
            log_store,
            state_machine.clone(),
        )
        .await
        .map_err(|e| ClusterError::Internal(format!("raft start: {e}")))?;
        network.follow_membership(raft.metrics());
        // Replaying the committed log needs no leader: wait for it, so the node starts from the
        // state it last knew (its shards, its indices) rather than from an empty one.
        if let Some(index) = committed {
            if let Err(e) = raft
                .wait(Some(Duration::from_secs(30)))
                .applied_index_at_least(Some(index), "replay the committed cluster state")
                .await
            {
                warn!(error = %e, "could not replay the committed cluster state");
            }
        }
        let uuid = state_machine.current().cluster_uuid.clone();
        if !uuid.is_empty() {
            transport.set_cluster_uuid(&uuid);
        }
        let cluster = Arc::new(Cluster {
            config,
            transport,
            raft,
            state_machine,
            initialized_log: Mutex::new(initialized),
            last_join_attempt: Mutex::new(None),
            checks_in_flight: Mutex::new(BTreeSet::new()),
            led_before: std::sync::atomic::AtomicBool::new(false),
            promotion_advisor: std::sync::OnceLock::new(),
            leaving: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(coordination_loop(Arc::downgrade(&cluster)));
        Ok(cluster)
    }

    pub fn local(&self) -> &DiscoveryNode {
        &self.config.local
    }

    /// Installs the [`PromotionAdvisor`] (once; later calls are ignored).
    pub fn set_promotion_advisor(&self, advisor: Arc<dyn PromotionAdvisor>) {
        let _ = self.promotion_advisor.set(advisor);
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// The last applied cluster state.
    pub fn state(&self) -> Arc<ClusterState> {
        self.state_machine.current()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterState>> {
        self.state_machine.subscribe()
    }

    /// Whether this member leads and a quorum of voters acknowledged it within the leader
    /// lease. openraft has no check-quorum step-down: a leader cut off from the majority
    /// stays leader until it hears a newer term, but it stops calling itself cluster manager
    /// once the lease runs out (the majority elects another within an election timeout).
    pub fn is_cluster_manager(&self) -> bool {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        metrics.state.is_leader() && self.holds_leader_lease(&metrics)
    }

    fn holds_leader_lease(
        &self,
        metrics: &openraft::RaftMetrics<crate::raft::types::TypeConfig>,
    ) -> bool {
        let voters = metrics.membership_config.membership().voter_ids().count();
        if voters <= 1 {
            return true;
        }
        // Followers wait at least this long without hearing from a leader before they elect
        // another, so the lease ends before a newer manager can exist.
        let lease = Duration::from_millis(self.raft.config().election_timeout_min);
        metrics
            .last_quorum_acked
            .as_ref()
            .is_some_and(|acked| openraft::Instant::elapsed(&acked.clone().into_inner()) < lease)
    }

    /// The leader this member follows; not itself once its leader lease has run out.
    fn leader_id(&self) -> Option<RaftId> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let leader = metrics.current_leader?;
        if leader == self.config.local.raft_id() && !self.holds_leader_lease(&metrics) {
            return None;
        }
        Some(leader)
    }

    /// The transport address of the elected cluster manager, as Raft knows it.
    pub fn leader_address(&self) -> Option<String> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let leader = metrics.current_leader?;
        metrics
            .membership_config
            .get_node(&leader)
            .map(|n| n.addr.clone())
    }

    /// This member's view of the Raft group, read from one metrics snapshot (diagnostics and
    /// multi-node tests).
    pub fn raft_status(&self) -> RaftStatus {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let membership = metrics.membership_config.membership();
        RaftStatus {
            term: metrics.current_term,
            is_leader: metrics.state.is_leader(),
            leader: metrics.current_leader,
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            addresses: membership
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect(),
        }
    }

    pub fn discovery_stats(&self) -> DiscoveryStats {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        let index = |log_id: &Option<LogId>| log_id.as_ref().map_or(0, |id| id.index() + 1);
        let appended = metrics.last_log_index.map_or(0, |i| i + 1);
        let committed = index(&metrics.local_committed);
        let applied = index(&metrics.last_applied);
        let (full_states, diffs) = self.state_machine.received().counts();
        DiscoveryStats {
            pending: appended.saturating_sub(committed),
            committed: committed.saturating_sub(applied),
            full_states,
            diffs,
        }
    }

    /// The elected cluster manager as a node of the state, when it has joined it.
    pub fn cluster_manager(&self) -> Option<DiscoveryNode> {
        let leader = self.leader_id()?;
        self.state()
            .nodes
            .values()
            .find(|n| n.raft_id() == leader)
            .cloned()
    }

    /// The Raft voters of the last committed and of the last accepted (possibly joint)
    /// configuration: OpenSearch's `last_committed_config` and `last_accepted_config`.
    pub fn voting_configs(&self) -> (BTreeSet<RaftId>, BTreeSet<RaftId>) {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow_watched();
        (
            metrics
                .committed_membership_config
                .membership()
                .voter_ids()
                .collect(),
            metrics.membership_config.membership().voter_ids().collect(),
        )
    }

    /// Waits, without polling, until the committed voting configuration satisfies `check`.
    /// Returns whether it did within `timeout`.
    pub async fn wait_for_committed_voters(
        &self,
        timeout: Duration,
        check: impl Fn(&BTreeSet<RaftId>) -> bool + Send + Sync + 'static,
    ) -> bool {
        self.raft
            .wait(Some(timeout))
            .metrics(
                move |m| {
                    check(
                        &m.committed_membership_config
                            .membership()
                            .voter_ids()
                            .collect(),
                    )
                },
                "voting configuration",
            )
            .await
            .is_ok()
    }

    /// Whether a cluster manager is known (otherwise `cluster.no_cluster_manager_block` applies).
    pub fn has_cluster_manager(&self) -> bool {
        self.leader_id().is_some()
    }

    /// Proposes a command through the cluster manager and waits until this node has applied
    /// it. Answers 503 `cluster_block_exception` when no cluster manager appears in time.
    pub async fn propose(
        &self,
        command: Command,
        timeout: Duration,
    ) -> Result<Arc<ClusterState>, ClusterError> {
        let deadline = Instant::now() + timeout;
        let no_leader_deadline = Instant::now() + NO_LEADER_GRACE.min(timeout);
        let result = loop {
            match self.try_propose(&command, deadline).await {
                Ok(result) => break result,
                Err(ClusterError::NoClusterManager) if Instant::now() < no_leader_deadline => {}
                Err(ClusterError::Internal(reason) | ClusterError::Moved(reason))
                    if Instant::now() < deadline =>
                {
                    debug!(%reason, "proposal failed; retrying");
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if let Some(error) = result.error {
            return Err(ClusterError::Refused(error));
        }
        self.wait_for_version(result.version, deadline).await
    }

    async fn try_propose(
        &self,
        command: &Command,
        deadline: Instant,
    ) -> Result<ApplyResult, ClusterError> {
        if self.raft.is_leader() {
            // A manager cut off from a majority stays Raft leader but can never commit: bound
            // the wait like a forwarded proposal's transport deadline bounds it.
            let remaining = deadline.saturating_duration_since(Instant::now());
            return match tokio::time::timeout(remaining, self.propose_as_leader(command.clone()))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(ClusterError::Timeout(remaining)),
            };
        }
        let Some(addr) = self.leader_address() else {
            return Err(ClusterError::NoClusterManager);
        };
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100));
        match self
            .transport
            .send::<ProposeAction>(&addr, command, remaining)
            .await
        {
            Ok(result) => Ok(result),
            // The manager changed under us: retried (as an internal error) until the deadline.
            Err(shoal_transport::TransportError::Remote(remote))
                if remote.kind != ErrorKind::Moved =>
            {
                Err(ClusterError::from_remote(remote))
            }
            Err(e) => Err(ClusterError::Internal(e.to_string())),
        }
    }

    pub(crate) async fn propose_as_leader(
        &self,
        command: Command,
    ) -> Result<ApplyResult, ClusterError> {
        let proposal = Proposal {
            now_millis: now_millis(),
            command,
        };
        match self.raft.client_write(proposal).await {
            Ok(response) => Ok(response.data),
            Err(e) if e.forward_to_leader().is_some() => Err(ClusterError::Moved(e.to_string())),
            Err(e) => Err(ClusterError::Internal(format!("raft write: {e}"))),
        }
    }

    /// Waits until the local state machine has applied `version`.
    pub async fn wait_for_version(
        &self,
        version: u64,
        deadline: Instant,
    ) -> Result<Arc<ClusterState>, ClusterError> {
        let mut rx = self.subscribe();
        loop {
            let state = rx.borrow_and_update().clone();
            if state.version >= version {
                return Ok(state);
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ClusterError::Timeout(Duration::ZERO));
            }
            if tokio::time::timeout(remaining, rx.changed()).await.is_err() {
                return Err(ClusterError::Timeout(remaining));
            }
        }
    }

    pub(crate) fn peer_info(&self) -> PeerInfo {
        PeerInfo {
            node: self.config.local.clone(),
            cluster_uuid: self.state().cluster_uuid.clone(),
            leader_address: self.leader_address(),
            initialized: *self.initialized_log.lock(),
        }
    }

    /// Refuses a node (`name`) whose protocol range does not overlap this node's.
    pub(crate) fn check_compatible(
        &self,
        name: &str,
        context: &ActionContext,
    ) -> Result<(), RemoteError> {
        crate::actions::check_join_compatibility(
            name,
            context,
            &self.config.local.name,
            self.transport.protocol(),
        )
    }

    /// The sender must re-resolve the cluster manager and send again there.
    pub(crate) fn not_leader(&self) -> RemoteError {
        RemoteError::new(
            503,
            "not_cluster_manager",
            format!(
                "node [{}] is not the cluster manager",
                self.config.local.name
            ),
        )
        .with_kind(ErrorKind::Moved)
    }

    pub(crate) async fn handle_join(
        &self,
        context: ActionContext,
        node: DiscoveryNode,
    ) -> Result<Ack, RemoteError> {
        self.check_compatible(&node.name, &context)?;
        if !self.raft.is_leader() {
            return Err(self.not_leader());
        }
        info!(node = %node.name, address = %node.transport_address, "node joining");
        self.ensure_raft_member(&node).await;
        self.update_raft_address(&node).await;
        self.propose_as_leader(Command::NodeJoin(node))
            .await
            .map_err(|e| e.to_remote())?;
        Ok(Ack {})
    }

    pub(crate) async fn handle_propose(
        &self,
        command: Command,
    ) -> Result<ApplyResult, RemoteError> {
        if !self.raft.is_leader() {
            return Err(self.not_leader());
        }
        match self.propose_as_leader(command).await {
            Ok(result) => Ok(result),
            // Leadership moved while the entry was written (a hand-over): the sender retries
            // with the new cluster manager instead of giving up.
            Err(_) if !self.raft.is_leader() => Err(self.not_leader()),
            // `ClusterError::Moved` (Raft refused it before writing it) answers kind `Moved` too.
            Err(e) => Err(e.to_remote()),
        }
    }

    /// Adds a node to the Raft group as a learner (it receives the log; voters are chosen by
    /// [`Cluster::reconcile_voters`]).
    pub(crate) async fn ensure_raft_member(&self, node: &DiscoveryNode) {
        let known = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow_watched();
            metrics
                .membership_config
                .get_node(&node.raft_id())
                .map(|n| n.addr == node.transport_address)
        };
        if known.is_some() {
            // Known, maybe at another address: only the node itself, joining, updates it
            // (`update_raft_address`), never a possibly stale address from the state.
            return;
        }
        if let Err(e) = self
            .raft
            .add_learner(
                node.raft_id(),
                BasicNode::new(&node.transport_address),
                false,
            )
            .await
        {
            warn!(node = %node.name, error = %e, "could not add node to the raft group");
        }
    }

    /// A member that joins from another address than the Raft group knows (restarted with the
    /// same node id and data on another port or host): `add_learner` never replaces a known
    /// node, so without this Raft would keep sending to the old address and the member would
    /// never receive the log again.
    async fn update_raft_address(&self, node: &DiscoveryNode) {
        let moved = {
            let metrics = self.raft.metrics();
            let metrics = metrics.borrow_watched();
            metrics
                .membership_config
                .get_node(&node.raft_id())
                .is_some_and(|n| n.addr != node.transport_address)
        };
        if !moved {
            return;
        }
        info!(node = %node.name, address = %node.transport_address, "updating the raft address of a node");
        let nodes = std::collections::BTreeMap::from([(
            node.raft_id(),
            BasicNode::new(&node.transport_address),
        )]);
        if let Err(e) = self
            .raft
            .change_membership(openraft::ChangeMembers::SetNodes(nodes), true)
            .await
        {
            warn!(node = %node.name, error = %e, "could not update the raft address of a node");
        }
    }

    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}

async fn coordination_loop(cluster: std::sync::Weak<Cluster>) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(cluster) = cluster.upgrade() else {
            return;
        };
        let uuid = cluster.state().cluster_uuid.clone();
        if !uuid.is_empty() && cluster.transport.cluster_uuid() != uuid {
            cluster.transport.set_cluster_uuid(&uuid);
        }
        if cluster.raft.is_leader() {
            *cluster.initialized_log.lock() = true;
            crate::leader::leader_duties(&cluster).await;
        } else {
            crate::discovery::follower_duties(&cluster).await;
        }
    }
}

impl Cluster {
    pub(crate) fn raft(&self) -> &Raft {
        &self.raft
    }

    pub(crate) fn mark_initialized(&self) {
        *self.initialized_log.lock() = true;
    }

    pub(crate) fn is_initialized(&self) -> bool {
        *self.initialized_log.lock()
    }

    pub(crate) fn join_due(&self) -> bool {
        let mut last = self.last_join_attempt.lock();
        if last.is_some_and(|t| t.elapsed() < Duration::from_millis(1000)) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }
}
