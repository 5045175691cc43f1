//! Raft messages over the node transport. Each RPC is one transport action whose body is the
//! JSON of openraft's request; the reply is the JSON of `Result<response, RaftError>`.

use std::future::Future;
use std::io::Cursor;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::{
    NetworkError, RPCError, RaftError, ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::v2::RaftNetworkV2;
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::alias::WatchReceiverOf;
use openraft::{BasicNode, OptionalSend, RaftMetrics};
use serde::de::DeserializeOwned;
use serde::Serialize;
use shoal_transport::{Transport, TransportError};

use super::types::{RaftId, Snapshot, TypeConfig, Vote};

pub const ACTION_APPEND: &str = "internal:raft/append";
pub const ACTION_VOTE: &str = "internal:raft/vote";
pub const ACTION_SNAPSHOT: &str = "internal:raft/snapshot";
pub const ACTION_TRANSFER_LEADER: &str = "internal:raft/transfer_leader";

type Metrics = WatchReceiverOf<TypeConfig, RaftMetrics<TypeConfig>>;

#[derive(Clone)]
pub struct Network {
    transport: Arc<Transport>,
    /// The local Raft node's metrics, once it is started (see [`Network::follow_membership`]).
    metrics: Arc<OnceLock<Metrics>>,
}

impl Network {
    pub fn new(transport: Arc<Transport>) -> Network {
        Network {
            transport,
            metrics: Arc::default(),
        }
    }

    /// Makes every client send to the address the current membership configuration gives its
    /// target. A leader keeps the clients of its replication streams and heartbeats across
    /// membership changes, so without this a member whose address was updated (restarted on
    /// another address) would still be sent to at its old one.
    pub fn follow_membership(&self, metrics: Metrics) {
        let _ = self.metrics.set(metrics);
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: RaftId, node: &BasicNode) -> Peer {
        Peer {
            transport: self.transport.clone(),
            target,
            addr: node.addr.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

pub struct Peer {
    transport: Arc<Transport>,
    target: RaftId,
    /// The target's address when the client was built.
    addr: String,
    metrics: Arc<OnceLock<Metrics>>,
}

impl Peer {
    async fn request<Req, Resp>(
        &self,
        action: &str,
        req: &Req,
        ttl: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let current = self.metrics.get().and_then(|metrics| {
            let metrics = metrics.borrow_watched();
            let node = metrics.membership_config.get_node(&self.target)?;
            Some(node.addr.clone())
        });
        let addr = current.as_deref().unwrap_or(&self.addr);
        let reply = self
            .transport
            .call(addr, action, Bytes::from(body), ttl)
            .await
            .map_err(|e| match e {
                TransportError::Unreachable { .. } | TransportError::Dropped => {
                    RPCError::Unreachable(Unreachable::new(&e))
                }
                other => RPCError::Network(NetworkError::new(&other)),
            })?;
        let result: Result<Resp, RaftError<TypeConfig>> =
            serde_json::from_slice(&reply).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }
}

impl RaftNetworkV2<TypeConfig> for Peer {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.request(ACTION_APPEND, &rpc, option.soft_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.request(ACTION_VOTE, &rpc, option.soft_ttl()).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        cancel: impl Future<Output = ReplicationClosed> + OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let req = (vote, snapshot.meta, snapshot.snapshot.into_inner());
        tokio::pin!(cancel);
        tokio::select! {
            closed = &mut cancel => Err(StreamingError::Closed(closed)),
            res = self.request(ACTION_SNAPSHOT, &req, option.hard_ttl()) => Ok(res?),
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.request(ACTION_TRANSFER_LEADER, &req, option.soft_ttl())
            .await
    }
}

/// Serves the Raft actions of this node's transport.
pub async fn handle(
    raft: &super::types::Raft,
    action: &str,
    body: &[u8],
) -> Option<Result<Vec<u8>, String>> {
    let bad = |e: serde_json::Error| format!("malformed raft message: {e}");
    let reply = match action {
        ACTION_APPEND => match serde_json::from_slice(body) {
            Ok(req) => serde_json::to_vec(&raft.append_entries(req).await),
            Err(e) => return Some(Err(bad(e))),
        },
        ACTION_VOTE => match serde_json::from_slice(body) {
            Ok(req) => serde_json::to_vec(&raft.vote(req).await),
            Err(e) => return Some(Err(bad(e))),
        },
        ACTION_SNAPSHOT => {
            let parsed: Result<(Vote, super::types::SnapshotMeta, Vec<u8>), _> =
                serde_json::from_slice(body);
            match parsed {
                Ok((vote, meta, data)) => {
                    let snapshot = Snapshot {
                        meta,
                        snapshot: Cursor::new(data),
                    };
                    let res: Result<SnapshotResponse<TypeConfig>, RaftError<TypeConfig>> = raft
                        .install_full_snapshot(vote, snapshot)
                        .await
                        .map_err(RaftError::Fatal);
                    serde_json::to_vec(&res)
                }
                Err(e) => return Some(Err(bad(e))),
            }
        }
        ACTION_TRANSFER_LEADER => match serde_json::from_slice(body) {
            Ok(req) => {
                let res: Result<TransferLeaderResponse<TypeConfig>, RaftError<TypeConfig>> = raft
                    .handle_transfer_leader(req)
                    .await
                    .map_err(RaftError::Fatal);
                serde_json::to_vec(&res)
            }
            Err(e) => return Some(Err(bad(e))),
        },
        _ => return None,
    };
    Some(reply.map_err(|e| e.to_string()))
}
