//! The coordinating side: shard results merged into one OpenSearch search response.
//!
//! In-process, [`merge_and_render`] fetches what it renders through a callback. Across nodes,
//! the coordinator first asks [`select_page`] which documents that will be, fetches them
//! remotely (the fetch phase), then calls [`merge_and_render`] with a callback that reads the
//! prefetched documents.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{json, Map, Value};
use tantivy::DocAddress;

use super::aggs::{render_aggs, RenderCtx};
use super::highlight::HighlightPlan;
use super::request::{SearchRequest, TrackTotalHits};
use super::shard::{ShardAggs, ShardHit, ShardResult};
use super::sort::{compare_all, sort_values_json, SortSpec};
use super::source::filter_source;
use crate::QueryError;

/// Fetches a document's `_source` by shard index and address (`None` if it has none).
type Fetch<'a> = dyn FnMut(usize, DocAddress) -> Result<Option<Value>, QueryError> + 'a;

/// Merges shard results into the `_search` response body.
///
/// `fetch(shard, address)` returns a hit's `_source` (`None` if it has none);
/// `index_name_of_shard(shard)` names the index of a shard (`ShardResult::shard_index`).
/// It calls `fetch` for exactly the documents [`select_page`] returns.
pub fn merge_and_render(
    req: &SearchRequest,
    mut shard_results: Vec<ShardResult>,
    fetch: &mut Fetch<'_>,
    index_name_of_shard: &dyn Fn(usize) -> String,
    took_ms: u64,
    total_shards: usize,
) -> Result<Value, QueryError> {
    let aggs = merge_aggs(shard_results.iter_mut().filter_map(|r| r.aggs.take()))?;
    let highlights = highlight_plans(&shard_results);
    let mut hits = Vec::new();
    for (shard, hit) in page(req, &shard_results) {
        let highlight = highlights.get(&shard).copied();
        hits.push(render_hit(
            req,
            shard,
            hit,
            highlight,
            fetch,
            index_name_of_shard,
        )?);
    }

    let timed_out = shard_results.iter().any(|r| r.timed_out);
    let successful = shard_results.len();
    let mut out = Map::new();
    out.insert("took".into(), json!(took_ms));
    out.insert("timed_out".into(), json!(timed_out));
    if req.terminate_after.is_some() {
        let terminated_early = shard_results.iter().any(|r| r.terminated_early);
        out.insert("terminated_early".into(), json!(terminated_early));
    }
    out.insert(
        "_shards".into(),
        json!({"total": total_shards, "successful": successful, "skipped": 0, "failed": total_shards.saturating_sub(successful)}),
    );
    out.insert("hits".into(), hits_object(req, &shard_results, hits));
    if req.aggs.is_some() {
        let aggregations = match aggs {
            Some(aggs) => render_merged_aggs(aggs, fetch, index_name_of_shard, req)?,
            None => json!({}),
        };
        out.insert("aggregations".into(), aggregations);
    }
    Ok(Value::Object(out))
}

/// The documents whose `_source` [`merge_and_render`] will fetch for these shard results:
/// the hits of the requested page (when `_source` or highlighting needs them) and the
/// `top_hits` documents the rendered buckets show. Each `(shard_index, address)` appears
/// once, in no particular order; a coordinator fetches them from the nodes that produced
/// the results, then has `merge_and_render`'s `fetch` read from what it got.
///
/// Hits are only sorted here. With `top_hits`, which documents show depends on the merged
/// buckets, so the aggregations are merged and rendered once more, without sources.
pub fn select_page(req: &SearchRequest, shard_results: &[ShardResult]) -> Vec<(usize, DocAddress)> {
    let highlights = highlight_plans(shard_results);
    let mut docs: Vec<(usize, DocAddress)> = page(req, shard_results)
        .into_iter()
        .filter(|(shard, _)| needs_source(req, highlights.contains_key(shard)))
        .map(|(shard, hit)| (shard, hit.address))
        .collect();
    if req.aggs.is_some() {
        docs.extend(top_hits_docs(req, shard_results));
    }
    docs.sort_unstable();
    docs.dedup();
    docs
}

/// Whether a page hit's `_source` is read: to return it, or to highlight it.
fn needs_source(req: &SearchRequest, highlighted: bool) -> bool {
    req.source.fetch || highlighted
}

/// The highlight plan of each shard that has one.
fn highlight_plans(shard_results: &[ShardResult]) -> HashMap<usize, &HighlightPlan> {
    shard_results
        .iter()
        .filter_map(|r| Some((r.shard_index, r.highlight.as_deref()?)))
        .collect()
}

/// The hits of the requested page, best first, with the index of their shard.
fn page<'a>(req: &SearchRequest, shard_results: &'a [ShardResult]) -> Vec<(usize, &'a ShardHit)> {
    let specs = req.effective_sort();
    let mut all: Vec<(usize, &ShardHit)> = shard_results
        .iter()
        .flat_map(|r| r.hits.iter().map(move |h| (r.shard_index, h)))
        .collect();
    all.sort_by(|a, b| compare_hits(&specs, *a, *b));
    all.into_iter().skip(req.from).take(req.size).collect()
}

/// The merged order: the sort values, then shard, segment and document (as OpenSearch breaks
/// ties by shard then doc).
fn compare_hits(
    specs: &[SortSpec],
    (sa, a): (usize, &ShardHit),
    (sb, b): (usize, &ShardHit),
) -> Ordering {
    compare_all(&a.sort_values, &b.sort_values, specs)
        .then(sa.cmp(&sb))
        .then(a.address.segment_ord.cmp(&b.address.segment_ord))
        .then(a.address.doc_id.cmp(&b.address.doc_id))
}

fn render_hit(
    req: &SearchRequest,
    shard: usize,
    hit: &ShardHit,
    highlight: Option<&HighlightPlan>,
    fetch: &mut Fetch<'_>,
    index_name_of_shard: &dyn Fn(usize) -> String,
) -> Result<Value, QueryError> {
    let source = if needs_source(req, highlight.is_some()) {
        fetch(shard, hit.address)?
    } else {
        None
    };
    let reports_scores = req.sorts_by_score() || req.track_scores;
    let mut h = Map::new();
    h.insert("_index".into(), json!(index_name_of_shard(shard)));
    if !req.hide_id {
        h.insert("_id".into(), json!(hit.id));
        if let Some(routing) = &hit.routing {
            h.insert("_routing".into(), json!(routing));
        }
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
    Ok(Value::Object(h))
}

/// The `hits` object: total, max score and the rendered page.
fn hits_object(req: &SearchRequest, shard_results: &[ShardResult], hits: Vec<Value>) -> Value {
    let total: u64 = shard_results.iter().map(|r| r.total_hits).sum();
    let reports_scores = req.sorts_by_score() || req.track_scores;
    let max_score = shard_results
        .iter()
        .filter_map(|r| r.max_score)
        .reduce(f32::max);
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
    Value::Object(hits_obj)
}

/// Merges the shards' aggregations into the first one's (all shards share one plan); for a
/// `top_hits` document found by several shards, the first shard's copy is kept.
fn merge_aggs(
    shard_aggs: impl Iterator<Item = ShardAggs>,
) -> Result<Option<ShardAggs>, QueryError> {
    let mut merged: Option<ShardAggs> = None;
    for aggs in shard_aggs {
        let Some(into) = &mut merged else {
            merged = Some(aggs);
            continue;
        };
        for (id, doc) in aggs.top_hits_docs {
            into.top_hits_docs.entry(id).or_insert(doc);
        }
        into.fruit.merge(aggs.fruit)?;
        into.doc_count += aggs.doc_count;
    }
    Ok(merged)
}

fn render_merged_aggs(
    aggs: ShardAggs,
    fetch: &mut Fetch<'_>,
    index_name_of_shard: &dyn Fn(usize) -> String,
    req: &SearchRequest,
) -> Result<Value, QueryError> {
    let ShardAggs {
        plan,
        fruit,
        doc_count,
        top_hits_docs,
    } = aggs;
    let mut rc = RenderCtx {
        fetch,
        index_name_of_shard,
        top_hits_docs: &top_hits_docs,
        typed_keys: req.typed_keys,
        buckets: 0,
        shards: 0,
        max_buckets: req.max_buckets,
    };
    render_aggs(&plan, fruit, doc_count, &mut rc)
}

/// The `top_hits` documents rendering fetches. What rendering shows never depends on what
/// `fetch` returns, so a render whose fetch only records the addresses finds exactly them.
fn top_hits_docs(req: &SearchRequest, shard_results: &[ShardResult]) -> Vec<(usize, DocAddress)> {
    let mut all_aggs = shard_results.iter().filter_map(|r| r.aggs.as_ref());
    if !all_aggs.next().is_some_and(|first| first.plan.has_top_hits) {
        return Vec::new();
    }
    let cloned = shard_results.iter().filter_map(|r| r.aggs.clone());
    let Ok(Some(merged)) = merge_aggs(cloned) else {
        return Vec::new();
    };
    let mut docs = Vec::new();
    let mut record = |shard: usize, address: DocAddress| {
        docs.push((shard, address));
        Ok(None)
    };
    // An error here is merge_and_render's error too, after the same fetches.
    let _ = render_merged_aggs(merged, &mut record, &|_| String::new(), req);
    docs
}
