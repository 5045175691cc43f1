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
//!
//! The delete of an update or a delete goes through the filters too ([`IdDeleteQuery`]):
//! tantivy applies every delete to every segment at each commit and merge, and a term delete
//! decoded a dictionary block in each (30,000 updates made a refresh take 4 to 7 s).

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fastbloom::BloomFilter;
use parking_lot::RwLock;
use shoal_codec::FlushedSegments;
use tantivy::error::DataCorruption;
use tantivy::index::SegmentId;
use tantivy::query::{EmptyScorer, EnableScoring, Explanation, Query, Scorer, TermQuery, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, SegmentReader, TantivyError, Term, TERMINATED};
use tracing::debug;

/// Expected share of segments answering "maybe" for an `_id` they do not hold.
const FALSE_POSITIVE_RATE: f64 = 0.01;
/// Flushed segments remembered at most (forgetting one only costs its deletes a lookup).
const MAX_FLUSHED_KEPT: usize = 1024;

pub(crate) struct IdFilters {
    id_field: Field,
    filters: RwLock<HashMap<SegmentId, Arc<BloomFilter>>>,
    /// Whether new searcher generations build their filters when warmed (only a copy that
    /// looks `_id`s up needs them: a segment replica never does until promoted).
    eager: AtomicBool,
    /// The segments the indexing threads flushed and no searcher shows yet.
    flushed: FlushedSegments,
    /// The segments of the latest searcher generation a lookup went through, shared by the
    /// deletes it hands out (tantivy keeps each until the next commit).
    segments: parking_lot::Mutex<Option<(u64, Arc<[SegmentId]>)>>,
    /// Segments a delete looked its `_id` up in (the filter could not rule them out).
    #[cfg(test)]
    delete_lookups: std::sync::atomic::AtomicUsize,
}

impl IdFilters {
    pub(crate) fn new(id_field: Field, eager: bool, flushed: FlushedSegments) -> IdFilters {
        IdFilters {
            id_field,
            filters: RwLock::new(HashMap::new()),
            eager: AtomicBool::new(eager),
            flushed,
            segments: Default::default(),
            #[cfg(test)]
            delete_lookups: Default::default(),
        }
    }

    /// Builds the filters of later generations when they are warmed (on promotion).
    pub(crate) fn build_eagerly(&self) {
        self.eager.store(true, Ordering::Relaxed);
    }

    /// The ids of the segments of `searcher`.
    pub(crate) fn segments_of(&self, searcher: &tantivy::Searcher) -> Arc<[SegmentId]> {
        let generation = searcher.generation().generation_id();
        let mut cached = self.segments.lock();
        if let Some((id, segments)) = cached.as_ref() {
            if *id == generation {
                // Generation ids are unique within one reader, and an engine keeps its reader.
                debug_assert!(
                    searcher
                        .segment_readers()
                        .iter()
                        .map(|segment| segment.segment_id())
                        .eq(segments.iter().copied()),
                    "searcher generation {generation} came from another reader"
                );
                return segments.clone();
            }
        }
        let segments: Arc<[SegmentId]> = searcher
            .segment_readers()
            .iter()
            .map(|segment| segment.segment_id())
            .collect();
        *cached = Some((generation, segments.clone()));
        segments
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

/// What a write's version lookup searched: the segments of its searcher and, in them, every
/// live document with its `_id`.
#[derive(Debug)]
pub(crate) struct Searched {
    pub(crate) segments: Arc<[SegmentId]>,
    pub(crate) live: LiveDocs,
}

/// Live documents of one `_id`, by segment.
pub(crate) type LiveDocs = Vec<(SegmentId, DocId)>;

/// Deletes every document whose `_id` is `id`, without a term lookup where it can:
/// - in a segment its write's lookup searched ([`Searched`]), the live documents it found;
/// - in a segment flushed by the indexing threads since, nothing when the lookup was needed
///   (the version map did not know the id): such a segment holds only writes the version map
///   still knows;
/// - elsewhere (a merged segment, or after a write the version map knew), a term lookup in
///   the segments whose filter may hold the id (one is built for a segment without it).
#[derive(Clone)]
pub(crate) struct IdDeleteQuery {
    id: String,
    filters: Arc<IdFilters>,
    searched: Option<Arc<Searched>>,
}

impl IdDeleteQuery {
    pub(crate) fn new(
        id: &str,
        filters: Arc<IdFilters>,
        searched: Option<Searched>,
    ) -> IdDeleteQuery {
        IdDeleteQuery {
            id: id.to_string(),
            filters,
            searched: searched.map(Arc::new),
        }
    }
}

impl std::fmt::Debug for IdDeleteQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdDeleteQuery({})", self.id)
    }
}

impl Query for IdDeleteQuery {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let term = Term::from_field_text(self.filters.id_field, &self.id);
        Ok(Box::new(IdDeleteWeight {
            query: self.clone(),
            term: TermQuery::new(term, IndexRecordOption::Basic).weight(scoring)?,
        }))
    }
}

struct IdDeleteWeight {
    query: IdDeleteQuery,
    term: Box<dyn Weight>,
}

impl Weight for IdDeleteWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let segment = reader.segment_id();
        let IdDeleteQuery {
            id,
            filters,
            searched,
        } = &self.query;
        if let Some(searched) = searched {
            if searched.segments.contains(&segment) {
                let docs: Vec<DocId> = searched
                    .live
                    .iter()
                    .filter(|(holder, _)| *holder == segment)
                    .map(|(_, doc)| *doc)
                    .collect();
                debug_assert!(docs.is_sorted(), "postings order");
                return Ok(Box::new(FoundDocs { docs, cursor: 0 }));
            }
            if filters.flushed.contains(&segment) {
                return Ok(Box::new(EmptyScorer));
            }
        }
        // A filter that cannot be built rules nothing out: the term lookup decides.
        if let Ok(false) = filters.may_contain(reader, id) {
            return Ok(Box::new(EmptyScorer));
        }
        #[cfg(test)]
        filters.delete_lookups.fetch_add(1, Ordering::Relaxed);
        self.term.scorer(reader, boost)
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.term.explain(reader, doc)
    }
}

/// The documents a lookup found in one segment, in doc id order.
struct FoundDocs {
    docs: Vec<DocId>,
    cursor: usize,
}

impl DocSet for FoundDocs {
    fn advance(&mut self) -> DocId {
        self.cursor = (self.cursor + 1).min(self.docs.len());
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.docs.get(self.cursor).copied().unwrap_or(TERMINATED)
    }

    fn size_hint(&self) -> u32 {
        self.docs.len() as u32
    }
}

impl Scorer for FoundDocs {
    fn score(&mut self) -> Score {
        1.0
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
        // A searcher shows them now (a delete's lookup found their documents), or a merge
        // took them before one did: too many means the latter, and forgetting is safe.
        self.flushed.retain(|id| !live.contains(id));
        if self.flushed.len() > MAX_FLUSHED_KEPT {
            self.flushed.retain(|_| false);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::sync::atomic::Ordering;

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

    /// `batches` lists of `per_batch` distinct ids (`doc-<batch>-<n>`).
    fn id_batches(batches: usize, per_batch: usize) -> Vec<Vec<String>> {
        (0..batches)
            .map(|b| (0..per_batch).map(|n| format!("doc-{b}-{n}")).collect())
            .collect()
    }

    #[test]
    fn each_segment_filters_the_ids_it_lacks_and_never_an_id_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let batches = id_batches(2, 200);
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
    fn updates_delete_their_old_versions_without_looking_them_up_again() {
        let dir = tempfile::tempdir().unwrap();
        let batches = id_batches(4, 100);
        let (engine, m) = refreshed_engine(dir.path(), &batches);
        let lookups = || engine.id_filters.delete_lookups.load(Ordering::Relaxed);
        let updated: Vec<&String> = batches.iter().map(|batch| &batch[7]).collect();
        for id in &updated {
            assert_eq!(write(&engine, &m, id), 2, "{id} is an update");
        }
        engine.refresh().unwrap();
        assert_eq!(
            engine.searcher().num_docs(),
            400,
            "every old version is gone"
        );
        for id in &updated {
            assert_eq!(engine.get(id).unwrap().unwrap().version, 2);
        }
        assert_eq!(
            lookups(),
            0,
            "the deletes removed what the writes' lookups found, and skipped the new segments"
        );

        // Updates of writes not refreshed yet: their old versions may be in any new segment.
        for n in 0..20 {
            write(&engine, &m, &format!("new-{n}"));
        }
        for id in updated.iter().copied().chain(&batches[0][..3]) {
            write(&engine, &m, id);
            write(&engine, &m, id);
        }
        for n in 0..20 {
            assert_eq!(write(&engine, &m, &format!("new-{n}")), 2);
        }
        engine.refresh().unwrap();
        assert_eq!(engine.searcher().num_docs(), 420);
        assert_eq!(engine.get(updated[0]).unwrap().unwrap().version, 4);
        assert_eq!(engine.get(&batches[0][1]).unwrap().unwrap().version, 3);
        assert!(
            lookups() > 0,
            "an update of an unrefreshed write looks its id up"
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
