//! Raft messages over the node transport. Each RPC is one transport action whose body is the
//! JSON of openraft's request; the reply is the JSON of `Result<response, RaftError>`.

use std::future::Future;
use std::io::Cursor;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
use shoal_transport::{Action, ActionRegistry, Transport, TransportError};

use super::types::{RaftId, Snapshot, TypeConfig, Vote};

/// A Raft RPC as a transport action: openraft's request, and `Result<response, RaftError>`.
pub struct AppendAction;
impl Action for AppendAction {
    const NAME: &'static str = "internal:raft/append";
    type Request = AppendEntriesRequest<TypeConfig>;
    type Response = Result<AppendEntriesResponse<TypeConfig>, RaftError<TypeConfig>>;
}

pub struct VoteAction;
impl Action for VoteAction {
    const NAME: &'static str = "internal:raft/vote";
    type Request = VoteRequest<TypeConfig>;
    type Response = Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>;
}

/// A whole snapshot in one message: the leader's vote, the snapshot's metadata and bytes.
pub struct SnapshotAction;
impl Action for SnapshotAction {
    const NAME: &'static str = "internal:raft/snapshot";
    type Request = (Vote, super::types::SnapshotMeta, Vec<u8>);
    type Response = Result<SnapshotResponse<TypeConfig>, RaftError<TypeConfig>>;
}

pub struct TransferLeaderAction;
impl Action for TransferLeaderAction {
    const NAME: &'static str = "internal:raft/transfer_leader";
    type Request = TransferLeaderRequest<TypeConfig>;
    type Response = Result<TransferLeaderResponse<TypeConfig>, RaftError<TypeConfig>>;
}

pub const ACTION_APPEND: &str = AppendAction::NAME;
pub const ACTION_VOTE: &str = VoteAction::NAME;
pub const ACTION_SNAPSHOT: &str = SnapshotAction::NAME;
pub const ACTION_TRANSFER_LEADER: &str = TransferLeaderAction::NAME;

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
    async fn request<A, Resp>(
        &self,
        req: &A::Request,
        ttl: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>>
    where
        A: Action<Response = Result<Resp, RaftError<TypeConfig>>>,
    {
        let current = self.metrics.get().and_then(|metrics| {
            let metrics = metrics.borrow_watched();
            let node = metrics.membership_config.get_node(&self.target)?;
            Some(node.addr.clone())
        });
        let addr = current.as_deref().unwrap_or(&self.addr);
        let result = self
            .transport
            .send::<A>(addr, req, ttl)
            .await
            .map_err(|e| match e {
                TransportError::Unreachable { .. } | TransportError::Dropped => {
                    RPCError::Unreachable(Unreachable::new(&e))
                }
                other => RPCError::Network(NetworkError::new(&other)),
            })?;
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
        self.request::<AppendAction, _>(&rpc, option.soft_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.request::<VoteAction, _>(&rpc, option.soft_ttl()).await
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
            res = self.request::<SnapshotAction, _>(&req, option.hard_ttl()) => Ok(res?),
        }
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.request::<TransferLeaderAction, _>(&req, option.soft_ttl())
            .await
    }
}

/// Registers the handlers of the Raft actions of this node's transport.
pub fn register(registry: &mut ActionRegistry, raft: &super::types::Raft) {
    let r = raft.clone();
    registry.register::<AppendAction, _, _>(move |_, req| {
        let raft = r.clone();
        async move { Ok(raft.append_entries(req).await) }
    });
    let r = raft.clone();
    registry.register::<VoteAction, _, _>(move |_, req| {
        let raft = r.clone();
        async move { Ok(raft.vote(req).await) }
    });
    let r = raft.clone();
    registry.register::<SnapshotAction, _, _>(move |_, (vote, meta, data)| {
        let raft = r.clone();
        async move {
            let snapshot = Snapshot {
                meta,
                snapshot: Cursor::new(data),
            };
            Ok(raft
                .install_full_snapshot(vote, snapshot)
                .await
                .map_err(RaftError::Fatal))
        }
    });
    let r = raft.clone();
    registry.register::<TransferLeaderAction, _, _>(move |_, req| {
        let raft = r.clone();
        async move {
            Ok(raft
                .handle_transfer_leader(req)
                .await
                .map_err(RaftError::Fatal))
        }
    });
}
