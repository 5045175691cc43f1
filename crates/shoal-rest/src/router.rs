//! Routes, the server, and the plumbing every handler shares.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put, MethodRouter};
use axum::Router;
use serde_json::json;
use shoal_node::{ApiError, ApiResult, Node};

use crate::request::Params;
use crate::response::RestError;
use crate::{aliases, cat, cluster, documents, indices, node_stats, search};

type S = Arc<Node>;
type Q = Query<HashMap<String, String>>;

/// Runs blocking node work on the thread pool the request was routed to (429 when its queue is
/// full; `thread_pools.rs`); a panic there becomes a logged 500.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> Result<T, RestError> {
    if let Ok(route) = crate::thread_pools::ROUTE.try_with(|r| r.clone()) {
        let admission = shoal_node::pressure::Admission::Normal;
        let write = route.write;
        let work = move || match write {
            true => shoal_node::pressure::priority::run_as_write(work),
            false => work(),
        };
        return match shoal_node::pressure::run_on(&route.pool, admission, &route.task, work).await {
            Ok(result) => result.map_err(RestError),
            Err(rejected_or_panicked) => Err(RestError(rejected_or_panicked)),
        };
    }
    // Outside a routed request (unit tests of handlers).
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(RestError),
        Err(join_error) => {
            tracing::error!(error = %join_error, "request handler panicked");
            Err(RestError(ApiError::internal(format!(
                "internal error while handling the request (this is a bug in Shoal): {join_error}"
            ))))
        }
    }
}

fn p(q: HashMap<String, String>) -> Params {
    Params(q)
}

/// The whole REST API.
pub fn router(node: Arc<Node>) -> Router {
    let max_content_length = node
        .core()
        .cluster_setting("http.max_content_length")
        .and_then(|v| shoal_node::settings::parse_byte_size(&v).ok())
        .unwrap_or(100 * 1024 * 1024) as usize;
    let api = Router::new()
        .route(
            "/",
            get(|State(n): State<S>, Query(q): Q| cluster::root(n, p(q), false))
                .head(|State(n): State<S>, Query(q): Q| cluster::root(n, p(q), true))
                // `DELETE /` deletes every index in OpenSearch (refused when destructive_requires_name is set).
                .delete(|State(n): State<S>, Query(q): Q| {
                    indices::delete(n, "_all".to_string(), p(q))
                }),
        )
        .merge(cluster_routes())
        .merge(crate::cluster_admin::routes())
        .merge(crate::recovery::routes())
        .merge(crate::segment_replication::routes())
        .merge(crate::remote_store::routes())
        .merge(crate::snapshot::routes())
        .merge(cat_routes())
        .merge(crate::tasks::routes())
        .merge(search_routes())
        .merge(document_routes())
        .merge(index_routes())
        .fallback(no_handler)
        .layer(middleware::from_fn_with_state(
            node.clone(),
            crate::thread_pools::route_to_pool,
        ))
        .layer(middleware::from_fn_with_state(
            node.clone(),
            crate::tasks::track,
        ))
        .layer(middleware::from_fn(
            crate::spec_params::refuse_unknown_params,
        ))
        .layer(middleware::from_fn(check_content_type))
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            crate::server::read_whole_body(req, next, max_content_length)
        }))
        .layer(DefaultBodyLimit::max(max_content_length))
        .layer(tower_http::decompression::RequestDecompressionLayer::new())
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
        .with_state(node);
    // axum adds `Allow` to a 405 outside the routes' layers: render it from outside the router.
    Router::new()
        .fallback_service(api)
        .layer(middleware::from_fn(render_method_not_allowed))
        .layer(middleware::from_fn(crate::server::render_http_errors))
}

fn cluster_routes() -> Router<S> {
    Router::new()
        .route(
            "/_cluster/state",
            get(|State(n): State<S>, Query(q): Q| cluster::state(n, None, None, p(q))),
        )
        .route(
            "/_cluster/state/{metrics}",
            get(|State(n): State<S>, Path(m): Path<String>, Query(q): Q| {
                cluster::state(n, Some(m), None, p(q))
            }),
        )
        .route(
            "/_cluster/state/{metrics}/{index}",
            get(
                |State(n): State<S>, Path((m, i)): Path<(String, String)>, Query(q): Q| {
                    cluster::state(n, Some(m), Some(i), p(q))
                },
            ),
        )
        .route(
            "/_cluster/settings",
            get(|State(n): State<S>, Query(q): Q| cluster::get_settings(n, p(q)))
                .put(|State(n): State<S>, Query(q): Q, b: Bytes| cluster::put_settings(n, p(q), b)),
        )
        .route(
            "/_cluster/stats",
            get(|State(n): State<S>, Query(q): Q| {
                crate::cluster_stats::cluster_stats(n, None, p(q))
            }),
        )
        .route(
            "/_cluster/stats/nodes/{nodes}",
            get(|State(n): State<S>, Path(x): Path<String>, Query(q): Q| {
                crate::cluster_stats::cluster_stats(n, Some(x), p(q))
            }),
        )
        .route(
            "/_nodes/stats",
            get(|State(n): State<S>, Query(q): Q| {
                node_stats::nodes_stats(n, None, None, None, p(q))
            }),
        )
        .route(
            "/_nodes/stats/{metric}",
            get(|State(n): State<S>, Path(m): Path<String>, Query(q): Q| {
                node_stats::nodes_stats(n, None, Some(m), None, p(q))
            }),
        )
        .route(
            "/_nodes/stats/{metric}/{index_metric}",
            get(
                |State(n): State<S>, Path((m, i)): Path<(String, String)>, Query(q): Q| {
                    node_stats::nodes_stats(n, None, Some(m), Some(i), p(q))
                },
            ),
        )
        .route(
            "/_nodes/{node}/stats",
            get(|State(n): State<S>, Path(x): Path<String>, Query(q): Q| {
                node_stats::nodes_stats(n, Some(x), None, None, p(q))
            }),
        )
        .route(
            "/_nodes/{node}/stats/{metric}",
            get(
                |State(n): State<S>, Path((x, m)): Path<(String, String)>, Query(q): Q| {
                    node_stats::nodes_stats(n, Some(x), Some(m), None, p(q))
                },
            ),
        )
        .route(
            "/_nodes/{node}/stats/{metric}/{index_metric}",
            get(
                |State(n): State<S>,
                 Path((x, m, i)): Path<(String, String, String)>,
                 Query(q): Q| {
                    node_stats::nodes_stats(n, Some(x), Some(m), Some(i), p(q))
                },
            ),
        )
        .route(
            "/_stats",
            get(|State(n): State<S>, Query(q): Q| cluster::index_stats(n, None, None, p(q))),
        )
        .route(
            "/_stats/{metric}",
            get(|State(n): State<S>, Path(m): Path<String>, Query(q): Q| {
                cluster::index_stats(n, None, Some(m), p(q))
            }),
        )
        .route(
            "/{index}/_stats",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                cluster::index_stats(n, Some(i), None, p(q))
            }),
        )
        .route(
            "/{index}/_stats/{metric}",
            get(
                |State(n): State<S>, Path((i, m)): Path<(String, String)>, Query(q): Q| {
                    cluster::index_stats(n, Some(i), Some(m), p(q))
                },
            ),
        )
}

fn cat_routes() -> Router<S> {
    Router::new()
        .route("/_cat", get(|| cat::help()))
        .route(
            "/_cat/indices",
            get(|State(n): State<S>, Query(q): Q| cat::indices(n, None, p(q))),
        )
        .route(
            "/_cat/indices/{index}",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat::indices(n, Some(i), p(q))
            }),
        )
        .route(
            "/_cat/shards",
            get(|State(n): State<S>, Query(q): Q| cat::shards(n, None, p(q))),
        )
        .route(
            "/_cat/shards/{index}",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat::shards(n, Some(i), p(q))
            }),
        )
        .route(
            "/_cat/health",
            get(|State(n): State<S>, Query(q): Q| cat::health(n, p(q))),
        )
        .route(
            "/_cat/count",
            get(|State(n): State<S>, Query(q): Q| cat::count(n, None, p(q))),
        )
        .route(
            "/_cat/count/{index}",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat::count(n, Some(i), p(q))
            }),
        )
        .route(
            "/_cat/nodes",
            get(|State(n): State<S>, Query(q): Q| cat::nodes(n, p(q))),
        )
        .route(
            "/_cat/segments",
            get(|State(n): State<S>, Query(q): Q| cat::segments(n, None, p(q))),
        )
        .route(
            "/_cat/segments/{index}",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                cat::segments(n, Some(i), p(q))
            }),
        )
        .route(
            "/_cat/thread_pool",
            get(|State(n): State<S>, Query(q): Q| crate::thread_pools::cat(n, None, p(q))),
        )
        .route(
            "/_cat/thread_pool/{patterns}",
            get(|State(n): State<S>, Path(t): Path<String>, Query(q): Q| {
                crate::thread_pools::cat(n, Some(t), p(q))
            }),
        )
}

fn search_routes() -> Router<S> {
    let search_all = || {
        get(|State(n): State<S>, Query(q): Q, b: Bytes| search::search(n, None, p(q), b))
            .post(|State(n): State<S>, Query(q): Q, b: Bytes| search::search(n, None, p(q), b))
    };
    let search_index = || {
        get(
            |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                search::search(n, Some(i), p(q), b)
            },
        )
        .post(
            |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                search::search(n, Some(i), p(q), b)
            },
        )
    };
    let count_all = || {
        get(|State(n): State<S>, Query(q): Q, b: Bytes| search::count(n, None, p(q), b))
            .post(|State(n): State<S>, Query(q): Q, b: Bytes| search::count(n, None, p(q), b))
    };
    let count_index = || {
        get(
            |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                search::count(n, Some(i), p(q), b)
            },
        )
        .post(
            |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                search::count(n, Some(i), p(q), b)
            },
        )
    };
    let msearch_all = || {
        get(|State(n): State<S>, Query(q): Q, b: Bytes| search::msearch(n, None, p(q), b))
            .post(|State(n): State<S>, Query(q): Q, b: Bytes| search::msearch(n, None, p(q), b))
    };
    let scroll = || {
        get(|State(n): State<S>, Query(q): Q, b: Bytes| search::scroll(n, None, p(q), b))
            .post(|State(n): State<S>, Query(q): Q, b: Bytes| search::scroll(n, None, p(q), b))
            .delete(|State(n): State<S>, Query(q): Q, b: Bytes| {
                search::clear_scroll(n, None, p(q), b)
            })
    };
    Router::new()
        .route("/_search", search_all())
        .route("/{index}/_search", search_index())
        .route("/_count", count_all())
        .route("/{index}/_count", count_index())
        .route("/_msearch", msearch_all())
        .route(
            "/{index}/_msearch",
            get(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    search::msearch(n, Some(i), p(q), b)
                },
            )
            .post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    search::msearch(n, Some(i), p(q), b)
                },
            ),
        )
        .route("/_search/scroll", scroll())
        .route(
            "/_search/scroll/{id}",
            get(
                |State(n): State<S>, Path(id): Path<String>, Query(q): Q, b: Bytes| {
                    search::scroll(n, Some(id), p(q), b)
                },
            )
            .post(
                |State(n): State<S>, Path(id): Path<String>, Query(q): Q, b: Bytes| {
                    search::scroll(n, Some(id), p(q), b)
                },
            )
            .delete(
                |State(n): State<S>, Path(id): Path<String>, Query(q): Q, b: Bytes| {
                    search::clear_scroll(n, Some(id), p(q), b)
                },
            ),
        )
        .route(
            "/{index}/_delete_by_query",
            post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    search::by_query(n, i, false, p(q), b)
                },
            ),
        )
        .route(
            "/{index}/_update_by_query",
            post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    search::by_query(n, i, true, p(q), b)
                },
            ),
        )
}

fn document_routes() -> Router<S> {
    let index_with_id = |create: bool| -> MethodRouter<S> {
        put(
            move |State(n): State<S>,
                  Path((i, id)): Path<(String, String)>,
                  Query(q): Q,
                  b: Bytes| documents::index_doc(n, i, Some(id), create, p(q), b),
        )
        .post(
            move |State(n): State<S>,
                  Path((i, id)): Path<(String, String)>,
                  Query(q): Q,
                  b: Bytes| documents::index_doc(n, i, Some(id), create, p(q), b),
        )
    };
    Router::new()
        .route(
            "/{index}/_doc/{id}",
            index_with_id(false)
                .get(
                    |State(n): State<S>, Path((i, id)): Path<(String, String)>, Query(q): Q| {
                        documents::get_doc(n, i, id, p(q), false, false)
                    },
                )
                .head(
                    |State(n): State<S>, Path((i, id)): Path<(String, String)>, Query(q): Q| {
                        documents::get_doc(n, i, id, p(q), true, false)
                    },
                )
                .delete(
                    |State(n): State<S>, Path((i, id)): Path<(String, String)>, Query(q): Q| {
                        documents::delete_doc(n, i, id, p(q))
                    },
                ),
        )
        .route(
            "/{index}/_doc",
            post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    documents::index_doc(n, i, None, false, p(q), b)
                },
            ),
        )
        .route("/{index}/_create/{id}", index_with_id(true))
        .route(
            "/{index}/_update/{id}",
            post(
                |State(n): State<S>,
                 Path((i, id)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| documents::update_doc(n, i, id, p(q), b),
            ),
        )
        .route(
            "/{index}/_source/{id}",
            get(
                |State(n): State<S>, Path((i, id)): Path<(String, String)>, Query(q): Q| {
                    documents::get_doc(n, i, id, p(q), false, true)
                },
            )
            .head(
                |State(n): State<S>, Path((i, id)): Path<(String, String)>, Query(q): Q| {
                    documents::get_doc(n, i, id, p(q), true, true)
                },
            ),
        )
        .route(
            "/_mget",
            get(|State(n): State<S>, Query(q): Q, b: Bytes| documents::mget(n, None, p(q), b))
                .post(|State(n): State<S>, Query(q): Q, b: Bytes| {
                    documents::mget(n, None, p(q), b)
                }),
        )
        .route(
            "/{index}/_mget",
            get(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    documents::mget(n, Some(i), p(q), b)
                },
            )
            .post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    documents::mget(n, Some(i), p(q), b)
                },
            ),
        )
        .route(
            "/_bulk",
            post(|State(n): State<S>, Query(q): Q, b: Bytes| documents::bulk(n, None, p(q), b))
                .put(|State(n): State<S>, Query(q): Q, b: Bytes| documents::bulk(n, None, p(q), b)),
        )
        .route(
            "/{index}/_bulk",
            post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    documents::bulk(n, Some(i), p(q), b)
                },
            )
            .put(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    documents::bulk(n, Some(i), p(q), b)
                },
            ),
        )
}

fn index_routes() -> Router<S> {
    let maint = |action: &'static str| -> (MethodRouter<S>, MethodRouter<S>) {
        (
            post(move |State(n): State<S>, Query(q): Q| {
                indices::maintenance(n, None, action, p(q))
            })
            .get(move |State(n): State<S>, Query(q): Q| {
                indices::maintenance(n, None, action, p(q))
            }),
            post(
                move |State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                    indices::maintenance(n, Some(i), action, p(q))
                },
            )
            .get(
                move |State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                    indices::maintenance(n, Some(i), action, p(q))
                },
            ),
        )
    };
    let (refresh_all, refresh_index) = maint("refresh");
    let (flush_all, flush_index) = maint("flush");
    let (merge_all, merge_index) = maint("forcemerge");
    Router::new()
        .route(
            "/{index}",
            put(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    indices::create(n, i, p(q), b)
                },
            )
            .delete(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::delete(n, i, p(q))
            })
            .head(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::exists(n, i, p(q))
            })
            .get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| indices::get(n, i, p(q))),
        )
        .route(
            "/_segments",
            get(|State(n): State<S>, Query(q): Q| crate::segments::segments(n, None, p(q))),
        )
        .route(
            "/{index}/_segments",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                crate::segments::segments(n, Some(i), p(q))
            }),
        )
        .route("/_refresh", refresh_all)
        .route("/{index}/_refresh", refresh_index)
        .route("/_flush", flush_all)
        .route("/{index}/_flush", flush_index)
        .route("/_forcemerge", merge_all)
        .route("/{index}/_forcemerge", merge_index)
        .route(
            "/_mapping",
            get(|State(n): State<S>, Query(q): Q| indices::get_mapping(n, None, p(q))),
        )
        .route(
            "/{index}/_mapping",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::get_mapping(n, Some(i), p(q))
            })
            .put(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    indices::put_mapping(n, i, p(q), b)
                },
            )
            .post(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    indices::put_mapping(n, i, p(q), b)
                },
            ),
        )
        .route(
            "/_settings",
            get(|State(n): State<S>, Query(q): Q| indices::get_settings(n, None, None, p(q))).put(
                |State(n): State<S>, Query(q): Q, b: Bytes| indices::put_settings(n, None, p(q), b),
            ),
        )
        .route(
            "/{index}/_settings",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::get_settings(n, Some(i), None, p(q))
            })
            .put(
                |State(n): State<S>, Path(i): Path<String>, Query(q): Q, b: Bytes| {
                    indices::put_settings(n, Some(i), p(q), b)
                },
            ),
        )
        .route(
            "/{index}/_settings/{name}",
            get(
                |State(n): State<S>, Path((i, s)): Path<(String, String)>, Query(q): Q| {
                    indices::get_settings(n, Some(i), Some(s), p(q))
                },
            ),
        )
        .route(
            "/{index}/_close",
            post(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::open_close(n, i, false, p(q))
            }),
        )
        .route(
            "/{index}/_open",
            post(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                indices::open_close(n, i, true, p(q))
            }),
        )
        .route(
            "/_aliases",
            post(|State(n): State<S>, Query(q): Q, b: Bytes| aliases::update_aliases(n, p(q), b))
                .get(|State(n): State<S>, Query(q): Q| aliases::get_aliases(n, None, None, p(q))),
        )
        .route(
            "/_alias",
            get(|State(n): State<S>, Query(q): Q| aliases::get_aliases(n, None, None, p(q))),
        )
        .route(
            "/_alias/{name}",
            get(|State(n): State<S>, Path(a): Path<String>, Query(q): Q| {
                aliases::get_aliases(n, None, Some(a), p(q))
            }),
        )
        .route(
            "/{index}/_alias",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                aliases::get_aliases(n, Some(i), None, p(q))
            }),
        )
        .route(
            "/{index}/_aliases",
            get(|State(n): State<S>, Path(i): Path<String>, Query(q): Q| {
                aliases::get_aliases(n, Some(i), None, p(q))
            }),
        )
        .route(
            "/{index}/_alias/{name}",
            get(
                |State(n): State<S>, Path((i, a)): Path<(String, String)>, Query(q): Q| {
                    aliases::get_aliases(n, Some(i), Some(a), p(q))
                },
            )
            .put(
                |State(n): State<S>,
                 Path((i, a)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| aliases::put_alias(n, i, a, p(q), b),
            )
            .post(
                |State(n): State<S>,
                 Path((i, a)): Path<(String, String)>,
                 Query(q): Q,
                 b: Bytes| aliases::put_alias(n, i, a, p(q), b),
            )
            .delete(
                |State(n): State<S>, Path((i, a)): Path<(String, String)>, Query(q): Q| {
                    aliases::delete_alias(n, i, a, p(q))
                },
            ),
        )
}

/// OpenSearch answers unknown paths with 400 and a plain `error` string naming the decoded path.
async fn no_handler(method: Method, uri: axum::http::Uri) -> Response {
    let path = crate::server::decoded_path(uri.path());
    let body = json!({"error": format!("no handler found for uri [{path}] and method [{method}]")});
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body.to_string(),
    )
        .into_response()
}

/// Turns axum's bare 405 into OpenSearch's body, listing the allowed methods.
async fn render_method_not_allowed(req: Request, next: Next) -> Response {
    let (method, uri) = (req.method().clone(), req.uri().clone());
    let response = next.run(req).await;
    if response.status() != StatusCode::METHOD_NOT_ALLOWED {
        return response;
    }
    let allowed = allowed_methods(
        uri.path(),
        response
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or(""),
    );
    let body = json!({"error": format!("Incorrect HTTP method for uri [{}] and method [{}], allowed: [{}]", uri, method, allowed), "status": 405});
    let mut out = (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body.to_string(),
    )
        .into_response();
    if let Some(allow) = response.headers().get(header::ALLOW) {
        out.headers_mut().insert(header::ALLOW, allow.clone());
    }
    out
}

/// OpenSearch accepts JSON-family bodies only (406 otherwise).
async fn check_content_type(req: Request, next: Next) -> Response {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(content_type) = content_type {
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let accepted = mime.is_empty()
            || mime.ends_with("/json")
            || mime.ends_with("+json")
            || matches!(
                mime.as_str(),
                "application/x-ndjson"
                    | "application/smile"
                    | "application/yaml"
                    | "application/cbor"
                    | "application/x-www-form-urlencoded"
            );
        if !accepted {
            let body = json!({"error": format!("Content-Type header [{content_type}] is not supported"), "status": 406});
            return (
                StatusCode::NOT_ACCEPTABLE,
                [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
                body.to_string(),
            )
                .into_response();
        }
    }
    next.run(req).await
}

/// The methods to list in a 405: axum's, without the HEAD it derives from GET unless
/// OpenSearch registers HEAD on that path too (root, index, document and source).
fn allowed_methods(path: &str, allow_header: &str) -> String {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let explicit_head = match segments.as_slice() {
        [] => true,
        [index] => !index.starts_with('_'),
        [_, kind, _] => *kind == "_doc" || *kind == "_source",
        _ => false,
    };
    allow_header
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty() && (*m != "HEAD" || explicit_head))
        .collect::<Vec<_>>()
        .join(", ")
}

fn panic_response(err: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let detail = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into());
    tracing::error!(panic = %detail, "request handler panicked");
    RestError(ApiError::internal(format!(
        "internal error while handling the request (this is a bug in Shoal): {detail}"
    )))
    .into_response()
}

pub use crate::server::serve;
