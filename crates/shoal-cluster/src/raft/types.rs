//! openraft type configuration: log entries carry [`Proposal`]s, responses say how applying went.

use serde::{Deserialize, Serialize};
use shoal_state::{Proposal, StateError};

/// What applying one entry gave: the new state version, or why the command was refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ApplyResult {
    pub version: u64,
    pub error: Option<StateError>,
}

openraft::declare_raft_types!(
    /// Raft types of the cluster-state group.
    pub TypeConfig:
        D = Proposal,
        R = ApplyResult,
        Node = openraft::BasicNode,
);

pub type RaftId = u64;
pub type Raft = openraft::Raft<TypeConfig, crate::raft::state_machine::StateMachine>;
pub type LogId = openraft::type_config::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::type_config::alias::VoteOf<TypeConfig>;
pub type Entry = <TypeConfig as openraft::RaftTypeConfig>::Entry;
pub type StoredMembership = openraft::type_config::alias::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = openraft::type_config::alias::SnapshotMetaOf<TypeConfig>;
pub type Snapshot = openraft::type_config::alias::SnapshotOf<TypeConfig, std::io::Cursor<Vec<u8>>>;

pub use shoal_state::raft_id_of;
