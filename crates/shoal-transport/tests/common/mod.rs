//! Shared fixtures of the transport integration tests: a handler dispatching on test actions
//! and helpers to start nodes on ephemeral ports.
#![allow(dead_code)] // each test binary uses a subset

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use shoal_transport::{
    Handler, RemoteError, ReplyStream, Request, ServerHandle, Transport, TransportError,
};

pub const TIMEOUT: Duration = Duration::from_secs(5);
pub const MIB: usize = 1024 * 1024;

/// Dispatches on the action like a node's handler would.
pub struct TestHandler;

impl Handler for TestHandler {
    fn handle(&self, req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> {
        Box::pin(async move {
            match req.action.as_str() {
                "test:echo" => Ok(req.body),
                "test:whoami" => Ok(Bytes::from(req.from_node)),
                "test:fail" => Err(RemoteError::new(
                    404,
                    "index_not_found_exception",
                    "no such index [logs]",
                )),
                "test:sleep" => {
                    let millis: u64 = serde_json::from_slice(&req.body)
                        .map_err(|e| RemoteError::bad_request(e.to_string()))?;
                    tokio::time::sleep(Duration::from_millis(millis)).await;
                    Ok(Bytes::from_static(b"slept"))
                }
                "test:panic" => panic!("boom"),
                other => Err(RemoteError::action_not_found(other)),
            }
        })
    }

    fn handle_stream(&self, req: Request) -> BoxFuture<'static, Result<ReplyStream, RemoteError>> {
        Box::pin(async move {
            match req.action.as_str() {
                "test:chunks" => {
                    let (chunks, chunk_size): (usize, usize) = serde_json::from_slice(&req.body)
                        .map_err(|e| RemoteError::bad_request(e.to_string()))?;
                    let items = stream::iter(0..chunks).map(move |i| Ok(chunk(i, chunk_size)));
                    Ok(items.boxed())
                }
                "test:fail_midway" => {
                    let items = stream::iter([
                        Ok(Bytes::from_static(b"first")),
                        Err(RemoteError::new(500, "io_exception", "disk gone")),
                        Ok(Bytes::from_static(b"never sent")),
                    ]);
                    Ok(items.boxed())
                }
                "test:panic_midway" => {
                    let items = stream::iter(0..3).map(|i| {
                        assert!(i < 1, "chunk {i} exploded");
                        Ok(Bytes::from_static(b"ok"))
                    });
                    Ok(items.boxed())
                }
                other => Err(RemoteError::action_not_found(other)),
            }
        })
    }
}

/// Deterministic chunk content, different for every chunk.
pub fn chunk(index: usize, size: usize) -> Bytes {
    (0..size)
        .map(|j| (j.wrapping_mul(31) ^ index.wrapping_mul(7)) as u8)
        .collect::<Vec<_>>()
        .into()
}

/// FNV-1a, enough to notice a lost, duplicated or reordered byte.
pub fn checksum(data: impl IntoIterator<Item = u8>) -> u64 {
    data.into_iter().fold(0xcbf29ce484222325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100000001b3)
    })
}

pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

pub async fn start_node(node_id: &str) -> (Arc<Transport>, ServerHandle, String) {
    let transport = Transport::new(node_id.to_string());
    let handle = transport
        .serve(localhost(), Arc::new(TestHandler))
        .await
        .unwrap();
    let addr = handle.local_addr().to_string();
    (transport, handle, addr)
}

pub async fn echo(
    client: &Transport,
    addr: &str,
    body: &'static [u8],
) -> Result<Bytes, TransportError> {
    client
        .call(addr, "test:echo", Bytes::from_static(body), TIMEOUT)
        .await
}

/// A port nothing listens on.
pub fn free_port_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}
