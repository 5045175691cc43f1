//! Faults placed at exact points inside a node with failpoints, which a test driving real
//! processes cannot hit: a replica batch racing a term bump, a recovery cancelled between two
//! file chunks. Run with `cargo test -p shoal-test-cluster --features failpoints`.
#![cfg(feature = "failpoints")]

use std::time::{Duration, Instant};

use serde_json::json;
use shoal_state::Command;
use shoal_test_cluster::{History, TestCluster};

const GREEN: Duration = Duration::from_secs(60);
const HIT: Duration = Duration::from_secs(15);

#[test]
#[ignore = "needs operation permits (lead's IndexShard branch)"]
fn a_replica_batch_of_the_old_term_never_applies_after_the_term_bump() {
    let cluster = TestCluster::start(3);
    let client = cluster.client(0);
    client.create_index(
        "race",
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 1}}),
    );
    cluster.wait_green(GREEN);
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
        .runtime()
        .block_on(cluster.node(replica).cluster().propose(
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

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|name| name.trim_end().starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
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
    client.create_index(
        index,
        &json!({"settings": {"number_of_shards": 1, "number_of_replicas": 0}}),
    );
    cluster.wait_green(GREEN);
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

#[test]
fn a_recovery_cancelled_between_file_chunks_leaves_nothing_behind_and_the_next_one_succeeds() {
    let cluster = TestCluster::start(3);
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    let primary = cluster.primary_of("moving", 0).expect("a primary");
    let targets: Vec<usize> = (0..3).filter(|&i| i != primary).collect();
    let pauses: Vec<_> = targets
        .iter()
        .map(|&i| (i, cluster.pause_at(i, "recovery_after_file_chunk")))
        .collect();
    let recovery_threads_before = threads_named("peer-recovery");
    cluster
        .client(0)
        .put(
            "/moving/_settings",
            &json!({"index": {"number_of_replicas": 1}}),
        )
        .expect("add a replica")
        .ok();
    let target = cluster.wait_for(HIT, "the recovery stopped after a chunk", |_| {
        pauses
            .iter()
            .find(|(_, p)| p.hits() > 0)
            .map(|(i, _)| *i)
            .ok_or_else(|| "no chunk written yet".to_string())
    });
    let index_dir = {
        let uuid = cluster
            .node(target)
            .index("moving")
            .expect("index on target")
            .uuid();
        cluster.node(target).paths.index_dir(&uuid)
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
    cluster.wait_for(
        HIT,
        "the cancelled recovery's thread and files gone",
        |_| {
            let threads = threads_named("peer-recovery");
            let open = open_files_under(&index_dir);
            if threads <= recovery_threads_before && open.is_empty() && !index_dir.exists() {
                Ok(())
            } else {
                Err(format!(
                    "recovery threads {threads}, open files {open:?}, directory left: {}",
                    index_dir.exists()
                ))
            }
        },
    );

    // A new recovery of the same name onto the same nodes completes.
    let history = History::default();
    index_with_files(&cluster, "moving", &history);
    cluster
        .client(0)
        .put(
            "/moving/_settings",
            &json!({"index": {"number_of_replicas": 1}}),
        )
        .expect("add a replica")
        .ok();
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
    let pauses: Vec<_> = (0..3)
        .filter(|&i| i != primary)
        .map(|i| (i, cluster.pause_at(i, "recovery_after_file_chunk")))
        .collect();
    let recovery_threads_before = threads_named("peer-recovery");
    cluster
        .client(0)
        .put(
            "/moving/_settings",
            &json!({"index": {"number_of_replicas": 1}}),
        )
        .expect("add a replica")
        .ok();
    let target = cluster.wait_for(HIT, "the recovery stopped after a chunk", |_| {
        pauses
            .iter()
            .find(|(_, p)| p.hits() > 0)
            .map(|(i, _)| *i)
            .ok_or_else(|| "no chunk written yet".to_string())
    });
    let state = cluster.state(target);
    let recovering = state
        .copies("moving", 0)
        .iter()
        .find(|c| !c.primary)
        .expect("the recovering copy")
        .clone();
    let index_dir = {
        let uuid = cluster.node(target).index("moving").expect("index").uuid();
        cluster.node(target).paths.index_dir(&uuid)
    };

    // The cluster manager fails the recovering copy; the next one may land on the same node.
    cluster
        .node(primary)
        .runtime()
        .block_on(cluster.node(primary).cluster().propose(
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
        "the failed recovery's thread and partial files gone",
        |_| {
            let threads = threads_named("peer-recovery");
            let partial = partial_files(&index_dir);
            if threads <= recovery_threads_before && partial.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "recovery threads {threads}, partial files {partial:?}"
                ))
            }
        },
    );
    let summary = history.verify(&cluster, "moving");
    assert_eq!(summary.copies_checked, 2, "{summary:?}");
    assert_eq!(summary.acknowledged, 300, "{summary:?}");
}
