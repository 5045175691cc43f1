//! Node-to-node calls of the data layer, in one place: sending a request to another node
//! (and waiting for it from blocking code), decoding requests and replies, and dispatching the
//! actions this node serves to their handlers on a bounded pool (`pressure`).

use std::time::Duration;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;
use shoal_transport::{RemoteError, TransportError};

use crate::error::{ApiError, ApiResult};
use crate::node::Node;

/// A request in flight to another node.
pub(crate) type Pending = tokio::task::JoinHandle<ApiResult<Bytes>>;

impl From<TransportError> for ApiError {
    fn from(e: TransportError) -> ApiError {
        let remote = e.to_remote_error();
        ApiError::new(remote.status, &remote.error_type, remote.reason)
    }
}

fn to_remote(e: ApiError) -> RemoteError {
    RemoteError::new(e.status, &e.error_type, e.reason)
}

/// Decodes a request this node received (a malformed one is the sender's fault: 400).
pub(crate) fn parse_request<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed transport request: {e}")))
}

/// Decodes another node's reply to `action`.
pub(crate) fn parse_reply<T: DeserializeOwned>(action: &str, reply: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(reply)
        .map_err(|e| ApiError::internal(format!("malformed [{action}] reply: {e}")))
}

pub(crate) fn json_bytes(value: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("transport messages serialize"))
}

impl Node {
    /// Sends `body` to `action` on the node at `address`; the handle resolves to the reply.
    pub(crate) fn send(
        &self,
        address: &str,
        action: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Pending {
        let (transport, address, action) = (
            self.transport.clone(),
            address.to_string(),
            action.to_string(),
        );
        self.runtime
            .spawn(async move { Ok(transport.call(&address, &action, body, timeout).await?) })
    }

    /// Waits for a request sent with [`Node::send`] (from blocking code).
    pub(crate) fn wait(&self, pending: Pending) -> ApiResult<Bytes> {
        self.runtime
            .block_on(pending)
            .unwrap_or_else(|e| Err(ApiError::internal(e.to_string())))
    }

    /// Sends and waits.
    pub(crate) fn call(
        &self,
        address: &str,
        action: &str,
        body: Bytes,
        timeout: Duration,
    ) -> ApiResult<Bytes> {
        self.wait(self.send(address, action, body, timeout))
    }

    /// Serves a data-layer action (`None`: not one of them). Runs on a blocking thread.
    fn serve_action(&self, action: &str, body: Bytes) -> Option<ApiResult<Bytes>> {
        use crate::{broadcast, cluster_api, cluster_bridge, replication, shard_search};
        Some(match action {
            cluster_bridge::ACTION_SHARD_BULK => self.handle_shard_bulk(&body),
            broadcast::ACTION_BROADCAST => self.handle_broadcast(&body),
            broadcast::ACTION_SHARD_STATS => self.handle_copy_stats(&body),
            replication::replica::ACTION_REPLICA_OPS => self.handle_replica_batch(body),
            replication::promotion::ACTION_LOCAL_CHECKPOINT => self.handle_local_checkpoint(&body),
            cluster_api::ACTION_NODES_INFO => self.handle_nodes_info(),
            action if action.starts_with(replication::recovery::ACTION_PREFIX) => {
                self.handle_recovery_action(action, &body)
            }
            action if action.starts_with(shard_search::ACTION_PREFIX) => {
                self.serve_read(action, &body)
            }
            _ => return None,
        })
    }

    /// [`Node::serve_action`] on a blocking thread, its error in the transport's shape.
    pub(crate) async fn serve_action_blocking(
        self: std::sync::Arc<Self>,
        action: String,
        body: Bytes,
    ) -> Result<Bytes, RemoteError> {
        let (pool, admission) = crate::pressure::pool_for_action(&action);
        let pool = self.pressure.pool(pool).clone();
        let task = format!("[{action}]");
        let served = crate::pressure::run_on(&pool, admission, &task, move || {
            self.serve_action(&action, body).ok_or(action)
        })
        .await
        .map_err(to_remote)?;
        match served {
            Ok(reply) => reply.map_err(to_remote),
            Err(action) => Err(RemoteError::new(
                400,
                "action_not_found_transport_exception",
                format!("No handler for action [{action}]"),
            )),
        }
    }
}
