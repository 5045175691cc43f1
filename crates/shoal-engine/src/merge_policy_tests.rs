//! The tiered merge policy's choices on weighed segments (sizes in MB).

use crate::merge_policy::{choose_merges, Weighed};
use crate::MergeSettings;

const MB: u64 = 1024 * 1024;

fn segment(mb: f64) -> Weighed {
    Weighed {
        bytes: (mb * MB as f64) as u64,
        max_doc: 1000,
        deleted: 0,
    }
}

fn sizes(segments: &[Weighed], merge: &[usize]) -> Vec<u64> {
    merge.iter().map(|i| segments[*i].bytes / MB).collect()
}

#[test]
fn an_index_within_its_segment_budget_merges_nothing() {
    // Ten floor-sized segments: the first tier is full, not over.
    let segments: Vec<Weighed> = (0..10).map(|_| segment(1.0)).collect();
    assert!(choose_merges(&segments, &MergeSettings::default()).is_empty());
}

#[test]
fn one_segment_over_the_budget_merges_a_whole_tier_at_once() {
    let segments: Vec<Weighed> = (0..11).map(|_| segment(1.0)).collect();
    let merges = choose_merges(&segments, &MergeSettings::default());
    assert_eq!(merges.len(), 1, "{merges:?}");
    assert_eq!(merges[0].len(), 10, "{merges:?}");
}

#[test]
fn evenly_sized_segments_merge_before_a_large_one_is_rewritten_with_small_ones() {
    let mut segments = vec![segment(20.0)];
    segments.extend((0..12).map(|_| segment(2.0)));
    let merges = choose_merges(&segments, &MergeSettings::default());
    assert_eq!(merges.len(), 1, "{merges:?}");
    assert_eq!(sizes(&segments, &merges[0]), vec![2; 10]);
}

#[test]
fn no_merge_makes_a_segment_larger_than_max_merged_segment() {
    let settings = MergeSettings {
        max_merged_segment: 30 * MB,
        ..MergeSettings::default()
    };
    let segments: Vec<Weighed> = (0..40).map(|_| segment(7.0)).collect();
    let merges = choose_merges(&segments, &settings);
    assert!(!merges.is_empty());
    for merge in &merges {
        let total: u64 = sizes(&segments, merge).iter().sum();
        assert!(total <= 30, "{merge:?} makes {total} MB");
    }
}

#[test]
fn a_segment_of_half_the_maximum_size_is_left_alone() {
    let settings = MergeSettings {
        max_merged_segment: 100 * MB,
        ..MergeSettings::default()
    };
    let mut segments = vec![segment(60.0)];
    segments.extend((0..30).map(|_| segment(1.0)));
    let merges = choose_merges(&segments, &settings);
    assert!(!merges.is_empty());
    assert!(merges.iter().all(|m| !m.contains(&0)), "{merges:?}");
}

#[test]
fn deleted_documents_past_the_allowance_get_their_segment_merged() {
    let mut segments: Vec<Weighed> = (0..3).map(|_| segment(5.0)).collect();
    segments[1].deleted = 700;
    let merges = choose_merges(&segments, &MergeSettings::default());
    assert!(merges.iter().any(|m| m.contains(&1)), "{merges:?}");
    // Within the allowance (20 %: 600 of 3,000 documents), nothing is merged.
    segments[1].deleted = 500;
    assert!(choose_merges(&segments, &MergeSettings::default()).is_empty());
}

#[test]
fn fewer_segments_per_tier_merge_sooner_and_fewer_at_once() {
    let settings = MergeSettings {
        segments_per_tier: 4.0,
        max_merge_at_once: 4,
        ..MergeSettings::default()
    };
    let segments: Vec<Weighed> = (0..5).map(|_| segment(1.0)).collect();
    let merges = choose_merges(&segments, &settings);
    assert_eq!(merges.len(), 1, "{merges:?}");
    assert_eq!(merges[0].len(), 4);
}

/// Real segments of a primary engine, weighed as the writer's policy weighs them.
mod on_an_engine {
    use std::time::{Duration, Instant};

    use crate::merge_policy::TieredMergePolicy;
    use crate::nrt_tests::{index_as_primary, open_single_threaded_primary, parse};
    use crate::{Engine, EngineConfig, MergeSettings, SharedMergeSettings};

    fn segments(engine: &Engine) -> Vec<tantivy::index::SegmentMeta> {
        engine.index().searchable_segment_metas().unwrap()
    }

    fn write_segment(engine: &Engine, first: i64, docs: i64) {
        for n in first..first + docs {
            index_as_primary(engine, &n.to_string(), n);
        }
        engine.refresh().unwrap();
    }

    #[test]
    fn a_segment_weighs_its_bytes_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_single_threaded_primary(dir.path());
        write_segment(&engine, 0, 1);
        write_segment(&engine, 1, 2000);
        let metas = segments(&engine);
        let policy =
            TieredMergePolicy::new(SharedMergeSettings::default(), dir.path().join("index"));
        let mut weighed: Vec<(u32, u64)> = policy
            .weigh(&metas)
            .iter()
            .map(|w| (w.max_doc, w.bytes))
            .collect();
        weighed.sort();
        assert_eq!(weighed.len(), 2, "{weighed:?}");
        let (small, large) = (weighed[0].1, weighed[1].1);
        assert!(small > 0 && large > 10 * small, "{weighed:?}");
    }

    #[test]
    fn a_changed_segments_per_tier_applies_to_the_next_merge_decision() {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig {
            indexing_threads: 1,
            merge: SharedMergeSettings::new(MergeSettings::default()),
            ..EngineConfig::new(dir.path().to_path_buf())
        };
        let engine = Engine::open(config, 1, &parse).unwrap();
        for segment in 0..6 {
            write_segment(&engine, segment * 10, 10);
        }
        assert_eq!(segments(&engine).len(), 6, "within the default budget");
        engine.set_merge_settings(MergeSettings {
            segments_per_tier: 2.0,
            ..MergeSettings::default()
        });
        write_segment(&engine, 60, 10);
        let deadline = Instant::now() + Duration::from_secs(20);
        while segments(&engine).len() > 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            engine.refresh().unwrap();
        }
        assert!(
            segments(&engine).len() <= 2,
            "{:?}",
            segments(&engine).len()
        );
        assert_eq!(crate::nrt_tests::docs(&engine), 70);
    }

    fn delete_as_primary(engine: &Engine, id: &str) {
        let op = crate::WriteOp::Delete {
            id: id.into(),
            routing: None,
            request: crate::DocRequest::default(),
            seq_no: crate::UNASSIGNED_SEQ_NO,
            primary_term: 1,
            version: 0,
        };
        engine
            .apply(vec![op], crate::Origin::Primary)
            .pop()
            .unwrap()
            .unwrap();
    }

    /// The segment with `deleted` deleted documents.
    fn with_deleted(engine: &Engine, deleted: u32) -> tantivy::index::SegmentId {
        let metas = segments(engine);
        let found = metas.iter().find(|m| m.num_deleted_docs() == deleted);
        found.expect("a segment with that many deletes").id()
    }

    fn ids(engine: &Engine) -> Vec<tantivy::index::SegmentId> {
        segments(engine).iter().map(|m| m.id()).collect()
    }

    #[test]
    fn expunging_deletes_rewrites_only_the_segments_past_the_allowance() {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_single_threaded_primary(dir.path());
        write_segment(&engine, 0, 20); // will lose 1 of 20: 5 %, under the 10 % allowed
        write_segment(&engine, 20, 20); // will lose 10 of 20: 50 %
        write_segment(&engine, 40, 20); // no deletes
        delete_as_primary(&engine, "0");
        for n in 20..30 {
            delete_as_primary(&engine, &n.to_string());
        }
        engine.refresh().unwrap();
        let (few, many, none) = (
            with_deleted(&engine, 1),
            with_deleted(&engine, 10),
            with_deleted(&engine, 0),
        );

        engine
            .force_merge(crate::ForceMergeTarget::ExpungeDeletes)
            .unwrap();
        let after = ids(&engine);
        assert_eq!(
            after.len(),
            3,
            "one segment rewritten, not merged with others"
        );
        assert!(after.contains(&few) && after.contains(&none), "{after:?}");
        assert!(!after.contains(&many));
        assert_eq!(crate::nrt_tests::docs(&engine), 49);

        // A lower allowance takes the segment with 5 % deleted too.
        engine.set_merge_settings(MergeSettings {
            expunge_deletes_allowed: 1.0,
            ..MergeSettings::default()
        });
        engine
            .force_merge(crate::ForceMergeTarget::ExpungeDeletes)
            .unwrap();
        let after = ids(&engine);
        assert!(!after.contains(&few) && after.contains(&none), "{after:?}");
        assert_eq!(crate::nrt_tests::docs(&engine), 49);
    }
}
