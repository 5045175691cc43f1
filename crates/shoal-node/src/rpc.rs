//! Node-to-node calls of the data layer, in one place: sending a typed request to another node
//! (and waiting for it from blocking code), and registering the actions this node serves, each
//! run on a bounded pool (`pressure`).
//!
//! Every module that owns an action declares it (a [`shoal_transport::Action`]: name, request
//! and response types, or a [`WireAction`] for a body with its own framing) and registers its
//! handler through [`NodeActions`]; there is no central dispatch. Nothing here knows the node
//! or its services: [`NodeActions`] is generic over what its handlers act on, and the node
//! lists its actions where it wires its services (`crate::node`).

use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use serde::Serialize;
use shoal_transport::{ActionRegistry, RemoteError, TransportError, WireAction, WireStreamAction};

use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};

/// One request in flight to several nodes (see [`NodeCore::ask`]).
pub(crate) struct Asked<T> {
    pending: Vec<(String, Pending<T>)>,
    /// What the nodes send back, for the log line of one that does not.
    what: &'static str,
}

/// A request in flight to another node; resolves to its (typed) reply.
pub(crate) type Pending<T = Bytes> = tokio::task::JoinHandle<ApiResult<T>>;

impl From<TransportError> for ApiError {
    fn from(e: TransportError) -> ApiError {
        ApiError::from_remote(e.to_remote_error())
    }
}

pub(crate) fn json_bytes(value: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("transport messages serialize"))
}

impl NodeCore {
    /// Sends `request` to the handler of `A` on the node at `address`; the handle resolves to
    /// the typed reply. The request is encoded here, once.
    pub(crate) fn send<A: WireAction>(
        &self,
        address: &str,
        request: &A::Request,
        timeout: Duration,
    ) -> Pending<A::Response> {
        match A::encode_request(request) {
            Ok(body) => self.send_encoded::<A>(address, body, timeout),
            Err(e) => {
                let error = ApiError::internal(format!("cannot encode [{}]: {e}", A::NAME));
                self.runtime.spawn(async move { Err(error) })
            }
        }
    }

    /// [`NodeCore::send`] of a request already encoded (one request sent to several nodes).
    pub(crate) fn send_encoded<A: WireAction>(
        &self,
        address: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Pending<A::Response> {
        let (transport, address) = (self.transport.clone(), address.to_string());
        self.runtime
            .spawn(async move { Ok(transport.send_encoded::<A>(&address, body, timeout).await?) })
    }

    /// Sends one request to every node at `addresses` at once (encoded once); collect the
    /// answers with [`NodeCore::answers`] after doing this node's own part meanwhile.
    pub(crate) fn ask<A: WireAction>(
        &self,
        addresses: Vec<String>,
        request: &A::Request,
        timeout: Duration,
        what: &'static str,
    ) -> Asked<A::Response> {
        let pending = match A::encode_request(request) {
            Ok(body) => addresses
                .into_iter()
                .map(|address| {
                    let reply = self.send_encoded::<A>(&address, body.clone(), timeout);
                    (address, reply)
                })
                .collect(),
            Err(e) => {
                tracing::error!(action = A::NAME, error = %e, "cannot encode a request");
                Vec::new()
            }
        };
        Asked { pending, what }
    }

    /// The answers of the nodes asked with [`NodeCore::ask`]. A node that fails, or leaves the
    /// cluster before it answers, is left out, and its absence logged.
    pub(crate) fn answers<T: Send + 'static>(&self, asked: Asked<T>) -> Vec<T> {
        let what = asked.what;
        asked
            .pending
            .into_iter()
            .filter_map(
                |(address, reply)| match self.wait_unless_gone(&address, reply) {
                    Ok(answer) => Some(answer),
                    Err(e) => {
                        tracing::warn!(node = %address, error = %e, "a node's {what} are missing");
                        None
                    }
                },
            )
            .collect()
    }

    /// Asks every node of `ids` but this one for `A` at once, and answers for this one with
    /// `local` meanwhile; the answers come back in `ids`' order. A node that is not in the
    /// cluster state, fails, or leaves before it answers is an error in its place.
    pub(crate) fn ask_each_node<A: WireAction>(
        &self,
        ids: &[String],
        request: &A::Request,
        timeout: Duration,
        local: impl FnOnce() -> A::Response,
    ) -> Vec<(String, ApiResult<A::Response>)>
    where
        A::Response: Send + 'static,
    {
        let state = self.cluster_state();
        let pending: Vec<_> = ids
            .iter()
            .map(|id| match state.nodes.get(id) {
                _ if *id == self.node_id => None,
                Some(node) => {
                    let reply = self.send::<A>(&node.transport_address, request, timeout);
                    Some(Ok((node.transport_address.clone(), reply)))
                }
                None => Some(Err(ApiError::bad_request(format!("unknown node [{id}]")))),
            })
            .collect();
        let mut local = Some(local);
        ids.iter()
            .zip(pending)
            .map(|(id, pending)| {
                let answer = match pending {
                    None => Ok((local.take().expect("this node is listed once"))()),
                    Some(Ok((address, reply))) => self.wait_unless_gone(&address, reply),
                    Some(Err(e)) => Err(e),
                };
                (id.clone(), answer)
            })
            .collect()
    }

    /// The transport addresses of every other node of the cluster.
    pub(crate) fn other_node_addresses(&self) -> Vec<String> {
        self.cluster_state()
            .nodes
            .values()
            .filter(|n| n.id != self.node_id)
            .map(|n| n.transport_address.clone())
            .collect()
    }

    /// Waits for a request sent to the node at `address`, unless that node leaves the cluster
    /// first. A node that froze (SIGSTOP) or is partitioned away answers only at the call's
    /// timeout; once a cluster state without it arrives the wait ends with a copy error, so
    /// writes reroute to the promoted primary and reads move on to another copy at once.
    pub(crate) fn wait_unless_gone<T: Send + 'static>(
        &self,
        address: &str,
        mut pending: Pending<T>,
    ) -> ApiResult<T> {
        let mut states = self.cluster.subscribe();
        let joined = |done: Result<ApiResult<T>, tokio::task::JoinError>| {
            done.unwrap_or_else(|e| Err(ApiError::internal(e.to_string())))
        };
        self.runtime.block_on(async move {
            loop {
                tokio::select! {
                    done = &mut pending => return joined(done),
                    changed = states.changed() => {
                        if changed.is_err() {
                            return joined(pending.await);
                        }
                        let listed = states
                            .borrow()
                            .nodes
                            .values()
                            .any(|n| n.transport_address == address);
                        if !listed {
                            pending.abort();
                            return Err(node_left(address));
                        }
                    }
                }
            }
        })
    }

    /// Sends and waits.
    pub(crate) fn call<A: WireAction>(
        &self,
        address: &str,
        request: &A::Request,
        timeout: Duration,
    ) -> ApiResult<A::Response> {
        self.wait_unless_gone(address, self.send::<A>(address, request, timeout))
    }
}

/// Runs a data-layer handler on its bounded pool (`pressure::pool_for_action`), its error in
/// the transport's shape. Every data-layer action goes through here (see
/// [`NodeActions::register_on`]); `service` is what the handler acts on.
async fn serve_action_blocking<S: Send + Sync + 'static, T: Send + 'static>(
    service: Arc<S>,
    pressure: &crate::pressure::Pressure,
    action: &'static str,
    handler: impl FnOnce(&S) -> ApiResult<T> + Send + 'static,
) -> Result<T, RemoteError> {
    let (pool, admission) = crate::pressure::pool_for_action(action);
    let pool = pressure.pool(pool).clone();
    let task = format!("[{action}]");
    crate::pressure::run_on(&pool, admission, &task, move || handler(&service))
        .await
        .and_then(|served| served)
        .map_err(ApiError::into_remote)
}

/// The data-layer actions of a node, as each owning service registers them: every handler
/// acts on a service, held weakly (a stopped node answers `node_closed`).
pub(crate) struct NodeActions {
    registry: ActionRegistry,
    pressure: Arc<crate::pressure::Pressure>,
}

impl NodeActions {
    /// An empty registry whose handlers run on the pools of `pressure`.
    pub(crate) fn new(pressure: Arc<crate::pressure::Pressure>) -> NodeActions {
        NodeActions {
            registry: ActionRegistry::new(),
            pressure,
        }
    }

    /// The registry the transport dispatches to.
    pub(crate) fn into_registry(self) -> ActionRegistry {
        self.registry
    }

    /// Registers the handler of `A` on a service: a blocking function of the service and the
    /// typed request. Held weakly, like the node: a stopped node answers `node_closed`.
    pub(crate) fn register_on<A: WireAction, S: Send + Sync + 'static>(
        &mut self,
        service: Weak<S>,
        handler: fn(&S, A::Request) -> ApiResult<A::Response>,
    ) {
        let pressure = self.pressure.clone();
        self.registry.register::<A, _, _>(move |_, request| {
            let (service, pressure) = (service.upgrade(), pressure.clone());
            async move {
                let service = service.ok_or_else(node_closed)?;
                serve_action_blocking(service, &pressure, A::NAME, move |s| handler(s, request))
                    .await
            }
        });
    }

    /// Registers the handler of the streaming action `A` on a service: it checks the request
    /// and answers the stream at once (cheap work only: it runs on the transport's thread;
    /// each item's work goes to a pool), or refuses it. Held weakly, like the node.
    pub(crate) fn register_stream_on<A: WireStreamAction, S: Send + Sync + 'static>(
        &mut self,
        service: Weak<S>,
        handler: fn(&Arc<S>, A::Request) -> ApiResult<BoxStream<'static, ApiResult<A::Item>>>,
    ) {
        self.registry
            .register_stream::<A, _, _, _>(move |_, request| {
                let service = service.upgrade();
                async move {
                    let service = service.ok_or_else(node_closed)?;
                    let items = handler(&service, request).map_err(ApiError::into_remote)?;
                    Ok(items.map(|item| item.map_err(ApiError::into_remote)))
                }
            });
    }
}

pub(crate) fn node_closed() -> RemoteError {
    RemoteError::new(503, "node_closed_exception", "node is starting or stopping")
}

/// A node left the cluster while a request to it was in flight.
fn node_left(address: &str) -> ApiError {
    ApiError::new(
        503,
        "node_not_connected_exception",
        format!("[{address}] left the cluster before it answered"),
    )
    .with_kind(crate::error::ErrorKind::Unavailable)
}
