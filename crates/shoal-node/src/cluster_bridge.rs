//! Where the node meets the cluster layer: it starts the transport and the Raft member,
//! turns metadata changes into proposals, and applies every new cluster state to the shards
//! this node holds (the "applier").

use std::collections::{BTreeMap, BTreeSet};
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use shoal_cluster::{CheckSettings, Cluster, ClusterConfig, ClusterError};
use shoal_state::{ClusterState, Command, DiscoveryNode, Role, ShardState};
use shoal_transport::{ActionRegistry, Handler, RemoteError, ReplyStream, Request, Transport};
use tracing::{info, warn};

use crate::error::{ApiError, ApiResult};
use crate::metadata::IndexMetadata;
use crate::node::{Node, NodeConfig};

/// How long a metadata change may wait for the cluster manager (OpenSearch's
/// `cluster_manager_timeout` default).
pub const CLUSTER_MANAGER_TIMEOUT: Duration = Duration::from_secs(30);

pub const ACTION_SHARD_BULK: &str = <ShardBulkAction as shoal_transport::Action>::NAME;

/// A coordinator forwards the writes of a `_bulk` (or a single write) to the node holding
/// their primaries; the answer has one result per item, in order.
pub struct ShardBulkAction;
impl shoal_transport::Action for ShardBulkAction {
    const NAME: &'static str = "indices:data/write/bulk[s]";
    type Request = ShardBulk;
    type Response = Vec<ApiResult<crate::documents::WriteOutcome>>;
}

pub(crate) fn register_actions(actions: &mut crate::rpc::NodeActions) {
    actions.register::<ShardBulkAction>(Node::handle_shard_bulk);
}

impl From<ClusterError> for ApiError {
    fn from(e: ClusterError) -> ApiError {
        ApiError::from_remote(e.to_remote())
    }
}

/// The node as the cluster state describes it.
pub fn local_discovery_node(config: &NodeConfig, node_id: &str) -> ApiResult<DiscoveryNode> {
    let roles = match config.settings.get("node.roles") {
        None => Role::all(),
        Some(value) => {
            let names = shoal_state::list_value(value);
            let mut roles = BTreeSet::new();
            for name in names {
                let role = Role::parse(&name)
                    .ok_or_else(|| ApiError::bad_request(format!("unknown role [{name}]")))?;
                roles.insert(role);
            }
            roles
        }
    };
    let attributes: BTreeMap<String, String> = config
        .settings
        .iter()
        .filter_map(|(k, v)| {
            let attr = k.strip_prefix("node.attr.")?;
            Some((
                attr.to_string(),
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string()),
            ))
        })
        .collect();
    let host = config
        .get("transport.host")
        .or(config.get("network.host"))
        .unwrap_or("127.0.0.1");
    let host = if host == "_local_" || host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    Ok(DiscoveryNode {
        id: node_id.to_string(),
        ephemeral_id: shoal_cluster::new_id(),
        name: config.node_name.clone(),
        transport_address: format!("{host}:{}", config.transport_port),
        http_address: format!("{}:{}", config.http_host, config.http_port),
        host: host.to_string(),
        ip: host.to_string(),
        roles,
        attributes,
        version: crate::OPENSEARCH_VERSION.to_string(),
    })
}

fn check_settings(config: &NodeConfig, prefix: &str) -> CheckSettings {
    let defaults = ClusterConfig::default_checks();
    let millis = |key: &str, default: Duration| {
        config
            .get(&format!("{prefix}.{key}"))
            .and_then(shoal_state::parse_duration_millis)
            .filter(|m| *m > 0)
            .map(|m| Duration::from_millis(m as u64))
            .unwrap_or(default)
    };
    CheckSettings {
        interval: millis("interval", defaults.interval),
        timeout: millis("timeout", defaults.timeout),
        retry_count: config
            .get(&format!("{prefix}.retry_count"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(defaults.retry_count),
    }
}

fn list_setting(config: &NodeConfig, key: &str) -> Vec<String> {
    config
        .settings
        .get(key)
        .map(shoal_state::list_value)
        .unwrap_or_default()
}

pub fn cluster_config(config: &NodeConfig, local: DiscoveryNode) -> ClusterConfig {
    let seed_hosts: Vec<String> = list_setting(config, "discovery.seed_hosts")
        .into_iter()
        .map(|h| {
            if h.contains(':') {
                h
            } else {
                format!("{h}:9300")
            }
        })
        .collect();
    let mut initial = list_setting(config, "cluster.initial_cluster_manager_nodes");
    if initial.is_empty() {
        initial = list_setting(config, "cluster.initial_master_nodes");
    }
    let single_node = config.get("discovery.type") == Some("single-node")
        || (seed_hosts.is_empty() && initial.is_empty());
    ClusterConfig {
        cluster_name: config.cluster_name.clone(),
        raft_dir: config.data_path.join("_state").join("raft"),
        seed_hosts,
        initial_cluster_manager_nodes: initial,
        single_node,
        follower_check: check_settings(config, "cluster.fault_detection.follower_check"),
        leader_check: check_settings(config, "cluster.fault_detection.leader_check"),
        cluster_settings: dynamic_cluster_settings(config),
        local,
    }
}

/// The dynamic cluster-scoped settings (`cluster.routing.*`, `indices.recovery.*`, ...) in
/// this node's configuration: if it bootstraps the cluster they back the cluster's settings.
fn dynamic_cluster_settings(config: &NodeConfig) -> BTreeMap<String, serde_json::Value> {
    let registry = crate::settings::registry();
    config
        .settings
        .iter()
        .filter(|(key, _)| {
            registry
                .get(key)
                .is_some_and(|def| def.dynamic && !def.index_scope)
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// Starts the transport server and the cluster member of this node.
pub fn start_cluster(
    runtime: &tokio::runtime::Handle,
    config: &NodeConfig,
    node_id: &str,
) -> ApiResult<(
    Arc<Transport>,
    Arc<Cluster>,
    Arc<NodeHandler>,
    shoal_transport::ServerHandle,
)> {
    let local = local_discovery_node(config, node_id)?;
    let cluster_config = cluster_config(config, local.clone());
    let transport = Transport::new(node_id.to_string());
    let bind = (local.host.as_str(), config.transport_port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            ApiError::bad_request(format!("cannot resolve transport host [{}]", local.host))
        })?;
    let handler = Arc::new(NodeHandler {
        data_layer: std::sync::OnceLock::new(),
        cluster: std::sync::OnceLock::new(),
    });
    runtime.block_on(async {
        let server = transport.serve(bind, handler.clone()).await.map_err(|e| {
            ApiError::internal(format!(
                "cannot bind transport on {bind}: {e} (set -E transport.port=...)"
            ))
        })?;
        let cluster = Cluster::start(cluster_config, transport.clone()).await?;
        let _ = handler.cluster.set(cluster.actions());
        info!(transport = %bind, node_id, "cluster member started");
        Ok::<_, ApiError>((transport.clone(), cluster, handler.clone(), server))
    })
}

/// Serves transport actions: the cluster layer's registry (set when the cluster member
/// starts), then the data layer's (set when the node is attached).
pub struct NodeHandler {
    data_layer: std::sync::OnceLock<ActionRegistry>,
    cluster: std::sync::OnceLock<ActionRegistry>,
}

impl Handler for NodeHandler {
    fn handle(&self, req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> {
        let req = match self.cluster.get().map(|cluster| cluster.dispatch(req)) {
            Some(Ok(reply)) => return reply,
            Some(Err(req)) => req,
            None => return starting(),
        };
        match self.data_layer.get() {
            Some(data_layer) => data_layer.handle(req),
            None => starting(),
        }
    }

    fn handle_stream(&self, req: Request) -> BoxFuture<'static, Result<ReplyStream, RemoteError>> {
        match self.data_layer.get() {
            Some(data_layer) => data_layer.handle_stream(req),
            None => Box::pin(async { Err(crate::rpc::node_closed()) }),
        }
    }
}

fn starting() -> BoxFuture<'static, Result<Bytes, RemoteError>> {
    Box::pin(async { Err(crate::rpc::node_closed()) })
}

impl NodeHandler {
    pub fn attach(&self, node: &Arc<Node>) {
        let _ = self.data_layer.set(crate::rpc::data_layer_actions(node));
    }
}

impl Node {
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The applied cluster state.
    pub fn cluster_state(&self) -> Arc<ClusterState> {
        self.cluster.state()
    }

    /// Proposes a command and waits until this node's applier has applied it.
    pub fn propose(&self, command: Command) -> ApiResult<Arc<ClusterState>> {
        let state = self
            .runtime
            .block_on(self.cluster.propose(command, CLUSTER_MANAGER_TIMEOUT))?;
        self.wait_applied(state.version, CLUSTER_MANAGER_TIMEOUT);
        Ok(state)
    }

    /// Publishes index metadata through the cluster manager (create or replace).
    pub fn publish_index(&self, meta: IndexMetadata, create: bool) -> ApiResult<Arc<ClusterState>> {
        self.propose(Command::PutIndex { meta, create })
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
            if self.killed.load(std::sync::atomic::Ordering::Acquire) {
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

    fn wait_applied(&self, version: u64, timeout: Duration) {
        self.wait_until_applied(timeout, |_, applied| (applied >= version).then_some(()));
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

    /// Applies a cluster state to this node: creates, updates and deletes index services and
    /// opens or closes the shard copies assigned here.
    pub(crate) fn apply_cluster_state(self: &Arc<Self>, state: &ClusterState) {
        for (name, state_meta) in &state.metadata.indices {
            if let Err(e) = self.apply_index(state, name, state_meta) {
                warn!(index = %name, error = %e.reason, "could not apply index metadata");
            }
        }
        let gone: Vec<_> = self
            .all_indices()
            .into_iter()
            .filter(|s| {
                state
                    .metadata
                    .indices
                    .get(&s.name())
                    .is_none_or(|m| m.uuid != s.uuid())
            })
            .collect();
        for service in gone {
            self.remove_local_index(&service);
        }
        self.forget_replaced_failed_copies(state);
        let mut applied = self.applied_version.lock();
        *applied = state.version;
        self.applied_cond.notify_all();
    }

    fn apply_index(
        self: &Arc<Self>,
        state: &ClusterState,
        name: &str,
        state_meta: &Arc<shoal_state::IndexMetadata>,
    ) -> ApiResult<()> {
        let service = self.sync_index_service(name, state_meta)?;
        let local: BTreeMap<usize, &shoal_state::ShardRouting> = state
            .copies_on_node(&self.node_id)
            .filter(|c| c.index == name)
            .map(|c| (c.shard as usize, c))
            .collect();
        let open = state_meta.state == shoal_state::IndexState::Open;
        for shard in 0..state_meta.number_of_shards() as usize {
            match local.get(&shard).filter(|_| open) {
                None if open && fully_active_elsewhere(state, name, shard, state_meta) => {
                    // A recovery of this shard into this node holds the lock while it writes.
                    let lock = self.recoveries.shard_lock(name, shard);
                    let _no_recovery = lock.lock();
                    service.delete_shard_data(shard);
                }
                None => service.close_shard(shard),
                // One copy that cannot be brought in line never holds back the others.
                Some(copy) => {
                    if let Err(e) = self.apply_local_copy(state, &service, state_meta, copy) {
                        self.copy_failed_to_open(&service, copy, &e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Brings one local copy in line with the cluster state: a copy that needs peer recovery
    /// starts it (once); other copies are opened, follow the in-sync set, take the primary
    /// role when they hold it, and report themselves started when initializing.
    fn apply_local_copy(
        self: &Arc<Self>,
        state: &ClusterState,
        service: &Arc<crate::index_service::IndexService>,
        state_meta: &shoal_state::IndexMetadata,
        copy: &shoal_state::ShardRouting,
    ) -> ApiResult<()> {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        // A state this node persisted before it restarted: its copies there are about to be
        // failed and recovered, so they open (for reads) but do not act as primaries, recover
        // or report themselves started on it.
        let current = self.state_knows_this_incarnation(state);
        if crate::replication::recovery::needs_peer_recovery(copy) {
            if !current {
                return Ok(());
            }
            match service
                .replication(shard)
                .filter(|r| r.allocation_id == allocation_id)
            {
                // Recovered and waiting to be reported started: keep following the state.
                Some(recovered) => recovered.apply_cluster_state(state, &copy.index, shard),
                None => self.start_peer_recovery(service, copy),
            }
            return Ok(());
        }
        if self.is_failed_copy(&allocation_id) {
            // Reported failed: the cluster manager assigns it again under a new id.
            return Ok(());
        }
        let term = state_meta.primary_terms.get(shard).copied().unwrap_or(1) as i64;
        if let Err(e) = service.ensure_shard_open(shard, term) {
            self.copy_failed_to_open(service, copy, &e);
            return Ok(());
        }
        let local = service.copy(shard)?;
        local.advance_to(if copy.state == ShardState::Started {
            shoal_shard::ShardState::Started
        } else {
            shoal_shard::ShardState::PostRecovery
        });
        let engine = local.engine().clone();
        let replication =
            service.replication_for(shard, &allocation_id, engine.global_checkpoint())?;
        replication.apply_cluster_state(state, &copy.index, shard);
        if !current {
            return Ok(());
        }
        if copy.primary && !replication.tracker.lock().is_primary_mode() {
            if copy.state == ShardState::Initializing {
                // A primary opening its own store (new or existing) has no copies to resync.
                if copy.bootstrap_new_history_uuid {
                    engine.bootstrap_new_history()?;
                    tracing::info!(index = %copy.index, shard, history_uuid = %engine.history_uuid(), "forced primary starts a new history");
                }
                replication.activate_primary(&engine, &self.node_id);
            } else {
                // A replica promoted, or a relocation target handed the primary role.
                self.start_primary_resync(service, shard, engine.clone(), replication.clone());
            }
        }
        if copy.state == ShardState::Initializing {
            self.record_store_recovery(copy, &engine);
            self.report_started(copy);
        }
        Ok(())
    }

    /// Whether `state` was made after this process joined (it lists this node with the
    /// ephemeral id of this process), rather than persisted before a restart.
    fn state_knows_this_incarnation(&self, state: &ClusterState) -> bool {
        let local = self.cluster.local();
        state
            .nodes
            .get(&local.id)
            .is_some_and(|known| known.ephemeral_id == local.ephemeral_id)
    }

    /// A primary initialized from its own store (new or existing) shows in `_cat/recovery`.
    fn record_store_recovery(
        &self,
        copy: &shoal_state::ShardRouting,
        engine: &shoal_engine::Engine,
    ) {
        use crate::replication::progress::{RecoveryRecord, RecoveryType};
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        let kind = match copy.recovery_source {
            Some(shoal_state::RecoverySource::ExistingStore) => RecoveryType::ExistingStore,
            _ => RecoveryType::EmptyStore,
        };
        if self
            .recoveries
            .has_record(&copy.index, copy.shard as usize, &allocation_id)
        {
            return;
        }
        let mut record = RecoveryRecord::new(
            &copy.index,
            copy.shard as usize,
            &allocation_id,
            copy.primary,
            kind,
            &self.node_id,
        );
        if let Ok(files) = engine.commit_files() {
            record.files_total = files.len() as u64;
            record.files_reused = files.len() as u64;
            record.bytes_total = files.iter().map(|(_, len)| len).sum();
            record.bytes_reused = record.bytes_total;
        }
        record.finish();
        self.record_recovery(record);
    }

    /// The local service of an index, created or updated from the cluster's metadata. The
    /// service keeps the applied state's own metadata (no copy) and parses the mapping only
    /// when its version changed: the applier sees every state, most of which only move shards.
    fn sync_index_service(
        self: &Arc<Self>,
        name: &str,
        state_meta: &Arc<shoal_state::IndexMetadata>,
    ) -> ApiResult<Arc<crate::index_service::IndexService>> {
        if let Some(service) = self.index(name).filter(|s| s.uuid() == state_meta.uuid) {
            service.replace_meta(state_meta.clone())?;
            return Ok(service);
        }
        let service = Arc::new(crate::index_service::IndexService::new(
            state_meta.clone(),
            self.paths.clone(),
            Arc::downgrade(self),
        )?);
        self.insert_index(name, service.clone());
        Ok(service)
    }

    /// Tells the cluster manager a local copy failed (its recovery, say), so allocation can
    /// place it again.
    pub(crate) fn report_failed(self: &Arc<Self>, copy: &shoal_state::ShardRouting, reason: &str) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        let cluster = self.cluster.clone();
        let command = Command::ShardFailed {
            index: copy.index.clone(),
            shard: copy.shard,
            allocation_id,
            reason: reason.to_string(),
            primary_term: None,
        };
        self.runtime.spawn(async move {
            if let Err(e) = cluster.propose(command, CLUSTER_MANAGER_TIMEOUT).await {
                warn!(error = %e, "could not report a failed shard");
            }
        });
    }

    pub(crate) fn report_started(self: &Arc<Self>, copy: &shoal_state::ShardRouting) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        if !self.reported_started.lock().insert(allocation_id.clone()) {
            return;
        }
        let cluster = self.cluster.clone();
        let node = Arc::downgrade(self);
        let command = Command::ShardStarted {
            index: copy.index.clone(),
            shard: copy.shard,
            allocation_id: allocation_id.clone(),
        };
        self.runtime.spawn(async move {
            if let Err(e) = cluster.propose(command, CLUSTER_MANAGER_TIMEOUT).await {
                // Forgotten, so the next applied state reports it again.
                warn!(error = %e, allocation_id, "could not report a started shard");
                if let Some(node) = node.upgrade() {
                    node.reported_started.lock().remove(&allocation_id);
                }
            }
        });
    }
}

/// Follows the cluster state on a dedicated thread (opening shards blocks).
pub fn spawn_applier(node: &Arc<Node>) {
    let weak = Arc::downgrade(node);
    let mut rx = node.cluster.subscribe();
    let runtime = node.runtime.clone();
    std::thread::Builder::new()
        .name("cluster-applier".into())
        .spawn(move || loop {
            let state = rx.borrow_and_update().clone();
            let Some(node) = weak.upgrade() else { return };
            node.apply_cluster_state(&state);
            drop(node);
            // A copy whose open failed for a passing reason (a full disk) is retried by
            // applying the same state again.
            loop {
                let next = runtime
                    .block_on(async { tokio::time::timeout(OPEN_RETRY, rx.changed()).await });
                match next {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => return,
                    Err(_elapsed) => {
                        let retry = weak
                            .upgrade()
                            .is_some_and(|n| n.failed_copies.take_retry_open());
                        if retry {
                            break;
                        }
                    }
                }
            }
        })
        .expect("spawn applier");
}

/// How often a copy that could not open for a passing reason tries again.
const OPEN_RETRY: Duration = Duration::from_secs(1);

/// A batch of writes forwarded to the node holding the primaries they route to.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ShardBulk {
    items: Vec<crate::documents::DocWrite>,
    options: crate::documents::WriteOptions,
}

impl ShardBulk {
    /// The document bytes it carries (what indexing pressure counts).
    fn source_bytes(&self) -> u64 {
        self.items
            .iter()
            .map(|item| match item {
                crate::documents::DocWrite::Index { source, .. } => source.len() as u64,
                crate::documents::DocWrite::Delete { id, .. } => id.len() as u64,
            })
            .sum()
    }
}

pub(crate) type Forwarded = Vec<(
    Vec<usize>,
    crate::rpc::Pending<Vec<ApiResult<crate::documents::WriteOutcome>>>,
)>;

/// How long a write waits for its shard's primary to become active (OpenSearch: the
/// request `timeout`, 1m; shorter here so a client sees the failure while it can act).
const PRIMARY_WAIT: Duration = Duration::from_secs(20);

impl Node {
    /// `None` when the primary of the shard is open on this node; the primary's transport
    /// address otherwise. Waits for an inactive primary (a promotion in progress).
    pub(crate) fn primary_location(&self, index: &str, shard: usize) -> ApiResult<Option<String>> {
        let located = self.wait_until_applied(PRIMARY_WAIT, |state, _| {
            let Some(primary) = state.primary(index, shard as u32).filter(|p| p.is_active()) else {
                // Not in the cluster state (yet): let the local path answer.
                return (!state.metadata.indices.contains_key(index)).then_some(None);
            };
            let node = primary.node.as_deref().unwrap_or_default();
            if node == self.node_id {
                // The latest state may name this copy primary before the applier made it one
                // (term, tracker): wait for that, or it would write under the old term.
                let ready = self.index(index).is_some_and(|s| {
                    s.shard(shard).is_ok()
                        && s.replication(shard)
                            .is_some_and(|r| r.tracker.lock().is_primary_mode())
                });
                return ready.then_some(None);
            }
            state
                .nodes
                .get(node)
                .map(|n| Some(n.transport_address.clone()))
        });
        located.ok_or_else(|| {
            ApiError::new(
                503,
                "unavailable_shards_exception",
                format!(
                    "[{index}][{shard}] primary shard is not active Timeout: [{}s]",
                    PRIMARY_WAIT.as_secs()
                ),
            )
        })
    }

    pub(crate) fn forward_writes(
        &self,
        remote: BTreeMap<String, Vec<(usize, crate::documents::DocWrite)>>,
        options: &crate::documents::WriteOptions,
    ) -> Forwarded {
        remote
            .into_iter()
            .map(|(address, batch)| {
                let (slots, items): (Vec<usize>, Vec<_>) = batch.into_iter().unzip();
                let bulk = ShardBulk {
                    items,
                    options: options.clone(),
                };
                let pending =
                    self.send::<ShardBulkAction>(&address, &bulk, Duration::from_secs(120));
                (slots, pending)
            })
            .collect()
    }

    pub(crate) fn collect_forwarded(
        &self,
        forwarded: Forwarded,
    ) -> Vec<(
        Vec<usize>,
        ApiResult<Vec<ApiResult<crate::documents::WriteOutcome>>>,
    )> {
        forwarded
            .into_iter()
            .map(|(slots, pending)| {
                let outcome = self.wait(pending);
                (slots, outcome)
            })
            .collect()
    }

    /// Executes a forwarded batch on this node (it holds the primaries).
    fn handle_shard_bulk(
        &self,
        bulk: ShardBulk,
    ) -> ApiResult<Vec<ApiResult<crate::documents::WriteOutcome>>> {
        // Primary bytes from another coordinator; over the limit every item of it gets 429.
        let _in_flight = self.pressure.indexing.primary(bulk.source_bytes())?;
        Ok(self.execute_writes(bulk.items, &bulk.options))
    }
}

impl Node {
    /// At startup, waits until the replayed cluster state is applied and every active shard
    /// copy it places on this node is open, so the node does not answer reads from a shard it
    /// has not reopened yet. Needs no cluster manager, so a node never waits for its peers.
    pub(crate) fn wait_for_local_shards(&self, timeout: Duration) {
        let ready = self.wait_until_applied(timeout, |state, applied| {
            (applied >= state.version && self.local_copies_open(state)).then_some(())
        });
        if ready.is_none() {
            warn!("started before every local shard copy was open");
        }
    }

    fn local_copies_open(&self, state: &ClusterState) -> bool {
        state
            .copies_on_node(&self.node_id)
            .filter(|c| c.is_active())
            .filter(|c| {
                state
                    .metadata
                    .indices
                    .get(&c.index)
                    .is_some_and(|m| m.state == shoal_state::IndexState::Open)
            })
            .all(|c| {
                self.index(&c.index)
                    .is_some_and(|s| s.shard(c.shard as usize).is_ok())
            })
    }
}

/// Whether every copy the index asks for of `shard` is started (none here): the local files
/// of the shard, if any, are then redundant.
fn fully_active_elsewhere(
    state: &ClusterState,
    index: &str,
    shard: usize,
    meta: &shoal_state::IndexMetadata,
) -> bool {
    let copies = state.copies(index, shard as u32);
    let started = copies
        .iter()
        .filter(|c| c.state == ShardState::Started)
        .count();
    started == copies.len() && started == meta.number_of_replicas() as usize + 1
}
