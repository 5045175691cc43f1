//! The shard-level read actions a coordinator sends to a copy (query phase, fetch phase,
//! free context, get by id) and their messages. The handlers are in [`super::shard`].

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_query::search::{SearchRequest, ShardResult};
use shoal_transport::{Action, WireAction};

use crate::error::ApiError;

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
