//! Typed actions through the registry, over a real server on 127.0.0.1.

mod common;

use std::sync::Arc;

use common::{localhost, TIMEOUT};
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use shoal_transport::{
    Action, ActionContext, ActionRegistry, ErrorKind, ProtocolVersion, RemoteError, ServerHandle,
    StreamAction, Transport, TransportError, WireStreamAction, PROTOCOL_VERSION,
};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Add {
    a: i64,
    b: i64,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Sum {
    sum: i64,
    from_node: String,
    sender_protocol: u32,
}

struct AddAction;
impl Action for AddAction {
    const NAME: &'static str = "test:typed/add";
    type Request = Add;
    type Response = Sum;
}

/// Fails with a copy failure that wraps an I/O error, like a broken engine would.
struct BrokenCopyAction;
impl Action for BrokenCopyAction {
    const NAME: &'static str = "test:typed/broken_copy";
    type Request = ();
    type Response = ();
}

/// Only understood from senders speaking protocol 7 or later.
struct FutureAction;
impl Action for FutureAction {
    const NAME: &'static str = "test:typed/future";
    const MIN_VERSION: u32 = 7;
    type Request = ();
    type Response = ();
}

/// Not registered on the server.
struct MissingAction;
impl Action for MissingAction {
    const NAME: &'static str = "test:typed/missing";
    type Request = ();
    type Response = ();
}

/// A request the server decodes as [`AddAction`]'s but whose fields do not fit.
struct MalformedAdd;
impl Action for MalformedAdd {
    const NAME: &'static str = AddAction::NAME;
    type Request = String;
    type Response = Sum;
}

struct CountAction;
impl StreamAction for CountAction {
    const NAME: &'static str = "test:typed/count";
    type Request = u32;
    type Item = u32;
}

/// Raw byte items (as file chunks travel): `n` items of `n` bytes each, then an error item
/// when `n` is odd.
struct BytesAction;
impl WireStreamAction for BytesAction {
    const NAME: &'static str = "test:typed/bytes";
    const MIN_VERSION: u32 = 2;
    type Request = u32;
    type Item = bytes::Bytes;

    fn encode_request(n: &u32) -> Result<bytes::Bytes, String> {
        Ok(bytes::Bytes::copy_from_slice(&n.to_be_bytes()))
    }

    fn decode_request(body: bytes::Bytes) -> Result<u32, String> {
        let raw: [u8; 4] = body
            .as_ref()
            .try_into()
            .map_err(|_| "not a u32".to_string())?;
        Ok(u32::from_be_bytes(raw))
    }

    fn encode_item(item: bytes::Bytes) -> Result<bytes::Bytes, String> {
        Ok(item)
    }

    fn decode_item(body: bytes::Bytes) -> Result<bytes::Bytes, String> {
        Ok(body)
    }
}

fn broken_copy_error() -> RemoteError {
    let mut io = RemoteError::new(500, "io_exception", "No space left on device");
    io.metadata.insert(
        "path".into(),
        serde_json::json!("/data/nodes/0/indices/x/0"),
    );
    let mut error = RemoteError::new(500, "engine_closed_exception", "engine failed")
        .with_kind(ErrorKind::CopyFailed)
        .with_cause(io);
    error
        .metadata
        .insert("shard".into(), serde_json::json!("0"));
    error
}

fn registry() -> ActionRegistry {
    let mut registry = ActionRegistry::new();
    registry.register::<AddAction, _, _>(|context: ActionContext, add: Add| async move {
        Ok(Sum {
            sum: add.a + add.b,
            from_node: context.from_node,
            sender_protocol: context.protocol.current,
        })
    });
    registry.register::<BrokenCopyAction, _, _>(|_, ()| async { Err(broken_copy_error()) });
    registry.register::<FutureAction, _, _>(|_, ()| async { Ok(()) });
    registry.register_stream::<CountAction, _, _, _>(|_, n: u32| async move {
        Ok(stream::iter((0..n).map(Ok)))
    });
    registry.register_stream::<BytesAction, _, _, _>(|_, n: u32| async move {
        let items = (0..n).map(move |i| Ok(bytes::Bytes::from(vec![i as u8; n as usize])));
        let failure = (n % 2 == 1).then(|| Err(RemoteError::internal("odd")));
        Ok(stream::iter(items.chain(failure)))
    });
    registry
}

async fn start_server() -> (ServerHandle, String) {
    let server = Transport::new("server".to_string());
    let handle = server
        .serve(localhost(), Arc::new(registry()))
        .await
        .unwrap();
    let addr = handle.local_addr().to_string();
    (handle, addr)
}

fn remote(error: TransportError) -> RemoteError {
    match error {
        TransportError::Remote(remote) => remote,
        other => panic!("expected a remote error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_typed_request_reaches_its_handler_with_the_senders_identity_and_version() {
    let (_handle, addr) = start_server().await;
    let client = Transport::new("client".to_string());
    let sum = client
        .send::<AddAction>(&addr, &Add { a: 40, b: 2 }, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        sum,
        Sum {
            sum: 42,
            from_node: "client".into(),
            sender_protocol: PROTOCOL_VERSION.current,
        }
    );
}

#[tokio::test]
async fn an_unknown_action_answers_action_not_found() {
    let (_handle, addr) = start_server().await;
    let client = Transport::new("client".to_string());
    let error = remote(
        client
            .send::<MissingAction>(&addr, &(), TIMEOUT)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (error.status, error.error_type.as_str(), error.kind),
        (
            400,
            "action_not_found_transport_exception",
            ErrorKind::Invalid
        )
    );
    assert_eq!(error.reason, "No handler for action [test:typed/missing]");
    let stream_error = client
        .call_stream(&addr, MissingAction::NAME, bytes::Bytes::new(), TIMEOUT)
        .await
        .err()
        .map(remote)
        .unwrap();
    assert_eq!(
        stream_error.error_type,
        "action_not_found_transport_exception"
    );
}

#[tokio::test]
async fn the_error_kind_fields_and_cause_chain_survive_the_wire() {
    let (_handle, addr) = start_server().await;
    let client = Transport::new("client".to_string());
    let error = remote(
        client
            .send::<BrokenCopyAction>(&addr, &(), TIMEOUT)
            .await
            .unwrap_err(),
    );
    assert_eq!(error, broken_copy_error());
    assert_eq!(
        error.to_cause_json(),
        serde_json::json!({
            "type": "engine_closed_exception",
            "reason": "engine failed",
            "shard": "0",
            "caused_by": {
                "type": "io_exception",
                "reason": "No space left on device",
                "path": "/data/nodes/0/indices/x/0"
            }
        })
    );
}

#[tokio::test]
async fn a_sender_older_than_the_actions_minimum_version_is_refused_naming_both_versions() {
    let (_handle, addr) = start_server().await;
    let old = Transport::new("old-node".to_string());
    let error = remote(
        old.send::<FutureAction>(&addr, &(), TIMEOUT)
            .await
            .unwrap_err(),
    );
    assert_eq!((error.status, error.kind), (400, ErrorKind::Invalid));
    assert!(
        error.reason.contains("[7]") && error.reason.contains("[1]"),
        "{}",
        error.reason
    );
    let new = Transport::with_protocol(
        "new-node".to_string(),
        ProtocolVersion {
            current: 7,
            min_compatible: 1,
        },
    );
    new.send::<FutureAction>(&addr, &(), TIMEOUT).await.unwrap();
}

#[tokio::test]
async fn a_malformed_request_is_the_senders_fault() {
    let (_handle, addr) = start_server().await;
    let client = Transport::new("client".to_string());
    let error = remote(
        client
            .send::<MalformedAdd>(&addr, &"forty-two".to_string(), TIMEOUT)
            .await
            .unwrap_err(),
    );
    assert_eq!((error.status, error.kind), (400, ErrorKind::Invalid));
    assert!(error
        .reason
        .starts_with("malformed transport request [test:typed/add]"));
}

#[tokio::test]
async fn a_registered_streaming_action_answers_typed_items() {
    let (_handle, addr) = start_server().await;
    let client = Transport::new("client".to_string());
    let items: Vec<u32> = client
        .send_stream::<CountAction>(&addr, &5, TIMEOUT)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(items, vec![0, 1, 2, 3, 4]);
}

#[test]
#[should_panic(expected = "registered twice")]
fn registering_an_action_twice_is_a_bug() {
    let mut registry = registry();
    registry.register::<AddAction, _, _>(|_, _| async { Err(RemoteError::internal("never")) });
}

#[tokio::test]
async fn a_streaming_action_with_its_own_encoding_carries_raw_bytes_and_ends_at_an_error() {
    let (_handle, addr) = start_server().await;
    let newer = ProtocolVersion {
        current: 2,
        min_compatible: 1,
    };
    let client = Transport::with_protocol("client".to_string(), newer);
    let items: Vec<_> = client
        .send_stream::<BytesAction>(&addr, &4, TIMEOUT)
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    let expected: Vec<_> = (0..4u8).map(|i| bytes::Bytes::from(vec![i; 4])).collect();
    assert_eq!(items, expected);

    let items: Vec<_> = client
        .send_stream::<BytesAction>(&addr, &3, TIMEOUT)
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 4, "three chunks, then the error item");
    assert!(items[..3].iter().all(Result::is_ok));
    assert_eq!(remote(items[3].clone().unwrap_err()).reason, "odd");
}

#[tokio::test]
async fn a_streaming_action_refuses_a_sender_older_than_its_minimum_version() {
    let (_handle, addr) = start_server().await;
    let old = ProtocolVersion {
        current: 1,
        min_compatible: 1,
    };
    let client = Transport::with_protocol("old".to_string(), old);
    let error = match client.send_stream::<BytesAction>(&addr, &2, TIMEOUT).await {
        Err(error) => remote(error),
        Ok(_) => panic!("a version-1 sender was served a version-2 stream"),
    };
    assert_eq!((error.status, error.kind), (400, ErrorKind::Invalid));
    assert!(
        error
            .reason
            .contains("needs transport protocol version [2]"),
        "{}",
        error.reason
    );
}
