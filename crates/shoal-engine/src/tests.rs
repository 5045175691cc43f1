//! Engine behaviour on a real tantivy index and translog in a temp directory.

use serde_json::json;
use shoal_mapping::{DocumentParser, MapperError, Mapping};
use tantivy::TantivyDocument;

use crate::*;

fn parse_fn(
    mapping: &Mapping,
) -> impl Fn(&str, &[u8]) -> Result<TantivyDocument, MapperError> + '_ {
    move |id, source| {
        let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
        Ok(DocumentParser::new(mapping, &schema).parse(id, source)?.doc)
    }
}

pub(crate) fn open(dir: &std::path::Path, mapping: &Mapping) -> Engine {
    Engine::open(EngineConfig::new(dir.to_path_buf()), 1, &parse_fn(mapping)).unwrap()
}

pub(crate) fn index_op(
    engine: &Engine,
    mapping: &Mapping,
    id: &str,
    source: serde_json::Value,
    request: DocRequest,
) -> WriteOp {
    let bytes = serde_json::to_vec(&source).unwrap();
    let doc = DocumentParser::new(mapping, engine.schema())
        .parse(id, &bytes)
        .unwrap()
        .doc;
    WriteOp::Index {
        id: id.into(),
        routing: None,
        source: bytes,
        doc,
        request,
        seq_no: UNASSIGNED_SEQ_NO,
        primary_term: 0,
        version: 0,
    }
}

fn delete_op(id: &str, seq_no: i64, primary_term: i64, version: i64) -> WriteOp {
    WriteOp::Delete {
        id: id.into(),
        routing: None,
        request: DocRequest::default(),
        seq_no,
        primary_term,
        version,
    }
}

pub(crate) fn apply_one(engine: &Engine, op: WriteOp) -> Result<OpResult, EngineError> {
    let result = engine.apply(vec![op], Origin::Primary).pop().unwrap()?;
    if let Some(loc) = result.location {
        engine.sync_to(&loc).unwrap();
    }
    Ok(result)
}

pub(crate) fn mapping() -> Mapping {
    Mapping::from_json(&json!({"properties": {"n": {"type": "long"}, "t": {"type": "text"}}}))
        .unwrap()
}

#[test]
fn seq_nos_versions_and_results_follow_opensearch() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let r1 = apply_one(
        &engine,
        index_op(&engine, &m, "1", json!({"n": 1}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(
        (r1.kind, r1.seq_no, r1.version),
        (OpResultKind::Created, 0, 1)
    );
    let r2 = apply_one(
        &engine,
        index_op(&engine, &m, "1", json!({"n": 2}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(
        (r2.kind, r2.seq_no, r2.version),
        (OpResultKind::Updated, 1, 2)
    );
    let del = delete_op("1", -2, 0, 0);
    let r3 = apply_one(&engine, del).unwrap();
    assert_eq!(
        (r3.kind, r3.seq_no, r3.version),
        (OpResultKind::Deleted, 2, 3)
    );
    let del = delete_op("1", -2, 0, 0);
    assert_eq!(
        apply_one(&engine, del).unwrap().kind,
        OpResultKind::NotFound
    );
    assert_eq!(engine.local_checkpoint(), 3);
}

#[test]
fn realtime_get_sees_unrefreshed_writes_and_refresh_makes_them_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    apply_one(
        &engine,
        index_op(&engine, &m, "a", json!({"n": 7}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(engine.searcher().num_docs(), 0);
    let got = engine.get("a").unwrap().unwrap();
    assert_eq!(got.source, br#"{"n":7}"#);
    engine.refresh().unwrap();
    assert_eq!(engine.searcher().num_docs(), 1);
    // After refresh the version map is pruned: get reads the index.
    assert_eq!(engine.get("a").unwrap().unwrap().version, 1);
}

#[test]
fn a_retried_auto_id_write_replaces_the_document_an_earlier_attempt_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let auto = |is_retry| DocRequest {
        auto_generated_id: true,
        is_retry,
        ..Default::default()
    };
    let first = apply_one(
        &engine,
        index_op(&engine, &m, "gen-1", json!({"n": 1}), auto(false)),
    )
    .unwrap();
    assert_eq!(first.kind, OpResultKind::Created);
    engine.refresh().unwrap();
    // The coordinator never heard of the first attempt and sends the same item again.
    let retry = apply_one(
        &engine,
        index_op(&engine, &m, "gen-1", json!({"n": 1}), auto(true)),
    )
    .unwrap();
    assert_eq!(
        (retry.kind, retry.version),
        (OpResultKind::Created, 1),
        "answered as the first attempt"
    );
    engine.refresh().unwrap();
    assert_eq!(
        engine.searcher().num_docs(),
        1,
        "a retried item must not become a second document"
    );
    // Without the retry mark an auto-generated id is appended without a lookup (the fast path).
    apply_one(
        &engine,
        index_op(&engine, &m, "gen-2", json!({"n": 2}), auto(false)),
    )
    .unwrap();
    engine.refresh().unwrap();
    assert_eq!(engine.searcher().num_docs(), 2);
}

#[test]
fn if_seq_no_conflicts_use_opensearch_reason() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    apply_one(
        &engine,
        index_op(&engine, &m, "1", json!({"n": 1}), DocRequest::default()),
    )
    .unwrap();
    let req = DocRequest {
        if_seq_no: Some(5),
        if_primary_term: Some(1),
        ..Default::default()
    };
    let err = apply_one(&engine, index_op(&engine, &m, "1", json!({"n": 1}), req)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[1]: version conflict, required seqNo [5], primary term [1]. current document has seqNo [0] and primary term [1]"
    );
    let create = DocRequest {
        create_only: true,
        ..Default::default()
    };
    let err = apply_one(&engine, index_op(&engine, &m, "1", json!({"n": 1}), create)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[1]: version conflict, document already exists (current version [1])"
    );
}

#[test]
fn external_versions_must_increase() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let ext = |v| DocRequest {
        version: Some(v),
        version_type: VersionType::External,
        ..Default::default()
    };
    assert_eq!(
        apply_one(&engine, index_op(&engine, &m, "1", json!({}), ext(5)))
            .unwrap()
            .version,
        5
    );
    let err = apply_one(&engine, index_op(&engine, &m, "1", json!({}), ext(5))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "[1]: version conflict, current version [5] is higher or equal to the one provided [5]"
    );
    assert_eq!(
        apply_one(&engine, index_op(&engine, &m, "1", json!({}), ext(9)))
            .unwrap()
            .version,
        9
    );
}

#[test]
fn unflushed_writes_survive_a_crash_through_translog_replay() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    {
        let engine = open(dir.path(), &m);
        for i in 0..50 {
            apply_one(
                &engine,
                index_op(
                    &engine,
                    &m,
                    &i.to_string(),
                    json!({"n": i}),
                    DocRequest::default(),
                ),
            )
            .unwrap();
        }
        engine.refresh().unwrap();
        for i in 0..10 {
            apply_one(
                &engine,
                index_op(
                    &engine,
                    &m,
                    &i.to_string(),
                    json!({"n": i + 100}),
                    DocRequest::default(),
                ),
            )
            .unwrap();
        }
        let del = delete_op("20", -2, 0, 0);
        apply_one(&engine, del).unwrap();
        // Crash: no flush, no close (dropping commits nothing; a real kill -9 test is in pytest).
        drop(engine);
    }
    let engine = open(dir.path(), &m);
    assert_eq!(engine.local_checkpoint(), 60);
    assert_eq!(engine.get("3").unwrap().unwrap().source, br#"{"n":103}"#);
    assert_eq!(engine.get("3").unwrap().unwrap().version, 2);
    assert!(engine.get("20").unwrap().is_none());
    assert_eq!(engine.get("30").unwrap().unwrap().version, 1);
    assert_eq!(engine.searcher().num_docs(), 49);
    // New writes continue the sequence.
    let r = apply_one(
        &engine,
        index_op(&engine, &m, "new", json!({}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(r.seq_no, 61);
}

#[test]
fn replica_ops_keep_primary_seq_nos_and_stale_ops_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let replica_op = |seq_no: i64, n: i64| {
        let bytes = serde_json::to_vec(&json!({"n": n})).unwrap();
        let doc = DocumentParser::new(&m, engine.schema())
            .parse("x", &bytes)
            .unwrap()
            .doc;
        WriteOp::Index {
            id: "x".into(),
            routing: None,
            source: bytes,
            doc,
            request: DocRequest::default(),
            seq_no,
            primary_term: 1,
            version: seq_no + 1,
        }
    };
    // The primary advertises x@4 as an update (x existed at 2).
    engine.advance_max_seq_no_of_updates(4);
    let r = engine
        .apply(vec![replica_op(4, 4)], Origin::Replica)
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(r.seq_no, 4);
    let r = engine
        .apply(vec![replica_op(2, 2)], Origin::Replica)
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(r.kind, OpResultKind::Noop);
    assert_eq!(engine.get("x").unwrap().unwrap().source, br#"{"n":4}"#);
    assert_eq!(
        engine.local_checkpoint(),
        -1,
        "seq_nos 0,1,3 are still missing"
    );
    assert_eq!(engine.max_seq_no(), 4);
}

#[test]
fn flush_trims_translog_and_force_merge_reduces_segments() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    for round in 0..3 {
        for i in 0..20 {
            apply_one(
                &engine,
                index_op(
                    &engine,
                    &m,
                    &format!("{round}-{i}"),
                    json!({"t": "hello world"}),
                    DocRequest::default(),
                ),
            )
            .unwrap();
        }
        engine.refresh().unwrap();
    }
    assert!(engine.segments().unwrap().len() >= 2);
    engine.flush(true).unwrap();
    assert_eq!(engine.stats().translog.uncommitted_operations, 0);
    engine
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    assert_eq!(engine.segments().unwrap().len(), 1);
    assert_eq!(engine.searcher().num_docs(), 60);
    assert_eq!(
        engine.get("1-5").unwrap().unwrap().source,
        br#"{"t":"hello world"}"#
    );
}

#[test]
fn force_merge_waits_out_background_merges() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    // Enough small commits for the tiered merge policy to merge in the background (it merges
    // ten floor-sized segments whenever there are eleven).
    for round in 0..24 {
        for i in 0..10 {
            apply_one(
                &engine,
                index_op(
                    &engine,
                    &m,
                    &format!("{round}-{i}"),
                    json!({"n": i}),
                    DocRequest::default(),
                ),
            )
            .unwrap();
        }
        engine.refresh().unwrap();
    }
    engine
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    assert_eq!(engine.segments().unwrap().len(), 1);
    assert_eq!(engine.searcher().num_docs(), 240);
}

#[test]
fn a_pinned_commit_copied_elsewhere_opens_as_a_copy_with_its_own_translog() {
    let source_dir = tempfile::tempdir().unwrap();
    let target_dir = tempfile::tempdir().unwrap();
    let mapping = mapping();
    let source = open(source_dir.path(), &mapping);
    for n in 0..20 {
        let op = index_op(
            &source,
            &mapping,
            &n.to_string(),
            json!({"n": n}),
            DocRequest::default(),
        );
        apply_one(&source, op).unwrap();
    }
    let pinned = source_dir.path().join("pinned");
    let snapshot = recovery::snapshot_commit(&source, &pinned).unwrap();
    assert_eq!(snapshot.payload.local_checkpoint, 19);
    // The source keeps writing and merging; the pinned files stay readable.
    for n in 20..40 {
        let op = index_op(
            &source,
            &mapping,
            &n.to_string(),
            json!({"n": n}),
            DocRequest::default(),
        );
        apply_one(&source, op).unwrap();
    }
    source
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    let config = EngineConfig::new(target_dir.path().to_path_buf());
    std::fs::create_dir_all(config.index_dir()).unwrap();
    for (name, len) in &snapshot.files {
        let copied = std::fs::copy(pinned.join(name), config.index_dir().join(name)).unwrap();
        assert_eq!(copied, *len, "{name}");
    }
    snapshot.release();
    let payload = recovery::bind_recovered_store(&config, 1).unwrap();
    assert_eq!(payload.local_checkpoint, 19);
    let target = open(target_dir.path(), &mapping);
    assert_eq!(target.local_checkpoint(), 19);
    assert!(target.get("7").unwrap().is_some());
    assert!(
        target.get("27").unwrap().is_none(),
        "ops above the commit come by replay"
    );
    // A replica op from the primary continues the history.
    let op = source.history(20, 20).unwrap().next().unwrap().unwrap();
    let doc = DocumentParser::new(&mapping, target.schema())
        .parse(&op.id, &op.source)
        .unwrap()
        .doc;
    let write = WriteOp::Index {
        id: op.id.clone(),
        routing: None,
        source: op.source.clone(),
        doc,
        request: DocRequest::default(),
        seq_no: op.seq_no,
        primary_term: op.primary_term,
        version: op.version,
    };
    target
        .apply(vec![write], Origin::Replica)
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(target.local_checkpoint(), 20);
}

fn replica_index_op(engine: &Engine, m: &Mapping, id: &str, seq_no: i64, term: i64) -> WriteOp {
    let bytes = serde_json::to_vec(&json!({"n": seq_no})).unwrap();
    let doc = DocumentParser::new(m, engine.schema())
        .parse(id, &bytes)
        .unwrap()
        .doc;
    WriteOp::Index {
        id: id.into(),
        routing: None,
        source: bytes,
        doc,
        request: DocRequest::default(),
        seq_no,
        primary_term: term,
        version: 1,
    }
}

#[test]
fn a_promoted_copy_fills_its_seq_no_gaps_with_no_ops_under_the_new_term() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let ops = [0, 1, 3, 6]
        .iter()
        .map(|&s| replica_index_op(&engine, &m, &format!("d{s}"), s, 1))
        .collect();
    for r in engine.apply(ops, Origin::Replica) {
        r.unwrap();
    }
    assert_eq!(engine.local_checkpoint(), 1);
    engine.set_primary_term(2);
    assert_eq!(engine.fill_seq_no_gaps(2).unwrap(), 3);
    assert_eq!(engine.local_checkpoint(), 6);
    assert_eq!(engine.max_seq_no(), 6);
    let history: Vec<_> = engine
        .history(2, 6)
        .unwrap()
        .map(|op| op.unwrap())
        .map(|op| (op.seq_no, op.primary_term, op.kind))
        .collect();
    for (seq_no, term) in [(2, 2), (4, 2), (5, 2), (3, 1), (6, 1)] {
        let kind = if term == 2 {
            OpKind::NoOp
        } else {
            OpKind::Index
        };
        assert!(
            history.contains(&(seq_no, term, kind)),
            "{seq_no} missing from {history:?}"
        );
    }
    assert_eq!(
        engine.fill_seq_no_gaps(2).unwrap(),
        0,
        "nothing left to fill"
    );
}

#[test]
fn flush_keeps_the_operations_above_the_global_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    for i in 0..30 {
        apply_one(
            &engine,
            index_op(
                &engine,
                &m,
                &format!("{i}"),
                json!({"n": i}),
                DocRequest::default(),
            ),
        )
        .unwrap();
        if i % 10 == 9 {
            engine.flush(true).unwrap();
        }
    }
    engine.update_global_checkpoint(12);
    engine.flush(true).unwrap();
    let seq_nos: Vec<i64> = engine
        .history(0, 29)
        .unwrap()
        .map(|op| op.unwrap().seq_no)
        .collect();
    assert!(
        (13..30).all(|s| seq_nos.contains(&s)),
        "ops above the global checkpoint must stay: {seq_nos:?}"
    );
    engine.update_global_checkpoint(29);
    engine.flush(true).unwrap();
    assert!(
        engine.history(0, 29).unwrap().count() < 17,
        "once every copy has them they are trimmed"
    );
}

#[test]
fn a_retention_floor_keeps_history_a_flush_would_trim_and_completeness_follows_the_trim() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    assert_eq!(engine.history_complete_from(), 0);
    engine.set_retention_floor(Some(5));
    for i in 0..20 {
        let op = index_op(
            &engine,
            &m,
            &format!("{i}"),
            json!({"n": i}),
            DocRequest::default(),
        );
        apply_one(&engine, op).unwrap();
        engine.flush(true).unwrap();
    }
    engine.update_global_checkpoint(19);
    engine.flush(true).unwrap();
    let seq_nos: Vec<i64> = engine
        .history(0, 19)
        .unwrap()
        .map(|op| op.unwrap().seq_no)
        .collect();
    assert!(
        (5..20).all(|s| seq_nos.contains(&s)),
        "the lease holds from 5: {seq_nos:?}"
    );
    assert_eq!(engine.history_complete_from(), 5);
    // The lease is released: the next flush trims, and the translog no longer lists 5..19.
    engine.set_retention_floor(None);
    engine.flush(true).unwrap();
    assert_eq!(engine.history_complete_from(), 20);
    assert!(engine.history(0, 19).unwrap().count() < 15);
    // Completeness survives a restart (it is in the commit).
    engine.close().unwrap();
    drop(engine);
    assert_eq!(open(dir.path(), &m).history_complete_from(), 20);
}

#[test]
fn a_store_recovered_from_files_knows_its_commit_is_not_in_its_translog() {
    let source_dir = tempfile::tempdir().unwrap();
    let target_dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let source = open(source_dir.path(), &m);
    for n in 0..10 {
        let op = index_op(
            &source,
            &m,
            &n.to_string(),
            json!({"n": n}),
            DocRequest::default(),
        );
        apply_one(&source, op).unwrap();
    }
    let pinned = source_dir.path().join("pinned");
    let snapshot = recovery::snapshot_commit(&source, &pinned).unwrap();
    let config = EngineConfig::new(target_dir.path().to_path_buf());
    std::fs::create_dir_all(config.index_dir()).unwrap();
    for (name, _) in &snapshot.files {
        std::fs::copy(pinned.join(name), config.index_dir().join(name)).unwrap();
    }
    let payload = recovery::bind_recovered_store(&config, 1).unwrap();
    assert_eq!(payload.history_complete_from, 10);
    assert_eq!(open(target_dir.path(), &m).history_complete_from(), 10);
}

#[test]
fn the_primary_raises_max_seq_no_of_updates_for_updates_and_deletes_only() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    assert_eq!(engine.max_seq_no_of_updates(), NO_OPS_PERFORMED);
    apply_one(
        &engine,
        index_op(&engine, &m, "a", json!({"n": 1}), DocRequest::default()),
    )
    .unwrap();
    apply_one(
        &engine,
        index_op(&engine, &m, "b", json!({"n": 2}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(
        engine.max_seq_no_of_updates(),
        NO_OPS_PERFORMED,
        "creates are not updates"
    );
    let update = apply_one(
        &engine,
        index_op(&engine, &m, "a", json!({"n": 3}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(engine.max_seq_no_of_updates(), update.seq_no);
    let delete = delete_op("b", -2, 0, 0);
    let deleted = apply_one(&engine, delete).unwrap();
    assert_eq!(engine.max_seq_no_of_updates(), deleted.seq_no);
    apply_one(
        &engine,
        index_op(&engine, &m, "b", json!({"n": 4}), DocRequest::default()),
    )
    .unwrap();
    assert_eq!(
        engine.max_seq_no_of_updates(),
        deleted.seq_no,
        "re-creating a deleted id is no update"
    );
}

#[test]
fn a_replica_appends_without_lookup_only_once_every_advertised_update_is_processed() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let replica = |op: WriteOp| {
        engine
            .apply(vec![op], Origin::Replica)
            .pop()
            .unwrap()
            .unwrap()
    };
    // The primary indexed x at 0, deleted it at 1 and indexed it again at 2; the delete
    // reaches this copy last. Seq_no 2 is above the advertised max_seq_no_of_updates (1),
    // but the delete is not processed yet, so x@0 may still be here: the copy must look up.
    replica(replica_index_op(&engine, &m, "x", 0, 1));
    engine.advance_max_seq_no_of_updates(1);
    replica(replica_index_op(&engine, &m, "x", 2, 1));
    let stale_delete = replica(delete_op("x", 1, 1, 2));
    assert_eq!(stale_delete.kind, OpResultKind::Noop);
    engine.refresh().unwrap();
    assert_eq!(engine.searcher().num_docs(), 1, "one live version of x");
    // Every update is processed now: new ids append, and the result is the same.
    assert_eq!(engine.local_checkpoint(), 2);
    replica(replica_index_op(&engine, &m, "y", 3, 1));
    replica(replica_index_op(&engine, &m, "z", 4, 1));
    engine.refresh().unwrap();
    assert_eq!(engine.searcher().num_docs(), 3);
}

#[test]
fn refresh_listeners_hear_each_commit_with_the_new_checkpoint_and_not_an_idle_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = open(dir.path(), &m);
    let heard = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = heard.clone();
    engine.add_refresh_listener(std::sync::Arc::new(move |engine: &Engine| {
        sink.lock()
            .push((engine.local_checkpoint(), engine.searcher().num_docs()));
    }));
    apply_one(
        &engine,
        index_op(&engine, &m, "a", json!({"n": 1}), DocRequest::default()),
    )
    .unwrap();
    assert!(engine.refresh().unwrap());
    assert!(!engine.refresh().unwrap(), "nothing new to refresh");
    apply_one(
        &engine,
        index_op(&engine, &m, "b", json!({"n": 2}), DocRequest::default()),
    )
    .unwrap();
    engine.flush(false).unwrap();
    assert_eq!(*heard.lock(), vec![(0, 1), (1, 2)]);
}

#[test]
fn an_id_written_again_replaces_its_document_wherever_the_first_copy_is() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let write = |engine: &Engine, id: &str, n: i64| {
        apply_one(
            engine,
            index_op(engine, &m, id, json!({ "n": n }), DocRequest::default()),
        )
        .unwrap()
    };
    {
        let engine = open(dir.path(), &m);
        write(&engine, "committed", 1);
        write(&engine, "reopened", 1);
        engine.flush(true).unwrap();
        // Known only to the searcher (the version map was pruned by the commit).
        write(&engine, "committed", 2);
        // Known only to the version map (not committed yet).
        write(&engine, "uncommitted", 1);
        write(&engine, "uncommitted", 2);
        engine.refresh().unwrap();
        assert_eq!(engine.searcher().num_docs(), 3);
        engine.close().unwrap();
    }
    // A reopened engine knows "reopened" from its commit alone.
    let engine = open(dir.path(), &m);
    let again = write(&engine, "reopened", 2);
    assert_eq!(again.kind, OpResultKind::Updated);
    engine.refresh().unwrap();
    assert_eq!(
        engine.searcher().num_docs(),
        3,
        "an overwrite left a second document"
    );
    for id in ["committed", "uncommitted", "reopened"] {
        assert_eq!(
            engine.get(id).unwrap().unwrap().source,
            br#"{"n":2}"#,
            "{id}"
        );
    }
}

#[test]
fn a_closed_engine_says_it_is_closed_and_a_failed_one_that_it_failed() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let closed = open(dir.path(), &m);
    assert!(!closed.is_closed() && !closed.has_failed());
    closed.close().unwrap();
    assert!(closed.is_closed() && !closed.has_failed());
    drop(closed);

    let failed = open(dir.path(), &m);
    failed.fail_engine("disk full".to_string());
    assert!(failed.has_failed() && !failed.is_closed());
    // Closing a failed engine keeps the failure: it must be recovered, not merely reopened.
    let _ = failed.close();
    assert!(failed.has_failed() && !failed.is_closed());
}
