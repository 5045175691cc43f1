//! Search APIs (filled in with the search execution module).

use std::sync::Arc;

use axum::body::Bytes;
use shoal_node::{ApiError, Node};

use crate::request::Params;
use crate::response::RestResult;

fn not_yet(what: &str) -> RestResult {
    Err(ApiError::bad_request(format!("[{what}] is not available in this build yet")).into())
}

pub async fn search(_n: Arc<Node>, _i: Option<String>, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_search")
}
pub async fn count(_n: Arc<Node>, _i: Option<String>, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_count")
}
pub async fn msearch(_n: Arc<Node>, _i: Option<String>, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_msearch")
}
pub async fn scroll(_n: Arc<Node>, _i: Option<String>, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_search/scroll")
}
pub async fn clear_scroll(_n: Arc<Node>, _i: Option<String>, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_search/scroll")
}
pub async fn by_query(_n: Arc<Node>, _i: String, _u: bool, _p: Params, _b: Bytes) -> RestResult {
    not_yet("_delete_by_query")
}
