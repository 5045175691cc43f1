//! Cluster-layer settings, read from the node's settings with OpenSearch names.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use shoal_state::DiscoveryNode;

/// How often and how patiently a node is checked before it is declared gone.
#[derive(Debug, Clone, Copy)]
pub struct CheckSettings {
    pub interval: Duration,
    pub timeout: Duration,
    pub retry_count: u32,
}

#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub cluster_name: String,
    /// This node, as it will appear in the cluster state.
    pub local: DiscoveryNode,
    /// Where the Raft log, vote and snapshot live (`path.data/_state/raft`).
    pub raft_dir: PathBuf,
    /// `discovery.seed_hosts`: transport addresses to probe.
    pub seed_hosts: Vec<String>,
    /// `cluster.initial_cluster_manager_nodes`: node names of the first voting configuration.
    pub initial_cluster_manager_nodes: Vec<String>,
    /// `discovery.type: single-node`, or no seeds and no initial nodes.
    pub single_node: bool,
    /// `cluster.fault_detection.follower_check.*`.
    pub follower_check: CheckSettings,
    /// `cluster.fault_detection.leader_check.*`: drives the Raft election timeout.
    pub leader_check: CheckSettings,
    /// Dynamic cluster settings from this node's configuration; they become the cluster's
    /// fallback values if this node bootstraps it.
    pub cluster_settings: BTreeMap<String, serde_json::Value>,
}

impl ClusterConfig {
    /// Shoal's fault-detection defaults: OpenSearch's interval and retry count, but a 500ms
    /// timeout and back-to-back retries after a first failure, so a hung node is removed in
    /// about 2.5s instead of ~30s.
    pub fn default_checks() -> CheckSettings {
        CheckSettings {
            interval: Duration::from_millis(1000),
            timeout: Duration::from_millis(500),
            retry_count: 3,
        }
    }
}
