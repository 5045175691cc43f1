//! The HTTP/1 server: hyper behind [`GuardedIo`], so OpenSearch's limits and errors apply to
//! the request head too, and one renderer gives every error OpenSearch's JSON body.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use shoal_node::{ApiError, Node};
use tokio::sync::watch;

use crate::http_guard::{GuardedIo, Limits, Rejection, REJECTION_HEADER, REJECTION_PATH};
use crate::response::RestError;

/// `http.max_initial_line_length` and `http.max_header_size` from the node's settings.
pub fn limits(node: &Node) -> Limits {
    let bytes = |key: &str, default: usize| {
        node.core()
            .cluster_setting(key)
            .and_then(|v| shoal_node::settings::parse_byte_size(&v).ok())
            .map_or(default, |v| v.max(64) as usize)
    };
    Limits {
        max_initial_line_length: bytes("http.max_initial_line_length", 4096),
        max_header_size: bytes("http.max_header_size", 8192),
    }
}

/// Serves the API on `listener` (bound before the node started, so a node whose HTTP port
/// is taken never joins the cluster) until the shutdown future resolves, then lets open
/// requests finish.
pub async fn serve(
    node: Arc<Node>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "http server listening");
    let limits = limits(&node);
    let reaper = tokio::spawn(expire_search_contexts(Arc::clone(&node)));
    let node_stats = Arc::clone(&node.node_stats);
    let app = crate::router(node);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .max_headers(limits.max_header_count());
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Too many open files and the like: wait instead of spinning.
                    tracing::warn!(error = %e, "cannot accept http connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let open = node_stats.http.opened();
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(GuardedIo::new(stream, limits));
        let service = TowerToHyperService::new(app.clone());
        let connection = builder.serve_connection(io, service);
        let mut stop = stop_rx.clone();
        let done = done_tx.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let stopping = tokio::select! {
                _ = connection.as_mut() => false,
                stopped = stop.wait_for(|s| *s) => stopped.is_ok(),
            };
            if stopping {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
            drop(open);
            drop(done);
        });
    }
    drop(listener);
    reaper.abort();
    let _ = stop_tx.send(true);
    drop(done_tx);
    // Every connection task holds a sender: this returns once the last one ends.
    let _ = tokio::time::timeout(Duration::from_secs(10), done_rx.changed()).await;
    Ok(())
}

/// Scroll and shard search contexts pin segments and memory until their keep-alive ends; the
/// registries drop expired ones only when touched, so a client that never returns would keep
/// them forever. Sweep them every second.
async fn expire_search_contexts(node: Arc<Node>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A context being read holds its lock: wait for it off the async workers.
        let node = Arc::clone(&node);
        let _ = tokio::task::spawn_blocking(move || {
            node.reads.expire_contexts();
        })
        .await;
    }
}

/// `http.max_content_length`, then the whole body read before any handler runs (as Netty's
/// aggregator does): a handler that answers without reading the body (a 405, a GET with a body)
/// would otherwise leave hyper to close the connection after its answer, without saying so, and
/// the client's next request on it would find it closed. Runs after decompression, so the limit
/// applies to what a gzip body inflates to.
pub async fn read_whole_body(req: Request, next: Next, max: usize) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = declared.filter(|len| *len > max) {
        // Read and drop a moderately oversized body so the client sees the 413 instead of a
        // connection reset mid-upload; a huge one is not worth reading.
        if len <= max.saturating_mul(4) {
            let mut body = req.into_body();
            while let Some(frame) = body.frame().await {
                if frame.is_err() {
                    break;
                }
            }
        }
        return closing(too_long(max));
    }
    let encoding = content_encoding(&req);
    let (parts, body) = req.into_parts();
    let bytes = match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return closing(too_long(max)),
        Err(e) => {
            let reason = if encoding.is_empty() {
                format!("cannot read the request body: {e}")
            } else {
                format!("cannot decode the request body (Content-Encoding [{encoding}]): {e}")
            };
            return closing(RestError(ApiError::bad_request(reason)).into_response());
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The request's `Content-Encoding` (empty when none): named in errors about its body.
fn content_encoding(req: &Request) -> String {
    req.headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn too_long(max: usize) -> Response {
    RestError(ApiError::new(
        413,
        "content_too_long_exception",
        format!("request body is too large: the limit is [{max}] bytes (http.max_content_length)"),
    ))
    .into_response()
}

/// The one error renderer in front of the router: a head the guard rejected, and any error the
/// HTTP plumbing (extractors, decompression, body limits) answers in text or without a body,
/// become OpenSearch's `{"error":{...},"status":N}`.
pub async fn render_http_errors(req: Request, next: Next) -> Response {
    if req.uri().path() == REJECTION_PATH {
        if let Some(rejection) = req
            .headers()
            .get(REJECTION_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(Rejection::from_header)
        {
            let err = ApiError::new(rejection.status, rejection.error_type, rejection.reason);
            return closing(RestError(err).into_response());
        }
    }
    let encoding = content_encoding(&req);
    let response = next.run(req).await;
    if !response.status().is_client_error() && !response.status().is_server_error() {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let status = response.status();
    let text = body_text(response.into_body()).await;
    RestError(plumbing_error(status, &text, &encoding)).into_response()
}

/// The error for a status the HTTP plumbing produced, with its text.
fn plumbing_error(status: StatusCode, text: &str, encoding: &str) -> ApiError {
    let code = status.as_u16();
    match code {
        413 => ApiError::new(
            413,
            "content_too_long_exception",
            format!("request body is too large (http.max_content_length): {text}"),
        ),
        415 => ApiError::new(
            415,
            "illegal_argument_exception",
            format!(
                "unsupported Content-Encoding [{encoding}]: only gzip and identity are accepted"
            ),
        ),
        400 if text.contains("Failed to buffer the request body") && !encoding.is_empty() => {
            ApiError::bad_request(format!(
                "cannot decode the request body (Content-Encoding [{encoding}]): {}",
                text.trim_start_matches("Failed to buffer the request body: ")
            ))
        }
        400 if text.starts_with("Failed to buffer the request body") => {
            ApiError::bad_request(format!(
                "cannot read the request body: {}",
                text.trim_start_matches("Failed to buffer the request body: ")
            ))
        }
        400 if text.starts_with("Invalid URL") => ApiError::bad_request(format!(
            "invalid path: {}",
            text.trim_start_matches("Invalid URL: ")
        )),
        _ => {
            let reason = if text.is_empty() {
                status.canonical_reason().unwrap_or("error").to_string()
            } else {
                text.to_string()
            };
            if code == 400 {
                ApiError::bad_request(reason)
            } else {
                ApiError::new(code, "exception", reason)
            }
        }
    }
}

/// The first 4 KiB of a plumbing error's body (they are short texts).
async fn body_text(body: Body) -> String {
    let limited = http_body_util::Limited::new(body, 4096);
    match limited.collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes())
            .trim()
            .to_string(),
        Err(_) => String::new(),
    }
}

fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A path with its percent-escapes decoded (the guard encodes bytes hyper refuses; messages show
/// what the client sent, as OpenSearch's `URI.getPath()` does).
pub fn decoded_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::decoded_path;

    #[test]
    fn decoded_path_undoes_percent_escapes() {
        assert_eq!(decoded_path("/%C3%A9/_x%3C"), "/é/_x<");
        assert_eq!(decoded_path("/a%zz%4"), "/a%zz%4");
        assert_eq!(decoded_path("/%FF"), "/\u{FFFD}");
    }
}
