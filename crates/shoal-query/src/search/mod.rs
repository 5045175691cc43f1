//! Execution of a search request on shard searchers: request parsing, sorting, paging,
//! aggregations, highlighting and the merge of shard results into one response.
//!
//! The node calls, per request:
//! 1. [`SearchRequest::parse`] (REST body + URL parameters), then
//!    [`SearchRequest::check_result_window`] with each index's `index.max_result_window`;
//! 2. per shard, [`search_shard`] (or [`search_shard_with`]) with the tantivy query built
//!    from `req.query` (`match_all` when `None`);
//! 3. [`merge_and_render`] with all shard results, which fetches `_source` of the returned
//!    hits (and `top_hits` documents) through a callback.
//!
//! Across nodes the same steps form OpenSearch's query-then-fetch: data nodes run step 2 and
//! send their [`ShardResult`] as JSON (see `wire`); the coordinator asks [`select_page`]
//! which documents the response will show, fetches them from the nodes that hold them
//! (which kept their searchers open), then runs step 3 with a callback reading those.
//!
//! `_count` uses [`count_shard`].

mod aggs;
pub(crate) mod datemath;
mod highlight;
mod merge;
mod request;
mod shard;
mod sort;
mod source;
#[cfg(test)]
mod tests;
pub(crate) mod wire;

pub use aggs::render::MAX_BUCKETS;
pub use aggs::{AggDef, AggRequest};
pub use highlight::{highlight_field, HighlightFieldSpec, HighlightPlan, HighlightSpec};
pub use merge::{merge_and_render, select_page};
pub use request::{SearchRequest, TrackTotalHits, DEFAULT_TRACK_TOTAL_HITS};
pub use shard::{count_shard, search_shard, search_shard_with, ShardHit, ShardResult};
pub use sort::{Missing, SortMode, SortOrder, SortSpec, SortTarget, SortValue};
pub use source::{filter_source, SourceFilter};

pub(crate) use aggs::render::TopHitDoc;

use serde_json::Value;
use tantivy::query::Query;

use crate::QueryError;

/// Translates a query clause nested in a request (`post_filter`, filter aggregations).
pub type BuildQuery<'a> = dyn Fn(&Value) -> Result<Box<dyn Query>, QueryError> + 'a;

/// An error raised while executing on a shard: OpenSearch reports it as a
/// `search_phase_execution_exception` ("all shards failed") caused by `cause_type`.
pub(crate) fn shard_error(cause_type: &str, reason: String) -> QueryError {
    QueryError::SearchPhase {
        reason: "all shards failed".into(),
        cause_type: cause_type.into(),
        cause_reason: reason,
    }
}
