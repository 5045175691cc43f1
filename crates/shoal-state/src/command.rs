//! Commands: the only way the cluster state changes. One command is one Raft log entry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metadata::IndexMetadata;
use crate::node::{DiscoveryNode, DiskUsage};

/// A command stamped by the cluster manager that proposed it. The timestamp is what makes
/// time-based rules (delayed allocation) deterministic on every node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub now_millis: i64,
    pub command: Command,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VotingExclusion {
    pub node_id: String,
    pub node_name: String,
}

/// `POST /_cluster/reroute` commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerouteCommand {
    Move {
        index: String,
        shard: u32,
        from_node: String,
        to_node: String,
    },
    Cancel {
        index: String,
        shard: u32,
        node: String,
        allow_primary: bool,
    },
    AllocateReplica {
        index: String,
        shard: u32,
        node: String,
    },
    AllocateEmptyPrimary {
        index: String,
        shard: u32,
        node: String,
        accept_data_loss: bool,
    },
    AllocateStalePrimary {
        index: String,
        shard: u32,
        node: String,
        accept_data_loss: bool,
    },
}

/// The copy to promote for one shard (see `Command::NodeLeft`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromotionChoice {
    pub index: String,
    pub shard: u32,
    pub allocation_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// The first entry of a new cluster.
    Bootstrap {
        cluster_uuid: String,
        cluster_name: String,
        /// Dynamic cluster settings the bootstrapping node was started with (`-E` or
        /// `shoal.yml`): they stand in for the built-in defaults cluster-wide, below persistent
        /// and transient settings, the way OpenSearch's node settings back cluster settings.
        #[serde(default)]
        node_settings: BTreeMap<String, Value>,
    },
    /// A node joins (or rejoins with a new address).
    NodeJoin(DiscoveryNode),
    /// Fault detection or a graceful shutdown removed a node.
    NodeLeft {
        node_id: String,
        reason: String,
        /// For shards whose primary leaves: the in-sync copy the cluster manager found most
        /// caught up (highest local checkpoint) when it asked them, promoted if still eligible.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        promote: Vec<PromotionChoice>,
    },
    /// The Raft leader announces itself as cluster manager for its term.
    ClusterManagerElected {
        node_id: String,
        term: u64,
    },
    /// Creates an index (`create`) or replaces its metadata (mappings, settings, aliases,
    /// open/close). Replica count changes adjust the routing table.
    PutIndex {
        meta: IndexMetadata,
        create: bool,
    },
    DeleteIndices {
        names: Vec<String>,
    },
    /// A node finished initializing a copy.
    ShardStarted {
        index: String,
        shard: u32,
        allocation_id: String,
    },
    /// A copy failed (its node reports it, or the primary could not replicate to it).
    ShardFailed {
        index: String,
        shard: u32,
        allocation_id: String,
        reason: String,
        /// The term of the primary reporting a replication failure. A report from a deposed
        /// primary (older term) is ignored: it must not fail the copy that replaced it.
        #[serde(default)]
        primary_term: Option<u64>,
    },
    PutClusterSettings {
        persistent: BTreeMap<String, Value>,
        transient: BTreeMap<String, Value>,
    },
    SetVotingExclusions(Vec<crate::command::VotingExclusion>),
    Reroute {
        commands: Vec<RerouteCommand>,
        retry_failed: bool,
    },
    DiskUsage {
        node_id: String,
        usage: DiskUsage,
    },
    /// Re-runs allocation (delayed shards whose delay expired).
    Tick,
    /// `_remotestore/_restore`: the shards of `indices` (every shard with `all_shards`, which
    /// also opens the closed indices; else those without an active primary) get a primary
    /// restored from the remote store, and their other copies start over from it.
    RestoreRemoteStore {
        indices: Vec<String>,
        all_shards: bool,
        /// Per index name, per shard: the highest primary term the shard's remote store holds
        /// history of, as the proposer listed it. The metadata can be older than the repository
        /// (the remote cluster state is uploaded asynchronously), and a restored primary must
        /// write above every stored term: its term is raised past these.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        stored_terms: BTreeMap<String, Vec<u64>>,
    },
    /// The first cluster manager of a cluster with a remote state repository looked for the
    /// metadata an earlier cluster of the same name uploaded: a fresh cluster takes its indices
    /// (red until restored from the remote store) and persistent settings. Applied once.
    RestoreClusterMetadata {
        metadata: Option<crate::metadata::RestorableMetadata>,
        /// The repository object it came from (shown in the state).
        source: Option<String>,
    },
    /// `PUT _snapshot/{name}`: registers (or replaces) a repository.
    PutRepository {
        name: String,
        repository: crate::snapshots::RepositoryMetadata,
    },
    /// `DELETE _snapshot/{names}`; refused while a snapshot runs in one of them.
    DeleteRepositories {
        names: Vec<String>,
    },
    /// A snapshot is created or deleted; refused while another runs in its repository.
    SnapshotBegin(crate::snapshots::SnapshotInProgress),
    /// `DELETE` of a running snapshot: its coordinator and primaries stop.
    SnapshotAbort {
        repository: String,
        uuid: String,
    },
    /// The coordinator finished (or gave up) the operation.
    SnapshotEnd {
        repository: String,
        uuid: String,
    },
    /// `_snapshot/{repo}/{snap}/_restore`: new indices whose primaries recover from the
    /// snapshot their `restored_from` names. `replacing` names (name → uuid) the closed
    /// indices they restore over: those go, their names taken by the restored ones.
    RestoreSnapshot {
        indices: Vec<crate::IndexMetadata>,
        #[serde(default)]
        replacing: std::collections::BTreeMap<String, String>,
    },
}

impl Command {
    /// Whether the command changes metadata (blocked while there is no cluster manager under
    /// `cluster.no_cluster_manager_block`; used for naming only here).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Bootstrap { .. } => "bootstrap",
            Command::NodeJoin(_) => "node-join",
            Command::NodeLeft { .. } => "node-left",
            Command::ClusterManagerElected { .. } => "elected-as-cluster-manager",
            Command::PutIndex { create: true, .. } => "create-index",
            Command::PutIndex { .. } => "put-index-metadata",
            Command::DeleteIndices { .. } => "delete-index",
            Command::ShardStarted { .. } => "shard-started",
            Command::ShardFailed { .. } => "shard-failed",
            Command::PutClusterSettings { .. } => "cluster-update-settings",
            Command::SetVotingExclusions(_) => "voting-config-exclusions",
            Command::Reroute { .. } => "cluster-reroute",
            Command::DiskUsage { .. } => "disk-usage",
            Command::Tick => "reroute-delayed",
            Command::RestoreRemoteStore { .. } => "remote-store-restore",
            Command::RestoreClusterMetadata { .. } => "remote-cluster-state-restore",
            Command::PutRepository { .. } => "put-repository",
            Command::DeleteRepositories { .. } => "delete-repository",
            Command::SnapshotBegin(_) => "snapshot-begin",
            Command::SnapshotEnd { .. } => "snapshot-end",
            Command::SnapshotAbort { .. } => "snapshot-abort",
            Command::RestoreSnapshot { .. } => "restore-snapshot",
        }
    }
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.command.name(), self.now_millis)
    }
}
