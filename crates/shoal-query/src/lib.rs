//! Search: the OpenSearch query DSL translated to tantivy queries (`dsl`), and the
//! execution of a search request on shard searchers (`search`): sorting, paging,
//! aggregations, highlighting and the merge of shard results into one response.

pub mod context;
pub mod dsl;
mod error;
pub mod search;

pub use context::QueryContext;
pub use dsl::glob_match;
pub use error::QueryError;
