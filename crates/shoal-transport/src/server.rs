//! Serving side of the transport: the gRPC service that hands requests to the node's
//! [`Handler`], and the [`ServerHandle`] that stops it.

use std::any::Any;
use std::io;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{self, BoxFuture};
use futures::stream::{self, BoxStream, StreamExt};
use futures::FutureExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::metadata::MetadataValue;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Response, Status};
use tracing::{error, info, warn};

use crate::client::CLUSTER_UUID_METADATA;
use crate::conn::{ConnRegistry, TrackedIo};
use crate::error::RemoteError;
use crate::pool::{CONNECTION_WINDOW, MAX_FRAME, STREAM_WINDOW};
use crate::transport::{Transport, MAX_MESSAGE_SIZE};
use crate::wire::rpc_server::{Rpc, RpcServer};
use crate::wire::{WireReply, WireRequest};
use crate::{Handler, ReplyStream, Request};

/// Same as the client side: notice vanished peers on idle connections.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

impl Transport {
    /// Binds `addr` (port 0 picks a free port) and serves requests with `handler` until the
    /// returned handle is shut down or dropped. Fails if the address cannot be bound.
    pub async fn serve(
        self: &Arc<Self>,
        addr: SocketAddr,
        handler: Arc<dyn Handler>,
    ) -> io::Result<ServerHandle> {
        // Tokio's listener sets SO_REUSEADDR, so a restarted node can bind the port again
        // while the previous connections linger in TIME_WAIT.
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let conns = Arc::new(ConnRegistry::default());
        let incoming = tracked_incoming(listener, conns.clone());
        let service = RpcService {
            transport: self.clone(),
            handler,
        };
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let task = tokio::spawn(run_server(service, incoming, shutdown_rx, local_addr));
        info!(addr = %local_addr, node = self.local_node_id(), "transport listening");
        Ok(ServerHandle {
            local_addr,
            shutdown_tx: Some(shutdown_tx),
            conns,
            task: Some(task),
        })
    }
}

fn tracked_incoming(
    listener: TcpListener,
    conns: Arc<ConnRegistry>,
) -> impl futures::Stream<Item = io::Result<TrackedIo>> {
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(TCP_KEEPALIVE))
        .map(move |accepted| accepted.map(|stream| conns.track(stream)))
}

async fn run_server(
    service: RpcService,
    incoming: impl futures::Stream<Item = io::Result<TrackedIo>>,
    shutdown_rx: oneshot::Receiver<()>,
    local_addr: SocketAddr,
) {
    let rpc = RpcServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
    // A dropped sender also means shut down.
    let shutdown = async {
        let _ = shutdown_rx.await;
    };
    let result = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .add_service(rpc)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    match result {
        Ok(()) => info!(addr = %local_addr, "transport stopped"),
        Err(error) => error!(addr = %local_addr, error = %error, "transport server failed"),
    }
}

/// A running transport server. Dropping the handle closes the server and all its connections
/// at once, like a crash; use [`ServerHandle::shutdown`] to let in-flight requests finish.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown_tx: Option<oneshot::Sender<()>>,
    conns: Arc<ConnRegistry>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The bound address (the actual port when serving on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets in-flight requests finish for at most `grace`, then closes the
    /// remaining connections. Returns once the port is released.
    pub async fn shutdown(mut self, grace: Duration) {
        self.stop_accepting();
        let Some(mut task) = self.task.take() else {
            return;
        };
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            warn!(addr = %self.local_addr, "transport connections still open after grace period, closing them");
            self.conns.kill_all();
            let _ = task.await;
        }
    }

    /// Closes the server and every connection now, like a crash. Returns once the port is
    /// released.
    pub async fn kill(mut self) {
        self.stop_accepting();
        self.conns.kill_all();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop_accepting(&mut self) {
        if let Some(shutdown_tx) = self.shutdown_tx.take() {
            let _ = shutdown_tx.send(());
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.task.is_some() {
            self.stop_accepting();
            self.conns.kill_all();
        }
    }
}

/// The gRPC service: checks the sender's cluster, then hands the request to the handler.
struct RpcService {
    transport: Arc<Transport>,
    handler: Arc<dyn Handler>,
}

#[tonic::async_trait]
impl Rpc for RpcService {
    async fn invoke(
        &self,
        request: tonic::Request<WireRequest>,
    ) -> Result<Response<WireReply>, Status> {
        let request = self.accept(request.into_inner())?;
        let action = request.action.clone();
        let handler = self.handler.clone();
        let result = guarded(&action, move || handler.handle(request)).await;
        let reply = reply(result);
        self.transport.stats.sent(reply.body.len());
        Ok(Response::new(reply))
    }

    type InvokeStreamStream = BoxStream<'static, Result<WireReply, Status>>;

    async fn invoke_stream(
        &self,
        request: tonic::Request<WireRequest>,
    ) -> Result<Response<Self::InvokeStreamStream>, Status> {
        let request = self.accept(request.into_inner())?;
        let action = request.action.clone();
        let handler = self.handler.clone();
        let replies = match guarded(&action, move || handler.handle_stream(request)).await {
            Ok(items) => {
                let stats = self.transport.stats.clone();
                reply_stream(action, items)
                    .inspect(move |item| {
                        if let Ok(reply) = item {
                            stats.sent(reply.body.len());
                        }
                    })
                    .boxed()
            }
            // Refusals travel in-band like any handler error.
            Err(error) => stream::once(future::ready(Ok(WireReply::err(error)))).boxed(),
        };
        Ok(Response::new(replies))
    }
}

impl RpcService {
    /// Refuses a sender of another cluster; either side not knowing its cluster yet is fine.
    fn accept(&self, wire: WireRequest) -> Result<Request, Status> {
        let local_uuid = self.transport.cluster_uuid();
        if !local_uuid.is_empty()
            && !wire.cluster_uuid.is_empty()
            && local_uuid != wire.cluster_uuid
        {
            warn!(
                action = %wire.action,
                from_node = %wire.from_node,
                local_cluster_uuid = %local_uuid,
                remote_cluster_uuid = %wire.cluster_uuid,
                "refusing transport request from another cluster"
            );
            return Err(cluster_mismatch(&local_uuid, &wire.cluster_uuid));
        }
        self.transport.stats.received(wire.body.len());
        Ok(Request {
            protocol: wire.protocol(),
            action: wire.action,
            from_node: wire.from_node,
            body: wire.body,
        })
    }
}

fn cluster_mismatch(local_uuid: &str, remote_uuid: &str) -> Status {
    let mut status = Status::failed_precondition(format!(
        "request from cluster [{remote_uuid}] refused by a node of cluster [{local_uuid}]"
    ));
    // The client reads our uuid from the metadata to build `TransportError::ClusterMismatch`.
    if let Ok(value) = MetadataValue::try_from(local_uuid) {
        status.metadata_mut().insert(CLUSTER_UUID_METADATA, value);
    }
    status
}

fn reply(result: Result<bytes::Bytes, RemoteError>) -> WireReply {
    match result {
        Ok(body) => WireReply::ok(body),
        Err(error) => WireReply::err(error),
    }
}

/// Streams the handler's items; a panic while producing one becomes a 500 item, and the stream
/// ends after the first error item (the client stops reading there anyway).
fn reply_stream(
    action: String,
    items: ReplyStream,
) -> BoxStream<'static, Result<WireReply, Status>> {
    AssertUnwindSafe(items)
        .catch_unwind()
        .map(move |item| item.unwrap_or_else(|panic| Err(panic_error(&action, panic))))
        .scan(false, |ended, item| {
            if *ended {
                return future::ready(None);
            }
            *ended = item.is_err();
            future::ready(Some(Ok(reply(item))))
        })
        .boxed()
}

/// Runs a handler call, turning a panic (while building or polling its future) into a 500.
async fn guarded<T>(
    action: &str,
    call: impl FnOnce() -> BoxFuture<'static, Result<T, RemoteError>>,
) -> Result<T, RemoteError> {
    let future = match std::panic::catch_unwind(AssertUnwindSafe(call)) {
        Ok(future) => future,
        Err(panic) => return Err(panic_error(action, panic)),
    };
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(panic_error(action, panic)),
    }
}

fn panic_error(action: &str, panic: Box<dyn Any + Send>) -> RemoteError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|message| message.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    error!(action, panic = %message, "transport handler panicked");
    RemoteError::internal(format!("handler of [{action}] panicked: {message}"))
}
