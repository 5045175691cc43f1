//! A bloom filter of each segment's `_id` terms, so the version lookup of a write with a
//! client-given `_id` skips the segments that cannot hold it.
//!
//! Shoal's term dictionaries are tantivy's sstables: cheap to write at every refresh and merge
//! (an FST over every term cost a refresh about half its time), but a point lookup decodes a
//! whole block. Every write of a new `_id` looks in every segment and finds nothing; with the
//! filters it decodes no block at all, and an update decodes about one (1 % false positives).
//! Segments are immutable, so a filter is built once per segment: when a new searcher
//! generation is warmed on a copy that indexes, or at the first lookup on one that did not
//! (a segment replica promoted to primary).

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fastbloom::BloomFilter;
use parking_lot::RwLock;
use tantivy::error::DataCorruption;
use tantivy::index::SegmentId;
use tantivy::schema::Field;
use tantivy::{SegmentReader, TantivyError};
use tracing::debug;

/// Expected share of segments answering "maybe" for an `_id` they do not hold.
const FALSE_POSITIVE_RATE: f64 = 0.01;

pub(crate) struct IdFilters {
    id_field: Field,
    filters: RwLock<HashMap<SegmentId, Arc<BloomFilter>>>,
    /// Whether new searcher generations build their filters when warmed (only a copy that
    /// looks `_id`s up needs them: a segment replica never does until promoted).
    eager: AtomicBool,
}

impl IdFilters {
    pub(crate) fn new(id_field: Field, eager: bool) -> IdFilters {
        IdFilters {
            id_field,
            filters: RwLock::new(HashMap::new()),
            eager: AtomicBool::new(eager),
        }
    }

    /// Builds the filters of later generations when they are warmed (on promotion).
    pub(crate) fn build_eagerly(&self) {
        self.eager.store(true, Ordering::Relaxed);
    }

    /// Whether `segment` may hold a term `_id` = `id`; `false` is certain.
    pub(crate) fn may_contain(&self, segment: &SegmentReader, id: &str) -> tantivy::Result<bool> {
        Ok(self.filter(segment)?.contains(id.as_bytes()))
    }

    fn filter(&self, segment: &SegmentReader) -> tantivy::Result<Arc<BloomFilter>> {
        let key = segment.segment_id();
        if let Some(filter) = self.filters.read().get(&key) {
            return Ok(filter.clone());
        }
        let built = Arc::new(self.build(segment)?);
        Ok(self.filters.write().entry(key).or_insert(built).clone())
    }

    /// tantivy's sstable reader asserts instead of failing on some damaged bytes: a panic while
    /// reading the dictionary is reported as the corruption it is.
    fn build(&self, segment: &SegmentReader) -> tantivy::Result<BloomFilter> {
        std::panic::catch_unwind(AssertUnwindSafe(|| self.read_ids(segment))).unwrap_or_else(|_| {
            Err(TantivyError::DataCorruption(DataCorruption::comment_only(
                format!(
                    "the _id term dictionary of segment [{}] is unreadable",
                    segment.segment_id().uuid_string()
                ),
            )))
        })
    }

    fn read_ids(&self, segment: &SegmentReader) -> tantivy::Result<BloomFilter> {
        let inverted = segment.inverted_index(self.id_field)?;
        let terms = inverted.terms();
        let expected = terms.num_terms().max(1);
        let mut filter = BloomFilter::with_false_pos(FALSE_POSITIVE_RATE).expected_items(expected);
        let mut stream = terms.stream().map_err(TantivyError::from)?;
        while stream.advance() {
            filter.insert(stream.key());
        }
        Ok(filter)
    }

    #[cfg(test)]
    pub(crate) fn built(&self) -> usize {
        self.filters.read().len()
    }
}

impl tantivy::Warmer for IdFilters {
    fn warm(&self, searcher: &tantivy::Searcher) -> tantivy::Result<()> {
        if !self.eager.load(Ordering::Relaxed) {
            return Ok(());
        }
        // Best effort: a segment whose filter cannot be built is reported by the first lookup
        // that needs it, not by failing every reload (and open) of the copy.
        for segment in searcher.segment_readers() {
            if let Err(e) = self.filter(segment) {
                debug!(segment = %segment.segment_id().uuid_string(), error = %e, "no _id filter");
            }
        }
        Ok(())
    }

    fn garbage_collect(&self, live_generations: &[&tantivy::SearcherGeneration]) {
        let live: HashSet<SegmentId> = live_generations
            .iter()
            .flat_map(|generation| generation.segments().keys().copied())
            .collect();
        self.filters.write().retain(|id, _| live.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use shoal_mapping::Mapping;

    use crate::tests::{apply_one, index_op, mapping, open};
    use crate::DocRequest;

    fn write(engine: &crate::Engine, m: &shoal_mapping::Mapping, id: &str) -> i64 {
        let op = index_op(engine, m, id, json!({"n": 1}), DocRequest::default());
        apply_one(engine, op).unwrap().version
    }

    /// Writes each batch of ids and refreshes after it (a segment or more per batch).
    fn refreshed_engine(
        dir: &std::path::Path,
        batches: &[Vec<String>],
    ) -> (crate::Engine, Mapping) {
        let m = mapping();
        let engine = open(dir, &m);
        for batch in batches {
            for id in batch {
                write(&engine, &m, id);
            }
            engine.refresh().unwrap();
        }
        (engine, m)
    }

    #[test]
    fn each_segment_filters_the_ids_it_lacks_and_never_an_id_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let batches: Vec<Vec<String>> = (0..2)
            .map(|b| (0..200).map(|n| format!("doc-{b}-{n}")).collect())
            .collect();
        let (engine, _) = refreshed_engine(dir.path(), &batches);
        let searcher = engine.searcher();
        let segments = searcher.segment_readers();
        assert!(segments.len() >= 2);
        assert_eq!(
            engine.id_filters.built(),
            segments.len(),
            "warming built every segment's filter"
        );
        // A get of a refreshed document looks it up through the filters.
        for id in batches.iter().flatten() {
            assert!(engine.get(id).unwrap().is_some(), "{id} was filtered out");
        }
        let maybe = |segment, id: &str| engine.id_filters.may_contain(segment, id).unwrap();
        let absent_maybes: usize = segments
            .iter()
            .map(|segment| {
                (0..1000)
                    .filter(|n| maybe(segment, &format!("absent-{n}")))
                    .count()
            })
            .sum();
        let lookups = 1000 * segments.len();
        assert!(
            absent_maybes * 20 < lookups,
            "{absent_maybes} of {lookups} lookups of absent ids passed"
        );
    }

    #[test]
    fn writes_find_the_documents_they_update_through_the_filters() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, m) =
            refreshed_engine(dir.path(), &[(0..50).map(|n| format!("doc-{n}")).collect()]);
        assert_eq!(
            write(&engine, &m, "doc-7"),
            2,
            "an update of a committed document"
        );
        assert_eq!(write(&engine, &m, "doc-50"), 1, "a new document");
        engine.refresh().unwrap();
        assert_eq!(engine.get("doc-7").unwrap().unwrap().version, 2);
        assert_eq!(engine.searcher().num_docs(), 51);
    }
}
