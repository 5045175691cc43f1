//! Multi-member scenarios of the cluster layer, run in one process (see `support/mod.rs`).
//!
//! Each test tells one story — forming, losing the manager, a partition, membership changes,
//! a crash and a restart — and every one of them ends by checking that no Raft term ever had
//! two cluster managers, neither in Raft nor in the applied cluster states.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use shoal_state::{ClusterState, Command, VotingExclusion};
use support::{formed, put_setting, timed, watch_for};

const FAILOVER: Duration = Duration::from_secs(10);
const CONVERGE: Duration = Duration::from_secs(10);

fn setting<'a>(state: &'a ClusterState, key: &str) -> Option<&'a serde_json::Value> {
    state.metadata.persistent_settings.get(key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_form_one_cluster_with_one_manager() {
    let start = Instant::now();
    let (cluster, leader) = formed(3).await;
    println!("formed in {:?}", start.elapsed());

    // Exactly one manager, and every member agrees who it is.
    let manager_id = cluster.nodes[leader].id.clone();
    for i in 0..3 {
        let state = cluster.state(i);
        assert_eq!(
            state.cluster_manager.as_deref(),
            Some(manager_id.as_str()),
            "node-{i}"
        );
        assert_eq!(
            cluster.cluster(i).cluster_manager().map(|n| n.id),
            Some(manager_id.clone()),
            "node-{i} knows the manager"
        );
        assert_eq!(cluster.cluster(i).is_cluster_manager(), i == leader);
    }
    // The same cluster: one uuid, also used by every transport.
    let uuid = cluster.state(0).cluster_uuid.clone();
    assert!(!uuid.is_empty());
    for i in 0..3 {
        assert_eq!(cluster.state(i).cluster_uuid, uuid);
        assert_eq!(cluster.member(i).transport.cluster_uuid(), uuid);
    }
    // All three vote (voters grow to 3 and stay odd).
    cluster
        .wait_until(
            "the voting configuration has all 3 members",
            CONVERGE,
            |_| cluster.voters(leader).len() == 3,
        )
        .await;

    // A proposal through a member that is not the manager is forwarded, committed, and applied
    // everywhere: versions converge.
    let follower = (leader + 1) % 3;
    let (result, took) = timed(cluster.propose_on(follower, put_setting("story", "one"))).await;
    let applied = result.expect("a forwarded proposal commits");
    assert_eq!(setting(&applied, "story"), Some(&json!("one")));
    println!("forwarded proposal committed and applied on the proposer in {took:?}");
    cluster.wait_for_convergence(CONVERGE).await;
    let version = cluster.state(0).version;
    assert!(version >= applied.version);

    // Stable: still the same single manager a second later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(cluster.leader_index(), Some(leader), "{}", cluster.dump());
    cluster.assert_one_manager_per_term();
    println!("total {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_manager_elects_a_survivor_that_still_commits() {
    let (mut cluster, old) = formed(3).await;
    cluster
        .propose_on(old, put_setting("before", 1))
        .await
        .expect("commit before the crash");

    // Once the dead manager is out of a state, that state names its successor: the new
    // manager announces itself before it removes anyone (seen once in CI without that order:
    // the removal committed between a refused announcement and its retry).
    let old_id = cluster.nodes[old].id.clone();
    let unnamed = {
        let old_id = old_id.clone();
        watch_for(&cluster, move |s| {
            !s.nodes.contains_key(&old_id) && s.cluster_manager.is_none()
        })
    };
    let killed_at = Instant::now();
    cluster.kill(old).await;
    let survivors: Vec<usize> = cluster.running();
    let new = cluster.wait_for_leader_among(&survivors, FAILOVER).await;
    let failover = killed_at.elapsed();
    println!(
        "{} killed {}; {} took over after {failover:?}",
        cluster.t(),
        cluster.name(old),
        cluster.name(new)
    );
    assert_ne!(new, old);
    // Measured ~1.8s idle and ~3.2s with two CPU hogs on a 2-core machine: the survivors wait
    // out the old manager's lease (election timeout 0.5-1s) before a pre-vote can succeed.
    assert!(
        failover < Duration::from_secs(5),
        "failover took {failover:?}"
    );

    // Both survivors commit, the non-manager through forwarding.
    let other = survivors.into_iter().find(|i| *i != new).unwrap();
    let (r1, t1) = timed(cluster.propose_on(new, put_setting("after", "manager"))).await;
    r1.expect("the new manager commits");
    let (r2, t2) = timed(cluster.propose_on(other, put_setting("after", "follower"))).await;
    let applied = r2.expect("the other survivor commits through the new manager");
    assert_eq!(setting(&applied, "after"), Some(&json!("follower")));
    println!("survivor proposals committed in {t1:?} and {t2:?}");

    // The dead manager leaves the state; its vote stays (never fewer than 3 voters while 3
    // are known), so 2 of 3 is still a majority.
    let took = cluster
        .wait_until(
            "the dead manager is removed from the state",
            CONVERGE,
            |states| {
                states
                    .iter()
                    .flatten()
                    .all(|s| !s.nodes.contains_key(&old_id))
            },
        )
        .await;
    println!("dead manager removed from the state {took:?} after the new election");
    cluster.wait_for_convergence(CONVERGE).await;
    assert_eq!(cluster.voters(new).len(), 3, "{}", cluster.dump());
    assert!(
        !unnamed.load(Ordering::SeqCst),
        "a state without the dead manager named no cluster manager\n{}",
        cluster.dump()
    );
    cluster.assert_one_manager_per_term();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_manager_cannot_commit_and_the_majority_moves_on() {
    let (mut cluster, old) = formed(3).await;
    cluster
        .propose_on(old, put_setting("written_by", "everyone"))
        .await
        .expect("commit before the partition");
    let isolated_write_seen = watch_for(&cluster, |s| {
        setting(s, "written_by") == Some(&json!("isolated"))
    });

    cluster.partition(old);
    let partitioned_at = Instant::now();
    println!("{} isolated the manager {}", cluster.t(), cluster.name(old));

    // The isolated manager cannot reach a majority: its proposal fails within its timeout.
    let isolated = {
        let member = cluster.cluster(old).clone();
        tokio::spawn(async move {
            let timeout = Duration::from_secs(2);
            let (result, took) = timed(tokio::time::timeout(
                timeout + Duration::from_secs(8),
                member.propose(put_setting("written_by", "isolated"), timeout),
            ))
            .await;
            (result, took)
        })
    };

    // Meanwhile the majority elects a manager of its own and commits.
    let majority: Vec<usize> = (0..3).filter(|i| *i != old).collect();
    let new = cluster.wait_for_leader_among(&majority, FAILOVER).await;
    println!(
        "{} the majority elected {} after {:?}",
        cluster.t(),
        cluster.name(new),
        partitioned_at.elapsed()
    );
    let other = majority.iter().copied().find(|i| *i != new).unwrap();
    cluster
        .propose_on(other, put_setting("written_by", "majority"))
        .await
        .expect("the majority commits");

    // openraft has no check-quorum, so the isolated member stays Raft leader of its older
    // term; but without acknowledgements from a quorum within the leader lease it no longer
    // calls itself cluster manager, nor names a manager at all.
    assert!(
        !cluster.cluster(old).is_cluster_manager(),
        "{} still calls itself cluster manager {:?} after it was isolated\n{}",
        cluster.name(old),
        partitioned_at.elapsed(),
        cluster.dump()
    );
    assert!(
        !cluster.cluster(old).has_cluster_manager(),
        "the isolated member names a cluster manager"
    );
    let (result, took) = isolated.await.unwrap();
    println!("the isolated manager's proposal returned after {took:?}: {result:?}");
    match result {
        Err(_) => panic!(
            "BUG: a proposal on the isolated manager did not return within its 2s timeout \
             (waited {took:?})\n{}",
            cluster.dump()
        ),
        Ok(Ok(state)) => panic!(
            "an isolated manager committed a proposal: v{} {:?}",
            state.version, state.metadata.persistent_settings
        ),
        Ok(Err(e)) => println!("refused as expected: {e}"),
    }
    assert!(
        took < Duration::from_secs(4),
        "the isolated proposal took {took:?}"
    );

    // After healing: one manager, and everybody converges to the majority's history.
    cluster.heal();
    let healed_at = Instant::now();
    let leader = cluster.wait_for_leader(FAILOVER).await;
    assert_ne!(
        leader, old,
        "the stale manager cannot win: its log is behind"
    );
    cluster
        .wait_until("the former manager rejoined", CONVERGE, |states| {
            states.iter().flatten().all(|s| s.nodes.len() == 3)
        })
        .await;
    cluster.wait_for_convergence(CONVERGE).await;
    println!(
        "{} converged {:?} after healing",
        cluster.t(),
        healed_at.elapsed()
    );
    for i in 0..3 {
        assert_eq!(
            setting(&cluster.state(i), "written_by"),
            Some(&json!("majority")),
            "node-{i}\n{}",
            cluster.dump()
        );
    }
    assert!(
        !isolated_write_seen.load(Ordering::SeqCst),
        "a member applied the isolated manager's uncommitted proposal"
    );
    assert_eq!(cluster.leader_index(), Some(leader));
    cluster.assert_one_manager_per_term();
}

/// Three rounds of isolating whoever is manager: each round the majority elects another one
/// and commits; no term ever sees two managers, and the states never diverge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_partitions_never_give_a_term_two_managers() {
    let (mut cluster, mut leader) = formed(3).await;
    for round in 0..3 {
        cluster.partition(leader);
        let majority: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
        let (new, took) = timed(cluster.wait_for_leader_among(&majority, FAILOVER)).await;
        println!(
            "round {round}: isolated {}, {} elected after {took:?}",
            cluster.name(leader),
            cluster.name(new)
        );
        cluster
            .propose_on(new, put_setting("round", round))
            .await
            .expect("the majority commits");
        cluster.heal();
        leader = cluster.wait_for_leader(FAILOVER).await;
        cluster
            .wait_until("everyone is back in the state", CONVERGE, |states| {
                states.iter().flatten().all(|s| s.nodes.len() == 3)
            })
            .await;
        cluster.wait_for_convergence(CONVERGE).await;
        assert_eq!(setting(&cluster.state(0), "round"), Some(&json!(round)));
    }
    let (applied, raft) = cluster.manager_history();
    assert!(
        applied.len() >= 4,
        "expected at least 4 terms with a manager: {applied:?}"
    );
    assert!(
        raft.len() >= 4,
        "expected at least 4 leader terms: {raft:?}"
    );
    cluster.assert_one_manager_per_term();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_members_vote_with_five_and_an_excluded_manager_hands_over() {
    let start = Instant::now();
    let (cluster, old) = formed(5).await;
    // 5 cluster-manager-eligible members: the configuration grows 3 → 5 (odd, at most 5).
    let took = cluster
        .wait_until("all 5 members vote", CONVERGE, |_| {
            let status = cluster.raft_status(old);
            status.voters.len() == 5 && status.learners.is_empty()
        })
        .await;
    println!(
        "{} voters {:?} ({took:?} after forming)",
        cluster.t(),
        cluster.voters(old)
    );
    assert_eq!(
        cluster.voters(old),
        (0..5).map(|i| format!("node-{i}")).collect()
    );

    // Excluding the manager from voting: it leaves the configuration, steps down, and another
    // member takes over. Four eligible members remain, so (odd, at most 5) three vote.
    let excluded = VotingExclusion {
        node_id: cluster.nodes[old].id.clone(),
        node_name: cluster.nodes[old].name.clone(),
    };
    let follower = (old + 1) % 5;
    let excluded_at = Instant::now();
    cluster
        .propose_on(follower, Command::SetVotingExclusions(vec![excluded]))
        .await
        .expect("exclusions commit");
    let others: Vec<usize> = (0..5).filter(|i| *i != old).collect();
    let new = cluster.wait_for_leader_among(&others, FAILOVER).await;
    println!(
        "{} {} took over {:?} after the exclusion",
        cluster.t(),
        cluster.name(new),
        excluded_at.elapsed()
    );
    let took = cluster
        .wait_until("three voters without the excluded member", CONVERGE, |_| {
            let status = cluster.raft_status(new);
            let voters = cluster.raft_names(&status.voters);
            voters.len() == 3 && !voters.contains(cluster.name(old))
        })
        .await;
    println!(
        "{} voters now {:?} (+{took:?})",
        cluster.t(),
        cluster.voters(new)
    );
    assert!(!cluster.is_manager(old), "{}", cluster.dump());
    assert!(!cluster.raft_status(old).is_leader);
    assert!(cluster
        .raft_status(new)
        .voters
        .contains(&cluster.nodes[new].raft_id()));

    // The excluded member stays in the cluster as a non-voting member and still commits
    // through the new manager.
    let applied = cluster
        .propose_on(old, put_setting("from", "excluded"))
        .await
        .expect("an excluded member can still propose");
    assert!(applied.nodes.contains_key(&cluster.nodes[old].id));
    cluster.wait_for_convergence(CONVERGE).await;
    assert_eq!(cluster.state(0).nodes.len(), 5);
    assert_eq!(cluster.leader_index(), Some(new));
    cluster.assert_one_manager_per_term();
    println!("total {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_member_is_removed_then_rejoins_as_itself() {
    let (mut cluster, leader) = formed(3).await;
    let victim = (leader + 1) % 3;
    let victim_node = cluster.nodes[victim].clone();

    let killed_at = Instant::now();
    cluster.kill(victim).await;
    cluster
        .wait_until(
            "the crashed member is removed by follower checks",
            CONVERGE,
            |states| {
                states
                    .iter()
                    .flatten()
                    .all(|s| !s.nodes.contains_key(&victim_node.id) && s.nodes.len() == 2)
            },
        )
        .await;
    let removal = killed_at.elapsed();
    println!(
        "{} crashed {} removed after {removal:?}",
        cluster.t(),
        victim_node.name
    );
    assert!(removal < Duration::from_secs(5), "removal took {removal:?}");
    // Its vote stays: 3 voters are kept while 3 members are known.
    assert_eq!(cluster.voters(leader).len(), 3);

    // Meanwhile the cluster keeps committing.
    cluster
        .propose_on(leader, put_setting("while", "away"))
        .await
        .expect("the cluster commits without the crashed member");

    // Restarted from the same Raft directory, it rejoins as the same node.
    let restarted_at = Instant::now();
    cluster.restart(victim).await;
    assert_eq!(cluster.cluster(victim).local().id, victim_node.id);
    cluster
        .wait_until(
            "the restarted member is back in every state",
            CONVERGE,
            |states| {
                states
                    .iter()
                    .flatten()
                    .all(|s| s.nodes.get(&victim_node.id) == Some(&victim_node))
            },
        )
        .await;
    cluster.wait_for_convergence(CONVERGE).await;
    println!(
        "{} restarted {} rejoined after {:?}",
        cluster.t(),
        victim_node.name,
        restarted_at.elapsed()
    );
    let state = cluster.state(victim);
    assert_eq!(
        setting(&state, "while"),
        Some(&json!("away")),
        "it caught up"
    );
    assert_eq!(state.nodes.len(), 3);
    let ids: BTreeSet<&String> = state.nodes.keys().collect();
    assert_eq!(
        ids,
        cluster.nodes.iter().map(|n| &n.id).collect(),
        "no duplicate identity"
    );
    cluster
        .propose_on(victim, put_setting("while", "back"))
        .await
        .expect("the restarted member commits");
    cluster.wait_for_convergence(CONVERGE).await;
    cluster.assert_one_manager_per_term();
}

/// A member that comes back on another port (a restarted container gets a new address) must
/// be reachable by Raft at its new address, or it never receives the log again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_restarted_on_a_new_port_rejoins_with_its_new_address() {
    let (mut cluster, leader) = formed(3).await;
    let victim = (leader + 1) % 3;
    let id = cluster.nodes[victim].id.clone();
    let old_address = cluster.nodes[victim].transport_address.clone();
    cluster.kill(victim).await;
    cluster
        .wait_until("the crashed member is removed", CONVERGE, |states| {
            states.iter().flatten().all(|s| !s.nodes.contains_key(&id))
        })
        .await;

    let restarted_at = Instant::now();
    cluster.restart_on_new_port(victim).await;
    let new_address = cluster.nodes[victim].transport_address.clone();
    assert_ne!(new_address, old_address);
    println!(
        "{} restarted {} on {new_address} (was {old_address})",
        cluster.t(),
        cluster.name(victim)
    );
    cluster
        .wait_until("the new address is in every state", CONVERGE, |states| {
            states
                .iter()
                .flatten()
                .all(|s| s.nodes.get(&id).map(|n| &n.transport_address) == Some(&new_address))
        })
        .await;
    cluster.wait_for_convergence(CONVERGE).await;
    println!(
        "{} rejoined after {:?}",
        cluster.t(),
        restarted_at.elapsed()
    );
    let leader = cluster.wait_for_leader(FAILOVER).await;
    let status = cluster.raft_status(leader);
    assert_eq!(
        status.addresses.get(&cluster.nodes[victim].raft_id()),
        Some(&new_address),
        "the Raft membership has the new address"
    );
    cluster
        .propose_on(victim, put_setting("moved", true))
        .await
        .expect("the moved member commits and applies");
    cluster.assert_one_manager_per_term();
}

/// Waits until every member but `victim` applied a state without it; returns how long it took.
async fn removed_by_the_others(cluster: &support::TestCluster, victim: usize) -> Duration {
    let id = cluster.nodes[victim].id.clone();
    cluster
        .wait_until(
            "the hung member is removed by the others",
            CONVERGE,
            |states| {
                states
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != victim)
                    .filter_map(|(_, s)| s.as_ref())
                    .all(|s| !s.nodes.contains_key(&id))
            },
        )
        .await
}

/// A member that hangs (still connected, but answering nothing in time) is removed once
/// `retry_count` follower checks in a row have timed out, and comes back once it recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_member_is_removed_after_its_checks_time_out_then_rejoins() {
    let (mut cluster, leader) = formed(3).await;
    let victim = (leader + 1) % 3;
    let id = cluster.nodes[victim].id.clone();
    let term_before = cluster.raft_status(leader).term;

    cluster.hang(victim);
    let removal = removed_by_the_others(&cluster, victim).await;
    let checks = support::FOLLOWER_CHECK;
    println!(
        "{} hung {} removed after {removal:?} (checks: every {:?}, timeout {:?}, {} retries)",
        cluster.t(),
        cluster.name(victim),
        checks.interval,
        checks.timeout,
        checks.retry_count
    );
    assert!(
        removal >= checks.timeout * checks.retry_count,
        "removed before its checks failed"
    );
    assert!(removal < Duration::from_secs(5), "removal took {removal:?}");

    cluster.heal();
    let (_, rejoin) = timed(async {
        cluster
            .wait_until(
                "the recovered member is back in every state",
                CONVERGE,
                |states| states.iter().flatten().all(|s| s.nodes.contains_key(&id)),
            )
            .await;
        cluster.wait_for_convergence(CONVERGE).await;
    })
    .await;
    let now_leader = cluster.wait_for_leader(FAILOVER).await;
    println!(
        "{} recovered {} rejoined after {rejoin:?}; manager {} (term {term_before} -> {})",
        cluster.t(),
        cluster.name(victim),
        cluster.name(now_leader),
        cluster.raft_status(now_leader).term
    );
    cluster
        .propose_on(victim, put_setting("recovered", true))
        .await
        .expect("the recovered member commits");
    cluster.assert_one_manager_per_term();
}

/// A member removed while it hung still holds the state it had (itself among the nodes). A
/// read barrier on it never answers from that state: cut off, it fails with
/// `ManagerNotDiscovered` after its timeout; healed, it answers once the member rejoined, with
/// a state at least as new as the manager's when it asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_removed_while_hung_reads_the_managers_state_only_after_it_rejoined() {
    let (mut cluster, leader) = formed(3).await;
    let victim = (leader + 1) % 3;
    let id = cluster.nodes[victim].id.clone();
    cluster.hang(victim);
    removed_by_the_others(&cluster, victim).await;
    assert!(
        cluster.state(victim).nodes.contains_key(&id),
        "the hung member's own state still lists it"
    );
    let cut_off = cluster
        .cluster(victim)
        .read_barrier(Duration::from_millis(600))
        .await;
    assert!(
        matches!(
            cut_off,
            Err(shoal_cluster::ClusterError::ManagerNotDiscovered(_))
        ),
        "{cut_off:?}"
    );

    // A follower's hang leaves the manager in place.
    let asked_at = cluster.state(leader).version;
    cluster.heal();
    let read = cluster
        .cluster(victim)
        .read_barrier(CONVERGE)
        .await
        .expect("the member reads once it rejoined");
    assert!(
        read.version >= asked_at,
        "read version {} older than the manager's {asked_at}",
        read.version
    );
    assert!(read.nodes.contains_key(&id), "read before it rejoined");
    cluster.assert_one_manager_per_term();
}
