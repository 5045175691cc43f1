//! The merged-segment hook of a primary engine: a merged segment is reported complete before
//! any commit names it, the merge waits for the listener while refreshes go on, and a replica
//! that received the merged files beforehand copies nothing when the merge's commit arrives.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::nrt_tests::{
    copy_files, docs, index_as_primary, open_primary, open_replica, open_single_threaded_primary,
    parse, refresh_and_copy, write,
};
use crate::*;

/// What the listener saw of the first merged segment.
struct Reported {
    files: Vec<StoreFile>,
    length: u64,
}

/// A listener that reports the first merged segment and holds that merge until `go`.
fn hold_first_merge(engine: &Engine) -> (mpsc::Receiver<Reported>, mpsc::Sender<()>) {
    let (reported, reports) = mpsc::channel();
    let (go, wait) = mpsc::channel::<()>();
    let first = Mutex::new(Some((reported, wait)));
    let listener: MergedSegmentListener = Arc::new(move |merged: &MergedSegment| {
        let Some((reported, wait)) = first.lock().take() else {
            return;
        };
        let files = merged.store_files().expect("complete files with footers");
        reported
            .send(Reported {
                files,
                length: merged.length(),
            })
            .unwrap();
        wait.recv().unwrap();
    });
    assert!(engine.set_merged_segment_listener(listener));
    (reports, go)
}

/// A primary and its replica with three segments, each written and copied.
fn three_copied_segments() -> ([tempfile::TempDir; 2], Arc<Engine>, Engine) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = Arc::new(open_primary(a.path()));
    let replica = open_replica(b.path());
    for batch in 0..3 {
        write(&primary, &replica, batch * 10..batch * 10 + 10);
        refresh_and_copy(&primary, &replica);
    }
    ([a, b], primary, replica)
}

/// A force merge to one segment, stopped where its merged segment is reported (until `go`).
fn force_merge_held_at_its_end(
    primary: &Arc<Engine>,
) -> (
    std::thread::JoinHandle<Result<(), crate::EngineError>>,
    Reported,
    mpsc::Sender<()>,
) {
    let (reports, go) = hold_first_merge(primary);
    let merging = {
        let primary = primary.clone();
        std::thread::spawn(move || primary.force_merge(ForceMergeTarget::MaxSegments(1)))
    };
    (merging, reports.recv().unwrap(), go)
}

fn names(files: &[StoreFile]) -> BTreeSet<String> {
    files.iter().map(|f| f.name.clone()).collect()
}

#[test]
fn a_merged_segment_is_reported_before_any_commit_names_it_and_refreshes_go_on_meanwhile() {
    let (_dirs, primary, replica) = three_copied_segments();
    let (merging, merged, go) = force_merge_held_at_its_end(&primary);
    assert!(merged.length > 0 && merged.files.iter().any(|f| f.name.ends_with(".src")));
    let before = primary.segment_checkpoint().unwrap();
    assert!(names(&before.files).is_disjoint(&names(&merged.files)));

    // The merge waits for the listener; writes, refreshes and replica copies do not.
    write(&primary, &replica, 30..40);
    let during = refresh_and_copy(&primary, &replica);
    assert!(during.is_ahead_of(&before));
    assert!(names(&during.files).is_disjoint(&names(&merged.files)));
    assert_eq!(docs(&replica), 40);

    go.send(()).unwrap();
    merging.join().unwrap().unwrap();
    refresh_and_copy(&primary, &replica);
    assert_eq!((docs(&primary), docs(&replica)), (40, 40));
}

#[test]
fn a_replica_given_the_merged_files_first_has_every_file_of_the_merge_commit() {
    let (_dirs, primary, replica) = three_copied_segments();
    let (merging, merged, go) = force_merge_held_at_its_end(&primary);
    // The pre-copy: the merged files reach the replica before the merge is committed.
    let pre_copy = SegmentCheckpoint {
        files: merged.files.clone(),
        ..primary.segment_checkpoint().unwrap()
    };
    copy_files(&pre_copy, &primary, &replica);
    go.send(()).unwrap();
    merging.join().unwrap().unwrap();

    let after = primary.segment_checkpoint().unwrap();
    assert_eq!(names(&after.files), names(&merged.files));
    let on_replica = replica.config().index_dir();
    for file in &after.files {
        let (length, checksum) = store::checksum_file(&on_replica.join(&file.name)).unwrap();
        assert_eq!(
            (length, checksum),
            (file.length, file.checksum),
            "{}",
            file.name
        );
    }
    replica.install_checkpoint(&after).unwrap();
    assert_eq!(docs(&replica), 30);
    // The hook counted the force merge as it wrote the segment.
    let stats = primary.stats();
    assert_eq!((stats.merge_total, stats.merge_docs), (1, 30), "{stats:?}");
    assert_eq!(stats.merge_size_in_bytes, merged.length, "{stats:?}");
}

#[test]
fn a_force_merge_under_continuous_writes_merges_what_was_there_and_returns() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let primary = Arc::new(open_primary(a.path()));
    let replica = Arc::new(open_replica(b.path()));
    for batch in 0..4 {
        write(&primary, &replica, batch * 10..batch * 10 + 10);
        primary.refresh().unwrap();
    }
    // Every merge takes a while (a slow pre-copy): refreshes add segments meanwhile.
    let slow: MergedSegmentListener =
        Arc::new(|_: &MergedSegment| std::thread::sleep(std::time::Duration::from_millis(200)));
    primary.set_merged_segment_listener(slow);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (primary, replica, stop) = (primary.clone(), replica.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 40;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                write(&primary, &replica, n..n + 5);
                primary.refresh().unwrap();
                n += 5;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let started = std::time::Instant::now();
    primary
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Release);
    writer.join().unwrap();
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    let largest = primary
        .index()
        .searchable_segment_metas()
        .unwrap()
        .iter()
        .map(|m| m.num_docs())
        .max();
    assert!(
        largest >= Some(40),
        "the first 40 documents are in one segment: {largest:?}"
    );
}

/// Waits until a background merge wrote its segment and tantivy swapped it in: counted, and
/// fewer than the eleven segments that started it in `meta.json`.
fn wait_for_background_merge(primary: &Engine) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while primary.stats().merge_total == 0
        || primary.index().searchable_segment_ids().unwrap().len() >= 11
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no background merge ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_background_merge_is_committed_by_the_next_refresh_and_counted() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // One segment per refresh: the eleventh puts the tiered policy over its budget of ten
    // floor-sized segments, and it merges ten after the last commit the test makes.
    let primary = open_single_threaded_primary(a.path());
    let replica = open_replica(b.path());
    for batch in 0..11 {
        write(&primary, &replica, batch * 10..batch * 10 + 10);
        refresh_and_copy(&primary, &replica);
    }
    wait_for_background_merge(&primary);
    let before = primary.segment_checkpoint().unwrap();

    assert!(
        primary.refresh().unwrap(),
        "nothing was written, but the merge is not committed yet"
    );
    let after = refresh_and_copy(&primary, &replica);
    assert!(after.is_ahead_of(&before));
    replica.install_checkpoint(&after).unwrap();
    assert_eq!(
        replica.searcher().segment_readers().len(),
        primary.searcher().segment_readers().len()
    );
    assert!(primary.searcher().segment_readers().len() < 11);
    assert_eq!((docs(&primary), docs(&replica)), (110, 110));
    assert!(!primary.refresh().unwrap(), "the merge was committed once");

    let stats = primary.stats();
    assert!(stats.merge_total >= 1, "{stats:?}");
    assert!(stats.merge_docs >= 10 * 10, "{stats:?}");
    assert!(stats.merge_size_in_bytes > 0, "{stats:?}");
}

/// (name, generation) of every segment of `engine`.
fn segment_names(engine: &Engine) -> BTreeSet<(String, u64)> {
    let segments = engine.segments().unwrap();
    segments
        .into_iter()
        .map(|s| (s.name, s.generation))
        .collect()
}

#[test]
fn segments_are_named_by_number_alike_on_every_copy_and_new_ones_are_numbered_above() {
    let (_dirs, primary, replica) = three_copied_segments();
    let copied = segment_names(&primary);
    assert_eq!(
        copied,
        segment_names(&replica),
        "the copies name their segments alike"
    );
    for (name, generation) in &copied {
        assert_eq!(
            *name,
            shoal_codec::segment_name(*generation),
            "Lucene's _<n in base 36>"
        );
    }
    let highest = copied.iter().map(|(_, number)| *number).max().unwrap();

    primary
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap();
    primary.refresh().unwrap();
    let merged = segment_names(&primary);
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert!(
        merged.iter().all(|(_, number)| *number > highest),
        "{merged:?} after {copied:?}"
    );

    // A promoted replica numbers its own segments above every one it copied, and above
    // those its old primary numbered after (the merged one never reached it).
    drop(primary);
    replica.promote_to_writer(&parse).unwrap();
    index_as_primary(&replica, "new", 99);
    replica.refresh().unwrap();
    let after = segment_names(&replica);
    let new: Vec<_> = after.difference(&copied).collect();
    assert_eq!(new.len(), 1, "{after:?}");
    assert!(
        new[0].1 > highest,
        "{new:?} numbered at or below the copied {copied:?}"
    );
    assert!(
        merged.iter().all(|(_, number)| new[0].1 > *number),
        "{new:?} reuses a number of the old primary's {merged:?}"
    );
}
