//! The cluster layer: the Raft group that agrees on the cluster state, discovery and joining,
//! fault detection, and the cluster manager's duties (voting configuration, node removal).

pub mod actions;
pub mod config;
pub mod coordinator;
mod discovery;
pub mod error;
mod leader;
mod leave;
pub mod raft;
pub mod read_barrier;

pub use config::{CheckSettings, ClusterConfig};
pub use coordinator::{
    new_id, now_millis, Cluster, DiscoveryStats, PeerInfo, PromotionAdvisor, RaftStatus,
};
pub use error::ClusterError;
pub use raft::types::raft_id_of;
