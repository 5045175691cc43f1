//! Sending side of the transport: unary calls and server-streaming calls.
//!
//! Deadlines are enforced on the client with a timer around the whole call (filters, connection
//! establishment, response), not with gRPC's `grpc-timeout` header: when the timer fires the
//! future is dropped, the HTTP/2 stream is reset and the server drops the handler's future.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};
use tracing::debug;

use crate::error::{RemoteError, TransportError};
use crate::filter::FilterDecision;
use crate::pool::{ChannelPool, PooledChannel};
use crate::transport::{Transport, MAX_MESSAGE_SIZE};
use crate::wire::rpc_client::RpcClient;
use crate::wire::{WireReply, WireRequest};

/// Metadata key of the server's cluster uuid on a refused request (see `server.rs`).
pub(crate) const CLUSTER_UUID_METADATA: &str = "x-shoal-cluster-uuid";

/// Items of a streamed answer, as seen by the caller; an error item ends the stream.
pub type ResponseStream = BoxStream<'static, Result<Bytes, TransportError>>;

/// One outgoing call: where, what, and until when.
struct Call<'a> {
    addr: &'a str,
    action: &'a str,
    timeout: Duration,
    deadline: Instant,
}

impl<'a> Call<'a> {
    fn new(addr: &'a str, action: &'a str, timeout: Duration) -> Self {
        Call {
            addr,
            action,
            timeout,
            deadline: Instant::now() + timeout,
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    fn timed_out(&self) -> TransportError {
        TransportError::Timeout {
            addr: self.addr.to_string(),
            action: self.action.to_string(),
            after: self.timeout,
        }
    }
}

impl Transport {
    /// Sends `body` to the handler of `action` on the node at `addr` ("host:port") and waits at
    /// most `timeout` for its answer.
    pub async fn call(
        &self,
        addr: &str,
        action: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, TransportError> {
        let call = Call::new(addr, action, timeout);
        self.pass_filters(&call).await?;
        self.stats.sent(body.len());
        let (response, _pooled) = self
            .send_attempts(&call, |mut client| {
                let request = self.wire_request(action, body.clone());
                async move { client.invoke(request).await }
            })
            .await?;
        let reply = response.into_inner();
        self.stats.received(reply.body.len());
        reply.into_result().map_err(TransportError::Remote)
    }

    /// Starts a server-streaming call. `idle_timeout` bounds the wait for the first item (a
    /// refusal by the handler is returned here as an error) and then for each following item, so
    /// a stalled peer cannot hang the caller.
    pub async fn call_stream(
        &self,
        addr: &str,
        action: &str,
        body: Bytes,
        idle_timeout: Duration,
    ) -> Result<ResponseStream, TransportError> {
        let call = Call::new(addr, action, idle_timeout);
        self.pass_filters(&call).await?;
        self.stats.sent(body.len());
        let (response, pooled) = self
            .send_attempts(&call, |mut client| {
                let request = self.wire_request(action, body.clone());
                async move { client.invoke_stream(request).await }
            })
            .await?;
        let mut replies = response.into_inner();
        let first = match tokio::time::timeout(call.remaining(), replies.message()).await {
            Err(_elapsed) => return Err(call.timed_out()),
            Ok(Err(status)) => return Err(self.status_error(addr, &pooled, &status)),
            Ok(Ok(None)) => return Ok(stream::empty().boxed()),
            Ok(Ok(Some(reply))) => {
                self.stats.received(reply.body.len());
                reply.into_result().map_err(TransportError::Remote)?
            }
        };
        let reader = ReplyReader {
            replies,
            addr: addr.to_string(),
            action: action.to_string(),
            idle_timeout,
            pool: self.pool.clone(),
            channel_id: pooled.id,
            local_cluster_uuid: self.cluster_uuid(),
            stats: self.stats.clone(),
        };
        Ok(stream::once(async move { Ok(first) })
            .chain(reader.into_stream())
            .boxed())
    }

    /// Sends one request through the pooled channel to `call.addr` within the call's deadline.
    ///
    /// A cached connection can be dead without the channel knowing yet (the peer restarted and
    /// the close is still in flight); the request then fails without having reached the peer,
    /// so it is sent once more on a fresh channel instead of failing the caller.
    async fn send_attempts<T, F, Fut>(
        &self,
        call: &Call<'_>,
        mut attempt: F,
    ) -> Result<(T, PooledChannel), TransportError>
    where
        F: FnMut(RpcClient<Channel>) -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let mut retried = false;
        loop {
            let pooled = self.pool.get(call.addr)?;
            let client = rpc_client(pooled.channel.clone());
            let status = match tokio::time::timeout(call.remaining(), attempt(client)).await {
                Err(_elapsed) => return Err(call.timed_out()),
                Ok(Ok(value)) => return Ok((value, pooled)),
                Ok(Err(status)) => status,
            };
            let error = self.status_error(call.addr, &pooled, &status);
            if retried || !is_stale_connection(&status) {
                return Err(error);
            }
            debug!(
                addr = call.addr,
                action = call.action,
                "cached transport connection was closed, retrying on a new one"
            );
            self.pool.evict(call.addr, pooled.id);
            retried = true;
        }
    }

    /// Applies the fault-injection filters; a delay counts against the call's deadline.
    async fn pass_filters(&self, call: &Call<'_>) -> Result<(), TransportError> {
        match self.filter_decision(call.addr, call.action) {
            FilterDecision::Pass => Ok(()),
            FilterDecision::Drop => {
                debug!(
                    addr = call.addr,
                    action = call.action,
                    "transport filter dropped request"
                );
                Err(TransportError::Dropped)
            }
            FilterDecision::Delay(delay) if delay >= call.remaining() => {
                tokio::time::sleep_until(call.deadline).await;
                Err(call.timed_out())
            }
            FilterDecision::Delay(delay) => {
                tokio::time::sleep(delay).await;
                Ok(())
            }
        }
    }

    fn wire_request(&self, action: &str, body: Bytes) -> WireRequest {
        WireRequest {
            action: action.to_string(),
            from_node: self.local_node_id().to_string(),
            cluster_uuid: self.cluster_uuid(),
            body,
            protocol_version: self.protocol().current,
            min_compatible_version: self.protocol().min_compatible,
        }
    }

    fn status_error(&self, addr: &str, pooled: &PooledChannel, status: &Status) -> TransportError {
        status_to_error(&self.pool, addr, pooled.id, &self.cluster_uuid(), status)
    }
}

fn rpc_client(channel: Channel) -> RpcClient<Channel> {
    RpcClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE)
}

/// Maps a gRPC status to a transport error; evicts the channel when the connection failed so the
/// next call reconnects from scratch.
fn status_to_error(
    pool: &ChannelPool,
    addr: &str,
    channel_id: u64,
    local_cluster_uuid: &str,
    status: &Status,
) -> TransportError {
    let error = classify_status(addr, local_cluster_uuid, status);
    if let TransportError::Unreachable { reason, .. } = &error {
        debug!(addr, reason = %reason, "transport connection failed");
        pool.evict(addr, channel_id);
    }
    error
}

fn classify_status(addr: &str, local_cluster_uuid: &str, status: &Status) -> TransportError {
    // A stream or connection broken at the HTTP/2 layer (a node stopping, frozen or shedding
    // streams) means the peer did not answer, whatever code tonic maps the h2 reason to
    // (`Internal`, `ResourceExhausted` for ENHANCE_YOUR_CALM, …): it is unreachable.
    if is_http2_failure(status) {
        return TransportError::Unreachable {
            addr: addr.to_string(),
            reason: status.message().to_string(),
        };
    }
    match status.code() {
        Code::FailedPrecondition => match remote_cluster_uuid(status) {
            Some(remote) => TransportError::ClusterMismatch {
                local: local_cluster_uuid.to_string(),
                remote,
            },
            None => protocol_error(addr, status),
        },
        // Connect errors, broken connections and reset streams all surface as one of these.
        Code::Unavailable | Code::Unknown | Code::Cancelled => TransportError::Unreachable {
            addr: addr.to_string(),
            reason: status.message().to_string(),
        },
        _ => protocol_error(addr, status),
    }
}

/// Whether the status comes from the HTTP/2 layer (a broken stream or connection) rather than
/// from the handler on the other side.
fn is_http2_failure(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.downcast_ref::<h2::Error>().is_some() {
            return true;
        }
        source = error.source();
    }
    false
}

/// True when the request failed because its connection was already closed when it was sent:
/// hyper cancelled it before writing it, or writing it hit a socket the peer had closed.
fn is_stale_connection(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
        {
            return true;
        }
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        source = error.source();
    }
    false
}

fn remote_cluster_uuid(status: &Status) -> Option<String> {
    let value = status.metadata().get(CLUSTER_UUID_METADATA)?;
    value.to_str().ok().map(str::to_string)
}

/// The peer answered but not with a reply (too large a message, undecodable bytes, unknown gRPC
/// method because of a version skew...): reported like OpenSearch's generic transport failure.
fn protocol_error(addr: &str, status: &Status) -> TransportError {
    TransportError::Remote(RemoteError::new(
        500,
        "transport_exception",
        format!("[{addr}] {:?}: {}", status.code(), status.message()),
    ))
}

/// Reads the items after the first one of a streamed answer.
struct ReplyReader {
    replies: Streaming<WireReply>,
    addr: String,
    action: String,
    idle_timeout: Duration,
    pool: Arc<ChannelPool>,
    channel_id: u64,
    local_cluster_uuid: String,
    stats: Arc<crate::stats::TransportStats>,
}

impl ReplyReader {
    fn into_stream(self) -> impl futures::Stream<Item = Result<Bytes, TransportError>> + Send {
        stream::unfold(Some(self), |reader| async move {
            let mut reader = reader?;
            match reader.next_item().await {
                None => None,
                Some(Ok(body)) => Some((Ok(body), Some(reader))),
                // An error item ends the stream.
                Some(Err(error)) => Some((Err(error), None)),
            }
        })
    }

    async fn next_item(&mut self) -> Option<Result<Bytes, TransportError>> {
        match tokio::time::timeout(self.idle_timeout, self.replies.message()).await {
            Err(_elapsed) => Some(Err(TransportError::Timeout {
                addr: self.addr.clone(),
                action: self.action.clone(),
                after: self.idle_timeout,
            })),
            Ok(Ok(None)) => None,
            Ok(Ok(Some(reply))) => {
                self.stats.received(reply.body.len());
                Some(reply.into_result().map_err(TransportError::Remote))
            }
            Ok(Err(status)) => Some(Err(status_to_error(
                &self.pool,
                &self.addr,
                self.channel_id,
                &self.local_cluster_uuid,
                &status,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_broken_at_the_http2_layer_is_unreachable_and_a_handler_error_is_not() {
        for reason in [h2::Reason::INTERNAL_ERROR, h2::Reason::PROTOCOL_ERROR] {
            let broken = Status::from_error(Box::new(h2::Error::from(reason)));
            assert_eq!(broken.code(), Code::Internal);
            assert!(
                matches!(
                    classify_status("n1:9300", "uuid", &broken),
                    TransportError::Unreachable { .. }
                ),
                "{reason:?}"
            );
        }
        // ENHANCE_YOUR_CALM reaches tonic as `ResourceExhausted` (seen against a frozen node).
        let shed = Status::from_error(Box::new(h2::Error::from(h2::Reason::ENHANCE_YOUR_CALM)));
        assert!(matches!(
            classify_status("n1:9300", "uuid", &shed),
            TransportError::Unreachable { .. }
        ));
        let answered = Status::internal("the handler failed");
        assert!(!matches!(
            classify_status("n1:9300", "uuid", &answered),
            TransportError::Unreachable { .. }
        ));
    }
}
