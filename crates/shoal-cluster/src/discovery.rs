//! Finding the cluster: probing seed hosts, bootstrapping the first voting configuration, and
//! joining the elected cluster manager.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::BasicNode;
use tracing::{debug, info, warn};

use shoal_transport::ErrorKind;

use crate::actions::{JoinAction, PeersAction};
use crate::coordinator::{Cluster, PeerInfo};

const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// What a node that is not the cluster manager does each coordination tick.
pub(crate) async fn follower_duties(cluster: &Cluster) {
    if cluster.is_leaving() {
        return;
    }
    if let Some(leader) = cluster.leader_address() {
        cluster.mark_initialized();
        if needs_join(cluster) && cluster.join_due() {
            send_join(cluster, &leader).await;
        }
        return;
    }
    if cluster.is_initialized() || !cluster.join_due() {
        return; // a member of a Raft group waits for the election
    }
    if cluster.config().single_node {
        bootstrap(cluster, vec![cluster.local().clone()]).await;
        return;
    }
    let peers = probe_seeds(cluster).await;
    if let Some(leader) = peers.iter().find_map(|p| p.leader_address.clone()) {
        send_join(cluster, &leader).await;
        return;
    }
    if let Some(voters) = bootstrap_configuration(cluster, &peers) {
        bootstrap(cluster, voters).await;
    }
}

/// The local node is missing from the state, or the state has an old address for it.
fn needs_join(cluster: &Cluster) -> bool {
    let local = cluster.local();
    match cluster.state().nodes.get(&local.id) {
        Some(known) => known != local,
        None => true,
    }
}

async fn send_join(cluster: &Cluster, leader: &str) {
    match cluster
        .transport()
        .send::<JoinAction>(leader, cluster.local(), Duration::from_secs(5))
        .await
    {
        Ok(_) => info!(cluster_manager = %leader, "joined the cluster"),
        // Refused for good (an incompatible protocol version…): retrying cannot help, so the
        // operator must see why.
        Err(e) if e.kind() == ErrorKind::Invalid => {
            warn!(cluster_manager = %leader, error = %e, "join refused; will retry")
        }
        Err(e) => debug!(cluster_manager = %leader, error = %e, "join failed; will retry"),
    }
}

async fn probe_seeds(cluster: &Cluster) -> Vec<PeerInfo> {
    let own = &cluster.local().transport_address;
    let probes = cluster
        .config()
        .seed_hosts
        .iter()
        .filter(|addr| *addr != own)
        .map(|addr| async move {
            cluster
                .transport()
                .send::<PeersAction>(addr, &(), PROBE_TIMEOUT)
                .await
                .ok()
        });
    futures::future::join_all(probes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The first voting configuration: every node named in `cluster.initial_cluster_manager_nodes`,
/// once all of them have been discovered and none is part of a cluster yet. Every one of them
/// proposes the same configuration, which Raft accepts as one.
fn bootstrap_configuration(
    cluster: &Cluster,
    peers: &[PeerInfo],
) -> Option<Vec<shoal_state::DiscoveryNode>> {
    let initial = &cluster.config().initial_cluster_manager_nodes;
    let local = cluster.local();
    if !initial
        .iter()
        .any(|name| name == &local.name || name == &local.transport_address)
    {
        return None;
    }
    if peers.iter().any(|p| p.initialized) {
        return None; // an existing cluster: wait to learn its leader and join it
    }
    let mut found = BTreeMap::new();
    found.insert(local.name.clone(), local.clone());
    for peer in peers {
        found.insert(peer.node.name.clone(), peer.node.clone());
    }
    let voters: Vec<_> = initial
        .iter()
        .filter_map(|name| {
            found
                .get(name)
                .or_else(|| found.values().find(|n| &n.transport_address == name))
                .cloned()
        })
        .collect();
    if voters.len() < initial.len() {
        debug!(
            discovered = voters.len(),
            needed = initial.len(),
            "waiting for initial cluster-manager nodes"
        );
        return None;
    }
    Some(voters)
}

async fn bootstrap(cluster: &Cluster, voters: Vec<shoal_state::DiscoveryNode>) {
    let members: BTreeMap<u64, BasicNode> = voters
        .iter()
        .map(|n| (n.raft_id(), BasicNode::new(&n.transport_address)))
        .collect();
    info!(voters = ?voters.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), "bootstrapping the cluster");
    match cluster.raft().initialize(members).await {
        Ok(()) => cluster.mark_initialized(),
        Err(e) => {
            warn!(error = %e, "bootstrap refused");
            cluster.mark_initialized();
        }
    }
}
