//! The search API of the read service: `_search` (resolve indices, plan which copy of every
//! shard answers, run the query and fetch phases of [`super::coordinator`] and
//! [`super::fetch`], merge and render), `_count`, and the checks `_msearch` runs first.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use shoal_cluster::now_millis;
use shoal_query::search::{merge_and_render, select_page, SearchRequest};
use shoal_query::{dsl, QueryContext, QueryError};

use super::actions::QueryMode;
use super::coordinator::{PlannedShard, QueryOutcome, QueryPhase, Reader, ShardFailure};
use super::copies::{parse_preference, Preference};
use super::fetch::PhaseError;
use super::scroll::{parse_keep_alive, ScrollContext};
use super::ReadService;
use crate::core::ResolveOptions;
use crate::error::{bool_param, ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;

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
            options: ResolveOptions::search().from_request(params)?,
        })
    }
}
/// Searches forbid closed indices as OpenSearch's search indices options do: a wildcard may
/// expand to a closed index (`expand_wildcards=all|closed`), which then fails the request
/// with `index_closed_exception`, or is skipped under `ignore_unavailable`. (Searching a closed
/// index's shards would answer a 503 for missing shards.)
pub(crate) fn forbid_closed(
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
impl ReadService {
    /// The shards a search reads and the copies it may read them from.
    pub fn search_shards(
        &self,
        indices: &str,
        scope: &SearchScope,
    ) -> ApiResult<Vec<PlannedShard>> {
        let services = forbid_closed(self.core.resolve(indices, scope.options)?, scope.options)?;
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        self.core
            .blocks()
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
        self.core
            .cluster_setting(MAX_BUCKETS_SETTING)
            .and_then(|v| v.parse().ok())
            .unwrap_or(shoal_query::search::MAX_BUCKETS)
    }

    /// `_search`.    /// `_search`.
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
        check_result_window(&request, &shards, scroll.is_some())?;
        let needs_fetch = scroll.is_some() || request.size > 0 || request.aggs.is_some();
        let mut phase = QueryPhase::first_page(
            body,
            params,
            request.clone(),
            QueryMode::Search,
            needs_fetch,
        );
        if let Some(keep_alive) = scroll {
            phase.keep_alive = keep_alive;
        }
        let (response, readers) = self.query_then_fetch(&shards, &phase, |shards, outcome| {
            let outcome = outcome_checked(outcome, &scope)?;
            self.render_search(shards, &request, outcome, scroll.is_some(), started)
        })?;
        let Some(keep_alive) = scroll else {
            return Ok(response);
        };
        let context = ScrollContext::open(shards, readers, body, params, request, keep_alive);
        Ok(self.register_scroll(context, response))
    }

    /// Fetches the page's documents and renders the response; returns the readers too (a
    /// scroll keeps their contexts).
    pub(super) fn render_search(
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
        let phase = QueryPhase::first_page(&search_body, params, request, QueryMode::Count, false);
        let outcome = outcome_checked(self.query_phase(&shards, &phase), &scope)?;
        let count: u64 = outcome.results.iter().map(|r| r.total_hits).sum();
        let mut response = json!({"count": count, "_shards": {"total": shards.len(), "successful": outcome.results.len(), "skipped": 0, "failed": outcome.failures.len()}});
        add_shard_failures(&mut response, &outcome.failures);
        Ok(response)
    }
}

/// Refuses a page beyond `index.max_result_window` of any index searched; a scroll pages past
/// it, but each of its pages must fit in it.
fn check_result_window(
    request: &SearchRequest,
    shards: &[PlannedShard],
    scroll: bool,
) -> ApiResult<()> {
    for shard in shards {
        let max = shard
            .service
            .with_meta(|m| m.settings().max_result_window());
        match scroll {
            true => request.check_scroll_batch(max)?,
            false => request.check_result_window(max)?,
        }
    }
    Ok(())
}

/// Turns shard failures into the request's error where OpenSearch fails the whole search:
/// a bad request (every shard would fail alike), no shard answering, or missing shards when
/// partial results are not allowed.
pub(crate) fn outcome_checked(
    outcome: QueryOutcome,
    scope: &SearchScope,
) -> ApiResult<QueryOutcome> {
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
