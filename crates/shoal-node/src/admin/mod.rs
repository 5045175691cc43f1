//! The admin service: index lifecycle (create, delete, open, close), aliases, cluster
//! settings, the shard limit, and cluster administration (allocation explain, reroute, voting
//! exclusions, `_nodes`).
//!
//! - [`indices`]: creating, deleting, opening and closing indices, and `POST /_aliases`;
//! - [`cluster`]: allocation explain, reroute, voting configuration exclusions, `_nodes`;
//! - [`shard_limit`]: `cluster.max_shards_per_node`;
//! - [`view`]: the read handle REST gets on the applied cluster state ([`ClusterView`]).
//!
//! It holds the node's [`NodeCore`] and the two services it calls (reads, to free the scrolls
//! of an index it closes; the remote store, for the defaults of a new index), never the
//! [`Node`](crate::node::Node).

pub mod cluster;
pub mod indices;
pub mod shard_limit;
pub mod view;

use std::sync::Arc;

use crate::core::NodeCore;
use crate::error::ApiResult;
use crate::read::ReadService;
use crate::remote::RemoteStoreService;
use crate::settings::{self, FlatSettings};

pub use indices::{ActiveShardsWait, AliasAction};
pub use view::ClusterView;

/// Persistent and transient cluster settings.
#[derive(Debug, Default, Clone)]
pub struct ClusterSettings {
    pub persistent: FlatSettings,
    pub transient: FlatSettings,
    /// From the bootstrapping node's configuration: shown among the defaults.
    pub node: FlatSettings,
}

pub struct AdminService {
    core: Arc<NodeCore>,
    /// Closing an index frees the scrolls open on it.
    reads: Arc<ReadService>,
    /// A new index takes the remote store's defaults (`node.attr.remote_store.*`).
    remote: Arc<RemoteStoreService>,
}

impl AdminService {
    pub(crate) fn new(
        core: Arc<NodeCore>,
        reads: Arc<ReadService>,
        remote: Arc<RemoteStoreService>,
    ) -> AdminService {
        AdminService {
            core,
            reads,
            remote,
        }
    }

    /// The cluster state this node applied last, as REST may read it: naming no cluster
    /// manager while this node knows none.
    pub fn view(&self) -> ClusterView {
        let known = view::ManagerKnown(self.has_cluster_manager());
        ClusterView::applied(self.core.cluster_state(), known)
    }

    /// The applied cluster state once it is as new as the cluster manager's when asked (see
    /// `shoal_cluster::read_barrier`): what a read that is not `local=true` answers from. A
    /// node removed from the cluster answers after it rejoined, or 503
    /// `cluster_manager_not_discovered_exception` after `timeout`.
    /// Holds no thread while it waits (a lost cluster manager makes every such read wait
    /// for its whole timeout).
    pub async fn confirmed_view(&self, timeout: std::time::Duration) -> ApiResult<ClusterView> {
        // Awaited in the request's task: a client that goes away cancels it.
        let state = self.core.cluster.read_barrier(timeout).await?;
        Ok(ClusterView::new(state))
    }

    /// `_cluster/state` of `view` for the comma-separated `metrics`, its metadata and routing
    /// table limited to the `index` expression.
    pub fn cluster_state_json(
        &self,
        view: &ClusterView,
        request: &StateRequest<'_>,
    ) -> ApiResult<serde_json::Value> {
        let services = self
            .core
            .resolve(request.index.unwrap_or("_all"), request.resolve)?;
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        let blocks = || self.core.blocks().to_json(&names);
        let voting = self.voting_configs(view.state());
        Ok(view.to_json(request, &services, blocks, voting))
    }

    /// Whether this node knows an elected cluster manager (`discovered_cluster_manager`).
    pub fn has_cluster_manager(&self) -> bool {
        self.core.cluster.has_cluster_manager()
    }

    /// This node as the cluster knows it (also before it joined a state).
    pub fn local_node(&self) -> shoal_state::DiscoveryNode {
        self.core.cluster.local().clone()
    }

    /// A node's disk usage: measured now for this node, else its last report in `view`.
    pub fn disk_usage(&self, view: &ClusterView, node_id: &str) -> Option<shoal_state::DiskUsage> {
        self.core.disk_usage_of(view.state(), node_id)
    }

    /// Persistent and transient cluster settings, as the cluster state holds them.
    pub fn cluster_settings(&self) -> ClusterSettings {
        let state = self.core.cluster_state();
        ClusterSettings {
            persistent: state.metadata.persistent_settings.clone(),
            transient: state.metadata.transient_settings.clone(),
            node: state.metadata.node_settings.clone(),
        }
    }

    /// `PUT /_cluster/settings`: null values reset a setting.
    pub fn update_cluster_settings(
        &self,
        persistent: FlatSettings,
        transient: FlatSettings,
    ) -> ApiResult<ClusterSettings> {
        let keys: Vec<&str> = persistent
            .keys()
            .chain(transient.keys())
            .map(String::as_str)
            .collect();
        self.core.blocks().check_cluster_settings_update(&keys)?;
        settings::validate_cluster_update(&persistent, &transient, |key| {
            self.core.cluster_setting(key)
        })?;
        for (key, value) in persistent.iter().chain(transient.iter()) {
            crate::recovery::throttle::validate(key, value)?;
            crate::read::search::validate_max_buckets(key, value)?;
        }
        let mut settings = self.cluster_settings();
        apply_update(&mut settings.persistent, persistent);
        apply_update(&mut settings.transient, transient);
        self.core
            .propose(shoal_state::Command::PutClusterSettings {
                persistent: settings.persistent.clone(),
                transient: settings.transient.clone(),
            })?;
        Ok(self.cluster_settings())
    }
}

fn apply_update(target: &mut FlatSettings, update: FlatSettings) {
    for (key, value) in update {
        if value.is_null() {
            // `"cluster.routing.*": null` resets a whole group.
            if let Some(prefix) = key.strip_suffix('*') {
                target.retain(|k, _| !k.starts_with(prefix));
            } else {
                target.remove(&key);
            }
        } else {
            target.insert(key, value);
        }
    }
}

/// What a `_cluster/state` request renders: its metrics (comma-separated, `_all` for all),
/// the indices of its expression and how that resolves, and whether settings are flat.
pub struct StateRequest<'a> {
    pub metrics: &'a str,
    pub index: Option<&'a str>,
    pub resolve: crate::core::ResolveOptions,
    pub flat_settings: bool,
}
