//! Search coordination: resolve indices, plan which copy of every shard answers, run the
//! query and fetch phases (see [`crate::read_coordinator`]), merge and render; `_count`,
//! scroll contexts, and delete/update by query.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};
use shoal_engine::DocRequest;
use shoal_query::search::{merge_and_render, select_page, SearchRequest};
use shoal_query::{dsl, QueryContext, QueryError};

use crate::copies::{parse_preference, Preference};
use crate::documents::{DocWrite, Refresh, WriteOptions};
use crate::error::{bool_param, ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::node::{now_millis, Node, ResolveOptions};
use crate::read_coordinator::{
    PhaseError, PlannedShard, QueryOutcome, QueryPhase, Reader, ShardFailure, FETCH_KEEP_ALIVE,
};
use crate::settings::parse_time;
use crate::shard_search::QueryMode;

/// An open scroll: the shards, the copies holding its contexts, the request, and where the
/// next page starts.
pub struct ScrollContext {
    shards: Vec<PlannedShard>,
    readers: Vec<Option<Reader>>,
    body: Value,
    params: HashMap<String, String>,
    request: Arc<SearchRequest>,
    next_from: usize,
    keep_alive: Duration,
    expires: Instant,
}

/// A scroll counts as current on its indices (`scroll_current`, `open_contexts`) while it
/// lives: cleared, expired or dropped with a closed index.
impl Drop for ScrollContext {
    fn drop(&mut self) {
        for shard in &self.shards {
            let current = &shard.service.search.scroll_current;
            let _ =
                current.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }
}

/// Open scroll contexts by id.
#[derive(Default)]
pub struct ScrollRegistry {
    contexts: Mutex<HashMap<String, Arc<Mutex<ScrollContext>>>>,
}

impl ScrollRegistry {
    fn insert(&self, context: ScrollContext) -> String {
        self.expire();
        let id = scroll_id();
        self.contexts
            .lock()
            .insert(id.clone(), Arc::new(Mutex::new(context)));
        id
    }

    fn get(&self, id: &str) -> Option<Arc<Mutex<ScrollContext>>> {
        self.expire();
        self.contexts.lock().get(id).cloned()
    }

    fn remove(&self, id: &str) -> Option<Arc<Mutex<ScrollContext>>> {
        self.contexts.lock().remove(id)
    }

    fn clear(&self) -> Vec<Arc<Mutex<ScrollContext>>> {
        self.contexts.lock().drain().map(|(_, c)| c).collect()
    }

    /// Removes the scrolls that read an index (it is closing: its contexts go with it).
    pub fn remove_index(&self, uuid: &str) -> Vec<Arc<Mutex<ScrollContext>>> {
        let mut removed = Vec::new();
        self.contexts.lock().retain(|_, c| {
            let reads_it = c.lock().shards.iter().any(|s| s.service.uuid() == uuid);
            if reads_it {
                removed.push(c.clone());
            }
            !reads_it
        });
        removed
    }

    /// Drops contexts whose keep-alive elapsed (their shard contexts expire alike).
    pub fn expire(&self) {
        let now = Instant::now();
        self.contexts.lock().retain(|_, c| c.lock().expires > now);
    }

    pub fn open_count(&self) -> usize {
        self.contexts.lock().len()
    }
}

fn scroll_id() -> String {
    use base64::Engine as _;
    let raw: [u8; 24] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Search parameters that select shards and copies rather than shape the result.
#[derive(Debug, Clone, Default)]
pub struct SearchScope {
    pub routing: Option<String>,
    /// `preference=_shards:0,2`: only these shard numbers.
    pub only_shards: Option<Vec<usize>>,
    pub preference: Preference,
    pub allow_partial_results: bool,
    pub options: ResolveOptions,
}

impl SearchScope {
    pub fn from_params(params: &HashMap<String, String>) -> ApiResult<SearchScope> {
        let (preference, only_shards) =
            parse_preference(params.get("preference").map(String::as_str))?;
        Ok(SearchScope {
            routing: params.get("routing").cloned(),
            only_shards,
            preference,
            allow_partial_results: bool_param(params, "allow_partial_search_results", true)?,
            options: ResolveOptions {
                ignore_unavailable: bool_param(params, "ignore_unavailable", false)?,
                allow_no_indices: bool_param(params, "allow_no_indices", true)?,
                include_closed: false,
                expand_hidden: false,
            }
            .with_expand_wildcards(params.get("expand_wildcards").map(String::as_str)),
        })
    }
}

/// Searches forbid closed indices as OpenSearch's search indices options do: a wildcard may
/// expand to a closed index (`expand_wildcards=all|closed`), which then fails the request
/// with `index_closed_exception`, or is skipped under `ignore_unavailable`. (Searching a closed
/// index's shards would answer a 503 for missing shards.)
fn forbid_closed(
    services: Vec<Arc<IndexService>>,
    options: ResolveOptions,
) -> ApiResult<Vec<Arc<IndexService>>> {
    if !options.ignore_unavailable {
        if let Some(closed) = services.iter().find(|s| !s.is_open()) {
            return Err(ApiError::index_closed(&closed.name(), &closed.uuid()));
        }
    }
    Ok(services.into_iter().filter(|s| s.is_open()).collect())
}

pub(crate) const MAX_BUCKETS_SETTING: &str = "search.max_buckets";

/// Refuses a `search.max_buckets` that is not an integer from 0 to 2^31-1, as OpenSearch.
pub(crate) fn validate_max_buckets(key: &str, value: &Value) -> ApiResult<()> {
    if key != MAX_BUCKETS_SETTING || value.is_null() {
        return Ok(());
    }
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match text.parse::<i64>() {
        Ok(n) if (0..=i32::MAX as i64).contains(&n) => Ok(()),
        Ok(n) if n < 0 => Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be >= 0"
        ))),
        _ => Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}]"
        ))),
    }
}

impl Node {
    /// The shards a search reads and the copies it may read them from.
    pub fn search_shards(
        &self,
        indices: &str,
        scope: &SearchScope,
    ) -> ApiResult<Vec<PlannedShard>> {
        let services = forbid_closed(self.resolve(indices, scope.options)?, scope.options)?;
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        self.blocks()
            .check_global_then_indices(crate::blocks::BlockLevel::Read, &names)?;
        self.plan_shards(
            &services,
            scope.routing.as_deref(),
            scope.only_shards.as_deref(),
            &scope.preference,
        )
    }

    /// `search.max_buckets` (validated when set).
    fn max_buckets(&self) -> usize {
        self.cluster_setting(MAX_BUCKETS_SETTING)
            .and_then(|v| v.parse().ok())
            .unwrap_or(shoal_query::search::MAX_BUCKETS)
    }

    /// `_search`.
    pub fn search(
        &self,
        indices: &str,
        body: &Value,
        params: &HashMap<String, String>,
    ) -> ApiResult<Value> {
        let started = Instant::now();
        let scope = SearchScope::from_params(params)?;
        let mut request = SearchRequest::parse(body, params)?;
        request.max_buckets = self.max_buckets();
        let request = Arc::new(request);
        let shards = self.search_shards(indices, &scope)?;
        let scroll = match params.get("scroll") {
            Some(keep_alive) => Some(parse_keep_alive(keep_alive)?),
            None => None,
        };
        if scroll.is_none() {
            for shard in &shards {
                request.check_result_window(
                    shard
                        .service
                        .with_meta(|m| m.settings().max_result_window()),
                )?;
            }
        }
        let needs_fetch = scroll.is_some() || request.size > 0 || request.aggs.is_some();
        let phase = QueryPhase {
            body,
            params,
            parsed: request.clone(),
            mode: QueryMode::Search,
            keep_alive: scroll.unwrap_or(if needs_fetch {
                FETCH_KEEP_ALIVE
            } else {
                Duration::ZERO
            }),
            readers: None,
            from: None,
            now: now_millis(),
        };
        let mut response = self.query_then_fetch(&shards, &phase, |shards, outcome| {
            let outcome = outcome_checked(outcome, &scope)?;
            self.render_search(shards, &request, outcome, scroll.is_some(), started)
        })?;
        let Some(keep_alive) = scroll else {
            return Ok(response.0);
        };
        for shard in &shards {
            shard
                .service
                .search
                .scroll_current
                .fetch_add(1, Ordering::Relaxed);
        }
        let id = self.scrolls.insert(ScrollContext {
            shards,
            readers: std::mem::take(&mut response.1),
            body: body.clone(),
            params: params.clone(),
            next_from: request.from + request.size,
            request,
            keep_alive,
            expires: Instant::now() + keep_alive,
        });
        let mut body = response.0;
        body.as_object_mut()
            .expect("object")
            .insert("_scroll_id".into(), json!(id));
        move_scroll_id_first(&mut body);
        Ok(body)
    }

    /// Fetches the page's documents and renders the response; returns the readers too (a
    /// scroll keeps their contexts).
    fn render_search(
        &self,
        shards: &[PlannedShard],
        request: &SearchRequest,
        outcome: QueryOutcome,
        keep_contexts: bool,
        started: Instant,
    ) -> Result<(Value, Vec<Option<Reader>>), PhaseError> {
        let docs = select_page(request, &outcome.results);
        let sources = self.fetch_phase(&outcome.readers, &docs, keep_contexts)?;
        let mut fetch =
            |shard: usize, address: tantivy::DocAddress| -> Result<Option<Value>, QueryError> {
                Ok(sources
                    .get(&(shard, address))
                    .and_then(Option::as_deref)
                    .and_then(|b| serde_json::from_slice(b).ok()))
            };
        let name_of = |shard: usize| shards[shard].service.name();
        let mut body = merge_and_render(
            request,
            outcome.results,
            &mut fetch,
            &name_of,
            started.elapsed().as_millis() as u64,
            shards.len(),
        )
        .map_err(ApiError::from)?;
        add_shard_failures(&mut body, &outcome.failures);
        Ok((body, outcome.readers))
    }

    /// Checks a search body's structure before anything runs (`_msearch` fails as a whole on a
    /// malformed query, like OpenSearch's REST-layer parsing). Field-level problems are left to
    /// the shards, which know the mapping.
    pub fn validate_search_body(
        &self,
        body: &Value,
        params: &HashMap<String, String>,
    ) -> ApiResult<()> {
        let request = SearchRequest::parse(body, params)?;
        let Some(query) = &request.query else {
            return Ok(());
        };
        let mapping = shoal_mapping::Mapping::default();
        let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
        let ctx = QueryContext {
            mapping: &mapping,
            schema: &schema,
            now_millis: now_millis(),
            index: "",
            default_fields: shoal_query::context::all_fields(),
        };
        match dsl::build_query(query, &ctx) {
            Err(e @ QueryError::Parsing(_)) => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// `_search/scroll`: the next page of an open scroll.
    pub fn scroll(&self, scroll_id: &str, keep_alive: Option<&str>) -> ApiResult<Value> {
        let started = Instant::now();
        let Some(context) = self.scrolls.get(scroll_id) else {
            return Err(scroll_missing(scroll_id));
        };
        let mut context = context.lock();
        if let Some(keep_alive) = keep_alive {
            context.keep_alive = parse_keep_alive(keep_alive)?;
        }
        context.expires = Instant::now() + context.keep_alive;
        let phase = QueryPhase {
            body: &context.body,
            params: &context.params,
            parsed: context.request.clone(),
            mode: QueryMode::Search,
            keep_alive: context.keep_alive,
            readers: Some(&context.readers),
            from: Some(context.next_from),
            now: now_millis(),
        };
        let outcome = self.query_phase(&context.shards, &phase);
        if outcome.results.is_empty() && !outcome.failures.is_empty() {
            return Err(scroll_missing(scroll_id));
        }
        let mut request = (*context.request).clone();
        request.from = context.next_from;
        let (mut response, _) =
            self.render_search(&context.shards, &request, outcome, true, started)?;
        context.next_from += request.size;
        for shard in &context.shards {
            shard
                .service
                .search
                .scroll_total
                .fetch_add(1, Ordering::Relaxed);
        }
        response
            .as_object_mut()
            .expect("object")
            .insert("_scroll_id".into(), json!(scroll_id));
        move_scroll_id_first(&mut response);
        Ok(response)
    }

    /// Frees the scrolls reading an index that is closing, here and on the nodes holding their
    /// shard contexts.
    pub(crate) fn free_index_scrolls(&self, uuid: &str) {
        for context in self.scrolls.remove_index(uuid) {
            self.free_readers(&context.lock().readers);
        }
    }

    /// `DELETE /_search/scroll`: returns how many contexts were freed.
    pub fn clear_scroll(&self, ids: &[String]) -> usize {
        let removed = if ids.iter().any(|id| id == "_all") {
            self.scrolls.clear()
        } else {
            ids.iter()
                .filter_map(|id| self.scrolls.remove(id))
                .collect()
        };
        for context in &removed {
            self.free_readers(&context.lock().readers);
        }
        removed.len()
    }

    /// `_count`.
    pub fn count(
        &self,
        indices: &str,
        body: &Value,
        params: &HashMap<String, String>,
    ) -> ApiResult<Value> {
        let scope = SearchScope::from_params(params)?;
        if let Some(other) = body
            .as_object()
            .and_then(|m| m.keys().find(|k| k.as_str() != "query"))
        {
            return Err(ApiError::parsing(format!(
                "request does not support [{other}]"
            )));
        }
        let mut search_body = serde_json::Map::new();
        if let Some(query) = body.get("query") {
            search_body.insert("query".into(), query.clone());
        }
        let search_body = Value::Object(search_body);
        let request = Arc::new(SearchRequest::parse(&search_body, params)?);
        let shards = self.search_shards(indices, &scope)?;
        let phase = QueryPhase {
            body: &search_body,
            params,
            parsed: request,
            mode: QueryMode::Count,
            keep_alive: Duration::ZERO,
            readers: None,
            from: None,
            now: now_millis(),
        };
        let outcome = outcome_checked(self.query_phase(&shards, &phase), &scope)?;
        let count: u64 = outcome.results.iter().map(|r| r.total_hits).sum();
        let mut response = json!({"count": count, "_shards": {"total": shards.len(), "successful": outcome.results.len(), "skipped": 0, "failed": outcome.failures.len()}});
        add_shard_failures(&mut response, &outcome.failures);
        Ok(response)
    }

    /// `_delete_by_query` and `_update_by_query` (re-index in place, no scripts).
    pub fn by_query(
        &self,
        indices: &str,
        body: &Value,
        params: &HashMap<String, String>,
        update: bool,
    ) -> ApiResult<Value> {
        let started = Instant::now();
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
        let proceed = conflicts == Some("proceed");
        let scope = SearchScope::from_params(params)?;
        let services = forbid_closed(self.resolve(indices, scope.options)?, scope.options)?;
        // Point-in-time view of the matches, as OpenSearch's scroll-based implementation.
        self.broadcast_refresh(&services)?;
        let shards = self.search_shards(indices, &scope)?;
        let mut query_body = serde_json::Map::new();
        if let Some(query) = body.get("query") {
            query_body.insert("query".into(), query.clone());
        }
        let query_body = Value::Object(query_body);
        let max_docs = body
            .get("max_docs")
            .and_then(Value::as_u64)
            .or_else(|| params.get("max_docs").and_then(|v| v.parse().ok()));
        let phase = QueryPhase {
            body: &query_body,
            params,
            parsed: Arc::new(SearchRequest::parse(&query_body, params)?),
            mode: QueryMode::AllHits,
            keep_alive: if update {
                FETCH_KEEP_ALIVE
            } else {
                Duration::ZERO
            },
            readers: None,
            from: None,
            now: now_millis(),
        };
        let mut partial_scope = scope.clone();
        partial_scope.allow_partial_results = false;
        let (outcome, mut sources) = self.query_then_fetch(&shards, &phase, |_, outcome| {
            let outcome = outcome_checked(outcome, &partial_scope)?;
            let sources = match update {
                true => self.fetch_phase(&outcome.readers, &every_hit(&outcome), false)?,
                false => HashMap::new(),
            };
            Ok((outcome, sources))
        })?;
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
        if let Some(max) = max_docs {
            writes.truncate(max as usize);
        }
        let total = writes.len();
        let refresh = if params
            .get("refresh")
            .is_some_and(|r| r.is_empty() || r == "true")
        {
            Refresh::True
        } else {
            Refresh::False
        };
        let results = self.execute_writes(
            writes,
            &WriteOptions {
                refresh,
                ..WriteOptions::default()
            },
        );
        let (mut done, mut conflicts, mut failures) = (0u64, 0u64, Vec::new());
        for result in results {
            match result {
                Ok(_) => done += 1,
                Err(e) if e.status == 409 => {
                    conflicts += 1;
                    if !proceed {
                        failures.push(json!({"index": e.extra.get("index"), "id": e.reason.split(']').next().map(|s| s.trim_start_matches('[')), "cause": e.to_cause_json(), "status": 409}));
                    }
                }
                Err(e) => failures.push(json!({"cause": e.to_cause_json(), "status": e.status})),
            }
        }
        let mut response = json!({
            "took": started.elapsed().as_millis() as u64,
            "timed_out": false,
            "total": total,
        });
        let map = response.as_object_mut().expect("object");
        map.insert("updated".into(), json!(if update { done } else { 0 }));
        map.insert("created".into(), json!(0));
        map.insert("deleted".into(), json!(if update { 0 } else { done }));
        map.insert(
            "batches".into(),
            json!(if total == 0 {
                0
            } else {
                1 + (total - 1) / 1000
            }),
        );
        map.insert("version_conflicts".into(), json!(conflicts));
        map.insert("noops".into(), json!(0));
        map.insert("retries".into(), json!({"bulk": 0, "search": 0}));
        map.insert("throttled_millis".into(), json!(0));
        map.insert("requests_per_second".into(), json!(-1.0));
        map.insert("throttled_until_millis".into(), json!(0));
        map.insert("failures".into(), Value::Array(failures));
        Ok(response)
    }
}

/// Turns shard failures into the request's error where OpenSearch fails the whole search:
/// a bad request (every shard would fail alike), no shard answering, or missing shards when
/// partial results are not allowed.
fn outcome_checked(outcome: QueryOutcome, scope: &SearchScope) -> ApiResult<QueryOutcome> {
    if outcome.failures.is_empty() {
        return Ok(outcome);
    }
    let failed_shards = json!(outcome
        .failures
        .iter()
        .map(ShardFailure::to_json)
        .collect::<Vec<_>>());
    if let Some(failure) = outcome.failures.iter().find(|f| f.is_request_error()) {
        let error = failure.error.clone();
        if error.error_type != "search_phase_execution_exception" {
            return Err(error);
        }
        return Err(error.with("failed_shards", failed_shards));
    }
    let first = outcome.failures[0].error.clone();
    if outcome.results.is_empty() {
        return Err(
            ApiError::new(503, "search_phase_execution_exception", "all shards failed")
                .with("phase", json!("query"))
                .with("grouped", json!(true))
                .with("failed_shards", failed_shards)
                .caused_by(first),
        );
    }
    if !scope.allow_partial_results {
        let missing: Vec<String> = outcome
            .failures
            .iter()
            .map(|f| format!("[{}][{}]", f.index, f.shard))
            .collect();
        return Err(ApiError::new(
            503,
            "search_phase_execution_exception",
            format!(
                "Search rejected due to missing shards [{}]. Consider using `allow_partial_search_results` setting to bypass this error.",
                missing.join(", ")
            ),
        )
        .with("phase", json!("query"))
        .with("grouped", json!(true))
        .caused_by(first));
    }
    Ok(outcome)
}

/// Adds `_shards.failures` (OpenSearch lists them only when some shard failed).
fn add_shard_failures(body: &mut Value, failures: &[ShardFailure]) {
    if failures.is_empty() {
        return;
    }
    if let Some(shards) = body.get_mut("_shards").and_then(Value::as_object_mut) {
        shards.insert("failed".into(), json!(failures.len()));
        shards.insert(
            "failures".into(),
            json!(failures
                .iter()
                .map(ShardFailure::to_json)
                .collect::<Vec<_>>()),
        );
    }
}

fn scroll_missing(scroll_id: &str) -> ApiError {
    ApiError::new(404, "search_phase_execution_exception", "all shards failed")
        .with("phase", json!("query"))
        .with("grouped", json!(true))
        .caused_by(ApiError::new(
            404,
            "search_context_missing_exception",
            format!("No search context found for id [{scroll_id}]"),
        ))
}

fn move_scroll_id_first(response: &mut Value) {
    if let Value::Object(map) = response {
        if let Some(id) = map.remove("_scroll_id") {
            let mut ordered = serde_json::Map::new();
            ordered.insert("_scroll_id".into(), id);
            ordered.extend(std::mem::take(map));
            *map = ordered;
        }
    }
}

fn parse_keep_alive(text: &str) -> ApiResult<Duration> {
    parse_time(text)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "failed to parse setting [scroll] with value [{text}] as a time value: {e}"
            ))
        })?
        .ok_or_else(|| ApiError::bad_request("[scroll] keep alive must be positive"))
}

/// Every hit of a query phase, as the fetch phase addresses them.
fn every_hit(outcome: &QueryOutcome) -> Vec<(usize, tantivy::DocAddress)> {
    outcome
        .results
        .iter()
        .flat_map(|r| r.hits.iter().map(move |h| (r.shard_index, h.address)))
        .collect()
}
