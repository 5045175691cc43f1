//! `GET /_segments` and `GET /{index}/_segments`: the segments of every active copy, under its
//! shard number with its routing, in the shape of OpenSearch's indices segments API. The
//! same per-copy lists back `_cat/segments`, so both views always agree.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use shoal_node::admin::ClusterView;
use shoal_node::{ApiError, ApiResult, Node, ResolveOptions};

use crate::request::Params;
use crate::response::{ok, RestResult};
use crate::router::blocking;

/// `GET [/{index}]/_segments`.
pub async fn segments(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let path = match &index {
        Some(index) => format!("/{index}/_segments"),
        None => "/_segments".to_string(),
    };
    let opts = crate::indices::resolving(&params, &path, &["verbose"], ResolveOptions::search())?;
    // OpenSearch's `verbose` adds Lucene's per-segment memory tree; Shoal has no such tree,
    // so asking for it is refused rather than answered without it.
    if params.bool_or("verbose", false)? {
        return Err(ApiError::bad_request(
            "[verbose] is not supported: Shoal segments have no per-segment memory breakdown; \
             leave it out or set it to false",
        )
        .into());
    }
    let body = blocking(move || -> ApiResult<Value> {
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), opts)?;
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        node.core()
            .blocks()
            .check_global_then_indices(shoal_node::blocks::BlockLevel::MetadataRead, &names)?;
        let state = node.admin.view();
        let copies = node.broadcast.copy_segments(&services);
        let total: usize = names.iter().map(|name| copy_count(&state, name)).sum();
        let mut indices = Map::new();
        let mut successful = 0;
        for name in &names {
            let shards = shard_entries(&state, name, &copies);
            successful += shards
                .values()
                .filter_map(Value::as_array)
                .map(Vec::len)
                .sum::<usize>();
            indices.insert(name.clone(), json!({ "shards": shards }));
        }
        Ok(json!({
            "_shards": {"total": total, "successful": successful, "failed": 0},
            "indices": indices,
        }))
    })
    .await?;
    ok(body, &params)
}

/// Every copy the routing table has for `index`, assigned or not (OpenSearch's total).
fn copy_count(state: &ClusterView, index: &str) -> usize {
    state.shard_copies(index).iter().map(Vec::len).sum()
}

/// `{"0": [copy, …], …}` for the copies of `index` that answered.
fn shard_entries(
    state: &ClusterView,
    index: &str,
    copies: &shoal_node::broadcast::CopySegments,
) -> Map<String, Value> {
    let mut shards = Map::new();
    for ((name, shard, node_id), segments) in copies {
        if name != index {
            continue;
        }
        let Some(routing) = state
            .copies(index, *shard as u32)
            .iter()
            .find(|c| c.node.as_deref() == Some(node_id.as_str()))
            .cloned()
        else {
            continue;
        };
        let entry = json!({
            "routing": {"state": routing.state.as_str(), "primary": routing.primary, "node": node_id},
            "num_committed_segments": segments.iter().filter(|s| s.committed).count(),
            "num_search_segments": segments.iter().filter(|s| s.searchable).count(),
            "segments": segment_map(segments),
        });
        if let Value::Array(list) = shards.entry(shard.to_string()).or_insert_with(|| json!([])) {
            list.push(entry);
        }
    }
    shards
}

fn segment_map(segments: &[shoal_engine::SegmentInfo]) -> Map<String, Value> {
    segments
        .iter()
        .map(|s| {
            let segment = json!({
                "generation": s.generation,
                "num_docs": s.docs_count,
                "deleted_docs": s.docs_deleted,
                "size_in_bytes": s.size_in_bytes,
                "memory_in_bytes": 0,
                "committed": s.committed,
                "search": s.searchable,
                "version": crate::cat::SEGMENT_VERSION,
                "compound": false,
                "attributes": {},
            });
            (s.name.clone(), segment)
        })
        .collect()
}
