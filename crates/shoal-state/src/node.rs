//! Nodes of the cluster as the cluster state knows them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    ClusterManager,
    Data,
    Ingest,
    RemoteClusterClient,
}

impl Role {
    pub fn parse(text: &str) -> Option<Role> {
        match text.trim() {
            "cluster_manager" | "master" => Some(Role::ClusterManager),
            "data" => Some(Role::Data),
            "ingest" => Some(Role::Ingest),
            "remote_cluster_client" => Some(Role::RemoteClusterClient),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::ClusterManager => "cluster_manager",
            Role::Data => "data",
            Role::Ingest => "ingest",
            Role::RemoteClusterClient => "remote_cluster_client",
        }
    }

    /// The letter `_cat/nodes` prints in `node.role`.
    pub fn letter(self) -> char {
        match self {
            Role::ClusterManager => 'm',
            Role::Data => 'd',
            Role::Ingest => 'i',
            Role::RemoteClusterClient => 'r',
        }
    }

    pub fn all() -> BTreeSet<Role> {
        [
            Role::ClusterManager,
            Role::Data,
            Role::Ingest,
            Role::RemoteClusterClient,
        ]
        .into_iter()
        .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveryNode {
    /// Persistent node id (kept in `path.data`).
    pub id: String,
    /// New at every process start: a node that comes back with another one restarted, and
    /// its shard copies must be recovered again (their stores may have missed operations).
    #[serde(default)]
    pub ephemeral_id: String,
    pub name: String,
    /// `host:port` of the transport (gRPC) server.
    pub transport_address: String,
    /// `host:port` of the REST server.
    pub http_address: String,
    pub host: String,
    pub ip: String,
    pub roles: BTreeSet<Role>,
    pub attributes: BTreeMap<String, String>,
    pub version: String,
}

impl DiscoveryNode {
    /// The node's id in the Raft group.
    pub fn raft_id(&self) -> u64 {
        crate::raft_id_of(&self.id)
    }

    pub fn is_data(&self) -> bool {
        self.roles.contains(&Role::Data)
    }

    pub fn is_cluster_manager_eligible(&self) -> bool {
        self.roles.contains(&Role::ClusterManager)
    }

    /// `dimr`-style role letters, sorted like OpenSearch prints them.
    pub fn role_letters(&self) -> String {
        let mut letters: Vec<char> = self.roles.iter().map(|r| r.letter()).collect();
        letters.sort_unstable();
        if letters.is_empty() {
            "-".to_string()
        } else {
            letters.into_iter().collect()
        }
    }
}

/// Disk usage of a node's data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiskUsage {
    pub total_bytes: u64,
    pub available_bytes: u64,
    /// Bytes held by the node's shards (for `_cat/allocation`).
    pub shards_bytes: u64,
}

impl DiskUsage {
    pub fn used_percent(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        100.0 * (self.total_bytes - self.available_bytes.min(self.total_bytes)) as f64
            / self.total_bytes as f64
    }
}
