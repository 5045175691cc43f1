//! The settings Shoal acts on, by name: every other setting OpenSearch knows is refused by
//! name rather than stored and ignored.

use super::registry;
use super::typed::{DISK_FLOOD, DISK_HIGH, DISK_LOW, SHARD_INDEXING_PRESSURE};
use crate::error::ApiError;

/// Cluster-level settings Shoal acts on (exact names, then prefixes of groups).
const HONOURED_CLUSTER: &[&str] = &[
    "action.auto_create_index",
    "action.destructive_requires_name",
    "cluster.blocks.read_only",
    "cluster.blocks.read_only_allow_delete",
    "cluster.blocks.create_index",
    "cluster.info.update.interval",
    "cluster.max_shards_per_node",
    "cluster.max_voting_config_exclusions",
    "cluster.routing.allocation.allow_rebalance",
    "cluster.routing.allocation.awareness.attributes",
    "cluster.routing.allocation.balance.index",
    "cluster.routing.allocation.balance.shard",
    "cluster.routing.allocation.balance.threshold",
    "cluster.routing.allocation.balance.prefer_primary",
    "cluster.routing.allocation.cluster_concurrent_rebalance",
    "cluster.routing.allocation.disk.threshold_enabled",
    DISK_LOW,
    DISK_HIGH,
    DISK_FLOOD,
    "cluster.routing.allocation.enable",
    "cluster.routing.allocation.node_concurrent_incoming_recoveries",
    "cluster.routing.allocation.node_concurrent_outgoing_recoveries",
    "cluster.routing.allocation.node_concurrent_recoveries",
    "cluster.routing.allocation.node_initial_primaries_recoveries",
    "cluster.routing.allocation.node_initial_replicas_recoveries",
    "cluster.routing.allocation.rebalance.primary.buffer",
    "cluster.routing.allocation.rebalance.primary.enable",
    "cluster.routing.allocation.same_shard.host",
    "cluster.routing.allocation.total_shards_per_node",
    "cluster.routing.rebalance.enable",
    "indices.recovery.chunk_size",
    "indices.recovery.max_bytes_per_sec",
    "indices.recovery.max_concurrent_file_chunks",
    "indices.recovery.recovery_activity_timeout",
    "indices.replication.max_bytes_per_sec",
    // remote/segments.rs and remote/translog.rs.
    "cluster.remote_store.index.segment_metadata.retention.max_count",
    "cluster.remote_store.translog.buffer_interval",
    "remote_store.segment.pressure.enabled",
    "remote_store.segment.pressure.consecutive_failures.limit",
    "remote_store.segment.pressure.bytes_lag.variance_factor",
    "remote_store.segment.pressure.time_lag.variance_factor",
    "indices.replication.merges.warmer.enabled",
    "indices.replication.merges.warmer.max_bytes_per_sec",
    "indices.replication.merges.warmer.min_segment_size_threshold",
    "indices.replication.merges.warmer.timeout",
    "segrep.pressure.enabled",
    "segrep.pressure.checkpoint.limit",
    "segrep.pressure.time.limit",
    "segrep.pressure.replica.stale.limit",
    "segrep.replication.time.limit",
    "http.max_content_length",
    "search.max_buckets",
    // Only `false` (its default): Shoal has no shard-level indexing pressure.
    SHARD_INDEXING_PRESSURE,
];
const HONOURED_CLUSTER_GROUPS: &[&str] = &[
    "cluster.routing.allocation.awareness.force.",
    "cluster.routing.allocation.include.",
    "cluster.routing.allocation.exclude.",
    "cluster.routing.allocation.require.",
];
/// `cluster.indices.replication.strategy`: the replication type of new indices that name none.
pub const REPLICATION_STRATEGY: &str = "cluster.indices.replication.strategy";
/// `cluster.index.restrict.replication.type`: new indices must use the strategy.
pub const RESTRICT_REPLICATION_TYPE: &str = "cluster.index.restrict.replication.type";

/// Node settings read at start only.
const HONOURED_NODE: &[&str] = &[
    REPLICATION_STRATEGY,
    // remote/cluster_state.rs: the cluster's metadata in the state repository.
    "cluster.remote_store.state.enabled",
    RESTRICT_REPLICATION_TYPE,
    "cluster.name",
    "cluster.initial_cluster_manager_nodes",
    "cluster.initial_master_nodes",
    "node.name",
    "node.roles",
    "path.data",
    "path.logs",
    // snapshot/repositories.rs: where `fs` snapshot repositories may be.
    "path.repo",
    "http.host",
    "http.port",
    "network.host",
    "transport.host",
    "transport.port",
    "discovery.seed_hosts",
    "discovery.type",
    "indices.memory.index_buffer_size",
    "indices.memory.min_index_buffer_size",
    "indices.memory.max_index_buffer_size",
    // crates/shoal-node/src/pressure/.
    "indexing_pressure.memory.limit",
    "thread_pool.write.size",
    "thread_pool.write.queue_size",
    "thread_pool.search.size",
    "thread_pool.search.queue_size",
    "thread_pool.get.size",
    "thread_pool.get.queue_size",
    "thread_pool.management.core",
    "thread_pool.management.max",
    "thread_pool.management.keep_alive",
    "thread_pool.generic.core",
    "thread_pool.generic.max",
    "thread_pool.generic.keep_alive",
    "thread_pool.snapshot.core",
    "thread_pool.snapshot.max",
    "thread_pool.snapshot.keep_alive",
    "thread_pool.refresh.core",
    "thread_pool.refresh.max",
    "thread_pool.refresh.keep_alive",
    "thread_pool.flush.core",
    "thread_pool.flush.max",
    "thread_pool.flush.keep_alive",
];
const HONOURED_NODE_GROUPS: &[&str] = &[
    "node.attr.",
    "cluster.fault_detection.follower_check.",
    "cluster.fault_detection.leader_check.",
];
/// Index settings Shoal acts on; the private ones are written by Shoal itself.
const HONOURED_INDEX: &[&str] = &[
    "index.number_of_shards",
    "index.number_of_replicas",
    "index.number_of_routing_shards",
    "index.refresh_interval",
    "index.translog.durability",
    "index.translog.sync_interval",
    "index.translog.flush_threshold_size",
    "index.codec",
    "index.codec.compression_level",
    "index.replication.type",
    // Written by Shoal on a node with a remote store (remote/mod.rs); a user may not set them.
    "index.remote_store.enabled",
    "index.remote_store.segment.repository",
    "index.remote_store.translog.repository",
    "index.remote_store.translog.buffer_interval",
    "index.max_result_window",
    "index.blocks.read_only",
    "index.blocks.read",
    "index.blocks.write",
    "index.blocks.metadata",
    "index.blocks.read_only_allow_delete",
    "index.hidden",
    "index.routing.allocation.enable",
    "index.routing.rebalance.enable",
    "index.routing.allocation.total_shards_per_node",
    "index.allocation.max_retries",
    "index.unassigned.node_left.delayed_timeout",
    "index.write.wait_for_active_shards",
    "index.soft_deletes.retention_lease.period",
    "index.global_checkpoint_sync.interval",
    "index.gc_deletes",
    "index.shard.check_on_startup",
    // The tiered merge policy's (shoal-engine/src/merge_policy.rs), applied at once.
    "index.merge.policy.segments_per_tier",
    "index.merge.policy.max_merge_at_once",
    "index.merge.policy.floor_segment",
    "index.merge.policy.max_merged_segment",
    "index.merge.policy.deletes_pct_allowed",
    "index.merge.policy.expunge_deletes_allowed",
    // Applied by every reroute (shoal-allocation/src/auto_expand.rs).
    "index.auto_expand_replicas",
    // The fields of query_string, simple_query_string and multi_match naming none.
    "index.query.default_field",
    // Checked on every mapping change (shoal-mapping/src/limits.rs).
    "index.mapping.total_fields.limit",
    "index.mapping.depth.limit",
    "index.mapping.field_name_length.limit",
    // Limits on request parts Shoal refuses outright (`docvalue_fields`, `script_fields`,
    // `rescore`): no request can exceed them, so they hold whatever their value.
    "index.max_docvalue_fields_search",
    "index.max_script_fields",
    "index.max_rescore_window",
    "index.uuid",
    "index.creation_date",
    "index.provided_name",
    "index.version.created",
    "index.version.upgraded",
];
const HONOURED_INDEX_GROUPS: &[&str] = &[
    "index.routing.allocation.include.",
    "index.routing.allocation.exclude.",
    "index.routing.allocation.require.",
];

pub fn honoured_index_setting(key: &str) -> bool {
    in_list(key, HONOURED_INDEX, HONOURED_INDEX_GROUPS)
}

/// Settings OpenSearch registers at run time (not in the built-in list) and Shoal has no use
/// for: recognised, so refused by name rather than called unknown.
const RECOGNISED_GROUPS: &[&str] = &["thread_pool."];

fn in_list(key: &str, exact: &[&str], groups: &[&str]) -> bool {
    exact.contains(&key)
        || groups
            .iter()
            .any(|g| key.starts_with(g) && key.len() > g.len())
}

pub fn honoured_cluster_setting(key: &str) -> bool {
    in_list(key, HONOURED_CLUSTER, HONOURED_CLUSTER_GROUPS)
}

pub fn honoured_node_setting(key: &str) -> bool {
    honoured_cluster_setting(key) || in_list(key, HONOURED_NODE, HONOURED_NODE_GROUPS)
}

/// Whether OpenSearch 2.18 knows `key` as a cluster or node setting.
pub fn recognised_node_setting(key: &str) -> bool {
    registry().get(key).is_some_and(|d| !d.index_scope)
        || RECOGNISED_GROUPS.iter().any(|g| key.starts_with(g))
}

/// A setting OpenSearch has and Shoal would ignore.
pub fn not_supported(key: &str) -> ApiError {
    ApiError::bad_request(format!(
        "setting [{key}] is not supported by Shoal: it is refused rather than stored and ignored"
    ))
}

pub fn unknown_setting(key: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unknown setting [{key}] please check that any required plugins are installed, or check the breaking changes documentation for removed settings"
    ))
}
