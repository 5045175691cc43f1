//! Index and node statistics in OpenSearch's `_stats` shapes (health comes from the cluster state).

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use shoal_engine::EngineStats;

use crate::index_service::{IndexService, SearchCounters};
use crate::metadata::IndexState;

/// Sums engine stats of the shard copies of an index open on this node.
pub fn sum_engine_stats(service: &IndexService) -> EngineStats {
    let local: Vec<EngineStats> = service.shards().iter().map(|e| e.stats()).collect();
    sum_stats(&local)
}

/// The `primaries` and `total` stats of an index, from the statistics of its copies
/// cluster-wide (`BroadcastService::copy_stats`); the routing table says which copies are primaries.
pub fn index_copy_totals(
    state: &crate::admin::ClusterView,
    index: &str,
    copies: &crate::broadcast::CopyStats,
) -> (EngineStats, EngineStats) {
    let mut primaries = Vec::new();
    let mut total = Vec::new();
    for ((name, shard, node), stats) in copies {
        if name != index {
            continue;
        }
        let primary = state
            .copies(index, *shard as u32)
            .iter()
            .any(|c| c.primary && c.node.as_deref() == Some(node.as_str()));
        if primary {
            primaries.push(stats);
        }
        total.push(stats);
    }
    (sum_stats(primaries), sum_stats(total))
}

/// Sums shard statistics.
pub fn sum_stats<'a>(shards: impl IntoIterator<Item = &'a EngineStats>) -> EngineStats {
    let mut total = EngineStats::default();
    for s in shards {
        total.docs_count += s.docs_count;
        total.docs_deleted += s.docs_deleted;
        total.store_size_in_bytes += s.store_size_in_bytes;
        total.index_total += s.index_total;
        total.index_time_in_millis += s.index_time_in_millis;
        total.index_current += s.index_current;
        total.index_failed += s.index_failed;
        total.delete_total += s.delete_total;
        total.delete_time_in_millis += s.delete_time_in_millis;
        total.noop_update_total += s.noop_update_total;
        total.refresh_total += s.refresh_total;
        total.refresh_time_in_millis += s.refresh_time_in_millis;
        total.external_refresh_total += s.external_refresh_total;
        total.flush_total += s.flush_total;
        total.flush_periodic += s.flush_periodic;
        total.flush_time_in_millis += s.flush_time_in_millis;
        total.merge_total += s.merge_total;
        total.merge_time_in_millis += s.merge_time_in_millis;
        total.merge_docs += s.merge_docs;
        total.merge_size_in_bytes += s.merge_size_in_bytes;
        total.merge_current += s.merge_current;
        total.segments_count += s.segments_count;
        total.version_map_memory_in_bytes += s.version_map_memory_in_bytes;
        total.get_total += s.get_total;
        total.get_exists += s.get_exists;
        for (extension, bytes) in &s.segment_file_sizes {
            *total
                .segment_file_sizes
                .entry(extension.clone())
                .or_insert(0) += bytes;
        }
        total.recovery.add(&s.recovery);
        total.translog.operations += s.translog.operations;
        total.translog.size_in_bytes += s.translog.size_in_bytes;
        total.translog.uncommitted_operations += s.translog.uncommitted_operations;
        total.translog.uncommitted_size_in_bytes += s.translog.uncommitted_size_in_bytes;
        total.translog.earliest_last_modified_age_ms = total
            .translog
            .earliest_last_modified_age_ms
            .max(s.translog.earliest_last_modified_age_ms);
    }
    total
}

/// The `primaries`/`total` section of `_stats` for one index.
pub fn stats_section(service: &IndexService, s: &EngineStats) -> Value {
    section(s, &service.search)
}

/// Every `_stats` section with its counts at zero: what a node without copies reports.
pub fn zero_section() -> Value {
    section(&EngineStats::default(), &SearchCounters::default())
}

fn section(s: &EngineStats, search: &SearchCounters) -> Value {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "docs": {"count": s.docs_count, "deleted": s.docs_deleted},
        "store": {"size_in_bytes": s.store_size_in_bytes, "reserved_in_bytes": 0},
        "indexing": {
            "index_total": s.index_total, "index_time_in_millis": s.index_time_in_millis, "index_current": s.index_current,
            "index_failed": s.index_failed, "delete_total": s.delete_total, "delete_time_in_millis": s.delete_time_in_millis,
            "delete_current": 0, "noop_update_total": s.noop_update_total, "is_throttled": false, "throttle_time_in_millis": 0
        },
        "get": {"total": s.get_total, "time_in_millis": 0, "exists_total": s.get_exists, "exists_time_in_millis": 0,
                "missing_total": s.get_total - s.get_exists.min(s.get_total), "missing_time_in_millis": 0, "current": 0},
        "search": {
            "open_contexts": load(&search.scroll_current), "query_total": load(&search.query_total),
            "query_time_in_millis": load(&search.query_time_nanos) / 1_000_000, "query_current": load(&search.query_current),
            "fetch_total": load(&search.fetch_total), "fetch_time_in_millis": load(&search.fetch_time_nanos) / 1_000_000, "fetch_current": 0,
            "scroll_total": load(&search.scroll_total), "scroll_time_in_millis": load(&search.scroll_time_nanos) / 1_000_000,
            "scroll_current": load(&search.scroll_current), "suggest_total": 0, "suggest_time_in_millis": 0, "suggest_current": 0
        },
        "merges": {"current": s.merge_current, "current_docs": 0, "current_size_in_bytes": 0, "total": s.merge_total,
                   "total_time_in_millis": s.merge_time_in_millis, "total_docs": s.merge_docs, "total_size_in_bytes": s.merge_size_in_bytes,
                   "total_stopped_time_in_millis": 0, "total_throttled_time_in_millis": 0, "total_auto_throttle_in_bytes": 0},
        "refresh": {"total": s.refresh_total, "total_time_in_millis": s.refresh_time_in_millis, "external_total": s.external_refresh_total,
                    "external_total_time_in_millis": s.refresh_time_in_millis, "listeners": 0},
        "flush": {"total": s.flush_total, "periodic": s.flush_periodic, "total_time_in_millis": s.flush_time_in_millis},
        "recovery": {"current_as_source": s.recovery.current_as_source, "current_as_target": s.recovery.current_as_target,
                     "throttle_time_in_millis": s.recovery.throttle_time_in_millis},
        "translog": {"operations": s.translog.operations, "size_in_bytes": s.translog.size_in_bytes,
                     "uncommitted_operations": s.translog.uncommitted_operations, "uncommitted_size_in_bytes": s.translog.uncommitted_size_in_bytes,
                     "earliest_last_modified_age": s.translog.earliest_last_modified_age_ms},
        "segments": {"count": s.segments_count, "memory_in_bytes": 0, "terms_memory_in_bytes": 0, "stored_fields_memory_in_bytes": 0,
                     "term_vectors_memory_in_bytes": 0, "norms_memory_in_bytes": 0, "points_memory_in_bytes": 0,
                     "doc_values_memory_in_bytes": 0, "index_writer_memory_in_bytes": 0,
                     "version_map_memory_in_bytes": s.version_map_memory_in_bytes, "fixed_bit_set_memory_in_bytes": 0,
                     "max_unsafe_auto_id_timestamp": -1, "file_sizes": file_sizes(s)},
    })
}

/// `segments.file_sizes`: bytes by segment file extension, with what each holds.
fn file_sizes(s: &EngineStats) -> Value {
    let sizes: serde_json::Map<String, Value> = s
        .segment_file_sizes
        .iter()
        .map(|(extension, bytes)| {
            let description = shoal_engine::segment_file_description(extension);
            (
                extension.clone(),
                json!({"size_in_bytes": bytes, "description": description}),
            )
        })
        .collect();
    Value::Object(sizes)
}

/// Adds two `_stats` sections (numbers summed recursively).
pub fn add_sections(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) => add_sections(existing, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (a @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                *a = json!(x + y);
            } else if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
                *a = json!(x.max(y));
            }
        }
        _ => {}
    }
}

pub fn is_open(service: &IndexService) -> bool {
    service.with_meta(|m| m.state == IndexState::Open)
}
