//! A commit lets writes through while tantivy writes its segments (`engine/committing.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use crate::tests::{index_op, mapping, open};
use crate::*;

#[test]
fn writes_are_acknowledged_while_a_commit_writes_its_segments_and_land_in_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let m = mapping();
    let engine = Arc::new(open(dir.path(), &m));
    // A backlog that takes tantivy a while to write out.
    for batch in 0..40 {
        let ops = (0..1000)
            .map(|k| {
                let id = format!("old-{batch}-{k}");
                let text = format!("package {k} of batch {batch} with some words to index");
                index_op(
                    &engine,
                    &m,
                    &id,
                    json!({"n": k, "t": text}),
                    DocRequest::default(),
                )
            })
            .collect();
        assert!(engine.apply(ops, Origin::Primary).iter().all(|r| r.is_ok()));
    }
    let done = Arc::new(AtomicBool::new(false));
    let refresher = {
        let (engine, done) = (engine.clone(), done.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            engine.refresh().unwrap();
            done.store(true, Ordering::Release);
            (started, Instant::now())
        })
    };
    let mut writes = Vec::new();
    while !done.load(Ordering::Acquire) {
        let id = format!("new-{}", writes.len());
        let started = Instant::now();
        let op = index_op(&engine, &m, &id, json!({"n": 1}), DocRequest::default());
        let result = engine
            .apply(vec![op], Origin::Primary)
            .pop()
            .unwrap()
            .unwrap();
        assert!(
            engine.get(&id).unwrap().is_some(),
            "{id} not seen by a realtime get"
        );
        writes.push((started, Instant::now(), result.seq_no));
    }
    let (refresh_started, refresh_ended) = refresher.join().unwrap();
    let inside = writes
        .iter()
        .filter(|(started, ended, _)| *started > refresh_started && *ended < refresh_ended)
        .count();
    assert!(
        inside > 0,
        "no write was acknowledged during a {:?} commit ({} writes)",
        refresh_ended - refresh_started,
        writes.len()
    );
    // Not in the commit that ran, all in the next one; ids and seq_nos intact.
    engine.refresh().unwrap();
    let searcher = engine.searcher();
    assert_eq!(searcher.num_docs() as usize, 40_000 + writes.len());
    for (k, (_, _, seq_no)) in writes.iter().enumerate() {
        let got = engine.get(&format!("new-{k}")).unwrap().unwrap();
        assert_eq!(got.seq_no, *seq_no);
    }
}
