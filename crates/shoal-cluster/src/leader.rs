//! Duties of the elected cluster manager: announcing itself, admitting nodes to the Raft
//! group, keeping the voting configuration odd and sized, checking followers and removing the
//! ones that stop answering, and waking allocation when delayed shards become due.

use std::collections::BTreeSet;
use std::sync::Arc;

use openraft::async_runtime::watch::WatchReceiver;
use shoal_state::{ClusterState, Command};
use tracing::{debug, info, warn};

use crate::actions::FollowerCheckAction;
use crate::coordinator::{now_millis, Cluster};

pub(crate) async fn leader_duties(cluster: &Arc<Cluster>) {
    let state = cluster.state();
    let local = cluster.local().clone();
    let term = cluster.raft().metrics().borrow_watched().current_term;
    if state.cluster_uuid.is_empty() {
        let uuid = crate::coordinator::new_id();
        let _ = cluster
            .propose_as_leader(Command::Bootstrap {
                cluster_uuid: uuid,
                cluster_name: cluster.config().cluster_name.clone(),
                node_settings: cluster.config().cluster_settings.clone(),
            })
            .await;
    }
    let first_time = !cluster
        .led_before
        .swap(true, std::sync::atomic::Ordering::SeqCst);
    if first_time
        && state.cluster_manager.as_deref() == Some(local.id.as_str())
        && !state.metadata.transient_settings.is_empty()
    {
        // The previous cluster manager was this node in an earlier process: the cluster
        // restarted as a whole (always so for a single node), and transient settings do not
        // survive a full cluster restart in OpenSearch. A full restart electing another node
        // keeps them: an approximation until nodes record their start epochs.
        let _ = cluster
            .propose_as_leader(Command::PutClusterSettings {
                persistent: state.metadata.persistent_settings.clone(),
                transient: Default::default(),
            })
            .await;
    }
    if (state.cluster_manager.as_deref() != Some(local.id.as_str()) || state.term != term)
        && !announce_as_cluster_manager(cluster, term).await
    {
        // No other duty before the state names this node: a node removal committed first
        // would leave the cluster with no cluster manager in its state until the next tick.
        return;
    }
    if state.nodes.get(&local.id) != Some(&local) {
        let _ = cluster.propose_as_leader(Command::NodeJoin(local)).await;
    }
    let state = cluster.state();
    for node in state.nodes.values() {
        cluster.ensure_raft_member(node).await;
    }
    reconcile_voters(cluster, &state).await;
    if hand_over_if_not_voting(cluster).await {
        return;
    }
    spawn_follower_checks(cluster, &state);
    if shoal_allocation::next_delay_expiry(&state).is_some_and(|due| due <= now_millis()) {
        let _ = cluster.propose_as_leader(Command::Tick).await;
    }
}

/// Writes "this node is the cluster manager for `term`" to the state. Right after an election
/// openraft refuses writes until a quorum has acknowledged the new leader (its lease), which
/// takes one heartbeat: retried briefly so the state names its manager within milliseconds.
async fn announce_as_cluster_manager(cluster: &Cluster, term: u64) -> bool {
    const ATTEMPTS: usize = 10;
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(20);
    info!(term, "elected as cluster manager");
    let command = Command::ClusterManagerElected {
        node_id: cluster.local().id.clone(),
        term,
    };
    for _ in 0..ATTEMPTS {
        // `announce_refused`: this attempt is refused as openraft refuses it before the lease.
        #[cfg(feature = "failpoints")]
        if fail::eval("announce_refused", |_| ()).is_some() {
            tokio::time::sleep(PAUSE).await;
            continue;
        }
        match cluster.propose_as_leader(command.clone()).await {
            Ok(_) => return true,
            Err(e) if !cluster.raft().is_leader() => {
                debug!(error = %e, "stepped down before announcing the election");
                return false;
            }
            Err(_) => tokio::time::sleep(PAUSE).await,
        }
    }
    warn!(
        term,
        "could not announce the election; retrying on the next tick"
    );
    false
}

/// Chooses the voters like OpenSearch's reconfigurator: live, non-excluded cluster-manager-
/// eligible nodes, an odd number of them up to 5, never fewer than 3 while 3 are available
/// (a dead voter stays in rather than shrinking to an even or tiny configuration).
pub(crate) fn desired_voters(state: &ClusterState, current: &BTreeSet<u64>) -> BTreeSet<u64> {
    let excluded: BTreeSet<&str> = state
        .metadata
        .voting_config_exclusions
        .iter()
        .map(|e| e.node_id.as_str())
        .collect();
    let mut live: Vec<&shoal_state::DiscoveryNode> = state
        .nodes
        .values()
        .filter(|n| n.is_cluster_manager_eligible() && !excluded.contains(n.id.as_str()))
        .collect();
    // Current voters first, so the configuration changes as little as possible.
    live.sort_by_key(|n| (!current.contains(&n.raft_id()), n.id.clone()));
    let target = round_down_to_odd(live.len()).min(5).max(live.len().min(3));
    let mut voters: BTreeSet<u64> = live.iter().take(target).map(|n| n.raft_id()).collect();
    // Keep absent (not excluded) voters while the configuration would otherwise be below 3.
    let excluded_raft: BTreeSet<u64> = excluded
        .iter()
        .map(|id| shoal_state::raft_id_of(id))
        .collect();
    for id in current {
        if voters.len() >= 3 {
            break;
        }
        if !excluded_raft.contains(id) && !state.nodes.values().any(|n| n.raft_id() == *id) {
            voters.insert(*id);
        }
    }
    voters
}

fn round_down_to_odd(n: usize) -> usize {
    if n == 0 {
        0
    } else if n % 2 == 0 {
        n - 1
    } else {
        n
    }
}

async fn reconcile_voters(cluster: &Cluster, state: &ClusterState) {
    let (current, members): (BTreeSet<u64>, BTreeSet<u64>) = {
        let metrics = cluster.raft().metrics();
        let metrics = metrics.borrow_watched();
        let membership = metrics.membership_config.membership();
        (
            membership.voter_ids().collect(),
            membership.nodes().map(|(id, _)| *id).collect(),
        )
    };
    let desired = desired_voters(state, &current);
    if desired.is_empty() || desired == current || !desired.is_subset(&members) {
        return;
    }
    info!(?current, ?desired, "changing the voting configuration");
    if let Err(e) = cluster.raft().change_membership(desired, true).await {
        warn!(error = %e, "voting configuration change failed");
    }
}

/// A manager that is no longer a voter (excluded from voting) hands over to the most
/// up-to-date voter. Removed voters are kept as learners (they still receive the log), and
/// openraft lets a leader that is still a learner keep leading, so its own step-down of a
/// removed leader never fires: the handover has to be explicit. Returns whether it handed over.
async fn hand_over_if_not_voting(cluster: &Cluster) -> bool {
    let target = {
        let metrics = cluster.raft().metrics();
        let metrics = metrics.borrow_watched();
        let membership = metrics.membership_config.membership();
        let local = cluster.local().raft_id();
        if membership.get_joint_config().len() != 1 || membership.voter_ids().any(|id| id == local)
        {
            return false;
        }
        let matched = |id: &u64| {
            metrics
                .replication
                .as_ref()
                .and_then(|r| r.get(id).cloned().flatten())
        };
        membership.voter_ids().max_by_key(matched)
    };
    let Some(target) = target else {
        return false;
    };
    info!(
        target,
        "not a voter any more: handing over the cluster manager role"
    );
    if let Err(e) = cluster.raft().trigger().transfer_leader(target).await {
        warn!(error = %e, "leadership transfer failed");
    }
    true
}

fn spawn_follower_checks(cluster: &Arc<Cluster>, state: &ClusterState) {
    let local = cluster.local().id.clone();
    for node in state.nodes.values().filter(|n| n.id != local) {
        if !cluster.checks_in_flight.lock().insert(node.id.clone()) {
            continue;
        }
        let cluster = cluster.clone();
        let node = node.clone();
        tokio::spawn(async move {
            check_follower(&cluster, &node).await;
            cluster.checks_in_flight.lock().remove(&node.id);
        });
    }
}

/// One round of checks of a follower: a successful check waits `interval` before the next; a
/// failed one is retried at once, `retry_count` times in a row before the node is removed. A
/// refused connection (the process is gone) removes the node at once, like OpenSearch does
/// for a disconnected node.
async fn check_follower(cluster: &Cluster, node: &shoal_state::DiscoveryNode) {
    let settings = cluster.config().follower_check;
    let mut failures = 0;
    let reason = loop {
        let result = cluster
            .transport()
            .send::<FollowerCheckAction>(&node.transport_address, &(), settings.timeout)
            .await;
        match result {
            Ok(_) => {
                tokio::time::sleep(settings.interval).await;
                return;
            }
            Err(e) if e.is_connection_error() => break "disconnected".to_string(),
            Err(_) => {
                failures += 1;
                if failures >= settings.retry_count {
                    break format!(
                        "followers check retry count exceeded [{}]",
                        settings.retry_count
                    );
                }
            }
        }
    };
    warn!(node = %node.name, %reason, "removing node from the cluster");
    let promote = promotion_choices(cluster, &node.id).await;
    let _ = cluster
        .propose_as_leader(Command::NodeLeft {
            node_id: node.id.clone(),
            reason,
            promote,
        })
        .await;
    cluster.transport().disconnect(&node.transport_address);
}

/// How long the removal of a node waits for the copies' checkpoints before it promotes in
/// the default order.
const PROMOTION_ADVICE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

pub(crate) async fn promotion_choices(
    cluster: &Cluster,
    leaving: &str,
) -> Vec<shoal_state::PromotionChoice> {
    let Some(advisor) = cluster.promotion_advisor.get() else {
        return Vec::new();
    };
    let advice = advisor.choose(cluster.state(), leaving.to_string());
    tokio::time::timeout(PROMOTION_ADVICE_TIMEOUT, advice)
        .await
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_state::{DiscoveryNode, Role};

    fn node(id: &str) -> DiscoveryNode {
        DiscoveryNode {
            id: id.into(),
            ephemeral_id: String::new(),
            name: id.into(),
            transport_address: format!("{id}:9300"),
            http_address: format!("{id}:9200"),
            host: id.into(),
            ip: "127.0.0.1".into(),
            roles: [Role::ClusterManager, Role::Data].into_iter().collect(),
            attributes: Default::default(),
            version: "2.18.0".into(),
        }
    }

    fn state_with(ids: &[&str]) -> ClusterState {
        let mut state = ClusterState::new("test");
        for id in ids {
            state.nodes.insert(id.to_string(), node(id));
        }
        state
    }

    #[test]
    fn voters_grow_to_three_then_five_and_stay_odd_above_three() {
        let ids = ["a", "b", "c", "d", "e", "f"];
        for n in 1..=6 {
            let state = state_with(&ids[..n]);
            let voters = desired_voters(&state, &BTreeSet::new());
            // Like OpenSearch's reconfigurator: at least 3 while available, otherwise all of them.
            let expected = [1, 2, 3, 3, 5, 5][n - 1];
            assert_eq!(voters.len(), expected, "{n} eligible nodes");
        }
    }

    #[test]
    fn a_dead_voter_stays_while_fewer_than_three_are_live() {
        let state = state_with(&["a", "b"]);
        let current: BTreeSet<u64> = ["a", "b", "c"]
            .iter()
            .map(|i| crate::raft::types::raft_id_of(i))
            .collect();
        assert_eq!(desired_voters(&state, &current), current);
    }

    #[test]
    fn excluded_nodes_leave_the_configuration() {
        let mut state = state_with(&["a", "b", "c"]);
        state
            .metadata
            .voting_config_exclusions
            .push(shoal_state::VotingExclusion {
                node_id: "c".into(),
                node_name: "c".into(),
            });
        let current: BTreeSet<u64> = ["a", "b", "c"]
            .iter()
            .map(|i| crate::raft::types::raft_id_of(i))
            .collect();
        let voters = desired_voters(&state, &current);
        assert!(!voters.contains(&crate::raft::types::raft_id_of("c")));
        assert_eq!(voters.len(), 2);
    }
}
