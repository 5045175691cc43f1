//! Typed actions: one request and one response type per action name, a typed call, and the
//! registry that dispatches a node's incoming requests to the handler each service registered.
//!
//! Bodies are JSON (serde_json) for every [`Action`]: messages are small next to the work they
//! trigger, and JSON keeps the wire readable and tolerant of added optional fields. The few
//! actions whose bodies carry document sources (raw JSON bytes that would otherwise be escaped
//! and parsed again) implement [`WireAction`] themselves with their own framing.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{self, BoxFuture};
use futures::stream::{BoxStream, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use shoal_types::ErrorKind;

use crate::error::{RemoteError, TransportError};
use crate::transport::Transport;
use crate::version::ProtocolVersion;
use crate::{Handler, ReplyStream, Request};

/// A unary node-to-node action whose request and response travel as JSON.
pub trait Action: 'static {
    /// OpenSearch-style action name, e.g. `indices:data/write/bulk[s]`.
    const NAME: &'static str;
    /// The oldest protocol version whose requests to this action this node understands.
    const MIN_VERSION: u32 = 1;
    type Request: Serialize + DeserializeOwned + Send + 'static;
    type Response: Serialize + DeserializeOwned + Send + 'static;
}

/// A unary action as the wire sees it: its name, version and how its bodies are encoded.
/// Every [`Action`] is one (JSON); implement it directly only for a body with its own framing.
pub trait WireAction: 'static {
    const NAME: &'static str;
    const MIN_VERSION: u32 = 1;
    type Request: Send + 'static;
    type Response: Send + 'static;
    fn encode_request(request: &Self::Request) -> Result<Bytes, String>;
    fn decode_request(body: Bytes) -> Result<Self::Request, String>;
    fn encode_response(response: &Self::Response) -> Result<Bytes, String>;
    fn decode_response(body: Bytes) -> Result<Self::Response, String>;
}

impl<A: Action> WireAction for A {
    const NAME: &'static str = <A as Action>::NAME;
    const MIN_VERSION: u32 = <A as Action>::MIN_VERSION;
    type Request = <A as Action>::Request;
    type Response = <A as Action>::Response;

    fn encode_request(request: &Self::Request) -> Result<Bytes, String> {
        to_json(request)
    }

    fn decode_request(body: Bytes) -> Result<Self::Request, String> {
        from_json(&body)
    }

    fn encode_response(response: &Self::Response) -> Result<Bytes, String> {
        to_json(response)
    }

    fn decode_response(body: Bytes) -> Result<Self::Response, String> {
        from_json(&body)
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<Bytes, String> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| e.to_string())
}

/// An empty body reads as JSON `null` (a unit request from a sender that sent nothing).
fn from_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let body: &[u8] = if body.is_empty() { b"null" } else { body };
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

/// A server-streaming action whose request and items travel as JSON: one request, a stream
/// of items.
pub trait StreamAction: 'static {
    const NAME: &'static str;
    const MIN_VERSION: u32 = 1;
    type Request: Serialize + DeserializeOwned + Send + 'static;
    type Item: Serialize + DeserializeOwned + Send + 'static;
}

/// A streaming action as the wire sees it. Every [`StreamAction`] is one (JSON); implement it
/// directly for items with their own encoding, such as raw file bytes (a JSON array of
/// numbers would triple them and cost a parse per byte).
pub trait WireStreamAction: 'static {
    const NAME: &'static str;
    const MIN_VERSION: u32 = 1;
    type Request: Send + 'static;
    type Item: Send + 'static;
    fn encode_request(request: &Self::Request) -> Result<Bytes, String>;
    fn decode_request(body: Bytes) -> Result<Self::Request, String>;
    fn encode_item(item: Self::Item) -> Result<Bytes, String>;
    fn decode_item(body: Bytes) -> Result<Self::Item, String>;
}

impl<A: StreamAction> WireStreamAction for A {
    const NAME: &'static str = <A as StreamAction>::NAME;
    const MIN_VERSION: u32 = <A as StreamAction>::MIN_VERSION;
    type Request = <A as StreamAction>::Request;
    type Item = <A as StreamAction>::Item;

    fn encode_request(request: &Self::Request) -> Result<Bytes, String> {
        to_json(request)
    }

    fn decode_request(body: Bytes) -> Result<Self::Request, String> {
        from_json(&body)
    }

    fn encode_item(item: Self::Item) -> Result<Bytes, String> {
        to_json(&item)
    }

    fn decode_item(body: Bytes) -> Result<Self::Item, String> {
        from_json(&body)
    }
}

/// Who sent a request, as a handler sees it next to the typed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionContext {
    /// Node id of the sender.
    pub from_node: String,
    /// The sender's protocol range.
    pub protocol: ProtocolVersion,
}

type UnaryHandler =
    Box<dyn Fn(Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> + Send + Sync>;
type StreamHandler =
    Box<dyn Fn(Request) -> BoxFuture<'static, Result<ReplyStream, RemoteError>> + Send + Sync>;

/// The handlers of a node, by action name. Each service registers its own actions; the
/// transport server dispatches through it (it implements [`Handler`]).
#[derive(Default)]
pub struct ActionRegistry {
    unary: HashMap<&'static str, UnaryHandler>,
    streams: HashMap<&'static str, StreamHandler>,
}

impl std::fmt::Debug for ActionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.names().collect();
        names.sort_unstable();
        f.debug_struct("ActionRegistry")
            .field("actions", &names)
            .finish()
    }
}

impl ActionRegistry {
    pub fn new() -> ActionRegistry {
        ActionRegistry::default()
    }

    /// Registers the handler of `A`. Registering a name twice is a bug and panics.
    pub fn register<A, F, Fut>(&mut self, handler: F)
    where
        A: WireAction,
        F: Fn(ActionContext, A::Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<A::Response, RemoteError>> + Send + 'static,
    {
        self.claim(A::NAME);
        let unary: UnaryHandler = Box::new(move |req: Request| {
            let (context, request) =
                match decode_request(A::NAME, A::MIN_VERSION, req, A::decode_request) {
                    Ok(decoded) => decoded,
                    Err(error) => return Box::pin(future::ready(Err(error))),
                };
            let response = handler(context, request);
            Box::pin(async move {
                A::encode_response(&response.await?)
                    .map_err(|e| serialization_error(A::NAME, "serialize the response", e))
            })
        });
        self.unary.insert(A::NAME, unary);
    }

    /// Registers the handler of the streaming action `A`: it answers a stream of items (an
    /// error item ends the stream), or refuses the request as a whole.
    pub fn register_stream<A, F, Fut, S>(&mut self, handler: F)
    where
        A: WireStreamAction,
        F: Fn(ActionContext, A::Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, RemoteError>> + Send + 'static,
        S: Stream<Item = Result<A::Item, RemoteError>> + Send + 'static,
    {
        self.claim(A::NAME);
        let streaming: StreamHandler = Box::new(move |req: Request| {
            let (context, request) =
                match decode_request(A::NAME, A::MIN_VERSION, req, A::decode_request) {
                    Ok(decoded) => decoded,
                    Err(error) => return Box::pin(future::ready(Err(error))),
                };
            let items = handler(context, request);
            Box::pin(async move {
                let items = items.await?;
                let encoded = items.map(|item| {
                    item.and_then(|item| {
                        A::encode_item(item)
                            .map_err(|e| serialization_error(A::NAME, "serialize the response", e))
                    })
                });
                Ok(encoded.boxed())
            })
        });
        self.streams.insert(A::NAME, streaming);
    }

    fn claim(&self, name: &'static str) {
        assert!(
            !self.handles(name),
            "transport action [{name}] registered twice"
        );
    }

    /// Whether a handler (unary or streaming) is registered under `action`.
    pub fn handles(&self, action: &str) -> bool {
        self.unary.contains_key(action) || self.streams.contains_key(action)
    }

    /// Every registered action name.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.unary.keys().chain(self.streams.keys()).copied()
    }

    /// Moves every handler of `other` into this registry (a node combines the registries of
    /// its services).
    pub fn merge(&mut self, other: ActionRegistry) {
        for (name, handler) in other.unary {
            self.claim(name);
            self.unary.insert(name, handler);
        }
        for (name, handler) in other.streams {
            self.claim(name);
            self.streams.insert(name, handler);
        }
    }

    /// Runs the unary handler of `req.action`; `Err(req)` when none is registered, so a
    /// layered handler can try elsewhere.
    pub fn dispatch(
        &self,
        req: Request,
    ) -> Result<BoxFuture<'static, Result<Bytes, RemoteError>>, Request> {
        match self.unary.get(req.action.as_str()) {
            Some(handler) => Ok(handler(req)),
            None => Err(req),
        }
    }

    /// Runs the streaming handler of `req.action`; `Err(req)` when none is registered.
    pub fn dispatch_stream(
        &self,
        req: Request,
    ) -> Result<BoxFuture<'static, Result<ReplyStream, RemoteError>>, Request> {
        match self.streams.get(req.action.as_str()) {
            Some(handler) => Ok(handler(req)),
            None => Err(req),
        }
    }
}

impl Handler for ActionRegistry {
    fn handle(&self, req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> {
        self.dispatch(req).unwrap_or_else(|req| {
            let error = RemoteError::action_not_found(&req.action);
            Box::pin(future::ready(Err(error)))
        })
    }

    fn handle_stream(&self, req: Request) -> BoxFuture<'static, Result<ReplyStream, RemoteError>> {
        self.dispatch_stream(req).unwrap_or_else(|req| {
            let error = RemoteError::action_not_found(&req.action);
            Box::pin(future::ready(Err(error)))
        })
    }
}

/// Checks the sender's version against the action's and decodes the body. A malformed body
/// is the sender's fault (400).
fn decode_request<T>(
    action: &str,
    min_version: u32,
    req: Request,
    decode: impl FnOnce(Bytes) -> Result<T, String>,
) -> Result<(ActionContext, T), RemoteError> {
    if req.protocol.current < min_version {
        return Err(RemoteError::new(
            400,
            "illegal_state_exception",
            format!(
                "action [{action}] needs transport protocol version [{min_version}] or later, \
                 but node [{}] speaks version [{}]",
                req.from_node, req.protocol.current
            ),
        )
        .with_kind(ErrorKind::Invalid));
    }
    let request = decode(req.body).map_err(|e| {
        RemoteError::bad_request(format!("malformed transport request [{action}]: {e}"))
    })?;
    let context = ActionContext {
        from_node: req.from_node,
        protocol: req.protocol,
    };
    Ok((context, request))
}

fn serialization_error(action: &str, what: &str, e: impl std::fmt::Display) -> RemoteError {
    RemoteError::new(
        500,
        "transport_serialization_exception",
        format!("failed to {what} of action [{action}]: {e}"),
    )
    .with_kind(ErrorKind::Internal)
}

impl Transport {
    /// Sends `request` to the handler of `A` on the node at `addr` ("host:port") and waits at
    /// most `timeout` for its typed answer.
    pub async fn send<A: WireAction>(
        &self,
        addr: &str,
        request: &A::Request,
        timeout: Duration,
    ) -> Result<A::Response, TransportError> {
        let body = A::encode_request(request)
            .map_err(|e| serialization_error(A::NAME, "serialize the request", e))
            .map_err(TransportError::Remote)?;
        self.send_encoded::<A>(addr, body, timeout).await
    }

    /// [`Transport::send`] of a request already encoded with `A::encode_request` (one
    /// request sent to several nodes is encoded once).
    pub async fn send_encoded<A: WireAction>(
        &self,
        addr: &str,
        body: Bytes,
        timeout: Duration,
    ) -> Result<A::Response, TransportError> {
        let reply = self.call(addr, A::NAME, body, timeout).await?;
        A::decode_response(reply)
            .map_err(|e| serialization_error(A::NAME, "deserialize the response", e))
            .map_err(TransportError::Remote)
    }

    /// Starts the streaming action `A`; `idle_timeout` bounds the wait for each item (see
    /// [`Transport::call_stream`]).
    pub async fn send_stream<A: WireStreamAction>(
        &self,
        addr: &str,
        request: &A::Request,
        idle_timeout: Duration,
    ) -> Result<BoxStream<'static, Result<A::Item, TransportError>>, TransportError> {
        let body = A::encode_request(request)
            .map_err(|e| serialization_error(A::NAME, "serialize the request", e))
            .map_err(TransportError::Remote)?;
        let items = self.call_stream(addr, A::NAME, body, idle_timeout).await?;
        Ok(items
            .map(|item| {
                item.and_then(|bytes| {
                    A::decode_item(bytes)
                        .map_err(|e| serialization_error(A::NAME, "deserialize the response", e))
                        .map_err(TransportError::Remote)
                })
            })
            .boxed())
    }
}
