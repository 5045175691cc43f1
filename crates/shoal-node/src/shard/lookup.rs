//! Finding the local copy a node-to-node request names.
//!
//! Every handler that acts on one copy (replica batches, shard reads, recovery, promotion
//! checks) finds it here, so each checks the same three things: the index is the one the
//! sender meant (same uuid, not a deleted and recreated namesake), a copy of the shard is
//! open on this node, and, when the sender names one, it is that allocation of the shard.

use std::sync::Arc;

use shoal_types::{AllocationId, ShardId};

use super::IndexShard;
use serde_json::json;

use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::replication::ShardReplication;

/// A local copy as a handler sees it.
pub struct LocalCopy {
    pub service: Arc<IndexService>,
    pub shard: Arc<IndexShard>,
    /// The copy's replication state (`None` while the applier has not set it up yet).
    pub replication: Option<Arc<ShardReplication>>,
}

impl LocalCopy {
    pub fn engine(&self) -> &Arc<shoal_engine::Engine> {
        self.shard.engine()
    }
}

impl NodeCore {
    /// The open copy of `shard_id` (of the index called `index`) on this node, and if
    /// `allocation` is given, only that allocation of it. Anything else is a
    /// `shard_not_found_exception`: the sender acted on a state this node no longer matches.
    pub fn local_copy(
        &self,
        index: &str,
        shard_id: &ShardId,
        allocation: Option<&AllocationId>,
    ) -> ApiResult<LocalCopy> {
        let number = shard_id.shard as usize;
        let not_found = || shard_not_found(index, number);
        let service = self
            .index(index)
            .filter(|s| s.uuid() == shard_id.index_uuid)
            .ok_or_else(not_found)?;
        let shard = service.copy(number).map_err(|_| not_found())?;
        let replication = service.replication(number);
        if let Some(wanted) = allocation {
            let same = replication
                .as_ref()
                .is_some_and(|r| r.allocation_id == wanted.as_str());
            if !same {
                return Err(not_found());
            }
        }
        Ok(LocalCopy {
            service,
            shard,
            replication,
        })
    }
}

/// A shard copy this node does not (or no longer) hold: the sender tries another copy.
pub fn shard_not_found(index: &str, shard: usize) -> ApiError {
    ApiError::new(404, "shard_not_found_exception", "no such shard")
        .with("index", json!(index))
        .with("shard", json!(shard.to_string()))
}
