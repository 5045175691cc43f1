//! Node-to-node RPC on the transport port (9300 by default), over gRPC with tonic.
//!
//! A message is an *action name* (as in OpenSearch, `internal:cluster/coordination/join`,
//! `indices:data/write/bulk[s]`, ...) plus a body. Services declare each action as an [`Action`]
//! (name, minimum protocol version, request and response types), register its handler in an
//! [`ActionRegistry`], and call it with [`Transport::send`]; the registry is the node's
//! [`Handler`]. The untyped [`Transport::call`] stays for raw bodies. Everything the cluster layer sends (Raft messages, joins, pings, shard bulk
//! forwarding, search phases, recovery file chunks) goes through the two gRPC methods of
//! `shoal.transport.Rpc`: `Invoke` (unary) and `InvokeStream` (server streaming).
//!
//! - Every request carries the sender's node id, cluster uuid and protocol version range
//!   ([`ProtocolVersion`]); the cluster manager refuses a joining node whose range does not
//!   overlap its own.
//! - Every request carries the sender's node id and cluster uuid. A server refuses a request
//!   whose cluster uuid differs from its own when both are known, so nodes of two clusters
//!   sharing hosts can never mix their state.
//! - Handler failures travel in-band as [`RemoteError`] (OpenSearch's error shape with its
//!   `caused_by` chain, plus the [`shoal_types::ErrorKind`] callers branch on); gRPC statuses
//!   only describe transport problems and are mapped to [`TransportError`].
//! - Channels are opened lazily, cached per `host:port`, and evicted when the connection fails,
//!   so a peer restarting on the same port is reached again on the next call. A request that
//!   fails because its cached connection had already been closed by the peer is sent once more
//!   on a fresh connection (at most once, within the same deadline).
//! - [`Filter`]s inject faults (drops, partitions, delays) for in-process cluster tests.
//!
//! No protoc is needed: messages are hand-written prost structs (`wire.rs`) and `build.rs`
//! generates the tonic stubs with `tonic_build::manual`.

mod action;
mod client;
mod conn;
mod error;
mod filter;
mod pool;
mod server;
mod stats;
mod transport;
mod version;
mod wire;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub use action::{
    Action, ActionContext, ActionRegistry, StreamAction, WireAction, WireStreamAction,
};
pub use client::ResponseStream;
pub use error::{RemoteError, TransportError};
pub use filter::{DelayFilter, DropActionFilter, Filter, FilterDecision, PartitionFilter};
pub use server::ServerHandle;
pub use shoal_types::ErrorKind;
pub use stats::{TransportCounts, TransportStats};
pub use transport::{Transport, DEFAULT_TRANSPORT_PORT, MAX_MESSAGE_SIZE};
pub use version::{ProtocolVersion, PROTOCOL_VERSION};

/// An incoming request, as seen by a [`Handler`].
#[derive(Debug, Clone)]
pub struct Request {
    pub action: String,
    /// Node id of the sender.
    pub from_node: String,
    /// The sender's protocol range.
    pub protocol: ProtocolVersion,
    pub body: Bytes,
}

/// The stream a streaming handler answers with; an error item ends the stream.
pub type ReplyStream = BoxStream<'static, Result<Bytes, RemoteError>>;

/// Serves the requests a node receives; one handler per node dispatches on [`Request::action`].
///
/// Futures are `'static` so handlers clone what they need out of `self`. A panic in a handler
/// answers a 500 [`RemoteError`] and does not affect the server.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>>;

    /// Server-streaming answers, e.g. file chunks during recovery.
    fn handle_stream(&self, req: Request) -> BoxFuture<'static, Result<ReplyStream, RemoteError>> {
        let error = RemoteError::new(
            400,
            error::ACTION_NOT_FOUND,
            format!("unknown streaming action [{}]", req.action),
        );
        Box::pin(async move { Err(error) })
    }
}
