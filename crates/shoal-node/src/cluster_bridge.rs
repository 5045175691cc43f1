//! Where the node meets the cluster layer: it starts the transport and the Raft member, and
//! publishes the metadata changes its index services make (proposals and the waits for this
//! node to apply them are the core's, `core/proposals.rs`; the applier is [`crate::applier`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use shoal_cluster::{CheckSettings, Cluster, ClusterConfig, ClusterError};
use shoal_state::{DiscoveryNode, Role};
use shoal_transport::{ActionRegistry, Handler, RemoteError, ReplyStream, Request, Transport};
use tracing::info;

use crate::config::NodeConfig;
use crate::error::{ApiError, ApiResult};

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
    /// Hands the data-layer actions to the transport, once the node they act on exists.
    pub(crate) fn attach(&self, data_layer: ActionRegistry) {
        let _ = self.data_layer.set(data_layer);
    }
}
