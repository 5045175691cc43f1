//! The routing table: where every copy of every shard is and in what state.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ShardState {
    Unassigned,
    Initializing,
    Started,
    Relocating,
}

impl ShardState {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardState::Unassigned => "UNASSIGNED",
            ShardState::Initializing => "INITIALIZING",
            ShardState::Started => "STARTED",
            ShardState::Relocating => "RELOCATING",
        }
    }
}

/// Why a copy is unassigned; the names are OpenSearch's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UnassignedReason {
    IndexCreated,
    ClusterRecovered,
    IndexReopened,
    NodeLeft,
    AllocationFailed,
    ReroutedCancelled,
    ReplicaAdded,
    PrimaryFailed,
    ReinitializeReplica,
    ManualAllocation,
    /// `allocate_empty_primary` replaced a lost primary with an empty one.
    ForcedEmptyPrimary,
    /// `_remotestore/_restore` restores the shard from the remote store.
    ExistingIndexRestored,
    /// A snapshot restore created the index.
    NewIndexRestored,
}

impl UnassignedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            UnassignedReason::IndexCreated => "INDEX_CREATED",
            UnassignedReason::ClusterRecovered => "CLUSTER_RECOVERED",
            UnassignedReason::IndexReopened => "INDEX_REOPENED",
            UnassignedReason::NodeLeft => "NODE_LEFT",
            UnassignedReason::AllocationFailed => "ALLOCATION_FAILED",
            UnassignedReason::ReroutedCancelled => "REROUTE_CANCELLED",
            UnassignedReason::ReplicaAdded => "REPLICA_ADDED",
            UnassignedReason::PrimaryFailed => "PRIMARY_FAILED",
            UnassignedReason::ReinitializeReplica => "REINITIALIZED",
            UnassignedReason::ManualAllocation => "MANUAL_ALLOCATION",
            UnassignedReason::ForcedEmptyPrimary => "FORCED_EMPTY_PRIMARY",
            UnassignedReason::ExistingIndexRestored => "EXISTING_INDEX_RESTORED",
            UnassignedReason::NewIndexRestored => "NEW_INDEX_RESTORED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnassignedInfo {
    pub reason: UnassignedReason,
    /// Cluster-manager clock when the copy became unassigned.
    pub at_millis: i64,
    pub details: Option<String>,
    #[serde(default)]
    pub failed_allocations: u32,
    /// Waiting for `index.unassigned.node_left.delayed_timeout` before being reallocated.
    #[serde(default)]
    pub delayed: bool,
    /// The node that last held this copy (a returning node gets its copies back; a primary
    /// with existing data may only be allocated where that data is).
    #[serde(default)]
    pub last_node: Option<String>,
    /// `no_attempt`, `no`, `throttled`, `no_valid_shard_copy`, `delayed`.
    #[serde(default = "no_attempt")]
    pub last_allocation_status: String,
}

fn no_attempt() -> String {
    "no_attempt".to_string()
}

impl UnassignedInfo {
    pub fn new(reason: UnassignedReason, at_millis: i64) -> UnassignedInfo {
        UnassignedInfo {
            reason,
            at_millis,
            details: None,
            failed_allocations: 0,
            delayed: false,
            last_node: None,
            last_allocation_status: no_attempt(),
        }
    }
}

/// Where an initializing copy gets its data from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RecoverySource {
    /// A new primary: an empty shard.
    EmptyStore,
    /// A primary reopening the data already on its node.
    ExistingStore,
    /// A replica or relocation target copying from the primary (or the relocation source).
    Peer,
    /// A primary restored from the remote store (`POST _remotestore/_restore`).
    RemoteStore,
    /// A primary restored from a snapshot (`POST _snapshot/{repo}/{snap}/_restore`); the
    /// index's `restored_from` names it.
    Snapshot,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRouting {
    pub index: String,
    pub shard: u32,
    pub primary: bool,
    pub state: ShardState,
    pub node: Option<String>,
    /// On a RELOCATING copy: the target node. On the INITIALIZING target of a relocation:
    /// the source node.
    pub relocating_node: Option<String>,
    /// Present on every assigned copy; kept on an unassigned copy that still has data
    /// somewhere (its previous id).
    pub allocation_id: Option<String>,
    pub recovery_source: Option<RecoverySource>,
    /// On a primary forced onto a stale or empty store (`allocate_stale_primary`,
    /// `allocate_empty_primary`): the store starts a new history (a new history uuid), so no
    /// copy of the old one can come back by replaying operations. Cleared once started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bootstrap_new_history_uuid: bool,
    pub unassigned: Option<UnassignedInfo>,
}

impl ShardRouting {
    pub fn unassigned(
        index: &str,
        shard: u32,
        primary: bool,
        info: UnassignedInfo,
    ) -> ShardRouting {
        ShardRouting {
            index: index.to_string(),
            shard,
            primary,
            state: ShardState::Unassigned,
            node: None,
            relocating_node: None,
            allocation_id: None,
            recovery_source: None,
            bootstrap_new_history_uuid: false,
            unassigned: Some(info),
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self.state, ShardState::Started | ShardState::Relocating)
    }

    pub fn is_assigned(&self) -> bool {
        self.node.is_some()
    }

    /// For the initializing target of a relocation: the source node.
    pub fn relocation_target_of(&self) -> Option<&str> {
        if self.state == ShardState::Initializing {
            self.relocating_node.as_deref()
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRoutingTable {
    /// Copies of shard `n` at `shards[n]`: the primary first, then replicas and relocation targets.
    pub shards: Vec<Vec<ShardRouting>>,
}
