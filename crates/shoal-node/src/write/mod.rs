//! The write path's roles: the [`coordinator`] (route, split, forward, merge, reroute),
//! [`forward`] (the shard bulk that carries a batch to its primary's node), and the
//! [`primary`] role that applies one shard's batch where its primary is; the replica role is
//! `replication/replica.rs`.
//!
//! They are one service, [`WriteService`] (`Node.writes`): it holds the node's [`NodeCore`],
//! the services the primary role calls (replication, segment replication, remote store) and
//! [`IndexCreation`] (auto-create, through the admin service), never the
//! [`Node`](crate::node::Node). Writes that read first read through the read service and write
//! through this one: the update API ([`update`]), `_delete_by_query` and `_update_by_query`
//! ([`by_query`]).

pub mod by_query;
pub mod coordinator;
pub mod forward;
pub mod primary;
pub mod update;

use std::sync::{Arc, Weak};

use crate::broadcast::BroadcastService;
use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::read::ReadService;
use crate::remote::RemoteStoreService;
use crate::replication::ReplicationService;
use crate::segrep::SegrepService;

pub(crate) use forward::register_actions;

/// Index creation: a first write may create its index. The admin service implements it; the
/// write service holds it weakly, and only the node holds the admin service, so a node that
/// is stopping writes nothing more.
pub(crate) trait IndexCreation: Send + Sync {
    /// Creates an index with default settings and mappings (auto-create on first write).
    fn create_index(&self, name: &str) -> ApiResult<Arc<IndexService>>;
}

/// Writes as this node coordinates them, the shard bulks other coordinators forward here, and
/// the primary role that applies a shard's batch where its primary is ([`primary`]).
pub struct WriteService {
    core: Arc<NodeCore>,
    /// The primary's side of replication, and `wait_for_active_shards`.
    replication: Arc<ReplicationService>,
    /// Segment replication: its pressure can hold a primary's writes back, and a refreshing
    /// write has the segment replicas copy the commit.
    segrep: Arc<SegrepService>,
    /// A remote-backed primary's pressure and translog upload.
    remote: Arc<RemoteStoreService>,
    /// Writes that read first: an update reads the document, by-query finds the matches.
    reads: Arc<ReadService>,
    /// By-query refreshes its indices first, for a point-in-time view of the matches.
    broadcast: Arc<BroadcastService>,
    creation: Weak<dyn IndexCreation>,
}

/// The services the write service calls: the primary role's (replication, segment
/// replication, remote store) and, for writes that read first, reads and broadcasts.
pub(crate) struct WriteParts {
    pub replication: Arc<ReplicationService>,
    pub segrep: Arc<SegrepService>,
    pub remote: Arc<RemoteStoreService>,
    pub reads: Arc<ReadService>,
    pub broadcast: Arc<BroadcastService>,
}

impl WriteService {
    pub(crate) fn new(
        core: Arc<NodeCore>,
        parts: WriteParts,
        creation: Weak<dyn IndexCreation>,
    ) -> WriteService {
        WriteService {
            core,
            replication: parts.replication,
            segrep: parts.segrep,
            remote: parts.remote,
            reads: parts.reads,
            broadcast: parts.broadcast,
            creation,
        }
    }

    /// Index creation, unless the node is stopping (then nothing more is written).
    fn creation(&self) -> ApiResult<Arc<dyn IndexCreation>> {
        self.creation
            .upgrade()
            .ok_or_else(|| ApiError::new(503, "node_closed_exception", "node is shutting down"))
    }
}
