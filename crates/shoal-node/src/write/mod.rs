//! The write path's roles: the [`coordinator`] (route, split, forward, merge, reroute),
//! [`forward`] (the shard bulk that carries a batch to its primary's node), and the
//! [`primary`] role that applies one shard's batch where its primary is; the replica role is
//! `replication/replica.rs`.
//!
//! The coordinator is a service, [`WriteService`] (`Node.writes`): it holds the node's
//! [`NodeCore`] and, for what is not a service yet, [`WriteRoles`] (the primary role and index
//! creation), never the [`Node`](crate::node::Node). `_delete_by_query` and
//! `_update_by_query` ([`by_query`]) read through the read service and write through this one.

pub mod by_query;
pub mod coordinator;
pub mod forward;
pub mod primary;

use std::sync::{Arc, Weak};

use crate::core::NodeCore;
use crate::documents::{LocalItem, WriteOptions};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;

pub(crate) use coordinator::Slots;
pub(crate) use forward::register_actions;

/// What the write coordinator asks of the parts of the node that are not services yet: the
/// primary role (a shard's batch applied where its primary is, [`primary`]) and index
/// creation (a first write may create its index). The node implements it; the service holds
/// it weakly, so a service never keeps a stopped node alive.
pub(crate) trait WriteRoles: Send + Sync {
    /// Applies one shard's batch on this node's primary and fills its items' slots; the
    /// primary refreshes (and has its segment replicas copy) when the request asks.
    fn write_on_primary(
        &self,
        shard: usize,
        group: Vec<LocalItem>,
        options: &WriteOptions,
        results: &mut Slots,
    );

    /// Creates an index with default settings and mappings (auto-create on first write).
    fn create_index(&self, name: &str) -> ApiResult<Arc<IndexService>>;
}

/// Writes as this node coordinates them, and the shard bulks other coordinators forward here.
pub struct WriteService {
    core: Arc<NodeCore>,
    roles: Weak<dyn WriteRoles>,
}

impl WriteService {
    pub(crate) fn new(core: Arc<NodeCore>, roles: Weak<dyn WriteRoles>) -> WriteService {
        WriteService { core, roles }
    }

    /// The node's roles, unless the node is stopping (then nothing more is written).
    fn roles(&self) -> ApiResult<Arc<dyn WriteRoles>> {
        self.roles
            .upgrade()
            .ok_or_else(|| ApiError::new(503, "node_closed_exception", "node is shutting down"))
    }
}
