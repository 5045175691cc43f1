//! A node whose transport protocol range does not overlap the cluster manager's is refused at
//! join, with an error that names both versions and says what to do.

mod support;

use std::time::Duration;

use shoal_cluster::actions::JoinAction;
use shoal_transport::{ErrorKind, ProtocolVersion, Transport, TransportError, PROTOCOL_VERSION};
use support::{discovery_node, TestCluster};

const FORM: Duration = Duration::from_secs(15);

async fn join_with(cluster: &TestCluster, name: &str, protocol: ProtocolVersion) -> TransportError {
    let leader = cluster.wait_for_leader(FORM).await;
    let manager = &cluster.nodes[leader].transport_address;
    let id = shoal_cluster::new_id();
    let transport = Transport::with_protocol(id.clone(), protocol);
    let joining = discovery_node(&id, name, "127.0.0.1:1".parse().unwrap());
    transport
        .send::<JoinAction>(manager, &joining, Duration::from_secs(5))
        .await
        .expect_err("an incompatible node must not join")
}

fn refusal_reason(error: TransportError) -> String {
    assert_eq!(error.kind(), ErrorKind::Invalid, "{error:?}");
    match error {
        TransportError::Remote(remote) => {
            assert_eq!(
                (remote.status, remote.error_type.as_str()),
                (400, "illegal_state_exception")
            );
            remote.reason
        }
        other => panic!("expected the manager's refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_too_new_for_the_cluster_is_refused_naming_both_versions() {
    let cluster = TestCluster::start(1).await;
    let newer = ProtocolVersion {
        current: PROTOCOL_VERSION.current + 5,
        min_compatible: PROTOCOL_VERSION.current + 3,
    };
    let reason = refusal_reason(join_with(&cluster, "future-node", newer).await);
    let names_both = reason.contains(&format!("protocol version [{}]", newer.current))
        && reason.contains(&format!("protocol version [{}]", PROTOCOL_VERSION.current));
    assert!(names_both, "{reason}");
    assert!(
        reason.contains("upgrade the cluster's nodes first"),
        "{reason}"
    );
    let state = cluster.member(0).cluster.state();
    assert!(!state.nodes.values().any(|n| n.name == "future-node"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_an_incompatible_version_never_joins_through_discovery() {
    let incompatible = ProtocolVersion {
        current: PROTOCOL_VERSION.current + 5,
        min_compatible: PROTOCOL_VERSION.current + 3,
    };
    // Three compatible cluster-manager nodes and a fourth, incompatible node seeded with them.
    let cluster = TestCluster::start_with_protocols(&[
        PROTOCOL_VERSION,
        PROTOCOL_VERSION,
        PROTOCOL_VERSION,
        incompatible,
    ])
    .await;
    let leader = cluster.wait_for_leader(FORM).await;
    let outsider = cluster.nodes[3].id.clone();
    cluster
        .wait_until("the three compatible members joined", FORM, |states| {
            states[leader].as_ref().is_some_and(|s| s.nodes.len() == 3)
        })
        .await;
    // Several join attempts (one a second) later, it is still outside.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let state = cluster.member(leader).cluster.state();
    assert_eq!(state.nodes.len(), 3);
    assert!(!state.nodes.contains_key(&outsider));
    assert!(!cluster.member(3).cluster.has_cluster_manager());
}
