//! Failure handling over real sockets on 127.0.0.1: peers going away and coming back, and the
//! fault-injection filters.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use shoal_transport::{
    DelayFilter, DropActionFilter, FilterDecision, PartitionFilter, Transport, TransportError,
};

async fn restart_on_same_port(kill: bool) {
    let (server, handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    assert_eq!(
        echo(&client, &addr, b"before").await.unwrap(),
        Bytes::from_static(b"before")
    );

    let bound = handle.local_addr();
    if kill {
        handle.kill().await;
    } else {
        handle.shutdown(Duration::from_secs(1)).await;
    }
    let handle = server.serve(bound, Arc::new(TestHandler)).await.unwrap();
    // The very next call reaches the new incarnation.
    assert_eq!(
        echo(&client, &addr, b"after").await.unwrap(),
        Bytes::from_static(b"after")
    );

    // While it is down, calls fail fast, and recover when it is back.
    handle.kill().await;
    let error = echo(&client, &addr, b"down").await.unwrap_err();
    assert!(
        matches!(error, TransportError::Unreachable { .. }),
        "{error:?}"
    );
    let _handle = server.serve(bound, Arc::new(TestHandler)).await.unwrap();
    assert_eq!(
        echo(&client, &addr, b"back").await.unwrap(),
        Bytes::from_static(b"back")
    );
}

#[tokio::test]
async fn peer_killed_and_restarted_on_same_port_is_reached_again() {
    restart_on_same_port(true).await;
}

#[tokio::test]
async fn peer_shut_down_and_restarted_on_same_port_is_reached_again() {
    restart_on_same_port(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_restart_on_same_port_multi_thread() {
    for _ in 0..5 {
        restart_on_same_port(true).await;
    }
}

#[tokio::test]
async fn graceful_shutdown_lets_in_flight_calls_finish() {
    let (_server, handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    echo(&client, &addr, b"warm up").await.unwrap();
    let in_flight = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move {
            client
                .call(&addr, "test:sleep", Bytes::from_static(b"300"), TIMEOUT)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        in_flight.await.unwrap().unwrap(),
        Bytes::from_static(b"slept")
    );
}

#[tokio::test]
async fn kill_fails_in_flight_calls() {
    let (_server, handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    let in_flight = tokio::spawn({
        let client = client.clone();
        let addr = addr.clone();
        async move {
            client
                .call(&addr, "test:sleep", Bytes::from_static(b"3000"), TIMEOUT)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    handle.kill().await;
    let error = in_flight.await.unwrap().unwrap_err();
    assert!(
        matches!(error, TransportError::Unreachable { .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn disconnect_drops_the_channel_and_next_call_reconnects() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    echo(&client, &addr, b"x").await.unwrap();
    client.disconnect(&addr);
    echo(&client, &addr, b"y").await.unwrap();
}

#[tokio::test]
async fn partition_filter_drops_and_clear_filters_heals() {
    let (_server_b, _handle_b, addr_b) = start_node("node-b").await;
    let (_server_c, _handle_c, addr_c) = start_node("node-c").await;
    let client = Transport::new("node-a".to_string());
    client.add_filter(Arc::new(PartitionFilter::new([addr_b.clone()])));

    let started = Instant::now();
    assert_eq!(
        echo(&client, &addr_b, b"x").await.unwrap_err(),
        TransportError::Dropped
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    let error = client
        .call_stream(
            &addr_b,
            "test:chunks",
            Bytes::from_static(b"[1,1]"),
            TIMEOUT,
        )
        .await
        .err();
    assert_eq!(error, Some(TransportError::Dropped));
    // Other nodes are still reachable.
    echo(&client, &addr_c, b"x").await.unwrap();

    client.clear_filters();
    echo(&client, &addr_b, b"x").await.unwrap();
}

#[tokio::test]
async fn drop_action_filter_and_closure_filters() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    client.add_filter(Arc::new(DropActionFilter::new("test:who")));
    assert_eq!(
        client
            .call(&addr, "test:whoami", Bytes::new(), TIMEOUT)
            .await
            .unwrap_err(),
        TransportError::Dropped
    );
    echo(&client, &addr, b"x").await.unwrap();

    client.clear_filters();
    client.add_filter(Arc::new(|_addr: &str, action: &str| {
        if action == "test:echo" {
            FilterDecision::Drop
        } else {
            FilterDecision::Pass
        }
    }));
    assert_eq!(
        echo(&client, &addr, b"x").await.unwrap_err(),
        TransportError::Dropped
    );
    client
        .call(&addr, "test:whoami", Bytes::new(), TIMEOUT)
        .await
        .unwrap();
}

#[tokio::test]
async fn delay_filter_delays_and_counts_against_the_deadline() {
    let (_server, _handle, addr) = start_node("node-b").await;
    let client = Transport::new("node-a".to_string());
    echo(&client, &addr, b"warm up").await.unwrap();
    let delay = Duration::from_millis(200);
    client.add_filter(Arc::new(DelayFilter::new(delay)));

    let started = Instant::now();
    echo(&client, &addr, b"x").await.unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= delay && elapsed < delay + Duration::from_millis(1000),
        "{elapsed:?}"
    );

    let started = Instant::now();
    let error = client
        .call(&addr, "test:echo", Bytes::new(), Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(error, TransportError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(600));

    // A delay scoped to other actions leaves this one alone.
    client.clear_filters();
    client.add_filter(Arc::new(DelayFilter::for_action_prefix(
        Duration::from_secs(10),
        "internal:",
    )));
    let started = Instant::now();
    echo(&client, &addr, b"x").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}
