//! Acknowledged writes survive node crashes, replicas catch up, new copies are identical and
//! a partitioned replica is failed and recovered: the essential scenarios of
//! `tests/test_replication_faults.py` and `tests/test_ops_recovery.py`, on nodes in this
//! process (see `shoal-test-cluster`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::json;
use shoal_test_cluster::{History, Load, Options, TestCluster};

const INDEX: &str = "acked";
const GREEN: Duration = Duration::from_secs(60);

fn create_index(cluster: &TestCluster, shards: usize, delayed_timeout: &str) {
    create_index_replicated(cluster, shards, delayed_timeout, "DOCUMENT");
}

fn create_index_replicated(
    cluster: &TestCluster,
    shards: usize,
    delayed_timeout: &str,
    replication: &str,
) {
    cluster.client(0).create_index(
        INDEX,
        &json!({"settings": {
            "number_of_shards": shards, "number_of_replicas": 1,
            "index.replication.type": replication,
            "index.translog.durability": "request",
            "index.unassigned.node_left.delayed_timeout": delayed_timeout},
            "mappings": {"properties": {"value": {"type": "long"}, "writer": {"type": "integer"}}}}),
    );
    cluster.wait_green(GREEN);
}

/// Rounds of: writers running, the node of a random primary killed, the writers going on
/// (every shard writable again), then the node restarted and every copy checked.
fn kill_primaries_under_load(rounds: usize, delayed_timeout: &str, seed: u64) {
    kill_primaries_of(rounds, delayed_timeout, seed, "DOCUMENT");
}

fn kill_primaries_of(rounds: usize, delayed_timeout: &str, seed: u64, replication: &str) {
    let mut cluster = TestCluster::start(3);
    create_index_replicated(&cluster, 3, delayed_timeout, replication);
    let history = Arc::new(History::default());
    let mut values = vec![0; 2];
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..rounds {
        let load = Load::resume(&cluster, INDEX, &history, &values, seed + round as u64);
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1000)));
        let victim = cluster
            .primary_of(INDEX, rng.random_range(0..3))
            .expect("a started primary");
        // Each shard whose primary dies has its replica promoted.
        let promoted: Vec<(usize, usize)> = (0..3)
            .filter(|&shard| cluster.primary_of(INDEX, shard) == Some(victim))
            .map(|shard| (shard, cluster.replicas_of(INDEX, shard)[0]))
            .collect();
        let killed_at = Instant::now();
        cluster.kill(victim);
        let recovered = load.wait_success_after(killed_at, Duration::from_secs(30));
        assert!(
            recovered.is_some(),
            "round {round}: no bulk succeeded on every shard after the kill"
        );
        values = load.stop();
        cluster.wait_for(GREEN, "the replicas promoted", |c| {
            let primaries: Vec<_> = promoted
                .iter()
                .map(|(s, _)| (*s, c.primary_of(INDEX, *s)))
                .collect();
            if promoted
                .iter()
                .all(|(s, r)| c.primary_of(INDEX, *s) == Some(*r))
            {
                Ok(())
            } else {
                Err(format!("expected {promoted:?}, primaries {primaries:?}"))
            }
        });
        cluster.restart(victim);
        cluster.wait_for_nodes(3, GREEN);
        cluster.wait_green(GREEN);
        let summary = history.verify(&cluster, INDEX);
        assert!(summary.acknowledged > 0, "{summary:?}");
        eprintln!("round {round}: killed node {victim}, first fully successful bulk sent {recovered:?} after the kill; {summary:?}");
    }
}

#[test]
fn killing_primaries_under_load_loses_no_acknowledged_write_and_promotes_their_replicas() {
    kill_primaries_under_load(3, "0", 17);
}

/// Segment replicas never index: a promoted one must index what it only logged, and the
/// copies must hold the same documents once the new primary's segments are copied.
#[test]
fn killing_segment_replicated_primaries_under_load_loses_no_acknowledged_write() {
    kill_primaries_of(5, "0", 41, "SEGMENT");
}

#[test]
fn killing_primaries_whose_copies_wait_for_their_node_loses_no_acknowledged_write() {
    kill_primaries_under_load(2, "1m", 29);
}

#[test]
fn a_full_cluster_restart_keeps_every_acknowledged_write() {
    let mut cluster = TestCluster::start(3);
    create_index(&cluster, 3, "0");
    let history = Arc::new(History::default());
    let load = Load::start(&cluster, INDEX, &history, 2);
    std::thread::sleep(Duration::from_millis(800));
    for i in 0..3 {
        cluster.kill(i);
    }
    load.stop();
    assert!(
        history.acknowledged() > 0,
        "writes were acknowledged before the crash"
    );
    cluster.start_nodes(&[0, 1, 2]);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, INDEX);
    eprintln!("{summary:?}");
}

#[test]
fn a_killed_replica_catches_up_and_a_returning_one_replays_what_it_missed() {
    let mut cluster = TestCluster::start(3);
    // The copies wait a minute for a departed node: a replica comes back to its own store.
    create_index(&cluster, 1, "1m");
    let history = Arc::new(History::default());
    // Under load the primary fails the unreachable replica at once; it is rebuilt anywhere.
    let load = Load::start(&cluster, INDEX, &history, 2);
    std::thread::sleep(Duration::from_millis(500));
    let victim = cluster.replicas_of(INDEX, 0)[0];
    cluster.kill(victim);
    let acked_before = history.acknowledged_writes();
    std::thread::sleep(Duration::from_millis(1500));
    let values = load.stop();
    assert!(
        history.acknowledged_writes() > acked_before,
        "writes were acknowledged while the replica was down"
    );
    cluster.restart(victim);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, INDEX);
    eprintln!("under load: {summary:?}; values {values:?}");

    // Gone while nothing is written to it, the replica is waited for; what it missed is
    // replayed from the primary's history instead of copying files.
    let victim = cluster.replicas_of(INDEX, 0)[0];
    let primary = cluster.primary_of(INDEX, 0).expect("a primary");
    cluster.kill(victim);
    cluster.wait_for_nodes(2, GREEN);
    let missed: Vec<(String, serde_json::Value)> = (0..100)
        .map(|n| (format!("missed-{n}"), json!({"value": n})))
        .collect();
    let sent: Vec<(String, i64)> = (0..100).map(|n| (format!("missed-{n}"), n)).collect();
    let answer = cluster
        .client(primary)
        .bulk(INDEX, &missed)
        .expect("bulk")
        .ok();
    history.record_bulk(&sent, &answer);
    cluster.restart(victim);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_green(GREEN);
    let record = latest_peer_recovery_onto(&cluster, primary, &cluster.slot(victim).name);
    assert_eq!(record["stage"], "DONE", "{record}");
    assert_eq!(
        record["index"]["files"]["recovered"], 0,
        "replayed, not copied: {record}"
    );
    assert_eq!(
        record["translog"]["recovered"], 100,
        "the missed writes replayed: {record}"
    );
    let summary = history.verify(&cluster, INDEX);
    eprintln!("returning: {summary:?}");
}

/// The latest `_recovery` record of a peer recovery onto `node_name`.
fn latest_peer_recovery_onto(
    cluster: &TestCluster,
    observer: usize,
    node_name: &str,
) -> serde_json::Value {
    let body = cluster
        .client(observer)
        .get(&format!("/{INDEX}/_recovery"))
        .expect("_recovery")
        .ok();
    let shards = body[INDEX]["shards"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    shards
        .into_iter()
        .filter(|s| s["type"] == "PEER" && s["target"]["name"] == node_name)
        .max_by_key(|s| s["start_time_in_millis"].as_u64())
        .unwrap_or_else(|| panic!("no peer recovery onto {node_name}: {body}"))
}

#[test]
fn a_node_added_under_load_recovers_identical_copies() {
    // The first two nodes form the cluster on their own; the third joins under load.
    let mut cluster = TestCluster::start_with(Options {
        cluster_managers: Some(2),
        start: Some(2),
        ..Options::nodes(3)
    });
    create_index(&cluster, 3, "0");
    let history = Arc::new(History::default());
    let load = Load::start(&cluster, INDEX, &history, 2);
    std::thread::sleep(Duration::from_millis(500));
    cluster.start_node(2);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_for(GREEN, "copies rebalanced onto the new node", |c| {
        let on_new: Vec<_> = c
            .started_copies(INDEX)
            .into_iter()
            .filter(|(_, slot, _)| *slot == 2)
            .collect();
        let health = c.client(0).health()?;
        let settled = health["relocating_shards"] == 0 && health["initializing_shards"] == 0;
        if !on_new.is_empty() && settled {
            Ok(())
        } else {
            Err(format!("copies on the new node {on_new:?}; {health}"))
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    load.stop();
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, INDEX);
    assert!(cluster
        .started_copies(INDEX)
        .iter()
        .any(|(_, slot, _)| *slot == 2));
    eprintln!("{summary:?}");
}

#[test]
fn a_replica_partitioned_from_its_primary_is_failed_and_recovers() {
    let cluster = TestCluster::start(3);
    // Both copies away from the cluster manager, so the partition leaves the cluster whole.
    let manager = cluster.cluster_manager();
    cluster.client(0).create_index(
        INDEX,
        &json!({"settings": {
            "number_of_shards": 1, "number_of_replicas": 1,
            "index.translog.durability": "request",
            "index.routing.allocation.exclude._name": cluster.slot(manager).name}}),
    );
    cluster.wait_green(GREEN);
    let primary = cluster.primary_of(INDEX, 0).expect("a primary");
    let replica = cluster.replicas_of(INDEX, 0)[0];
    let failed_copy = allocation_id(&cluster, replica);
    let history = Arc::new(History::default());
    // Not through the replica's node: cut off from the primary, it makes writes wait for it.
    let load = Load::start_through(&cluster, INDEX, &history, 2, &[primary, manager]);
    cluster.partition(primary, replica);
    cluster.wait_for(
        GREEN,
        "the unreachable replica failed",
        |c| match allocation_id_opt(c, replica) {
            Some(id) if id == failed_copy => Err("the replica still holds its copy".into()),
            _ => Ok(()),
        },
    );
    let acked_at_failure = history.acknowledged_writes();
    std::thread::sleep(Duration::from_millis(500));
    let acked_while_partitioned = history.acknowledged_writes();
    cluster.heal();
    std::thread::sleep(Duration::from_millis(500));
    let values = load.stop();
    assert!(
        acked_while_partitioned > acked_at_failure,
        "writes went on once the replica was failed"
    );
    cluster.wait_green(GREEN);
    assert_ne!(
        allocation_id_opt(&cluster, replica),
        Some(failed_copy),
        "the replica was rebuilt under a new allocation id"
    );
    let summary = history.verify(&cluster, INDEX);
    assert_eq!(summary.copies_checked, 2, "{summary:?}");
    eprintln!("{summary:?}; values {values:?}");
}

fn allocation_id_opt(cluster: &TestCluster, slot: usize) -> Option<String> {
    let node_id = cluster.node(slot).core().node_id.clone();
    let state = cluster.state(cluster.cluster_manager());
    state
        .copies(INDEX, 0)
        .iter()
        .find(|c| c.node.as_deref() == Some(node_id.as_str()))
        .and_then(|c| c.allocation_id.clone())
}

fn allocation_id(cluster: &TestCluster, slot: usize) -> String {
    allocation_id_opt(cluster, slot).expect("a copy on the node")
}

#[test]
fn a_copy_that_cannot_open_is_reported_failed_while_the_other_shards_open() {
    let mut cluster = TestCluster::start(1);
    cluster.client(0).create_index(
        INDEX,
        &json!({"settings": {"number_of_shards": 3, "number_of_replicas": 0}}),
    );
    cluster.wait_green(GREEN);
    let history = History::default();
    for n in 0..60 {
        let id = n.to_string();
        let r = cluster
            .client(0)
            .index_doc(INDEX, &id, &json!({"value": n}))
            .expect("index");
        history.record_doc(&id, n, r.status, &r.body);
    }
    cluster
        .client(0)
        .post(&format!("/{INDEX}/_flush"), &json!(null))
        .expect("flush")
        .ok();
    let uuid = cluster.node(0).core().index(INDEX).expect("index").uuid();
    let shard_dir = cluster.node(0).core().paths.shard_dir(&uuid, 1);
    cluster.kill(0);
    // The store of shard 1 becomes a plain file: the engine cannot open it.
    assert!(
        shard_dir.is_dir(),
        "no shard directory at {}",
        shard_dir.display()
    );
    std::fs::remove_dir_all(&shard_dir).expect("remove shard 1");
    std::fs::write(&shard_dir, b"not a shard").expect("block shard 1");
    cluster.restart(0);
    let state_of_shard_1 = cluster.wait_for(GREEN, "shard 1 reported failed", |c| {
        let state = c.state(0);
        let copies = state.copies(INDEX, 1).to_vec();
        match copies.first() {
            Some(copy) if copy.state == shoal_state::ShardState::Unassigned => Ok(copy.clone()),
            other => Err(format!("shard 1: {other:?}")),
        }
    });
    let reason = format!("{:?}", state_of_shard_1.unassigned);
    assert!(reason.contains("failed to open shard"), "{reason}");
    for shard in [0, 2] {
        let engine = cluster.engine(0, INDEX, shard);
        assert!(
            engine.is_some(),
            "shard {shard} opened although shard 1 could not"
        );
    }
    let started: Vec<usize> = cluster.started_copies(INDEX).iter().map(|c| c.0).collect();
    assert_eq!(
        started.iter().filter(|s| **s != 1).count(),
        2,
        "{started:?}"
    );
    // Shards 0 and 2 answer with what they held.
    let count = cluster
        .client(0)
        .get(&format!("/{INDEX}/_count?ignore_unavailable=true"))
        .expect("count");
    assert!(count.body["count"].as_u64() > Some(0), "{:?}", count.body);
}

#[test]
fn a_slow_replica_link_only_slows_writes_and_a_lossy_one_gets_the_replica_rebuilt() {
    let cluster = TestCluster::start(3);
    create_index(&cluster, 1, "0");
    let primary = cluster.primary_of(INDEX, 0).expect("a primary");
    let replica = cluster.replicas_of(INDEX, 0)[0];
    let copy = allocation_id(&cluster, replica);
    let history = Arc::new(History::default());
    let load = Load::start(&cluster, INDEX, &history, 2);
    // Replica batches take 100 ms longer: writes slow down, the replica stays.
    cluster.delay(primary, Duration::from_millis(100), Some(REPLICA_ACTION));
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        allocation_id_opt(&cluster, replica).as_deref(),
        Some(copy.as_str())
    );
    // A replica batch is lost: the primary fails the replica, which is rebuilt.
    cluster.heal();
    cluster.drop_next(primary, REPLICA_ACTION, 1);
    cluster.wait_for(GREEN, "the replica failed", |c| {
        match allocation_id_opt(c, replica) {
            Some(id) if id == copy => Err("the replica still holds its copy".into()),
            _ => Ok(()),
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    load.stop();
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, INDEX);
    assert_eq!(summary.copies_checked, 2, "{summary:?}");
    eprintln!("{summary:?}");
}

/// The action a primary sends its replicas' batches with.
const REPLICA_ACTION: &str = "indices:data/write/bulk[s][r]";
