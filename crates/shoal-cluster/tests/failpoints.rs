//! Cluster-layer scenarios that need a failpoint of `leader.rs`:
//!
//!     cargo test -p shoal-cluster --features failpoints --test failpoints

#![cfg(feature = "failpoints")]

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use support::{formed, watch_for};

const FAILOVER: Duration = Duration::from_secs(10);

/// Seen once in CI (before the fix): the new manager's announcement refused (openraft refuses
/// writes until a quorum acknowledged the new leader), a node removal committed right after it,
/// and for a tick the state named no cluster manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_announcement_holds_back_removals_until_the_state_names_the_new_manager() {
    let scenario = fail::FailScenario::setup();
    let (mut cluster, old) = formed(3).await;
    let old_id = cluster.nodes[old].id.clone();
    let unnamed = {
        let old_id = old_id.clone();
        watch_for(&cluster, move |s| {
            !s.nodes.contains_key(&old_id) && s.cluster_manager.is_none()
        })
    };
    fail::cfg("announce_refused", "1*return").unwrap();

    cluster.kill(old).await;
    let survivors = cluster.running();
    let new = cluster.wait_for_leader_among(&survivors, FAILOVER).await;
    cluster
        .wait_until(
            "the dead manager removed and its successor named",
            FAILOVER,
            |states| {
                states
                    .iter()
                    .flatten()
                    .all(|s| !s.nodes.contains_key(&old_id) && s.cluster_manager.is_some())
            },
        )
        .await;
    assert_ne!(new, old);
    assert!(
        !unnamed.load(Ordering::SeqCst),
        "a state without the dead manager named no cluster manager\n{}",
        cluster.dump()
    );
    cluster.assert_one_manager_per_term();
    scenario.teardown();
}
