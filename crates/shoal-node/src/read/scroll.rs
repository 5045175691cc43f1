//! Scrolls: a search whose contexts stay open on the copies that ranked its first page, so
//! each next page reads the same point-in-time view (`_search?scroll=`, `_search/scroll`,
//! `DELETE /_search/scroll`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Value};
use shoal_cluster::now_millis;
use shoal_query::search::SearchRequest;

use super::actions::QueryMode;
use super::coordinator::{PlannedShard, QueryPhase, Reader};
use super::ReadService;
use crate::error::{ApiError, ApiResult};

use crate::settings::parse_time;

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

impl ScrollContext {
    /// A scroll over the first page's shards and readers; it counts as current on its indices
    /// from now until it is dropped.
    pub(super) fn open(
        shards: Vec<PlannedShard>,
        readers: Vec<Option<Reader>>,
        body: &Value,
        params: &HashMap<String, String>,
        request: Arc<SearchRequest>,
        keep_alive: Duration,
    ) -> ScrollContext {
        for shard in &shards {
            shard
                .service
                .search
                .scroll_current
                .fetch_add(1, Ordering::Relaxed);
        }
        ScrollContext {
            shards,
            readers,
            body: body.clone(),
            params: params.clone(),
            next_from: request.from + request.size,
            request,
            keep_alive,
            expires: Instant::now() + keep_alive,
        }
    }
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
impl ReadService {
    /// Keeps a scroll's first page open and answers that page with its `_scroll_id`.
    pub(super) fn register_scroll(&self, context: ScrollContext, mut first_page: Value) -> Value {
        let id = self.scrolls.insert(context);
        first_page
            .as_object_mut()
            .expect("object")
            .insert("_scroll_id".into(), json!(id));
        move_scroll_id_first(&mut first_page);
        first_page
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

pub(super) fn parse_keep_alive(text: &str) -> ApiResult<Duration> {
    parse_time(text)
        .map_err(|e| {
            ApiError::bad_request(format!(
                "failed to parse setting [scroll] with value [{text}] as a time value: {e}"
            ))
        })?
        .ok_or_else(|| ApiError::bad_request("[scroll] keep alive must be positive"))
}
