//! A read barrier on the cluster manager's state. A read that must not answer from a stale
//! view (`_cluster/health` without `local=true`) first learns the state version the cluster
//! manager has applied, then waits until this node has applied it too, and reads its own copy.
//! OpenSearch runs such reads on the cluster manager (`TransportClusterManagerNodeReadAction`);
//! asking for a version gives the same answer without shipping the state.
//!
//! Why it matters: a node that was frozen (SIGSTOP, a long GC-like pause) and removed from the
//! cluster still holds the state it had before; answering from it says "green, 3 nodes" about
//! a cluster that moved on. Through the barrier it answers once it has rejoined and caught up,
//! or `cluster_manager_not_discovered_exception` when no cluster manager takes it back in time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use shoal_state::ClusterState;
use shoal_transport::{Action, ErrorKind, RemoteError, TransportError};
use tracing::debug;

use crate::coordinator::Cluster;
use crate::error::ClusterError;

/// A node asks the cluster manager which state version a read must see.
pub struct ReadBarrierAction;
impl Action for ReadBarrierAction {
    const NAME: &'static str = "internal:cluster/coordination/read_barrier";
    type Request = ReadBarrierRequest;
    type Response = ReadBarrierResponse;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadBarrierRequest {
    /// The asking node: a node the cluster manager removed must rejoin before it reads.
    pub node_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReadBarrierResponse {
    /// The cluster state version the cluster manager has applied.
    pub version: u64,
}

/// The longest one question to the cluster manager may take (its answer is a field read).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long to wait between attempts while no cluster manager answers.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

impl Cluster {
    /// The applied cluster state once it is at least as new as the cluster manager's at the
    /// time of the call. Retries while no cluster manager is known, the one asked stepped down,
    /// or it does not count this node as a member (it was removed and is rejoining); after
    /// `timeout` answers [`ClusterError::ManagerNotDiscovered`].
    pub async fn read_barrier(&self, timeout: Duration) -> Result<Arc<ClusterState>, ClusterError> {
        let deadline = Instant::now() + timeout;
        loop {
            let last_failure = match self.cluster_manager_version(deadline).await {
                Ok(version) => match self.wait_for_version(version, deadline).await {
                    Ok(state) => return Ok(state),
                    Err(_) => format!(
                        "this node did not apply the cluster manager's state version [{version}] in time"
                    ),
                },
                Err(reason) => reason,
            };
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(ClusterError::ManagerNotDiscovered(format!(
                    "no cluster manager confirmed the state of node [{}] within [{}ms]: {last_failure}; \
                     check that a majority of the cluster-manager-eligible nodes is up and reachable, \
                     or pass local=true to read this node's own view",
                    self.local().name,
                    timeout.as_millis()
                )));
            }
            debug!(reason = %last_failure, "read barrier: retrying");
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// The state version the cluster manager has applied: this node's own when it is the
    /// manager (and holds its lease), else the manager's answer.
    async fn cluster_manager_version(&self, deadline: Instant) -> Result<u64, String> {
        if self.is_cluster_manager() {
            return Ok(self.state().version);
        }
        if !self.has_cluster_manager() {
            return Err("no cluster manager is known".into());
        }
        let address = self
            .leader_address()
            .ok_or_else(|| String::from("the cluster manager's address is unknown"))?;
        let request = ReadBarrierRequest {
            node_id: self.local().id.clone(),
        };
        // One attempt never takes the whole wait: a manager frozen since this node last heard
        // of it answers nothing, and its successor is found by asking again.
        let attempt_timeout = deadline
            .saturating_duration_since(Instant::now())
            .clamp(RETRY_PAUSE, ATTEMPT_TIMEOUT);
        match self
            .transport()
            .send::<ReadBarrierAction>(&address, &request, attempt_timeout)
            .await
        {
            Ok(answer) => Ok(answer.version),
            // A manager of an older release (a rolling upgrade) cannot confirm: this node
            // reads its own state, as every node did before the barrier existed.
            Err(TransportError::Remote(remote)) if remote.is_action_not_found() => {
                Ok(self.state().version)
            }
            Err(e) => Err(format!("the cluster manager at [{address}] answered: {e}")),
        }
    }

    /// The cluster manager's side: its applied version, for a member only.
    pub(crate) fn handle_read_barrier(
        &self,
        request: &ReadBarrierRequest,
    ) -> Result<ReadBarrierResponse, RemoteError> {
        if !self.is_cluster_manager() {
            return Err(self.not_leader());
        }
        let state = self.state();
        if !state.nodes.contains_key(&request.node_id) {
            return Err(RemoteError::new(
                503,
                "node_not_connected_exception",
                format!(
                    "node [{}] is not part of the cluster that [{}] manages; it reads once it has rejoined",
                    request.node_id,
                    self.local().name
                ),
            )
            .with_kind(ErrorKind::Unavailable));
        }
        Ok(ReadBarrierResponse {
            version: state.version,
        })
    }
}
