//! Segment replication between two real engines: a primary that indexes and a writer-less
//! replica that logs operations and installs the primary's copied segments.

use std::path::Path;

use serde_json::json;
use shoal_mapping::{DocumentParser, MapperError, Mapping};
use tantivy::TantivyDocument;

use crate::*;

fn mapping() -> Mapping {
    Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap()
}

pub(crate) fn parse(id: &str, source: &[u8]) -> Result<TantivyDocument, MapperError> {
    let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
    Ok(DocumentParser::new(&mapping(), &schema)
        .parse(id, source)?
        .doc)
}

pub(crate) fn open_primary(dir: &Path) -> Engine {
    Engine::open(EngineConfig::new(dir.to_path_buf()), 1, &parse).unwrap()
}

/// A primary with one indexing thread: each refresh that found writes adds one segment.
pub(crate) fn open_single_threaded_primary(dir: &Path) -> Engine {
    let config = EngineConfig {
        indexing_threads: 1,
        ..EngineConfig::new(dir.to_path_buf())
    };
    Engine::open(config, 1, &parse).unwrap()
}

pub(crate) fn open_replica(dir: &Path) -> Engine {
    let config = EngineConfig {
        segment_replica: true,
        ..EngineConfig::new(dir.to_path_buf())
    };
    Engine::open(config, 1, &parse).unwrap()
}

fn index_op(id: &str, n: i64, seq_no: i64, version: i64) -> WriteOp {
    let source = serde_json::to_vec(&json!({ "n": n })).unwrap();
    WriteOp::Index {
        id: id.into(),
        routing: None,
        doc: parse(id, &source).unwrap(),
        source,
        request: DocRequest::default(),
        seq_no,
        primary_term: 1,
        version,
    }
}

/// Writes document `id` with `n` as a primary does; returns its result.
pub(crate) fn index_as_primary(engine: &Engine, id: &str, n: i64) -> OpResult {
    engine
        .apply(vec![index_op(id, n, UNASSIGNED_SEQ_NO, 0)], Origin::Primary)
        .pop()
        .unwrap()
        .unwrap()
}

/// Indexes `ids` on the primary and sends the same operations to the replica, as the
/// primary's write path does; both wait for their translogs.
pub(crate) fn write(primary: &Engine, replica: &Engine, ids: std::ops::Range<i64>) {
    let ops = ids
        .clone()
        .map(|n| index_op(&format!("d{n}"), n, UNASSIGNED_SEQ_NO, 0))
        .collect();
    let results = primary.apply(ops, Origin::Primary);
    let replicated = ids
        .zip(&results)
        .map(|(n, r)| {
            let r = r.as_ref().unwrap();
            index_op(&format!("d{n}"), n, r.seq_no, r.version)
        })
        .collect();
    for (engine, results) in [
        (primary, results),
        (replica, replica.apply(replicated, Origin::Replica)),
    ] {
        for result in results {
            engine.sync_to(&result.unwrap().location.unwrap()).unwrap();
        }
    }
}

/// Copies the checkpoint's files from the primary's index directory to the replica's, as a
/// segment-replication target does before installing.
pub(crate) fn copy_files(checkpoint: &SegmentCheckpoint, primary: &Engine, replica: &Engine) {
    let (from, to) = (primary.config().index_dir(), replica.config().index_dir());
    for file in &checkpoint.files {
        if !to.join(&file.name).exists() {
            std::fs::copy(from.join(&file.name), to.join(&file.name)).unwrap();
        }
    }
}

pub(crate) fn refresh_and_copy(primary: &Engine, replica: &Engine) -> SegmentCheckpoint {
    primary.refresh().unwrap();
    let checkpoint = primary.segment_checkpoint().unwrap();
    copy_files(&checkpoint, primary, replica);
    replica.install_checkpoint(&checkpoint).unwrap();
    checkpoint
}

pub(crate) fn docs(engine: &Engine) -> u64 {
    engine.searcher().num_docs()
}

#[test]
fn a_replica_logs_operations_without_indexing_them_and_searches_the_copied_segments() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    assert!(replica.is_writer_less() && !primary.is_writer_less());

    write(&primary, &replica, 0..10);
    replica.refresh().unwrap();
    assert_eq!(docs(&replica), 0, "a replica's own refresh indexes nothing");
    assert_eq!(
        replica.stats().index_total,
        0,
        "the replica never ran the indexing path"
    );
    assert_eq!(
        replica.local_checkpoint(),
        9,
        "logged operations count as processed"
    );

    let checkpoint = refresh_and_copy(&primary, &replica);
    assert_eq!(docs(&replica), 10);
    assert_eq!(replica.stats().index_total, 0);
    assert_eq!(checkpoint.local_checkpoint, 9);
    let source = replica
        .get_refreshed("d3")
        .unwrap()
        .expect("d3 on the replica")
        .source;
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&source).unwrap()["n"],
        3
    );
}

#[test]
fn installing_a_commit_trims_the_operations_it_holds_from_the_replica_translog() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..50);
    replica.update_global_checkpoint(49);
    assert_eq!(replica.stats().translog.operations, 50);

    refresh_and_copy(&primary, &replica);
    assert_eq!(
        replica.stats().translog.operations,
        0,
        "every operation is in the installed commit and below the global checkpoint"
    );
    assert_eq!(replica.history_complete_from(), 50);

    // Operations above the commit stay until a commit holds them.
    write(&primary, &replica, 50..60);
    assert_eq!(replica.stats().translog.operations, 10);
}

#[test]
fn a_replica_keeps_the_operations_the_global_checkpoint_does_not_cover() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..20);
    replica.update_global_checkpoint(4);
    refresh_and_copy(&primary, &replica);
    // A promoted copy resyncs the others from the global checkpoint: it must still have them.
    let kept: Vec<i64> = replica
        .history(5, i64::MAX)
        .unwrap()
        .map(|op| op.unwrap().seq_no)
        .collect();
    assert_eq!(kept, (5..20).collect::<Vec<_>>());
}

#[test]
fn a_reopened_replica_searches_its_installed_commit_and_knows_what_it_logged_above_it() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = open_primary(a.path());
    {
        let replica = open_replica(b.path());
        write(&primary, &replica, 0..10);
        refresh_and_copy(&primary, &replica);
        write(&primary, &replica, 10..15);
        replica.close().unwrap();
    }
    let replica = open_replica(b.path());
    assert_eq!(docs(&replica), 10);
    assert_eq!(replica.local_checkpoint(), 14);
    assert_eq!(replica.max_seq_no(), 14);
}

#[test]
fn a_promoted_replica_indexes_what_it_only_logged_and_takes_new_writes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..10);
    refresh_and_copy(&primary, &replica);
    // Acknowledged on both copies, never in a commit the replica copied.
    write(&primary, &replica, 10..15);
    drop(primary);

    let replayed = replica.promote_to_writer(&parse).unwrap();
    assert_eq!(replayed, 5);
    assert!(!replica.is_writer_less());
    assert_eq!(docs(&replica), 15);
    let result = index_as_primary(&replica, "new", 99);
    assert_eq!(result.seq_no, 15);
    replica.refresh().unwrap();
    assert_eq!(docs(&replica), 16);
}

#[test]
fn a_replica_refuses_primary_writes_and_a_copied_file_of_the_wrong_length() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    let refused = replica.apply(
        vec![index_op("x", 1, UNASSIGNED_SEQ_NO, 0)],
        Origin::Primary,
    );
    assert!(matches!(refused[0], Err(EngineError::Closed(_))));

    write(&primary, &replica, 0..10);
    primary.refresh().unwrap();
    let checkpoint = primary.segment_checkpoint().unwrap();
    copy_files(&checkpoint, &primary, &replica);
    let victim = &checkpoint.files[0];
    let path = replica.config().index_dir().join(&victim.name);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(victim.length / 2)
        .unwrap();
    assert!(matches!(
        replica.install_checkpoint(&checkpoint),
        Err(EngineError::Corrupted(_))
    ));
    assert_eq!(docs(&replica), 0, "nothing of a bad copy is searched");
}

#[test]
fn later_commits_are_ahead_and_files_merged_away_leave_the_replica() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..10);
    let first = refresh_and_copy(&primary, &replica);
    write(&primary, &replica, 10..20);
    let second = refresh_and_copy(&primary, &replica);
    assert!(second.is_ahead_of(&first) && !first.is_ahead_of(&second));
    assert!(second.length() > first.length());

    primary
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    let merged = refresh_and_copy(&primary, &replica);
    assert_eq!(docs(&replica), 20);
    let on_disk: std::collections::BTreeSet<String> =
        std::fs::read_dir(replica.config().index_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            // meta.json, tantivy's lock files and the copy's own schema checksum
            .filter(|name| {
                !name.ends_with(".json") && !name.starts_with('.') && !name.starts_with("shoal_")
            })
            .collect();
    let listed: std::collections::BTreeSet<String> =
        merged.files.iter().map(|f| f.name.clone()).collect();
    assert_eq!(
        on_disk, listed,
        "the replica keeps exactly the files its commit names"
    );
}

#[test]
fn a_replica_counts_only_what_it_logged_and_refuses_a_deposed_primarys_checkpoint() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..5);
    // Indexed on the primary, not (yet) sent to the replica.
    let ops = (5..8)
        .map(|n| index_op(&format!("d{n}"), n, UNASSIGNED_SEQ_NO, 0))
        .collect();
    for result in primary.apply(ops, Origin::Primary) {
        primary.sync_to(&result.unwrap().location.unwrap()).unwrap();
    }
    refresh_and_copy(&primary, &replica);
    assert_eq!(
        docs(&replica),
        8,
        "the replica searches the primary's commit"
    );
    assert_eq!(
        replica.local_checkpoint(),
        4,
        "operations it was never sent are not counted: a new primary's resync must reach it"
    );

    // The replica follows a new primary (term 2); the old one's commits are refused.
    replica.set_primary_term(2);
    write(&primary, &replica, 8..9);
    primary.refresh().unwrap();
    let stale = primary.segment_checkpoint().unwrap();
    copy_files(&stale, &primary, &replica);
    assert!(matches!(
        replica.install_checkpoint(&stale),
        Err(EngineError::StaleCheckpoint {
            checkpoint: 1,
            current: 2
        })
    ));
}

/// A primary's commit can hold an operation its replica was never sent (the primary died with
/// the operation in flight, unacknowledged, after the replica copied that commit). Promoted,
/// the replica must number its writes above that operation: a write numbered below it would
/// later be replayed as older than the document it replaced, and dropped.
#[test]
fn a_promoted_replica_numbers_its_writes_above_every_operation_in_its_copied_segments() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (primary, replica) = (open_primary(dirs[0].path()), open_replica(dirs[1].path()));
    write(&primary, &replica, 0..10);
    // Applied and committed on the primary, never sent to the replica.
    assert_eq!(index_as_primary(&primary, "x", 1).seq_no, 10);
    refresh_and_copy(&primary, &replica);
    drop(primary);

    replica.promote_to_writer(&parse).unwrap();
    let rewrite = index_as_primary(&replica, "x", 2);
    assert!(
        rewrite.seq_no > 10,
        "the new primary numbered a write {} while its segments hold seq_no 10",
        rewrite.seq_no
    );
    replica.sync_to(&rewrite.location.unwrap()).unwrap();

    // Its own replica copied the commit that still holds x = 1, then logged the rewrite;
    // promoted in turn, it replays the rewrite over that commit.
    let next = open_replica(dirs[2].path());
    let promotion_commit = replica.segment_checkpoint().unwrap();
    copy_files(&promotion_commit, &replica, &next);
    next.install_checkpoint(&promotion_commit).unwrap();
    let logged = next.apply(
        vec![index_op("x", 2, rewrite.seq_no, rewrite.version)],
        Origin::Replica,
    );
    next.sync_to(&logged[0].as_ref().unwrap().location.unwrap())
        .unwrap();
    drop(replica);
    next.promote_to_writer(&parse).unwrap();
    next.refresh().unwrap();
    let x = next.get("x").unwrap().expect("x is there");
    assert_eq!(
        x.source, br#"{"n":2}"#,
        "the acknowledged rewrite of x was lost"
    );
}

/// A store copied by a peer recovery holds operations no translog of the new copy has; a
/// checkpoint older than that store (a remote store lagging behind the primary) must not
/// replace it, or a later promotion would fill those operations in as no-ops.
#[test]
fn a_recovered_replica_refuses_a_checkpoint_older_than_the_store_it_copied() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = open_primary(a.path());
    let ops = |ids: std::ops::Range<i64>| {
        ids.map(|n| index_op(&format!("d{n}"), n, UNASSIGNED_SEQ_NO, 0))
            .collect()
    };
    primary.apply(ops(0..10), Origin::Primary);
    primary.refresh().unwrap();
    let older = primary.segment_checkpoint().unwrap();
    primary.apply(ops(10..20), Origin::Primary);
    primary.refresh().unwrap();
    let recovered = primary.segment_checkpoint().unwrap();

    // The file phase of a peer recovery: the primary's commit, bound to a new translog.
    let config = EngineConfig {
        segment_replica: true,
        ..EngineConfig::new(b.path().to_path_buf())
    };
    std::fs::create_dir_all(config.index_dir()).unwrap();
    for checkpoint in [&older, &recovered] {
        for file in &checkpoint.files {
            let (from, to) = (a.path().join("index"), config.index_dir());
            std::fs::copy(from.join(&file.name), to.join(&file.name)).unwrap();
        }
    }
    std::fs::write(config.index_dir().join("meta.json"), &recovered.meta).unwrap();
    crate::recovery::bind_recovered_store(&config, 1).unwrap();
    let replica = Engine::open(config, 1, &parse).unwrap();
    assert_eq!(docs(&replica), 20);

    assert!(replica.is_behind_store(&older));
    assert!(!replica.is_behind_store(&recovered));
    assert!(matches!(
        replica.install_checkpoint(&older),
        Err(EngineError::CheckpointBehindStore {
            local_checkpoint: 9,
            complete_from: 20
        })
    ));
    assert_eq!(
        docs(&replica),
        20,
        "the store copied by the recovery is still searched"
    );
}

#[test]
fn a_precopied_files_checksum_outlives_an_install_that_does_not_name_it_until_the_file_goes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (primary, replica) = (open_primary(a.path()), open_replica(b.path()));
    write(&primary, &replica, 0..10);
    refresh_and_copy(&primary, &replica);
    // A merged segment's file arrives ahead of the checkpoint that names it.
    let dir = replica.config().index_dir();
    std::fs::write(dir.join("merged.idx"), b"merged bytes").unwrap();
    let merged = StoreFile {
        name: "merged.idx".into(),
        length: 12,
        checksum: 0xabcd,
    };
    replica.remember_checksums(std::slice::from_ref(&merged));
    write(&primary, &replica, 10..20);
    let installed = refresh_and_copy(&primary, &replica);
    assert!(installed.files.iter().all(|f| f.name != "merged.idx"));
    assert_eq!(replica.known_checksum("merged.idx"), Some((12, 0xabcd)));
    for file in &installed.files {
        assert_eq!(
            replica.known_checksum(&file.name),
            Some((file.length, file.checksum))
        );
    }
    std::fs::remove_file(dir.join("merged.idx")).unwrap();
    write(&primary, &replica, 20..30);
    refresh_and_copy(&primary, &replica);
    assert_eq!(replica.known_checksum("merged.idx"), None);
}
