//! The coordinating side: shard results merged into one OpenSearch search response.

use std::collections::HashMap;

use serde_json::{json, Map, Value};
use tantivy::DocAddress;

use super::aggs::{render_aggs, LevelFruit, RenderCtx};
use super::request::{SearchRequest, TrackTotalHits};
use super::shard::ShardResult;
use super::sort::{compare_all, sort_values_json};
use super::source::filter_source;
use super::TopHitDoc;
use crate::QueryError;

/// Merges shard results into the `_search` response body.
///
/// `fetch(shard, address)` returns a hit's `_source` (`None` if it has none);
/// `index_name_of_shard(shard)` names the index of a shard (`ShardResult::shard_index`).
pub fn merge_and_render(
    req: &SearchRequest,
    shard_results: Vec<ShardResult>,
    fetch: &mut dyn FnMut(usize, DocAddress) -> Result<Option<Value>, QueryError>,
    index_name_of_shard: &dyn Fn(usize) -> String,
    took_ms: u64,
    total_shards: usize,
) -> Result<Value, QueryError> {
    let successful = shard_results.len();
    let total: u64 = shard_results.iter().map(|r| r.total_hits).sum();
    let timed_out = shard_results.iter().any(|r| r.timed_out);
    let terminated_early = shard_results.iter().any(|r| r.terminated_early);
    let reports_scores = req.sorts_by_score() || req.track_scores;
    let max_score = shard_results
        .iter()
        .filter_map(|r| r.max_score)
        .reduce(f32::max);

    let mut aggs_state: Option<(std::sync::Arc<super::aggs::AggPlan>, LevelFruit, u64)> = None;
    let mut top_hits_docs: HashMap<String, TopHitDoc> = HashMap::new();
    let mut highlights = HashMap::new();
    let mut all_hits = Vec::new();
    for result in shard_results {
        if let Some(plan) = &result.highlight {
            highlights.insert(result.shard_index, plan.clone());
        }
        if let Some(aggs) = result.aggs {
            for (id, doc) in aggs.top_hits_docs {
                top_hits_docs.entry(id).or_insert(doc);
            }
            match &mut aggs_state {
                None => aggs_state = Some((aggs.plan, aggs.fruit, aggs.doc_count)),
                Some((_, fruit, count)) => {
                    fruit.merge(aggs.fruit)?;
                    *count += aggs.doc_count;
                }
            }
        }
        all_hits.extend(result.hits.into_iter().map(|h| (result.shard_index, h)));
    }
    let specs = req.effective_sort();
    all_hits.sort_by(|(sa, a), (sb, b)| {
        compare_all(&a.sort_values, &b.sort_values, &specs)
            .then(sa.cmp(sb))
            .then(a.address.segment_ord.cmp(&b.address.segment_ord))
            .then(a.address.doc_id.cmp(&b.address.doc_id))
    });

    let mut hits = Vec::new();
    for (shard, hit) in all_hits.into_iter().skip(req.from).take(req.size) {
        let highlight = highlights.get(&shard);
        let source = if req.source.fetch || highlight.is_some() {
            fetch(shard, hit.address)?
        } else {
            None
        };
        let mut h = Map::new();
        h.insert("_index".into(), json!(index_name_of_shard(shard)));
        h.insert("_id".into(), json!(hit.id));
        if let Some(routing) = &hit.routing {
            h.insert("_routing".into(), json!(routing));
        }
        if req.version {
            h.insert("_version".into(), json!(hit.version));
        }
        if req.seq_no_primary_term {
            h.insert("_seq_no".into(), json!(hit.seq_no));
            h.insert("_primary_term".into(), json!(hit.primary_term));
        }
        h.insert(
            "_score".into(),
            if reports_scores && hit.score.is_finite() {
                json!(hit.score)
            } else {
                Value::Null
            },
        );
        if let Some(source) = &source {
            if req.source.fetch {
                h.insert("_source".into(), filter_source(source, &req.source));
            }
        }
        if let (Some(plan), Some(source)) = (highlight, &source) {
            if let Some(fragments) = plan.highlight(source) {
                h.insert("highlight".into(), fragments);
            }
        }
        if !req.sort.is_empty() {
            h.insert("sort".into(), sort_values_json(&hit.sort_values));
        }
        hits.push(Value::Object(h));
    }

    let mut hits_obj = Map::new();
    match req.track_total_hits {
        TrackTotalHits::Disabled => {
            if req.total_hits_as_int {
                hits_obj.insert("total".into(), json!(-1));
            }
        }
        tracking => {
            let (value, relation) = match tracking {
                TrackTotalHits::UpTo(limit) if total > limit && req.terminate_after.is_none() => {
                    (limit, "gte")
                }
                _ => (total, "eq"),
            };
            hits_obj.insert(
                "total".into(),
                if req.total_hits_as_int {
                    json!(value)
                } else {
                    json!({"value": value, "relation": relation})
                },
            );
        }
    }
    hits_obj.insert(
        "max_score".into(),
        match max_score {
            Some(s) if reports_scores && s.is_finite() => json!(s),
            _ => Value::Null,
        },
    );
    hits_obj.insert("hits".into(), Value::Array(hits));

    let mut out = Map::new();
    out.insert("took".into(), json!(took_ms));
    out.insert("timed_out".into(), json!(timed_out));
    if req.terminate_after.is_some() {
        out.insert("terminated_early".into(), json!(terminated_early));
    }
    out.insert(
        "_shards".into(),
        json!({"total": total_shards, "successful": successful, "skipped": 0, "failed": total_shards.saturating_sub(successful)}),
    );
    out.insert("hits".into(), Value::Object(hits_obj));
    if req.aggs.is_some() {
        let aggregations = match aggs_state {
            Some((plan, fruit, doc_count)) => {
                let mut rc = RenderCtx {
                    fetch,
                    index_name_of_shard,
                    top_hits_docs: &top_hits_docs,
                    typed_keys: req.typed_keys,
                    buckets: 0,
                };
                render_aggs(&plan, fruit, doc_count, &mut rc)?
            }
            None => json!({}),
        };
        out.insert("aggregations".into(), aggregations);
    }
    Ok(Value::Object(out))
}
