//! A small blocking HTTP/1.1 client over hyper: every call goes through the node's REST layer
//! (`shoal_rest::serve`) exactly as an OpenSearch client's would.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use serde_json::Value;

/// How long one HTTP call may take before the client gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// An HTTP answer: the status and the JSON body (`Value::Null` when empty or not JSON).
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: Value,
}

impl Response {
    /// Panics with the body unless the status is 2xx.
    pub fn ok(self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "HTTP {}: {}",
            self.status,
            self.body
        );
        self.body
    }
}

/// A client of one node's HTTP address; calls block the calling (non-async) thread.
#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    runtime: tokio::runtime::Handle,
}

impl Client {
    pub(crate) fn new(addr: SocketAddr, runtime: tokio::runtime::Handle) -> Client {
        Client { addr, runtime }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// One request with a JSON body (`Value::Null`: none). Errs when the node does not
    /// answer (refused, reset, timed out), as a client sees a crashed node.
    pub fn request(&self, method: &str, path: &str, body: &Value) -> Result<Response, String> {
        let body = match body {
            Value::Null => Bytes::new(),
            other => Bytes::from(serde_json::to_vec(other).expect("json body")),
        };
        self.raw(method, path, body, "application/json")
    }

    /// One request with a body as is (ndjson for `_bulk`).
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        body: Bytes,
        content_type: &str,
    ) -> Result<Response, String> {
        let call = send(self.addr, method, path, body, content_type);
        self.runtime
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, call).await })
            .map_err(|_| format!("{method} {path}: no answer within {CALL_TIMEOUT:?}"))?
    }

    pub fn get(&self, path: &str) -> Result<Response, String> {
        self.request("GET", path, &Value::Null)
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<Response, String> {
        self.request("PUT", path, body)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Response, String> {
        self.request("POST", path, body)
    }

    pub fn delete(&self, path: &str) -> Result<Response, String> {
        self.request("DELETE", path, &Value::Null)
    }

    /// `PUT /{index}` with `body`; panics unless it is acknowledged.
    pub fn create_index(&self, index: &str, body: &Value) -> Value {
        self.put(&format!("/{index}"), body)
            .unwrap_or_else(|e| panic!("create index [{index}]: {e}"))
            .ok()
    }

    /// `PUT /{index}/_doc/{id}`.
    pub fn index_doc(&self, index: &str, id: &str, doc: &Value) -> Result<Response, String> {
        self.put(&format!("/{index}/_doc/{id}"), doc)
    }

    /// `GET /{index}/_doc/{id}`.
    pub fn get_doc(&self, index: &str, id: &str) -> Result<Response, String> {
        self.get(&format!("/{index}/_doc/{id}"))
    }

    /// `POST /_bulk` of `index` actions for (id, document) pairs.
    pub fn bulk(&self, index: &str, docs: &[(String, Value)]) -> Result<Response, String> {
        let mut lines = String::new();
        for (id, doc) in docs {
            lines.push_str(&serde_json::json!({"index": {"_index": index, "_id": id}}).to_string());
            lines.push('\n');
            lines.push_str(&doc.to_string());
            lines.push('\n');
        }
        self.raw("POST", "/_bulk", Bytes::from(lines), "application/x-ndjson")
    }

    /// `POST /{index}/_refresh`; panics on failure.
    pub fn refresh(&self, index: &str) {
        self.post(&format!("/{index}/_refresh"), &Value::Null)
            .unwrap_or_else(|e| panic!("refresh [{index}]: {e}"))
            .ok();
    }

    /// `POST /{index}/_search` with `body`.
    pub fn search(&self, index: &str, body: &Value) -> Result<Response, String> {
        self.post(&format!("/{index}/_search"), body)
    }

    /// `GET /_cluster/health`.
    pub fn health(&self) -> Result<Value, String> {
        self.get("/_cluster/health").map(|r| r.body)
    }
}

async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Bytes,
    content_type: &str,
) -> Result<Response, String> {
    let context = |e: &dyn std::fmt::Display| format!("{method} {path} on {addr}: {e}");
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| context(&e))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| context(&e))?;
    tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(body))
        .map_err(|e| context(&e))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| context(&e))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| context(&e))?
        .to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Response { status, body })
}
