//! Search coordination: resolve indices, run the query on every shard's point-in-time
//! searcher, merge and render; `_count`, scroll contexts, and delete/update by query.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};
use shoal_engine::{DocRequest, Engine};
use shoal_query::search::{
    count_shard, merge_and_render, search_shard, SearchRequest, ShardResult,
};
use shoal_query::{dsl, QueryContext, QueryError};
use tantivy::query::{AllQuery, Query};
use tantivy::Searcher;

use crate::documents::{DocWrite, Refresh, WriteOptions};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::node::{now_millis, Node, ResolveOptions};
use crate::settings::parse_time;

/// One shard taking part in a search, pinned to a point-in-time searcher.
#[derive(Clone)]
pub struct ShardTarget {
    pub service: Arc<IndexService>,
    pub engine: Arc<Engine>,
    pub searcher: Searcher,
}

impl ShardTarget {
    /// The query context of this shard's index; `mapping` and `name` come from its service.
    fn query_context<'a>(
        &'a self,
        mapping: &'a shoal_mapping::Mapping,
        name: &'a str,
        now: i64,
    ) -> QueryContext<'a> {
        QueryContext {
            mapping,
            schema: self.engine.schema(),
            now_millis: now,
            index: name,
        }
    }
}

/// An open scroll: the pinned shards, the request, and where the next page starts.
pub struct ScrollContext {
    targets: Vec<ShardTarget>,
    request: SearchRequest,
    next_from: usize,
    keep_alive: Duration,
    expires: Instant,
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

    fn remove(&self, id: &str) -> bool {
        self.contexts.lock().remove(id).is_some()
    }

    fn clear(&self) -> usize {
        let mut contexts = self.contexts.lock();
        let n = contexts.len();
        contexts.clear();
        n
    }

    /// Drops contexts whose keep-alive elapsed (they pin segments and memory).
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

/// Search parameters that select shards rather than shape the result.
#[derive(Debug, Clone, Default)]
pub struct SearchScope {
    pub routing: Option<String>,
    /// `preference=_shards:0,2`: only these shard numbers.
    pub only_shards: Option<Vec<usize>>,
    pub options: ResolveOptions,
}

impl SearchScope {
    pub fn from_params(params: &HashMap<String, String>) -> ApiResult<SearchScope> {
        let flag = |k: &str, default: bool| -> ApiResult<bool> {
            match params.get(k).map(String::as_str) {
                None => Ok(default),
                Some("") | Some("true") => Ok(true),
                Some("false") => Ok(false),
                Some(other) => Err(ApiError::bad_request(format!(
                    "Failed to parse value [{other}] as only [true] or [false] are allowed."
                ))),
            }
        };
        let only_shards = match params
            .get("preference")
            .and_then(|p| p.strip_prefix("_shards:"))
        {
            Some(list) => Some(
                list.split('|')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .map_err(|_| ApiError::bad_request(format!("No shard id [{s}] found")))
                    })
                    .collect::<ApiResult<Vec<usize>>>()?,
            ),
            None => None,
        };
        Ok(SearchScope {
            routing: params.get("routing").cloned(),
            only_shards,
            options: ResolveOptions {
                ignore_unavailable: flag("ignore_unavailable", false)?,
                allow_no_indices: flag("allow_no_indices", true)?,
                include_closed: false,
                expand_hidden: false,
            }
            .with_expand_wildcards(params.get("expand_wildcards").map(String::as_str)),
        })
    }
}

impl Node {
    /// Pins a searcher on every shard the search touches.
    pub fn search_targets(
        &self,
        indices: &str,
        scope: &SearchScope,
    ) -> ApiResult<Vec<ShardTarget>> {
        let services = self.resolve(indices, scope.options)?;
        let mut targets = Vec::new();
        for service in services {
            let shard_count = service.with_meta(|m| m.settings().number_of_shards());
            let selected: Vec<usize> = match &scope.routing {
                Some(routing) => {
                    let mut ids: Vec<usize> = routing
                        .split(',')
                        .map(|r| service.route(r.trim()))
                        .collect();
                    ids.sort();
                    ids.dedup();
                    ids
                }
                None => (0..shard_count).collect(),
            };
            for shard in selected {
                if scope
                    .only_shards
                    .as_ref()
                    .is_some_and(|only| !only.contains(&shard))
                {
                    continue;
                }
                let Ok(engine) = service.shard(shard) else {
                    continue;
                };
                targets.push(ShardTarget {
                    service: service.clone(),
                    engine: engine.clone(),
                    searcher: engine.searcher(),
                });
            }
        }
        Ok(targets)
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
        let request = SearchRequest::parse(body, params)?;
        let targets = self.search_targets(indices, &scope)?;
        let scroll = match params.get("scroll") {
            Some(keep_alive) => Some(parse_keep_alive(keep_alive)?),
            None => None,
        };
        if scroll.is_none() {
            for target in &targets {
                request.check_result_window(
                    target
                        .service
                        .with_meta(|m| m.settings().max_result_window()),
                )?;
            }
        }
        let mut response = run_search(&targets, &request, started)?;
        if let Some(keep_alive) = scroll {
            let next_from = request.from + request.size;
            for target in &targets {
                target
                    .service
                    .search
                    .scroll_current
                    .fetch_add(1, Ordering::Relaxed);
            }
            let id = self.scrolls.insert(ScrollContext {
                targets,
                request,
                next_from,
                keep_alive,
                expires: Instant::now() + keep_alive,
            });
            response
                .as_object_mut()
                .expect("object")
                .insert("_scroll_id".into(), json!(id));
            move_scroll_id_first(&mut response);
        }
        Ok(response)
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
            return Err(ApiError::new(
                404,
                "search_phase_execution_exception",
                "all shards failed",
            )
            .with("phase", json!("query"))
            .with("grouped", json!(true))
            .caused_by(ApiError::new(
                404,
                "search_context_missing_exception",
                format!("No search context found for id [{scroll_id}]"),
            )));
        };
        let mut context = context.lock();
        if let Some(keep_alive) = keep_alive {
            context.keep_alive = parse_keep_alive(keep_alive)?;
        }
        context.expires = Instant::now() + context.keep_alive;
        let mut request = context.request.clone();
        request.from = context.next_from;
        let mut response = run_search(&context.targets, &request, started)?;
        context.next_from += request.size;
        for target in &context.targets {
            target
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

    /// `DELETE /_search/scroll`: returns how many contexts were freed.
    pub fn clear_scroll(&self, ids: &[String]) -> usize {
        if ids.iter().any(|id| id == "_all") {
            return self.scrolls.clear();
        }
        ids.iter().filter(|id| self.scrolls.remove(id)).count()
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
        let request = SearchRequest::parse(&Value::Object(search_body), params)?;
        let targets = self.search_targets(indices, &scope)?;
        let now = now_millis();
        let mut count = 0;
        for target in &targets {
            let (mapping, name) = (target.service.mapping(), target.service.name());
            let ctx = target.query_context(&mapping, &name, now);
            let query = build(&request, &ctx)?;
            count += count_shard(&target.searcher, query.as_ref())?;
        }
        Ok(
            json!({"count": count, "_shards": {"total": targets.len(), "successful": targets.len(), "skipped": 0, "failed": 0}}),
        )
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
        // Point-in-time view of the matches, as OpenSearch's scroll-based implementation.
        for service in self.resolve(indices, scope.options)? {
            for engine in service.shards() {
                engine.refresh()?;
            }
        }
        let targets = self.search_targets(indices, &scope)?;
        let mut query_body = serde_json::Map::new();
        if let Some(query) = body.get("query") {
            query_body.insert("query".into(), query.clone());
        }
        let max_docs = body
            .get("max_docs")
            .and_then(Value::as_u64)
            .or_else(|| params.get("max_docs").and_then(|v| v.parse().ok()));
        let mut matches: Vec<(Arc<IndexService>, String, i64, i64, Option<Vec<u8>>)> = Vec::new();
        let now = now_millis();
        for target in &targets {
            let (mapping, name) = (target.service.mapping(), target.service.name());
            let ctx = target.query_context(&mapping, &name, now);
            let mut request = SearchRequest::parse(&Value::Object(query_body.clone()), params)?;
            let query = build(&request, &ctx)?;
            request.from = 0;
            request.size = count_shard(&target.searcher, query.as_ref())? as usize;
            request.aggs = None;
            request.highlight = None;
            let result = search_shard(&target.searcher, query.as_ref(), &request, &ctx, 0)?;
            for hit in result.hits {
                let source = if update {
                    target.engine.source_of(&target.searcher, hit.address)?
                } else {
                    None
                };
                matches.push((
                    target.service.clone(),
                    hit.id,
                    hit.seq_no,
                    hit.primary_term,
                    source,
                ));
            }
        }
        if let Some(max) = max_docs {
            matches.truncate(max as usize);
        }
        let total = matches.len();
        let writes: Vec<DocWrite> = matches
            .into_iter()
            .map(|(service, id, seq_no, primary_term, source)| {
                let request = DocRequest {
                    if_seq_no: Some(seq_no),
                    if_primary_term: Some(primary_term),
                    ..DocRequest::default()
                };
                match source {
                    Some(source) if update => DocWrite::Index {
                        index: service.name(),
                        id: Some(id),
                        routing: None,
                        source,
                        request,
                    },
                    _ => DocWrite::Delete {
                        index: service.name(),
                        id,
                        routing: None,
                        request,
                    },
                }
            })
            .collect();
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
                require_alias: false,
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

fn build(request: &SearchRequest, ctx: &QueryContext) -> Result<Box<dyn Query>, QueryError> {
    match &request.query {
        Some(query) => dsl::build_query(query, ctx),
        None => Ok(Box::new(AllQuery)),
    }
}

/// Adds OpenSearch's `failed_shards` entry to a shard-level search failure.
fn with_failed_shard(error: QueryError, target: &ShardTarget) -> ApiError {
    let error = ApiError::from(error);
    if error.error_type != "search_phase_execution_exception" {
        return error;
    }
    let reason = error
        .caused_by
        .as_ref()
        .map(|c| c.to_cause_json())
        .unwrap_or(json!(null));
    let shard = target
        .service
        .shards()
        .iter()
        .position(|e| Arc::ptr_eq(e, &target.engine))
        .unwrap_or(0);
    error.with("failed_shards", json!([{"shard": shard, "index": target.service.name(), "node": "local", "reason": reason}]))
}

/// Runs a request on pinned shards and renders the merged response.
fn run_search(
    targets: &[ShardTarget],
    request: &SearchRequest,
    started: Instant,
) -> ApiResult<Value> {
    let now = now_millis();
    let mut results: Vec<ShardResult> = Vec::with_capacity(targets.len());
    for (shard_index, target) in targets.iter().enumerate() {
        let query_started = Instant::now();
        let (mapping, name) = (target.service.mapping(), target.service.name());
        let ctx = target.query_context(&mapping, &name, now);
        target
            .service
            .search
            .query_current
            .fetch_add(1, Ordering::Relaxed);
        let outcome = build(request, &ctx).and_then(|query| {
            search_shard(&target.searcher, query.as_ref(), request, &ctx, shard_index)
        });
        target
            .service
            .search
            .query_current
            .fetch_sub(1, Ordering::Relaxed);
        target.service.count_search(query_started);
        results.push(outcome.map_err(|e| with_failed_shard(e, target))?);
    }
    let mut fetch =
        |shard: usize, address: tantivy::DocAddress| -> Result<Option<Value>, QueryError> {
            let target = &targets[shard];
            let bytes = target
                .engine
                .source_of(&target.searcher, address)
                .map_err(|e| QueryError::Internal(e.to_string()))?;
            Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
        };
    let name_of = |shard: usize| targets[shard].service.name();
    let body = merge_and_render(
        request,
        results,
        &mut fetch,
        &name_of,
        started.elapsed().as_millis() as u64,
        targets.len(),
    )?;
    Ok(body)
}
