//! The node: startup and shutdown, and the services it wires.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde_json::json;

use crate::admin::AdminService;
use crate::applier::{Applier, ApplierParts};
use crate::broadcast::BroadcastService;
use crate::core::{CoreParts, NodeCore};
use crate::error::ApiResult;
use crate::metadata::NodePaths;
use crate::read::ReadService;
use crate::write::{IndexCreation, WriteParts, WriteService};

pub use crate::config::NodeConfig;
pub use crate::core::ResolveOptions;

/// How long a graceful shutdown waits to be removed from the cluster before it stops anyway.
const LEAVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The node: wires its services to the shared [`NodeCore`].
///
/// It only starts, wires and stops them: every request goes to a service (`node.admin`,
/// `node.reads`…), or to [`Node::core`] for what only the core has. Services take
/// `Arc<NodeCore>` and the narrow handles of the services they call, never `Node`, so they
/// reach only what is generic (see [`crate::core`]).
pub struct Node {
    pub(crate) core: Arc<NodeCore>,
    /// Searches, counts, scrolls and gets.
    pub reads: Arc<ReadService>,
    /// Writes this node coordinates, and the shard bulks forwarded to it.
    pub writes: Arc<WriteService>,
    /// Segment replication (`index.replication.type: SEGMENT`).
    pub segrep: Arc<crate::segrep::SegrepService>,
    /// Remote-backed storage (`node.attr.remote_store.*`).
    pub remote: Arc<crate::remote::RemoteStoreService>,
    pub snapshots: Arc<crate::snapshot::SnapshotService>,
    /// Document replication: the primary's and the replica's side, resync, promotion.
    pub replication: Arc<crate::replication::ReplicationService>,
    /// Peer recoveries, as the source and as the target.
    pub recoveries: Arc<crate::recovery::RecoveryService>,
    /// Index lifecycle, aliases, cluster settings and cluster administration.
    pub admin: Arc<AdminService>,
    /// Refresh, flush, force merge and copy statistics on every copy of some indices.
    pub broadcast: Arc<BroadcastService>,
    /// This node's statistics, and every selected node's for `_nodes/stats`.
    pub node_stats: Arc<crate::node_stats::NodeStatsService>,
    /// Every node's running tasks, for `_tasks`.
    pub tasks: Arc<crate::tasks::TasksService>,
    /// Follows the cluster state: opens, closes, deletes and recovers this node's copies.
    /// Only the node holds it, so its thread and copy tasks stop with the node.
    applier: Arc<Applier>,
    /// Started and failed reports of this node's copies to the cluster manager, and the
    /// copies it failed.
    pub(crate) reports: Arc<crate::copy_reports::CopyReports>,
    /// Keeps a runtime alive when the node was started outside of one (tests).
    own_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// The transport server; dropping the handle would stop it.
    transport_server: Mutex<Option<shoal_transport::ServerHandle>>,
}

/// The registry of every data-layer action of `node`, filled by the modules and services
/// that own them.
fn data_layer_actions(node: &Arc<Node>) -> shoal_transport::ActionRegistry {
    let mut actions = crate::rpc::NodeActions::new(node.core.pressure.clone());
    crate::write::register_actions(&mut actions, &node.writes);
    crate::broadcast::register_actions(&mut actions, &node.broadcast);
    crate::replication::replica::register_actions(&mut actions, &node.replication);
    crate::replication::promotion::register_actions(&mut actions, &node.replication);
    crate::recovery::register_actions(&mut actions, &node.recoveries);
    crate::segrep::register_actions(&mut actions, &node.segrep);
    crate::remote::stats::register_actions(&mut actions, &node.remote);
    crate::snapshot::shard::register_actions(&mut actions, &node.snapshots);
    crate::snapshot::status::register_actions(&mut actions, &node.snapshots);
    actions.register_stream_on::<crate::segrep::FileStreamAction, _>(
        Arc::downgrade(&node.segrep),
        |segrep, request| segrep.serve_file_stream(request),
    );
    crate::admin::cluster::register_actions(&mut actions, &node.admin);
    crate::node_stats::register_actions(&mut actions, &node.node_stats);
    crate::tasks::register_actions(&mut actions, &node.tasks);
    crate::read::register_actions(&mut actions, &node.reads);
    actions.into_registry()
}

impl Node {
    /// What every service shares (configuration, identity, the cluster member, the indices
    /// held here, the thread pools), for a caller that needs more than one service's view.
    pub fn core(&self) -> &Arc<NodeCore> {
        &self.core
    }

    /// Starts the node: loads its identity, starts the transport and the cluster member, and
    /// follows the cluster state (which opens the shards assigned here).
    pub fn start(config: NodeConfig) -> ApiResult<Arc<Node>> {
        let pressure = Arc::new(crate::pressure::Pressure::from_settings(
            &config.node_name,
            &config.settings,
        )?);
        let repositories = crate::remote::RemoteRepositories::from_node_settings(&config.settings)?;
        let paths = NodePaths {
            data: config.data_path.clone(),
        };
        std::fs::create_dir_all(&paths.data)?;
        let state = paths.load_node_state()?;
        let known_id = state
            .as_ref()
            .and_then(|s| s["node_id"].as_str().map(str::to_string));
        let node_id = known_id.clone().unwrap_or_else(new_id);
        // Written once: a node restarting on a full disk must not need space to start.
        if known_id.is_none() {
            paths.persist_node_state(&json!({ "node_id": node_id }))?;
        }
        let (runtime, own_runtime) = node_runtime()?;
        let (transport, cluster, handler, server) =
            crate::cluster_bridge::start_cluster(&runtime, &config, &node_id)?;
        let core = Arc::new(NodeCore::new(CoreParts {
            config,
            node_id,
            paths,
            cluster,
            transport,
            runtime,
            pressure,
        }));
        let node = Arc::new(Node::wire(core, repositories, own_runtime, server));
        handler.attach(data_layer_actions(&node));
        node.core.cluster.set_promotion_advisor(Arc::new(
            crate::replication::promotion::CheckpointAdvisor(Arc::downgrade(&node.replication)),
        ));
        crate::applier::spawn_applier(&node.applier);
        crate::scheduler::spawn(Arc::downgrade(&node));
        crate::disk_usage::spawn_reporter(&node.core, Arc::downgrade(&node));
        node.applier
            .wait_for_local_shards(std::time::Duration::from_secs(20));
        node.core
            .wait_for_single_node_join(std::time::Duration::from_secs(10));
        Ok(node)
    }

    /// Builds every service on the core, each given the services it calls.
    fn wire(
        core: Arc<NodeCore>,
        repositories: Option<crate::remote::RemoteRepositories>,
        own_runtime: Option<tokio::runtime::Runtime>,
        server: shoal_transport::ServerHandle,
    ) -> Node {
        let remote = Arc::new(crate::remote::RemoteStoreService::new(
            core.clone(),
            repositories,
        ));
        let segrep = crate::segrep::SegrepService::new(core.clone(), remote.clone());
        let reports = Arc::new(crate::copy_reports::CopyReports::new(core.clone()));
        let recoveries = Arc::new(crate::recovery::RecoveryService::new(
            core.clone(),
            segrep.clone(),
            reports.clone(),
        ));
        let replication = Arc::new(crate::replication::ReplicationService::new(
            core.clone(),
            segrep.clone(),
        ));
        let snapshots = Arc::new(crate::snapshot::SnapshotService::new(core.clone()));
        let reads = Arc::new(ReadService::new(core.clone()));
        let admin = Arc::new(AdminService::new(
            core.clone(),
            reads.clone(),
            remote.clone(),
        ));
        let broadcast = Arc::new(BroadcastService::new(
            core.clone(),
            segrep.clone(),
            remote.clone(),
            recoveries.clone(),
        ));
        let node_stats = Arc::new(crate::node_stats::NodeStatsService::new(
            core.clone(),
            segrep.clone(),
            recoveries.clone(),
        ));
        let tasks = Arc::new(crate::tasks::TasksService::new(core.clone()));
        let write_parts = WriteParts {
            replication: replication.clone(),
            segrep: segrep.clone(),
            remote: remote.clone(),
            reads: reads.clone(),
            broadcast: broadcast.clone(),
        };
        let writes = Arc::new(WriteService::new(
            core.clone(),
            write_parts,
            Arc::downgrade(&admin) as Weak<dyn IndexCreation>,
        ));
        let applier = Arc::new(Applier::new(
            core.clone(),
            ApplierParts {
                reports: reports.clone(),
                recoveries: recoveries.clone(),
                replication: replication.clone(),
                segrep: segrep.clone(),
                remote: remote.clone(),
                snapshots: snapshots.clone(),
            },
        ));
        Node {
            core,
            reads,
            writes,
            segrep,
            remote,
            snapshots,
            replication,
            recoveries,
            admin,
            broadcast,
            node_stats,
            tasks,
            reports,
            applier,
            own_runtime: Mutex::new(own_runtime),
            transport_server: Mutex::new(Some(server)),
        }
    }

    /// Stops the node like a crash, for in-process tests (call it outside a runtime): the
    /// transport and the Raft member stop at once, every local engine fails without a flush
    /// (nothing more reaches its files) and is dropped, and a runtime of the node's own stops
    /// with all its tasks. A new node can open the same data directory once the threads
    /// still holding the node or an engine let go.
    pub fn kill_for_test(&self) {
        if let Some(server) = self.transport_server.lock().take() {
            self.core.runtime.block_on(server.kill());
        }
        self.core.runtime.block_on(self.core.cluster.shutdown());
        let indices = self.core.take_indices();
        for index in indices.values() {
            for (shard, engine) in index.local_shards() {
                engine.fail_engine("node killed".into());
                index.discard_shard(shard);
            }
        }
        if let Some(runtime) = self.own_runtime.lock().take() {
            runtime.shutdown_background();
        }
        self.core.mark_killed();
    }

    /// A graceful shutdown: leaves the cluster (its primaries move to in-sync copies on other
    /// nodes while this one still answers the writes in flight to it), stops the transport
    /// and flushes every shard.
    pub fn shutdown(&self) {
        self.core
            .runtime
            .block_on(self.core.cluster.leave(LEAVE_TIMEOUT));
        if let Some(server) = self.transport_server.lock().take() {
            self.core
                .runtime
                .block_on(server.shutdown(std::time::Duration::from_millis(200)));
        }
        for index in self.core.all_indices() {
            if let Err(e) = index.close_shards() {
                tracing::warn!(index = %index.name(), error = %e, "flush at shutdown failed");
            }
        }
    }
}

/// The runtime the node runs on: the caller's, or one of its own when started outside of one
/// (tests), which the node then keeps alive.
fn node_runtime() -> ApiResult<(tokio::runtime::Handle, Option<tokio::runtime::Runtime>)> {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        return Ok((handle, None));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok((runtime.handle().clone(), Some(runtime)))
}

pub use shoal_cluster::{new_id, now_millis};
