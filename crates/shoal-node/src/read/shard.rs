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
use shoal_engine::Engine;
use shoal_query::search::{count_shard, search_shard, SearchRequest, ShardResult};
use shoal_query::{dsl, QueryContext};
use tantivy::query::{AllQuery, Query};
use tantivy::{DocAddress, Searcher};

use super::actions::{
    FetchAction, FetchRequest, FreeContextAction, GetAction, GetRequest, QueryAction, QueryMode,
    QueryReply, QueryRequest,
};
use super::ReadService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::rpc::NodeActions;

/// Registers the shard-level read handlers: they run on this node's [`ReadService`].
pub(crate) fn register_actions(actions: &mut NodeActions, reads: &Arc<ReadService>) {
    let reads = Arc::downgrade(reads);
    actions.register_on::<QueryAction, _>(reads.clone(), |reads, request| {
        Ok(reads.shard_query(&request))
    });
    actions.register_on::<FetchAction, _>(reads.clone(), |reads, request| {
        let sources = reads.shard_fetch(&request)?;
        Ok(sources.into_iter().map(|s| s.map(Bytes::from)).collect())
    });
    actions.register_on::<FreeContextAction, _>(reads.clone(), |reads, request| {
        reads.free_search_contexts(&request.contexts);
        Ok(())
    });
    actions.register_on::<GetAction, _>(reads, |reads, request| reads.shard_get(&request));
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

impl ReadService {
    /// The open local copy of a shard of the index the coordinator meant (same uuid).
    fn read_copy(
        &self,
        index: &str,
        index_uuid: &str,
        shard: usize,
    ) -> ApiResult<(Arc<IndexService>, Arc<Engine>)> {
        let shard_id = shoal_types::ShardId::new(index_uuid, shard as u32);
        let copy = self.core.local_copy(index, &shard_id, None)?;
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
