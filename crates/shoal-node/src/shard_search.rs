//! The data-node side of distributed reads. A coordinator (this node or another) asks a shard
//! copy for the query phase, then the fetch phase, then frees the context; gets by id go
//! straight to one copy.
//!
//! A search context pins a point-in-time searcher between the phases, so the fetch phase
//! reads the exact documents the query phase ranked (a `DocAddress` means nothing to
//! another searcher), and scroll pages keep reading one snapshot. Contexts expire after
//! their keep-alive, in case a coordinator dies between the phases.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shoal_engine::Engine;
use shoal_query::search::{count_shard, search_shard, SearchRequest, ShardResult};
use shoal_query::{dsl, QueryContext};
use tantivy::query::{AllQuery, Query};
use tantivy::{DocAddress, Searcher};

use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::node::Node;
use crate::rpc::NodeActions;
use shoal_transport::{Action, WireAction};

/// The query phase on one shard copy. The answer carries the phase's full error inside the
/// body (a search error keeps its nested cause and extra fields that way).
pub struct QueryAction;
impl Action for QueryAction {
    const NAME: &'static str = "indices:data/read/search[phase/query]";
    type Request = QueryRequest;
    type Response = Result<QueryReply, ApiError>;
}

/// The fetch phase: the sources of some hits of a pinned searcher, sent raw (framed).
pub struct FetchAction;
impl WireAction for FetchAction {
    const NAME: &'static str = "indices:data/read/search[phase/fetch]";
    type Request = FetchRequest;
    type Response = Vec<Option<Bytes>>;

    fn encode_request(request: &FetchRequest) -> Result<Bytes, String> {
        Ok(crate::rpc::json_bytes(request))
    }

    fn decode_request(body: Bytes) -> Result<FetchRequest, String> {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }

    fn encode_response(sources: &Vec<Option<Bytes>>) -> Result<Bytes, String> {
        let blobs: Vec<Option<&[u8]>> = sources.iter().map(Option::as_deref).collect();
        Ok(crate::wire::frame(&(), &blobs))
    }

    fn decode_response(body: Bytes) -> Result<Vec<Option<Bytes>>, String> {
        let ((), blobs) = crate::wire::unframe(body)?;
        Ok(blobs)
    }
}

/// Releases search contexts the coordinator will not fetch from.
pub struct FreeContextAction;
impl Action for FreeContextAction {
    const NAME: &'static str = "indices:data/read/search[free_context]";
    type Request = FreeContexts;
    type Response = ();
}

/// A realtime get on one shard copy; the source travels raw (framed).
pub struct GetAction;
impl WireAction for GetAction {
    const NAME: &'static str = "indices:data/read/get[s]";
    type Request = GetRequest;
    type Response = Option<shoal_engine::GetResult>;

    fn encode_request(request: &GetRequest) -> Result<Bytes, String> {
        Ok(crate::rpc::json_bytes(request))
    }

    fn decode_request(body: Bytes) -> Result<GetRequest, String> {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }

    fn encode_response(doc: &Option<shoal_engine::GetResult>) -> Result<Bytes, String> {
        Ok(match doc {
            Some(doc) => crate::wire::frame(
                &Some(GetHeader {
                    seq_no: doc.seq_no,
                    primary_term: doc.primary_term,
                    version: doc.version,
                    routing: doc.routing.clone(),
                }),
                &[Some(&doc.source)],
            ),
            None => crate::wire::frame(&None::<GetHeader>, &[]),
        })
    }

    fn decode_response(body: Bytes) -> Result<Option<shoal_engine::GetResult>, String> {
        let (header, mut blobs): (Option<GetHeader>, _) = crate::wire::unframe(body)?;
        Ok(header.map(|h| shoal_engine::GetResult {
            seq_no: h.seq_no,
            primary_term: h.primary_term,
            version: h.version,
            source: blobs
                .pop()
                .flatten()
                .map(|b| b.to_vec())
                .unwrap_or_default(),
            routing: h.routing,
        }))
    }
}

pub const ACTION_QUERY: &str = <QueryAction as Action>::NAME;
pub const ACTION_FETCH: &str = <FetchAction as WireAction>::NAME;
pub const ACTION_FREE_CONTEXT: &str = <FreeContextAction as Action>::NAME;
pub const ACTION_GET: &str = <GetAction as WireAction>::NAME;

pub(crate) fn register_actions(actions: &mut NodeActions) {
    actions.register::<QueryAction>(|node, request| Ok(node.shard_query(&request)));
    actions.register::<FetchAction>(|node, request| {
        let sources = node.shard_fetch(&request)?;
        Ok(sources.into_iter().map(|s| s.map(Bytes::from)).collect())
    });
    actions.register::<FreeContextAction>(|node, request| {
        node.free_search_contexts(&request.contexts);
        Ok(())
    });
    actions.register::<GetAction>(|node, request| node.shard_get(&request));
}

/// What the query phase computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueryMode {
    /// Top `from + size` hits and aggregation partials.
    Search,
    /// Only the number of matches (`_count`).
    Count,
    /// Every match, for `_delete_by_query` / `_update_by_query`.
    AllHits,
}

/// The query phase on one shard copy.
#[derive(Clone, Serialize, Deserialize)]
pub struct QueryRequest {
    pub index: String,
    pub index_uuid: String,
    pub shard: usize,
    /// The context to search again (a scroll page); `None` pins a new searcher.
    pub context: Option<u64>,
    /// How long to keep the context for the fetch phase or the next scroll page; 0 frees it
    /// at once (nothing will be fetched).
    pub keep_alive_ms: u64,
    pub body: Value,
    pub params: HashMap<String, String>,
    /// Overrides the request's `from` (scroll pages).
    pub from: Option<usize>,
    pub mode: QueryMode,
    /// The shard's position in the coordinator's list (hits and sources are keyed by it).
    pub shard_index: usize,
    /// The coordinator's clock, so every shard resolves `now` alike.
    pub now: i64,
    /// The parsed request, when the coordinator is this node (skips parsing again).
    #[serde(skip)]
    pub parsed: Option<Arc<SearchRequest>>,
}

#[derive(Serialize, Deserialize)]
pub struct QueryReply {
    pub context: Option<u64>,
    pub result: ShardResult,
}

#[derive(Serialize, Deserialize)]
pub struct FetchRequest {
    pub context: u64,
    /// `(segment_ord, doc_id)` pairs from the query phase.
    pub docs: Vec<(u32, u32)>,
    /// Frees the context after reading (a search; a scroll keeps it).
    pub release: bool,
}

#[derive(Serialize, Deserialize)]
pub struct FreeContexts {
    pub contexts: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
pub struct GetRequest {
    pub index: String,
    pub index_uuid: String,
    pub shard: usize,
    pub id: String,
    pub realtime: bool,
    pub refresh: bool,
}

/// A get's answer without the source (which travels as a framed blob).
#[derive(Serialize, Deserialize)]
pub struct GetHeader {
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
    pub routing: Option<String>,
}

/// A pinned searcher of one shard copy. It does not keep the engine alive: closing the shard
/// (closing the index) frees it with its index writer and lock, as OpenSearch frees a closed
/// index's search contexts, so a reopen can take the lock at once.
struct SearchContext {
    service: Arc<IndexService>,
    engine: Weak<Engine>,
    searcher: Searcher,
    keep_alive: Duration,
    expires: Mutex<Instant>,
}

impl SearchContext {
    /// The engine of a kept context, unless its shard was closed since.
    fn engine(&self, id: u64) -> ApiResult<Arc<Engine>> {
        self.engine.upgrade().ok_or_else(|| {
            ApiError::new(
                404,
                "search_context_missing_exception",
                format!("No search context found for id [{id}]"),
            )
        })
    }
}

/// The open search contexts of this node.
#[derive(Default)]
pub struct SearchContexts {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<SearchContext>>>,
}

impl SearchContexts {
    fn insert(&self, context: Arc<SearchContext>) -> u64 {
        self.expire();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        self.open.lock().insert(id, context);
        id
    }

    /// The context, its keep-alive renewed.
    fn get(&self, id: u64) -> ApiResult<Arc<SearchContext>> {
        let missing = || {
            ApiError::new(
                404,
                "search_context_missing_exception",
                format!("No search context found for id [{id}]"),
            )
        };
        let context = self.open.lock().get(&id).cloned().ok_or_else(missing)?;
        if context.engine.strong_count() == 0 {
            self.remove(id);
            return Err(missing());
        }
        *context.expires.lock() = Instant::now() + context.keep_alive;
        Ok(context)
    }

    fn remove(&self, id: u64) {
        self.open.lock().remove(&id);
    }

    /// Drops contexts whose keep-alive elapsed (they pin segments and memory) and those of
    /// shards closed since.
    pub fn expire(&self) {
        let now = Instant::now();
        self.open
            .lock()
            .retain(|_, c| *c.expires.lock() > now && c.engine.strong_count() > 0);
    }

    pub fn open_count(&self) -> usize {
        self.open.lock().len()
    }
}

/// A shard copy this node does not (or no longer) hold: the coordinator tries another copy.
pub fn shard_not_found(index: &str, shard: usize) -> ApiError {
    ApiError::new(404, "shard_not_found_exception", "no such shard")
        .with("index", json!(index))
        .with("shard", json!(shard.to_string()))
}

impl Node {
    /// The open local copy of a shard of the index the coordinator meant (same uuid).
    fn read_copy(
        &self,
        index: &str,
        index_uuid: &str,
        shard: usize,
    ) -> ApiResult<(Arc<IndexService>, Arc<Engine>)> {
        let shard_id = shoal_types::ShardId::new(index_uuid, shard as u32);
        let copy = self.local_copy(index, &shard_id, None)?;
        Ok((copy.service, copy.shard.engine().clone()))
    }

    /// Runs the query phase on a local shard copy.
    pub fn shard_query(&self, request: &QueryRequest) -> ApiResult<QueryReply> {
        let (context, engine) = match request.context {
            Some(id) => {
                let context = self.search_contexts.get(id)?;
                let engine = context.engine(id)?;
                (context, engine)
            }
            None => {
                let (service, engine) =
                    self.read_copy(&request.index, &request.index_uuid, request.shard)?;
                let searcher = engine.searcher();
                let keep_alive = Duration::from_millis(request.keep_alive_ms);
                let context = Arc::new(SearchContext {
                    service,
                    engine: Arc::downgrade(&engine),
                    searcher,
                    keep_alive,
                    expires: Mutex::new(Instant::now() + keep_alive),
                });
                (context, engine)
            }
        };
        let mut search = match &request.parsed {
            Some(parsed) => (**parsed).clone(),
            None => SearchRequest::parse(&request.body, &request.params)?,
        };
        if let Some(from) = request.from {
            search.from = from;
        }
        let result = run_query(&context, &engine, &search, request)?;
        let id = match (request.context, request.keep_alive_ms) {
            (Some(id), _) => Some(id),
            (None, 0) => None,
            (None, _) => Some(self.search_contexts.insert(context)),
        };
        Ok(QueryReply {
            context: id,
            result,
        })
    }

    /// Reads the sources of documents the query phase ranked, from the same searcher.
    pub fn shard_fetch(&self, request: &FetchRequest) -> ApiResult<Vec<Option<Vec<u8>>>> {
        let context = self.search_contexts.get(request.context)?;
        let engine = context.engine(request.context)?;
        let sources = request
            .docs
            .iter()
            .map(|&(segment_ord, doc_id)| {
                engine
                    .source_of(&context.searcher, DocAddress::new(segment_ord, doc_id))
                    .map_err(ApiError::from)
            })
            .collect();
        if request.release {
            self.search_contexts.remove(request.context);
        }
        sources
    }

    pub fn free_search_contexts(&self, contexts: &[u64]) {
        for id in contexts {
            self.search_contexts.remove(*id);
        }
    }

    /// A get by id on a local shard copy.
    pub fn shard_get(&self, request: &GetRequest) -> ApiResult<Option<shoal_engine::GetResult>> {
        let (_, engine) = self.read_copy(&request.index, &request.index_uuid, request.shard)?;
        if request.refresh {
            engine.refresh()?;
        }
        let doc = if request.realtime {
            engine.get(&request.id)?
        } else {
            engine.get_refreshed(&request.id)?
        };
        Ok(doc)
    }
}

fn run_query(
    context: &SearchContext,
    engine: &Engine,
    search: &SearchRequest,
    request: &QueryRequest,
) -> ApiResult<ShardResult> {
    let started = Instant::now();
    let service = &context.service;
    let (mapping, name) = (service.mapping(), service.name());
    let ctx = QueryContext {
        mapping: &mapping,
        schema: engine.schema(),
        now_millis: request.now,
        index: &name,
        default_fields: service.with_meta(|m| m.settings().query_default_fields()),
    };
    let query: Box<dyn Query> = match &search.query {
        Some(query) => dsl::build_query(query, &ctx)?,
        None => Box::new(AllQuery),
    };
    service.search.query_current.fetch_add(1, Ordering::Relaxed);
    let outcome = match request.mode {
        QueryMode::Count => count_shard(&context.searcher, query.as_ref())
            .map(|count| ShardResult::count_only(request.shard_index, count)),
        QueryMode::AllHits => count_shard(&context.searcher, query.as_ref()).and_then(|count| {
            let mut all = search.clone();
            all.from = 0;
            all.size = count as usize;
            all.aggs = None;
            all.highlight = None;
            search_shard(
                &context.searcher,
                query.as_ref(),
                &all,
                &ctx,
                request.shard_index,
            )
        }),
        QueryMode::Search => search_shard(
            &context.searcher,
            query.as_ref(),
            search,
            &ctx,
            request.shard_index,
        ),
    };
    service.search.query_current.fetch_sub(1, Ordering::Relaxed);
    if request.mode == QueryMode::Search {
        service.count_search(started);
    }
    Ok(outcome?)
}
