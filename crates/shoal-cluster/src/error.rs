//! Errors of the cluster service, each mapping to an HTTP status and OpenSearch error type.

use shoal_state::StateError;
use shoal_transport::{ErrorKind, RemoteError};

#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// No elected cluster manager: `cluster.no_cluster_manager_block`.
    #[error("blocked by: [SERVICE_UNAVAILABLE/2/no cluster-manager];")]
    NoClusterManager,
    /// The command was refused by the state (index exists, no such index…).
    #[error("{0}")]
    Refused(StateError),
    #[error("failed to process cluster event within {0:?}")]
    Timeout(std::time::Duration),
    /// The cluster manager stepped down before it wrote the proposal (Raft says "forward to
    /// the leader"): nothing was written, so the sender proposes again to the new one.
    #[error("the cluster manager changed before the proposal was written: {0}")]
    Moved(String),
    /// A read that must see the cluster manager's state found none to confirm it in time.
    #[error("{0}")]
    ManagerNotDiscovered(String),
    #[error("{0}")]
    Internal(String),
}

impl ClusterError {
    pub fn to_remote(&self) -> RemoteError {
        match self {
            ClusterError::NoClusterManager => {
                RemoteError::new(503, "cluster_block_exception", self.to_string())
            }
            ClusterError::Refused(e) => {
                RemoteError::new(e.status, e.error_type.clone(), e.reason.clone())
            }
            ClusterError::Timeout(_) => RemoteError::new(
                503,
                "process_cluster_event_timeout_exception",
                self.to_string(),
            ),
            ClusterError::Moved(_) => {
                RemoteError::new(503, "not_cluster_manager", self.to_string())
                    .with_kind(ErrorKind::Moved)
            }
            ClusterError::ManagerNotDiscovered(reason) => RemoteError::new(
                503,
                "cluster_manager_not_discovered_exception",
                reason.clone(),
            ),
            ClusterError::Internal(reason) => RemoteError::internal(reason.clone()),
        }
    }

    /// The cluster manager's refusal of a forwarded proposal, rendered as it answered it.
    /// (A manager never answers "no cluster manager": a node that is not the manager answers
    /// `not_cluster_manager` of kind `Moved`, which the sender retries elsewhere.)
    pub fn from_remote(remote: RemoteError) -> ClusterError {
        ClusterError::Refused(StateError::new(
            remote.status,
            &remote.error_type,
            remote.reason,
        ))
    }
}
