//! Faults placed at exact points inside a node with failpoints, which a test driving real
//! processes cannot hit: a replica batch racing a term bump, a recovery cancelled between two
//! file chunks or before finalize, a new primary dying in the middle of its resync. Run with `cargo test -p shoal-test-cluster --features failpoints`.
#![cfg(feature = "failpoints")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use shoal_state::Command;
use shoal_test_cluster::{History, Load, Options, TestCluster};

const GREEN: Duration = Duration::from_secs(60);
const HIT: Duration = Duration::from_secs(15);
const REPLICATION_POOL: &str = shoal_node::pressure::settings::REPLICATION;

/// Without operation permits (before IndexShard) this failed: the batch passed its term check,
/// the copy was promoted to term 2, then the batch of term 1 applied.
#[test]
fn a_replica_batch_of_the_old_term_never_applies_after_the_term_bump() {
    let cluster = TestCluster::start(3);
    let client = cluster.client(0);
    one_shard_index(&cluster, "race", 1);
    let primary = cluster.primary_of("race", 0).expect("a primary");
    let replica = cluster.replicas_of("race", 0)[0];
    client
        .index_doc("race", "before", &json!({"value": 1}))
        .expect("index")
        .ok();

    // A write of term 1 reaches the replica, which passes the term check and stops there.
    let paused = cluster.pause_at(replica, "replica_apply_after_term_check");
    let bumps = cluster.count_at(replica, "before_term_bump");
    let writer = {
        let client = cluster.client(primary);
        std::thread::spawn(move || client.index_doc("race", "x", &json!({"value": 2})))
    };
    assert!(
        paused.wait_hits(1, HIT),
        "the replica batch never reached its term check"
    );

    // The primary fails: the replica is promoted and bumps its term to 2.
    let state = cluster.state(primary);
    let old_primary = state.primary("race", 0).expect("primary routing").clone();
    cluster
        .node(replica)
        .core()
        .runtime()
        .block_on(cluster.node(replica).core().cluster().propose(
            Command::ShardFailed {
                index: "race".into(),
                shard: 0,
                allocation_id: old_primary.allocation_id.clone().expect("allocation id"),
                reason: "failed by the test".into(),
                primary_term: None,
            },
            GREEN,
        ))
        .expect("fail the primary");
    assert!(
        bumps.wait_hits(1, HIT),
        "the promoted replica never bumped its term"
    );
    let engine = cluster
        .engine(replica, "race", 0)
        .expect("the promoted copy");
    // With operation permits the bump waits for the paused batch; without, it goes through.
    let deadline = Instant::now() + Duration::from_secs(3);
    while engine.primary_term() == 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let term_at_release = engine.primary_term();
    paused.release();
    let _ = writer.join().expect("writer thread");

    let applied = engine.get("x").expect("get").map(|doc| doc.primary_term);
    assert!(
        !(term_at_release > 1 && applied == Some(1)),
        "a batch of term 1 applied on the copy after it moved to term {term_at_release}"
    );
}

/// Recovery and resync tasks running on the nodes' bounded `replication` pools.
fn replication_tasks_running(cluster: &TestCluster) -> usize {
    cluster
        .running()
        .into_iter()
        .map(|i| {
            let pool = cluster.node(i).core().pressure.pool(REPLICATION_POOL);
            pool.stats().active
        })
        .sum()
}

/// Files this process holds open under `dir`.
fn open_files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/fd")
        .map(|fds| {
            fds.flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter(|target| target.starts_with(dir))
                .collect()
        })
        .unwrap_or_default()
}

/// Creates `index` (1 shard, no replica), indexes 300 documents into it and flushes, so a
/// replica added later copies files.
fn index_with_files(cluster: &TestCluster, index: &str, history: &History) {
    let client = cluster.client(0);
    one_shard_index(&cluster, index, 0);
    for batch in 0..3 {
        let docs: Vec<(String, serde_json::Value)> = (0..100)
            .map(|n| (format!("{batch}-{n}"), json!({"value": n})))
            .collect();
        let sent: Vec<(String, i64)> = (0..100).map(|n| (format!("{batch}-{n}"), n)).collect();
        let answer = client.bulk(index, &docs).expect("bulk").ok();
        history.record_bulk(&sent, &answer);
        client
            .post(&format!("/{index}/_flush"), &json!(null))
            .expect("flush")
            .ok();
    }
}

/// Adds a replica to `moving` and holds its peer recovery after the first file chunk it
/// writes: (the node recovering, the pause of every node that may be chosen).
fn add_a_replica_paused_after_a_file_chunk(
    cluster: &TestCluster,
    primary: usize,
) -> (usize, Vec<(usize, shoal_test_cluster::Pause)>) {
    let pauses: Vec<_> = (0..3)
        .filter(|&i| i != primary)
        .map(|i| (i, cluster.pause_at(i, "recovery_after_file_chunk")))
        .collect();
    add_a_replica(&cluster, "moving");
    let target = cluster.wait_for(HIT, "the recovery stopped after a chunk", |_| {
        pauses
            .iter()
            .find(|(_, p)| p.hits() > 0)
            .map(|(i, _)| *i)
            .ok_or_else(|| "no chunk written yet".to_string())
    });
    (target, pauses)
}

#[test]
fn a_recovery_cancelled_between_file_chunks_leaves_nothing_behind_and_the_next_one_succeeds() {
    let cluster = TestCluster::start(3);
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    let primary = cluster.primary_of("moving", 0).expect("a primary");
    let (target, pauses) = add_a_replica_paused_after_a_file_chunk(&cluster, primary);
    let index_dir = {
        let uuid = cluster
            .node(target)
            .core()
            .index("moving")
            .expect("index on target")
            .uuid();
        cluster.node(target).core().paths.index_dir(&uuid)
    };
    assert!(
        !open_files_under(&index_dir).is_empty(),
        "the paused recovery holds its partial file open"
    );

    // Cancelled by deleting the index, then let go.
    cluster
        .client(primary)
        .delete("/moving")
        .expect("delete")
        .ok();
    for (_, pause) in &pauses {
        pause.release();
    }
    cluster.wait_for(HIT, "the cancelled recovery's task and files gone", |c| {
        let tasks = replication_tasks_running(c);
        let open = open_files_under(&index_dir);
        if tasks == 0 && open.is_empty() && !index_dir.exists() {
            Ok(())
        } else {
            Err(format!(
                "recovery tasks {tasks}, open files {open:?}, directory left: {}",
                index_dir.exists()
            ))
        }
    });

    // A new recovery of the same name onto the same nodes completes.
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    add_a_replica(&cluster, "moving");
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, "moving");
    assert_eq!(summary.copies_checked, 2, "{summary:?}");
    assert_eq!(summary.acknowledged, 300, "{summary:?}");
}

/// Partial files (`*.recovering`) under `dir`, on disk or held open.
fn partial_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let is_partial = |p: &std::path::Path| p.extension().is_some_and(|e| e == "recovering");
    let mut found: Vec<_> = open_files_under(dir)
        .into_iter()
        .filter(|p| is_partial(p))
        .collect();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if is_partial(&path) {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn a_recovery_whose_target_is_failed_between_file_chunks_gives_way_to_a_new_one() {
    let cluster = TestCluster::start(3);
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    let primary = cluster.primary_of("moving", 0).expect("a primary");
    let (target, pauses) = add_a_replica_paused_after_a_file_chunk(&cluster, primary);
    let state = cluster.state(target);
    let recovering = state
        .copies("moving", 0)
        .iter()
        .find(|c| !c.primary)
        .expect("the recovering copy")
        .clone();
    let index_dir = {
        let uuid = cluster
            .node(target)
            .core()
            .index("moving")
            .expect("index")
            .uuid();
        cluster.node(target).core().paths.index_dir(&uuid)
    };

    // The cluster manager fails the recovering copy; the next one may land on the same node.
    cluster
        .node(primary)
        .core()
        .runtime()
        .block_on(cluster.node(primary).core().cluster().propose(
            Command::ShardFailed {
                index: "moving".into(),
                shard: 0,
                allocation_id: recovering.allocation_id.clone().expect("allocation id"),
                reason: "failed by the test".into(),
                primary_term: None,
            },
            GREEN,
        ))
        .expect("fail the recovering copy");
    for (_, pause) in &pauses {
        pause.release();
    }
    cluster.wait_green(GREEN);
    let replica = cluster.replicas_of("moving", 0)[0];
    let state = cluster.state(replica);
    let rebuilt = state
        .copies("moving", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned();
    assert_ne!(
        rebuilt.and_then(|c| c.allocation_id),
        recovering.allocation_id,
        "the failed copy was replaced"
    );
    cluster.wait_for(
        HIT,
        "the failed recovery's task and partial files gone",
        |c| {
            let tasks = replication_tasks_running(c);
            let partial = partial_files(&index_dir);
            if tasks == 0 && partial.is_empty() {
                Ok(())
            } else {
                Err(format!("recovery tasks {tasks}, partial files {partial:?}"))
            }
        },
    );
    let summary = history.verify(&cluster, "moving");
    assert_eq!(summary.copies_checked, 2, "{summary:?}");
    assert_eq!(summary.acknowledged, 300, "{summary:?}");
}

#[test]
fn a_new_primary_killed_in_the_middle_of_its_resync_hands_over_without_losing_a_write() {
    // A dedicated cluster manager, so that two data nodes can be down at once.
    let mut cluster = TestCluster::start_with(Options {
        cluster_managers: Some(1),
        node_settings: vec![(0, "node.roles".into(), "cluster_manager".into())]
            .into_iter()
            .chain((1..4).map(|i| (i, "node.roles".into(), "data".into())))
            .collect(),
        ..Options::nodes(4)
    });
    cluster.client(0).create_index(
        "handover",
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 2,
            "index.translog.durability": "request"}}),
    );
    cluster.wait_green(GREEN);
    let history = Arc::new(History::default());
    let load = Load::start(&cluster, "handover", &history, 2);
    std::thread::sleep(Duration::from_millis(500));
    let resyncs: Vec<_> = (1..4)
        .map(|i| (i, cluster.pause_at(i, "primary_resync_before_batch")))
        .collect();
    let first = cluster.primary_of("handover", 0).expect("a primary");
    cluster.kill(first);
    // The promoted replica stops before it sends its first resync batch, and dies there.
    let promoted = cluster.wait_for(HIT, "the promoted replica resyncing", |_| {
        resyncs
            .iter()
            .find(|(i, p)| *i != first && p.hits() > 0)
            .map(|(i, _)| *i)
            .ok_or_else(|| "no resync started".to_string())
    });
    cluster.kill(promoted);
    resyncs
        .iter()
        .find(|(i, _)| *i == promoted)
        .unwrap()
        .1
        .release();
    // The last copy is promoted; with no other copy left to resync it takes over at once.
    let last = (1..4).find(|i| *i != first && *i != promoted).unwrap();
    cluster.wait_for(GREEN, "the last copy promoted", |c| {
        match c.primary_of("handover", 0) {
            Some(p) if p == last => Ok(()),
            other => Err(format!("primary {other:?}")),
        }
    });
    let handed_over_at = Instant::now();
    // Writes that reached the last copy while it was resyncing go on once it takes over, not
    // at their 20 s primary timeout (the next cluster state may be long in coming).
    let recovered = load.wait_success_after(handed_over_at, Duration::from_secs(10));
    assert!(
        recovered.is_some(),
        "no write succeeded on the last copy within 10 s"
    );
    let stopping = Instant::now();
    load.stop();
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "a write stayed blocked {:?} after the last copy took over",
        stopping.elapsed()
    );
    cluster.start_nodes(&[first, promoted]);
    cluster.wait_for_nodes(4, GREEN);
    cluster.wait_green(GREEN);
    let summary = history.verify(&cluster, "handover");
    assert_eq!(summary.copies_checked, 3, "{summary:?}");
    eprintln!("{summary:?}");
}

#[test]
fn a_write_waiting_for_a_resyncing_primary_goes_on_as_soon_as_the_resync_ends() {
    let mut cluster = TestCluster::start(3);
    one_shard_index(&cluster, "resync", 2);
    let first = cluster.primary_of("resync", 0).expect("a primary");
    cluster
        .client(first)
        .index_doc("resync", "before", &json!({"value": 1}))
        .expect("index")
        .ok();
    let resyncs: Vec<_> = (0..3)
        .filter(|&i| i != first)
        .map(|i| (i, cluster.pause_at(i, "primary_resync_before_batch")))
        .collect();
    cluster.kill(first);
    let promoted = cluster.wait_for(HIT, "the promoted replica resyncing", |_| {
        resyncs
            .iter()
            .find(|(_, p)| p.hits() > 0)
            .map(|(i, _)| *i)
            .ok_or_else(|| "no resync started".to_string())
    });
    // A write reaches the new primary while its resync is held: it waits for the primary role.
    let writer = {
        let client = cluster.client(promoted);
        std::thread::spawn(move || {
            let answer = client.index_doc("resync", "during", &json!({"value": 2}));
            (answer, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !writer.is_finished(),
        "the write did not wait for the resync"
    );
    let released_at = Instant::now();
    for (_, pause) in &resyncs {
        pause.release();
    }
    let (answer, answered_at) = writer.join().expect("writer");
    let answer = answer.expect("the write answered");
    assert!(matches!(answer.status, 200 | 201), "{answer:?}");
    assert!(
        answered_at - released_at < Duration::from_secs(5),
        "the write went on {:?} after the resync ended",
        answered_at - released_at
    );
}

#[test]
fn a_recovery_whose_source_dies_before_finalize_starts_again_from_the_promoted_primary() {
    let mut cluster = TestCluster::start(3);
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    let client = cluster.client(0);
    client
        .put(
            "/moving/_settings",
            &json!({"index": {"number_of_replicas": 1}}),
        )
        .expect("add a replica")
        .ok();
    cluster.wait_green(GREEN);
    let source = cluster.primary_of("moving", 0).expect("a primary");
    let replica = cluster.replicas_of("moving", 0)[0];
    let target = (0..3).find(|i| *i != source && *i != replica).unwrap();
    // A second replica copies every file, then stops before it asks the primary to finalize.
    let finalize = cluster.pause_at(target, "recovery_before_finalize");
    client
        .put(
            "/moving/_settings",
            &json!({"index": {"number_of_replicas": 2}}),
        )
        .expect("add a second replica")
        .ok();
    assert!(
        finalize.wait_hits(1, HIT),
        "the recovery never reached finalize"
    );
    cluster.kill(source);
    finalize.release();
    // The replica is promoted; the interrupted copy is recovered again, from it.
    cluster.wait_for(GREEN, "the replica promoted", |c| {
        match c.primary_of("moving", 0) {
            Some(p) if p == replica => Ok(()),
            other => Err(format!("primary {other:?}")),
        }
    });
    cluster.restart(source);
    cluster.wait_for_nodes(3, GREEN);
    cluster.wait_green(GREEN);
    let recoveries = cluster
        .client(replica)
        .get("/moving/_recovery")
        .expect("_recovery")
        .ok();
    let onto_target = recoveries["moving"]["shards"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["type"] == "PEER" && r["target"]["name"] == cluster.slot(target).name)
        .max_by_key(|r| r["start_time_in_millis"].as_u64())
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        onto_target["source"]["name"],
        cluster.slot(replica).name,
        "the copy recovered again from the promoted primary: {onto_target}"
    );
    let summary = history.verify(&cluster, "moving");
    assert_eq!(summary.copies_checked, 3, "{summary:?}");
    assert_eq!(summary.acknowledged, 300, "{summary:?}");
}

/// Creates `index` with one shard and `replicas` replicas, and waits for green.
fn one_shard_index(cluster: &TestCluster, index: &str, replicas: u32) {
    cluster.client(0).create_index(
        index,
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": replicas}}),
    );
    cluster.wait_green(GREEN);
}

/// Raises `index` to one replica (its recovery then starts).
fn add_a_replica(cluster: &TestCluster, index: &str) {
    cluster
        .client(0)
        .put(
            &format!("/{index}/_settings"),
            &json!({"index": {"number_of_replicas": 1}}),
        )
        .expect("add a replica")
        .ok();
}

/// Before the applier handed each copy's work to its own task, it opened copies one after the
/// other on its thread: a copy whose open hung held back every other index on the node, and
/// the node's applied version with them.
#[test]
fn a_copy_whose_open_hangs_does_not_stop_another_index_from_starting() {
    let cluster = TestCluster::start(1);
    let client = cluster.client(0);
    let one_shard = json!({"settings": {"number_of_shards": 1, "number_of_replicas": 0}});
    let hung = cluster.pause_first_at(0, "applier_before_open");
    let slow_create = {
        let (client, body) = (cluster.client(0), one_shard.clone());
        std::thread::spawn(move || client.put("/slow", &body).map(|r| r.status))
    };
    assert!(
        hung.wait_hits(1, HIT),
        "the first copy never reached its open"
    );

    let started = Instant::now();
    client.create_index("fast", &one_shard);
    client
        .index_doc("fast", "1", &json!({"value": 1}))
        .expect("index into the other index")
        .ok();
    let took = started.elapsed();
    assert!(
        hung.hits() >= 2,
        "the other index's copy opened without passing the failpoint"
    );
    let state = cluster.state(0);
    let slow_primary = state.primary("slow", 0).expect("the slow copy is assigned");
    assert!(
        !slow_primary.is_active(),
        "the hung copy must still be opening: {slow_primary:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the other index took {took:?} to start"
    );

    hung.release();
    let status = slow_create
        .join()
        .expect("create thread")
        .expect("create slow");
    assert_eq!(status, 200);
    cluster.wait_green(GREEN);
    client
        .index_doc("slow", "1", &json!({"value": 1}))
        .expect("index into the copy that was slow to open")
        .ok();
}

/// A started report proposed while the cluster manager changes can be refused on the way
/// ("forward to the leader"). Before the scheduler sent such reports again, a peer-recovered
/// replica whose report was lost stayed initializing for good (the applier only reports copies
/// it opens itself), and the cluster never went green.
#[test]
fn a_replica_whose_started_report_is_lost_is_reported_again_until_it_starts() {
    let cluster = TestCluster::start(2);
    one_shard_index(&cluster, "lost", 0);
    let primary = cluster.primary_of("lost", 0).expect("a primary");
    let lost = cluster.fail_at(1 - primary, "started_report_lost");
    add_a_replica(&cluster, "lost");

    // Long enough to recover an empty shard many times over; the report keeps being lost.
    std::thread::sleep(Duration::from_secs(3));
    let replica = cluster
        .state(0)
        .copies("lost", 0)
        .iter()
        .find(|c| !c.primary)
        .cloned()
        .expect("the replica is assigned");
    assert!(
        !replica.is_active(),
        "the replica started although every report of it was lost: {replica:?}"
    );

    lost.release();
    cluster.wait_green(GREEN);
}
