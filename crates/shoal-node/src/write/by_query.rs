//! `_delete_by_query` and `_update_by_query`: writes that read first. The read service finds
//! every match (query phase in `AllHits` mode, and for an update the fetch phase for their
//! sources); each match becomes a write conditional on the seq_no and term it was read at, run
//! through the write coordinator, so a document changed since counts as a version conflict.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};
use shoal_engine::DocRequest;
use shoal_query::search::SearchRequest;
use tantivy::DocAddress;

use crate::documents::{DocWrite, Refresh, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult};
use crate::read::actions::QueryMode;
use crate::read::coordinator::{PlannedShard, QueryOutcome, QueryPhase};
use crate::read::search::{forbid_closed, outcome_checked, SearchScope};
use crate::write::WriteService;

/// What a by-query request asks for, beyond the query.
struct ByQuery {
    update: bool,
    /// `conflicts=proceed`: version conflicts are counted, not reported as failures.
    proceed: bool,
    max_docs: Option<u64>,
    refresh: Refresh,
    /// Matches written per batch (`scroll_size`, 1,000 by default).
    scroll_size: usize,
}

impl ByQuery {
    /// Whether a write's result is a failure the response lists (and that ends the run).
    fn reports(&self, result: &ApiResult<WriteOutcome>) -> bool {
        match result {
            Ok(_) => false,
            Err(e) => e.status != 409 || !self.proceed,
        }
    }
}

/// The matches a by-query read found, with their sources when it updates.
type Matches = (QueryOutcome, HashMap<(usize, DocAddress), Option<Bytes>>);

impl WriteService {
    /// `_delete_by_query` and `_update_by_query` (re-index in place, no scripts).
    pub fn by_query(
        &self,
        indices: &str,
        body: &Value,
        params: &HashMap<String, String>,
        update: bool,
    ) -> ApiResult<Value> {
        let started = Instant::now();
        let request = ByQuery::parse(body, params, update)?;
        let scope = SearchScope::from_params(params)?;
        let services = forbid_closed(self.core.resolve(indices, scope.options)?, scope.options)?;
        // Point-in-time view of the matches, as OpenSearch's scroll-based implementation.
        self.broadcast.broadcast_refresh(&services)?;
        let shards = self.reads.search_shards(indices, &scope)?;
        let matches = self.read_matches(&shards, body, params, &scope, update)?;
        let mut writes = writes_for(&shards, matches, update);
        if let Some(max) = request.max_docs {
            writes.truncate(max as usize);
        }
        let total = writes.len();
        let (results, batches) = self.write_in_batches(&request, writes);
        if request.refresh == Refresh::True {
            self.broadcast.broadcast_refresh(&services)?;
        }
        Ok(render(&request, total, results, batches, started))
    }

    /// Runs the writes `scroll_size` at a time, as OpenSearch's scroll batches; a batch with a
    /// failure it reports (any failure, or a version conflict unless `conflicts=proceed`)
    /// is the last, as OpenSearch aborts there. Returns the results and the batches run.
    fn write_in_batches(
        &self,
        request: &ByQuery,
        writes: Vec<DocWrite>,
    ) -> (Vec<ApiResult<WriteOutcome>>, usize) {
        let (mut results, mut batches) = (Vec::with_capacity(writes.len()), 0);
        let mut writes = writes.into_iter().peekable();
        while writes.peek().is_some() {
            let batch: Vec<DocWrite> = writes.by_ref().take(request.scroll_size).collect();
            let outcomes = self.execute_writes(batch, &WriteOptions::default());
            batches += 1;
            let abort = outcomes.iter().any(|r| request.reports(r));
            results.extend(outcomes);
            if abort {
                break;
            }
        }
        (results, batches)
    }

    /// Every match of the query, no partial results; for an update, with its source.
    fn read_matches(
        &self,
        shards: &[PlannedShard],
        body: &Value,
        params: &HashMap<String, String>,
        scope: &SearchScope,
        update: bool,
    ) -> ApiResult<Matches> {
        let mut query_body = serde_json::Map::new();
        if let Some(query) = body.get("query") {
            query_body.insert("query".into(), query.clone());
        }
        let query_body = Value::Object(query_body);
        let parsed = Arc::new(SearchRequest::parse(&query_body, params)?);
        let phase = QueryPhase::first_page(&query_body, params, parsed, QueryMode::AllHits, update);
        let mut whole = scope.clone();
        whole.allow_partial_results = false;
        self.reads.query_then_fetch(shards, &phase, |_, outcome| {
            let outcome = outcome_checked(outcome, &whole)?;
            let sources = match update {
                true => self
                    .reads
                    .fetch_phase(&outcome.readers, &every_hit(&outcome), false)?,
                false => HashMap::new(),
            };
            Ok((outcome, sources))
        })
    }
}

impl ByQuery {
    fn parse(body: &Value, params: &HashMap<String, String>, update: bool) -> ApiResult<ByQuery> {
        if body.get("script").is_some() {
            return Err(ApiError::bad_request("scripts are not supported by Shoal yet: [_update_by_query] re-indexes documents as they are"));
        }
        if !update && body.get("query").is_none() && params.get("q").is_none() {
            return Err(ApiError::action_request_validation(&[
                "query is missing".to_string()
            ]));
        }
        let conflicts = params
            .get("conflicts")
            .map(String::as_str)
            .or_else(|| body.get("conflicts").and_then(Value::as_str));
        let max_docs = body
            .get("max_docs")
            .and_then(Value::as_u64)
            .or_else(|| params.get("max_docs").and_then(|v| v.parse().ok()));
        let refresh = if params
            .get("refresh")
            .is_some_and(|r| r.is_empty() || r == "true")
        {
            Refresh::True
        } else {
            Refresh::False
        };
        let scroll_size = match params.get("scroll_size") {
            None => 1000,
            Some(text) => match text.parse::<i64>() {
                Ok(n) if n > 0 => n as usize,
                Ok(n) => {
                    return Err(ApiError::action_request_validation(&[format!(
                        "[size] cannot be [{n}] in a scroll context"
                    )]))
                }
                Err(_) => {
                    return Err(ApiError::bad_request(format!(
                        "Failed to parse int parameter [scroll_size] with value [{text}]"
                    )))
                }
            },
        };
        Ok(ByQuery {
            update,
            proceed: conflicts == Some("proceed"),
            max_docs,
            refresh,
            scroll_size,
        })
    }
}

/// One write per match, conditional on the seq_no and term the match was read at: a
/// re-index of its source (update) or a delete (delete, or an update whose source is gone).
fn writes_for(shards: &[PlannedShard], matches: Matches, update: bool) -> Vec<DocWrite> {
    let (outcome, mut sources) = matches;
    let mut writes: Vec<DocWrite> = Vec::new();
    for result in &outcome.results {
        let index = shards[result.shard_index].service.name();
        for hit in &result.hits {
            let request = DocRequest {
                if_seq_no: Some(hit.seq_no),
                if_primary_term: Some(hit.primary_term),
                ..DocRequest::default()
            };
            let source = sources
                .remove(&(result.shard_index, hit.address))
                .flatten()
                .map(|b| b.to_vec());
            writes.push(match source {
                Some(source) if update => DocWrite::Index {
                    index: index.clone(),
                    id: Some(hit.id.clone()),
                    routing: hit.routing.clone(),
                    source,
                    request,
                },
                _ => DocWrite::Delete {
                    index: index.clone(),
                    id: hit.id.clone(),
                    routing: hit.routing.clone(),
                    request,
                },
            });
        }
    }
    writes
}

/// OpenSearch's by-query response: counts, conflicts and failures of the writes.
fn render(
    request: &ByQuery,
    total: usize,
    results: Vec<ApiResult<WriteOutcome>>,
    batches: usize,
    started: Instant,
) -> Value {
    let (mut done, mut conflicts, mut failures) = (0u64, 0u64, Vec::new());
    for result in &results {
        let Err(e) = result else {
            done += 1;
            continue;
        };
        let conflict = e.status == 409;
        conflicts += u64::from(conflict);
        if !request.reports(result) {
            continue;
        }
        failures.push(match conflict {
            true => json!({"index": e.extra.get("index"), "id": e.reason.split(']').next().map(|s| s.trim_start_matches('[')), "cause": e.to_cause_json(), "status": 409}),
            false => json!({"cause": e.to_cause_json(), "status": e.status}),
        });
    }
    let update = request.update;
    let mut response = json!({
        "took": started.elapsed().as_millis() as u64,
        "timed_out": false,
        "total": total,
    });
    let map = response.as_object_mut().expect("object");
    map.insert("updated".into(), json!(if update { done } else { 0 }));
    map.insert("created".into(), json!(0));
    map.insert("deleted".into(), json!(if update { 0 } else { done }));
    map.insert("batches".into(), json!(batches));
    map.insert("version_conflicts".into(), json!(conflicts));
    map.insert("noops".into(), json!(0));
    map.insert("retries".into(), json!({"bulk": 0, "search": 0}));
    map.insert("throttled_millis".into(), json!(0));
    map.insert("requests_per_second".into(), json!(-1.0));
    map.insert("throttled_until_millis".into(), json!(0));
    map.insert("failures".into(), Value::Array(failures));
    response
}

/// Every hit of a query phase, as the fetch phase addresses them.
fn every_hit(outcome: &QueryOutcome) -> Vec<(usize, DocAddress)> {
    outcome
        .results
        .iter()
        .flat_map(|r| r.hits.iter().map(move |h| (r.shard_index, h.address)))
        .collect()
}
