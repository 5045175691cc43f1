//! End-to-end tests of calls and streams over real sockets on 127.0.0.1.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use futures::future::BoxFuture;
use futures::stream::StreamExt;
use shoal_transport::{Handler, RemoteError, Request, Transport, TransportError};

#[tokio::test]
async fn round_trip_carries_body_and_sender() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    assert_eq!(
        echo(&client, &addr, b"hello").await.unwrap(),
        Bytes::from_static(b"hello")
    );
    let whoami = client
        .call(&addr, "test:whoami", Bytes::new(), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(whoami, Bytes::from_static(b"node-a"));
}

#[tokio::test]
async fn both_sides_count_the_messages_and_payload_bytes_of_a_call() {
    let (server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    echo(&client, &addr, b"twelve bytes").await.unwrap();
    let sent = client.stats();
    assert_eq!((sent.tx_count, sent.tx_bytes), (1, 12));
    assert_eq!((sent.rx_count, sent.rx_bytes), (1, 12));
    let served = server.stats();
    assert_eq!((served.rx_count, served.rx_bytes), (1, 12));
    assert_eq!((served.tx_count, served.tx_bytes), (1, 12));
}

#[tokio::test]
async fn large_unary_message_above_grpc_default_limit() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let body = chunk(3, 20 * MIB);
    let echoed = client
        .call(&addr, "test:echo", body.clone(), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(echoed, body);
}

#[tokio::test]
async fn concurrent_calls_share_one_channel() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let calls = (0..200).map(|i| {
        let client = client.clone();
        let addr = addr.clone();
        async move {
            let body = Bytes::from(format!("message {i}"));
            let echoed = client
                .call(&addr, "test:echo", body.clone(), TIMEOUT)
                .await
                .unwrap();
            assert_eq!(echoed, body);
        }
    });
    futures::future::join_all(calls).await;
}

#[tokio::test]
async fn remote_error_keeps_status_type_and_reason() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let error = client
        .call(&addr, "test:fail", Bytes::new(), TIMEOUT)
        .await
        .unwrap_err();
    let expected = RemoteError::new(404, "index_not_found_exception", "no such index [logs]");
    assert_eq!(error, TransportError::Remote(expected.clone()));
    assert_eq!(error.to_remote_error(), expected);

    let error = client
        .call(&addr, "test:nope", Bytes::new(), TIMEOUT)
        .await
        .unwrap_err();
    let TransportError::Remote(remote) = error else {
        panic!("unexpected {error:?}")
    };
    assert_eq!(
        (remote.status, remote.error_type.as_str()),
        (400, "action_not_found_transport_exception")
    );
}

#[tokio::test]
async fn handler_panic_is_a_500_and_server_survives() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let error = client
        .call(&addr, "test:panic", Bytes::new(), TIMEOUT)
        .await
        .unwrap_err();
    let TransportError::Remote(remote) = error else {
        panic!("unexpected {error:?}")
    };
    assert_eq!(remote.status, 500);
    assert!(remote.reason.contains("boom"), "{}", remote.reason);
    assert_eq!(
        echo(&client, &addr, b"still up").await.unwrap(),
        Bytes::from_static(b"still up")
    );
}

#[tokio::test]
async fn deadline_exceeded_is_a_timeout_within_the_deadline() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let deadline = Duration::from_millis(300);
    let started = Instant::now();
    let error = client
        .call(&addr, "test:sleep", Bytes::from_static(b"5000"), deadline)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(&error, TransportError::Timeout { action, after, .. } if action == "test:sleep" && *after == deadline),
        "{error:?}"
    );
    assert!(
        elapsed >= deadline && elapsed < deadline + Duration::from_millis(1000),
        "{elapsed:?}"
    );
    // The connection is still usable after a timed out call.
    assert_eq!(
        echo(&client, &addr, b"next").await.unwrap(),
        Bytes::from_static(b"next")
    );
}

#[tokio::test]
async fn unreachable_address_fails_fast() {
    let client = Transport::new("node-a".to_string());
    let addr = free_port_addr();
    let started = Instant::now();
    let error = echo(&client, &addr, b"anyone?").await.unwrap_err();
    assert!(
        matches!(&error, TransportError::Unreachable { addr: a, .. } if *a == addr),
        "{error:?}"
    );
    assert!(error.is_connection_error());
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    let error = echo(&client, "not an address", b"x").await.unwrap_err();
    assert!(
        matches!(error, TransportError::Unreachable { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn cluster_uuid_mismatch_is_refused_and_unknown_uuid_accepted() {
    let (server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());

    // Neither side knows its cluster yet.
    echo(&client, &addr, b"x").await.unwrap();
    // Only the server knows it.
    server.set_cluster_uuid("cluster-1");
    echo(&client, &addr, b"x").await.unwrap();
    // Same cluster.
    client.set_cluster_uuid("cluster-1");
    echo(&client, &addr, b"x").await.unwrap();
    // Different clusters.
    client.set_cluster_uuid("cluster-2");
    let error = echo(&client, &addr, b"x").await.unwrap_err();
    assert_eq!(
        error,
        TransportError::ClusterMismatch {
            local: "cluster-2".to_string(),
            remote: "cluster-1".to_string()
        }
    );
    let error = client
        .call_stream(&addr, "test:chunks", Bytes::from_static(b"[1,1]"), TIMEOUT)
        .await
        .err();
    assert!(
        matches!(error, Some(TransportError::ClusterMismatch { .. })),
        "{error:?}"
    );
    // Only the client knows it.
    server.set_cluster_uuid("");
    echo(&client, &addr, b"x").await.unwrap();
}

#[tokio::test]
async fn twenty_mib_stream_in_one_mib_chunks_arrives_intact() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let request = Bytes::from(serde_json::to_vec(&(20usize, MIB)).unwrap());
    let mut chunks = client
        .call_stream(&addr, "test:chunks", request, TIMEOUT)
        .await
        .unwrap();
    let mut received = Vec::with_capacity(20 * MIB);
    let mut count = 0;
    while let Some(item) = chunks.next().await {
        let item = item.unwrap();
        assert_eq!(item.len(), MIB);
        received.extend_from_slice(&item);
        count += 1;
    }
    assert_eq!(count, 20);
    let expected = (0..20).flat_map(|i| chunk(i, MIB));
    assert_eq!(checksum(received), checksum(expected));
}

#[tokio::test]
async fn stream_errors_end_the_stream() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());

    // Refused before the first item: the error comes from call_stream itself.
    let error = client
        .call_stream(&addr, "test:no_such_stream", Bytes::new(), TIMEOUT)
        .await
        .err();
    let Some(TransportError::Remote(remote)) = error else {
        panic!("unexpected {error:?}")
    };
    assert_eq!(remote.status, 400);

    let items: Vec<_> = client
        .call_stream(&addr, "test:fail_midway", Bytes::new(), TIMEOUT)
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[0], Ok(Bytes::from_static(b"first")));
    assert_eq!(
        items[1],
        Err(TransportError::Remote(RemoteError::new(
            500,
            "io_exception",
            "disk gone"
        )))
    );

    let items: Vec<_> = client
        .call_stream(&addr, "test:panic_midway", Bytes::new(), TIMEOUT)
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        matches!(&items[1], Err(TransportError::Remote(e)) if e.status == 500 && e.reason.contains("exploded"))
    );
    // The default handle_stream refuses with a 400.
    struct UnaryOnly;
    impl Handler for UnaryOnly {
        fn handle(&self, _req: Request) -> BoxFuture<'static, Result<Bytes, RemoteError>> {
            Box::pin(async { Ok(Bytes::new()) })
        }
    }
    let unary_only = Transport::new("node-c".to_string());
    let handle = unary_only
        .serve(localhost(), Arc::new(UnaryOnly))
        .await
        .unwrap();
    let error = client
        .call_stream(
            &handle.local_addr().to_string(),
            "test:chunks",
            Bytes::new(),
            TIMEOUT,
        )
        .await
        .err();
    assert!(
        matches!(
            error,
            Some(TransportError::Remote(RemoteError { status: 400, .. }))
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn serving_a_busy_port_fails() {
    let (server, handle, _addr) = start_node("node-b").await;
    let result = server
        .serve(handle.local_addr(), Arc::new(TestHandler))
        .await;
    assert!(result.is_err());
}
