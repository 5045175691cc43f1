//! `cluster.max_shards_per_node` (OpenSearch's `ShardLimitValidator`): creating an index,
//! raising its replicas or opening a closed one may not take the cluster past
//! `max_shards_per_node × data nodes` open shard copies.

use shoal_state::{ClusterState, IndexState};

use super::AdminService;
use crate::error::{ApiError, ApiResult};

pub const MAX_SHARDS_PER_NODE: &str = "cluster.max_shards_per_node";

/// Shard copies (primaries and replicas) of the open indices.
fn open_shard_copies(state: &ClusterState) -> u64 {
    state
        .metadata
        .indices
        .values()
        .filter(|m| m.state == IndexState::Open)
        .map(|m| m.number_of_shards() as u64 * (1 + m.number_of_replicas() as u64))
        .sum()
}

/// The refusal when `new_shards` more copies would exceed the limit; nothing while the
/// cluster has no data node (OpenSearch does not block a cluster that is still forming).
pub fn check(state: &ClusterState, per_node: u64, new_shards: i64) -> ApiResult<()> {
    let data_nodes = state.nodes.values().filter(|n| n.is_data()).count() as u64;
    if data_nodes == 0 || new_shards <= 0 {
        return Ok(());
    }
    let limit = per_node.saturating_mul(data_nodes);
    let current = open_shard_copies(state);
    if current + new_shards as u64 <= limit {
        return Ok(());
    }
    Err(ApiError::new(
        400,
        "validation_exception",
        format!(
            "Validation Failed: 1: this action would add [{new_shards}] total shards, but this cluster currently has [{current}]/[{limit}] maximum shards open;"
        ),
    ))
}

/// `cluster.max_shards_per_node` as the cluster has it set (1000 when unset).
pub fn max_shards_per_node(core: &crate::core::NodeCore) -> u64 {
    core.cluster_setting(MAX_SHARDS_PER_NODE)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

impl AdminService {
    fn max_shards_per_node(&self) -> u64 {
        max_shards_per_node(&self.core)
    }

    /// Refuses adding `new_shards` shard copies past `cluster.max_shards_per_node`.
    pub fn check_shard_limit(&self, new_shards: i64) -> ApiResult<()> {
        check(
            &self.core.cluster_state(),
            self.max_shards_per_node(),
            new_shards,
        )
    }

    /// The copies that setting `index.number_of_replicas` to `replicas` adds to `indices`.
    pub fn check_shard_limit_for_replicas(
        &self,
        indices: &[String],
        replicas: i64,
    ) -> ApiResult<()> {
        let state = self.core.cluster_state();
        let added: i64 = indices
            .iter()
            .filter_map(|name| state.metadata.indices.get(name))
            .map(|m| (replicas - m.number_of_replicas() as i64) * m.number_of_shards() as i64)
            .sum();
        check(&state, self.max_shards_per_node(), added)
    }

    /// The copies that opening `index` adds back.
    pub fn check_shard_limit_for_open(&self, index: &str) -> ApiResult<()> {
        let state = self.core.cluster_state();
        let added = state
            .metadata
            .indices
            .get(index)
            .filter(|m| m.state == IndexState::Close)
            .map(|m| m.number_of_shards() as i64 * (1 + m.number_of_replicas() as i64))
            .unwrap_or(0);
        check(&state, self.max_shards_per_node(), added)
    }
}
