//! A commit lets writes through while tantivy writes its segments (`engine/committing.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use shoal_mapping::Mapping;

use crate::tests::{index_op, mapping, open};
use crate::*;

/// A write acknowledged during a commit: (started, ended, seq_no).
type Write = (Instant, Instant, i64);

/// Indexes `source` as document `id` on the primary: the write's one result.
fn write_one(
    engine: &Engine,
    m: &Mapping,
    id: &str,
    source: serde_json::Value,
) -> Result<OpResult, EngineError> {
    let op = index_op(engine, m, id, source, DocRequest::default());
    engine.apply(vec![op], Origin::Primary).pop().unwrap()
}

/// An engine with a backlog that takes tantivy a while to write out.
fn engine_with_backlog(dir: &std::path::Path, m: &Mapping) -> Arc<Engine> {
    let engine = Arc::new(open(dir, m));
    for batch in 0..40 {
        let ops = (0..1000)
            .map(|k| {
                let id = format!("old-{batch}-{k}");
                let text = format!("package {k} of batch {batch} with some words to index");
                index_op(
                    &engine,
                    m,
                    &id,
                    json!({"n": k, "t": text}),
                    DocRequest::default(),
                )
            })
            .collect();
        assert!(engine.apply(ops, Origin::Primary).iter().all(|r| r.is_ok()));
    }
    engine
}

/// Runs `commit` on a thread and writes `new-<k>` documents until it returns; answers the
/// writes and how many were acknowledged while the commit ran (asserted to be some).
fn write_during(engine: &Arc<Engine>, m: &Mapping, commit: fn(&Engine)) -> (Vec<Write>, usize) {
    let done = Arc::new(AtomicBool::new(false));
    let committer = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            commit(&engine);
            done.store(true, Ordering::Release);
            (started, Instant::now())
        })
    };
    let mut writes = Vec::new();
    while !done.load(Ordering::Acquire) {
        let id = format!("new-{}", writes.len());
        let started = Instant::now();
        let result = write_one(engine, m, &id, json!({"n": 1})).unwrap();
        assert!(
            engine.get(&id).unwrap().is_some(),
            "{id} not seen by a realtime get"
        );
        writes.push((started, Instant::now(), result.seq_no));
    }
    let (commit_started, commit_ended) = committer.join().unwrap();
    let inside = writes
        .iter()
        .filter(|(started, ended, _)| *started > commit_started && *ended < commit_ended)
        .count();
    assert!(
        inside > 0,
        "no write was acknowledged during a {:?} commit ({} writes)",
        commit_ended - commit_started,
        writes.len()
    );
    (writes, inside)
}

#[test]
fn writes_are_acknowledged_while_a_commit_writes_its_segments_and_land_in_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = engine_with_backlog(dir.path(), &m);
    let (writes, _) = write_during(&engine, &m, |e| {
        e.refresh().unwrap();
    });
    // Not in the commit that ran, all in the next one; ids and seq_nos intact.
    engine.refresh().unwrap();
    let searcher = engine.searcher();
    assert_eq!(searcher.num_docs() as usize, 40_000 + writes.len());
    for (k, (_, _, seq_no)) in writes.iter().enumerate() {
        let got = engine.get(&format!("new-{k}")).unwrap().unwrap();
        assert_eq!(got.seq_no, *seq_no);
    }
}

#[test]
fn writes_made_during_a_flush_still_count_as_uncommitted_translog_operations() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = engine_with_backlog(dir.path(), &m);
    let (_, inside) = write_during(&engine, &m, |e| {
        e.flush(true).unwrap();
    });
    let uncommitted = engine.stats().translog.uncommitted_operations as usize;
    assert!(
        uncommitted >= inside,
        "{inside} writes were acknowledged during the flush's commit, not in it, yet the translog counts {uncommitted} uncommitted operations"
    );
}

#[test]
fn a_panic_inside_a_commit_fails_the_engine_and_wakes_the_writes_waiting_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = Arc::new(open(dir.path(), &m));
    assert!(write_one(&engine, &m, "first", json!({"n": 1})).is_ok());
    // The commit panics once as many writes wait for it as may.
    *engine.commit_hook.lock() = Some(|engine| {
        while engine.pending_operations() < crate::engine::committing::MAX_PENDING_DOCS {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("injected: tantivy panicked inside a commit");
    });
    let refresher = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.refresh())
    };
    let writer = {
        let (engine, m) = (engine.clone(), m.clone());
        std::thread::spawn(move || {
            for k in 0.. {
                if let Err(e) = write_one(&engine, &m, &format!("w-{k}"), json!({"n": k})) {
                    return (k, e);
                }
            }
            unreachable!()
        })
    };
    assert!(
        refresher.join().is_err(),
        "the injected panic did not unwind the refresh"
    );
    let started = Instant::now();
    while !writer.is_finished() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "a write waiting for room was not woken by the failed commit"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (refused_at, error) = writer.join().unwrap();
    // The hook held the commit until the waiting room was full: the refused write waited.
    assert!(refused_at > 0, "{refused_at}: {error}");
    assert!(engine.has_failed());
    assert!(error.to_string().contains("panicked"), "{error}");
}

#[test]
fn a_write_beyond_the_room_for_waiting_documents_waits_for_the_commit_to_end() {
    static RELEASE: AtomicBool = AtomicBool::new(false);
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = Arc::new(open(dir.path(), &m));
    assert!(write_one(&engine, &m, "first", json!({"n": 1})).is_ok());
    // The commit holds the writer until the test lets it go.
    *engine.commit_hook.lock() = Some(|_| {
        while !RELEASE.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let refresher = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.refresh())
    };
    // Single writes go through until one waits for the commit rather than being indexed.
    let mut k = 0;
    while engine.pending_operations() == 0 {
        write_one(&engine, &m, &format!("before-{k}"), json!({"n": 2})).unwrap();
        k += 1;
    }
    let room = crate::engine::committing::MAX_PENDING_DOCS - engine.pending_operations();
    let filling = (0..room)
        .map(|n| {
            index_op(
                &engine,
                &m,
                &format!("fill-{n}"),
                json!({"n": 3}),
                DocRequest::default(),
            )
        })
        .collect();
    assert!(engine
        .apply(filling, Origin::Primary)
        .iter()
        .all(|r| r.is_ok()));
    let late = {
        let (engine, m) = (engine.clone(), m.clone());
        std::thread::spawn(move || write_one(&engine, &m, "late", json!({"n": 4})))
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !late.is_finished(),
        "a write was acknowledged while {} documents already waited for the commit",
        crate::engine::committing::MAX_PENDING_DOCS
    );
    RELEASE.store(true, Ordering::Release);
    late.join().unwrap().expect("the waiting write fails");
    refresher.join().unwrap().unwrap();
    engine.refresh().unwrap();
    assert!(engine.get("late").unwrap().is_some());
    assert_eq!(engine.searcher().num_docs() as usize, 1 + k + room + 1);
}
