//! Shard-level execution: one pass over the matching documents of every segment feeds the
//! hit count, the top `from + size` hits by the request's sort, and the aggregations.

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tantivy::query::{EnableScoring, Query};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, DocId, DocSet, Score, Searcher, SegmentReader, Term, TERMINATED};

use super::aggs::{
    collect_top_hits_ids, finish_shard, plan_aggs, AggCollector, AggPlan, LevelFruit,
};
use super::highlight::{plan_highlight, HighlightPlan};
use super::request::{SearchRequest, TrackTotalHits};
use super::sort::{compare_all, resolve_sorts, SegmentKeys, SortValue};
use super::{shard_error, wire, TopHitDoc};
use crate::{dsl, QueryContext, QueryError};

/// One hit of a shard, before the merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardHit {
    /// The score, or NaN when scores were not computed.
    #[serde(with = "wire::float32")]
    pub score: f32,
    pub sort_values: Vec<SortValue>,
    /// Only meaningful to the node that ran the query phase, with the same searcher.
    #[serde(with = "wire::doc_address")]
    pub address: DocAddress,
    pub id: String,
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
    /// The custom routing value the document was indexed with.
    pub routing: Option<String>,
}

/// Aggregation results of a shard, mergeable with other shards'.
///
/// The plan travels with the partial results (rather than being rebuilt on the coordinator)
/// because building it needs the index mapping and the shard's `now`, and rendering must
/// use exactly what the shard collected with.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct ShardAggs {
    #[serde(with = "wire::packed_arc")]
    pub plan: Arc<AggPlan>,
    #[serde(with = "wire::packed")]
    pub fruit: LevelFruit,
    /// Documents aggregated (before `post_filter`).
    pub doc_count: u64,
    pub top_hits_docs: HashMap<String, TopHitDoc>,
}

/// What a shard returns for a search: the query phase's result, serializable so that a data
/// node can send it to the coordinator (see [`super::wire`]).
#[derive(Serialize, Deserialize)]
pub struct ShardResult {
    pub shard_index: usize,
    /// The shard's best `from + size` hits, best first.
    pub hits: Vec<ShardHit>,
    /// Matching documents (exact; after `post_filter` and `min_score`).
    pub total_hits: u64,
    #[serde(with = "wire::opt_float32")]
    pub max_score: Option<f32>,
    pub timed_out: bool,
    pub terminated_early: bool,
    pub(crate) aggs: Option<ShardAggs>,
    /// The highlighting resolved on the shard. It holds analyzed terms, not a tantivy query,
    /// so it travels as is and the coordinator highlights the fetched sources with it.
    #[serde(with = "wire::opt_arc")]
    pub(crate) highlight: Option<Arc<HighlightPlan>>,
}

impl ShardResult {
    /// The result of a shard that only counted its matches (`_count`).
    pub fn count_only(shard_index: usize, total_hits: u64) -> ShardResult {
        ShardResult {
            shard_index,
            hits: Vec::new(),
            total_hits,
            max_score: None,
            timed_out: false,
            terminated_early: false,
            aggs: None,
            highlight: None,
        }
    }
}

impl std::fmt::Debug for ShardResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardResult")
            .field("shard_index", &self.shard_index)
            .field("hits", &self.hits)
            .field("total_hits", &self.total_hits)
            .field("max_score", &self.max_score)
            .finish()
    }
}

/// Counts the documents matching a query (`_count`).
pub fn count_shard(searcher: &Searcher, query: &dyn Query) -> Result<u64, QueryError> {
    Ok(query.count(searcher)? as u64)
}

/// Runs a search on one shard; filter aggregations and `post_filter` are translated with the
/// query DSL.
pub fn search_shard(
    searcher: &Searcher,
    query: &dyn Query,
    req: &SearchRequest,
    ctx: &QueryContext,
    shard_index: usize,
) -> Result<ShardResult, QueryError> {
    search_shard_with(searcher, query, req, ctx, shard_index, &|q| {
        dsl::build_query(q, ctx)
    })
}

struct Candidate {
    keys: Vec<u128>,
    doc: DocId,
    score: Score,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys && self.doc == other.doc
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.keys.cmp(&other.keys).then(self.doc.cmp(&other.doc))
    }
}

/// [`search_shard`] with an explicit translator for the queries nested in the request
/// (`post_filter`, `filter`/`filters` aggregations).
pub fn search_shard_with(
    searcher: &Searcher,
    query: &dyn Query,
    req: &SearchRequest,
    ctx: &QueryContext,
    shard_index: usize,
    build: &super::BuildQuery<'_>,
) -> Result<ShardResult, QueryError> {
    let sorts = resolve_sorts(&req.effective_sort(), ctx)?;
    let after = match &req.search_after {
        None => None,
        Some(values) => {
            if values.len() != sorts.len() {
                return Err(shard_error(
                    "illegal_argument_exception",
                    format!(
                        "search_after has {} value(s) but sort has {}.",
                        values.len(),
                        sorts.len()
                    ),
                ));
            }
            let mut typed = Vec::new();
            for (value, sort) in values.iter().zip(&sorts) {
                typed.push(sort.typed_from_json(value, ctx.now_millis).map_err(|_| {
                    shard_error(
                        "illegal_argument_exception",
                        format!(
                            "Failed to parse search_after value for field [{}].",
                            sort.name()
                        ),
                    )
                })?);
            }
            Some(typed)
        }
    };
    let k = req.from + req.size;
    let reports_scores = req.sorts_by_score() || req.track_scores;
    let need_scores =
        k > 0 && (reports_scores || req.min_score.is_some()) || req.min_score.is_some();
    let scoring = if need_scores {
        EnableScoring::enabled_from_searcher(searcher)
    } else {
        EnableScoring::disabled_from_searcher(searcher)
    };
    let weight = query.weight(scoring)?;
    let post_filter = match &req.post_filter {
        Some(q) => Some(build(q)?.weight(EnableScoring::disabled_from_searcher(searcher))?),
        None => None,
    };
    let plan = match &req.aggs {
        Some(aggs) => Some(Arc::new(plan_aggs(&aggs.aggs, ctx)?)),
        None => None,
    };
    let agg_collector = match &plan {
        Some(plan) => Some(AggCollector::new(plan, searcher, build)?),
        None => None,
    };
    let highlight = req
        .highlight
        .as_ref()
        .map(|h| Arc::new(plan_highlight(h, req.query.as_ref(), ctx)));

    let mut result = ShardResult {
        shard_index,
        hits: Vec::new(),
        total_hits: 0,
        max_score: None,
        timed_out: false,
        terminated_early: false,
        aggs: None,
        highlight,
    };
    let simple_count = k == 0
        && agg_collector.is_none()
        && post_filter.is_none()
        && req.min_score.is_none()
        && req.terminate_after.is_none()
        && req.timeout.is_none();
    if simple_count {
        if req.track_total_hits != TrackTotalHits::Disabled {
            for reader in searcher.segment_readers() {
                result.total_hits += weight.count(reader)? as u64;
            }
        }
        return Ok(result);
    }

    let deadline = req.timeout.map(|t| Instant::now() + t);
    let mut fruit: Option<LevelFruit> = None;
    let mut agg_docs = 0u64;
    let mut collected = 0u64;
    let mut hits: Vec<(u32, ShardHit)> = Vec::new();
    let mut doc_base = 0u64;
    let mut max_score = f32::NEG_INFINITY;
    for (ordinal, reader) in searcher.segment_readers().iter().enumerate() {
        if result.terminated_early || result.timed_out {
            break;
        }
        let keys = SegmentKeys::open(&sorts, reader, doc_base)?;
        let after_keys = match &after {
            Some(values) => Some(keys.after_keys(&sorts, values)?),
            None => None,
        };
        let mut aggs = match &agg_collector {
            Some(c) => Some(c.for_segment(ordinal as u32, reader)?),
            None => None,
        };
        let mut post_scorer = match &post_filter {
            Some(w) => Some(w.scorer(reader, 1.0)?),
            None => None,
        };
        let alive = reader.alive_bitset();
        let mut top: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k.min(1024));
        let mut scratch = Vec::with_capacity(sorts.len());
        let mut seen = 0u64;
        let mut on_doc = |doc: DocId, score: Score, result: &mut ShardResult| -> bool {
            if alive.is_some_and(|a| !a.is_alive(doc)) {
                return true;
            }
            if req.min_score.is_some_and(|min| score < min) {
                return true;
            }
            if let Some(limit) = req.terminate_after {
                if collected >= limit {
                    result.terminated_early = true;
                    return false;
                }
            }
            collected += 1;
            seen += 1;
            if seen.is_multiple_of(256) && deadline.is_some_and(|d| Instant::now() > d) {
                result.timed_out = true;
                return false;
            }
            if let Some(aggs) = &mut aggs {
                agg_docs += 1;
                aggs.collect(doc);
            }
            if let Some(scorer) = &mut post_scorer {
                let mut current = scorer.doc();
                if current < doc && current != TERMINATED {
                    current = scorer.seek(doc);
                }
                if current != doc {
                    return true;
                }
            }
            result.total_hits += 1;
            if score > max_score {
                max_score = score;
            }
            if k > 0 {
                keys.keys(doc, score, &mut scratch);
                if after_keys
                    .as_ref()
                    .is_some_and(|a| scratch.as_slice() <= a.as_slice())
                {
                    return true;
                }
                if top.len() < k {
                    top.push(Candidate {
                        keys: scratch.clone(),
                        doc,
                        score,
                    });
                } else if let Some(worst) = top.peek() {
                    if scratch.as_slice() < worst.keys.as_slice() {
                        top.pop();
                        top.push(Candidate {
                            keys: scratch.clone(),
                            doc,
                            score,
                        });
                    }
                }
            }
            true
        };
        if req.terminate_after.is_some() || deadline.is_some() {
            let mut scorer = weight.scorer(reader, 1.0)?;
            let mut doc = scorer.doc();
            while doc != TERMINATED {
                let score = if need_scores { scorer.score() } else { 0.0 };
                if !on_doc(doc, score, &mut result) {
                    break;
                }
                doc = scorer.advance();
            }
        } else if need_scores {
            weight.for_each(reader, &mut |doc, score| {
                on_doc(doc, score, &mut result);
            })?;
        } else {
            weight.for_each_no_score(reader, &mut |docs| {
                for &doc in docs {
                    on_doc(doc, 0.0, &mut result);
                }
            })?;
        }
        if let Some(aggs) = aggs {
            let segment_fruit = aggs.harvest()?;
            match &mut fruit {
                Some(f) => f.merge(segment_fruit)?,
                None => fruit = Some(segment_fruit),
            }
        }
        if !top.is_empty() {
            let meta = MetaColumns::open(reader)?;
            for candidate in top.into_vec() {
                let sort_values = keys.values(&sorts, candidate.doc, candidate.score)?;
                let (id, seq_no, primary_term, version) = meta.read(candidate.doc)?;
                let routing = meta.routing(candidate.doc)?;
                hits.push((
                    ordinal as u32,
                    ShardHit {
                        score: if need_scores {
                            candidate.score
                        } else {
                            f32::NAN
                        },
                        sort_values,
                        address: DocAddress::new(ordinal as u32, candidate.doc),
                        id,
                        seq_no,
                        primary_term,
                        version,
                        routing,
                    },
                ));
            }
        }
        doc_base += reader.max_doc() as u64;
    }
    let specs: Vec<_> = sorts.iter().map(|s| s.spec.clone()).collect();
    hits.sort_by(|(_, a), (_, b)| {
        compare_all(&a.sort_values, &b.sort_values, &specs)
            .then(a.address.segment_ord.cmp(&b.address.segment_ord))
            .then(a.address.doc_id.cmp(&b.address.doc_id))
    });
    hits.truncate(k);
    result.hits = hits.into_iter().map(|(_, h)| h).collect();
    if reports_scores && need_scores && result.total_hits > 0 {
        result.max_score = Some(max_score);
    }
    if let Some(plan) = plan {
        let mut fruit = fruit.unwrap_or_default();
        finish_shard(&plan, &mut fruit)?;
        let top_hits_docs = if plan.has_top_hits {
            resolve_ids(
                searcher,
                ctx,
                shard_index,
                collect_top_hits_ids(&plan, &fruit)?,
            )?
        } else {
            HashMap::new()
        };
        result.aggs = Some(ShardAggs {
            plan,
            fruit,
            doc_count: agg_docs,
            top_hits_docs,
        });
    }
    Ok(result)
}

/// `_id`, `_seq_no`, `_primary_term` and `_version` of a segment's documents.
struct MetaColumns {
    id: Option<tantivy::columnar::StrColumn>,
    routing: Option<tantivy::columnar::StrColumn>,
    seq_no: Option<tantivy::columnar::Column<i64>>,
    primary_term: Option<tantivy::columnar::Column<i64>>,
    version: Option<tantivy::columnar::Column<i64>>,
}

impl MetaColumns {
    fn open(reader: &SegmentReader) -> Result<MetaColumns, QueryError> {
        let ff = reader.fast_fields();
        Ok(MetaColumns {
            id: ff.str(shoal_mapping::schema::ID_FIELD)?,
            routing: ff.str(shoal_mapping::schema::ROUTING_FIELD)?,
            seq_no: ff.column_opt(shoal_mapping::schema::SEQ_NO_FIELD)?,
            primary_term: ff.column_opt(shoal_mapping::schema::PRIMARY_TERM_FIELD)?,
            version: ff.column_opt(shoal_mapping::schema::VERSION_FIELD)?,
        })
    }

    fn routing(&self, doc: DocId) -> Result<Option<String>, QueryError> {
        let Some(col) = &self.routing else {
            return Ok(None);
        };
        let Some(ord) = col.term_ords(doc).next() else {
            return Ok(None);
        };
        let mut routing = String::new();
        col.ord_to_str(ord, &mut routing)
            .map_err(|e| QueryError::Internal(e.to_string()))?;
        Ok(Some(routing))
    }

    fn read(&self, doc: DocId) -> Result<(String, i64, i64, i64), QueryError> {
        let mut id = String::new();
        if let Some(col) = &self.id {
            if let Some(ord) = col.term_ords(doc).next() {
                col.ord_to_str(ord, &mut id)
                    .map_err(|e| QueryError::Internal(e.to_string()))?;
            }
        }
        let get = |c: &Option<tantivy::columnar::Column<i64>>| {
            c.as_ref().and_then(|c| c.first(doc)).unwrap_or(-1)
        };
        Ok((
            id,
            get(&self.seq_no),
            get(&self.primary_term),
            get(&self.version),
        ))
    }
}

/// Finds the live documents of `_id`s picked by `top_hits`.
fn resolve_ids(
    searcher: &Searcher,
    ctx: &QueryContext,
    shard: usize,
    ids: Vec<String>,
) -> Result<HashMap<String, TopHitDoc>, QueryError> {
    let mut out = HashMap::new();
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        let term = Term::from_field_text(ctx.schema.id, &id);
        'segments: for (ordinal, reader) in searcher.segment_readers().iter().enumerate() {
            let inverted = reader.inverted_index(ctx.schema.id)?;
            let Some(mut postings) = inverted
                .read_postings(&term, IndexRecordOption::Basic)
                .map_err(|e| QueryError::Internal(e.to_string()))?
            else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if reader.alive_bitset().is_none_or(|a| a.is_alive(doc)) {
                    let (_, seq_no, primary_term, version) =
                        MetaColumns::open(reader)?.read(doc)?;
                    let address = DocAddress::new(ordinal as u32, doc);
                    out.insert(
                        id.clone(),
                        TopHitDoc {
                            shard,
                            address,
                            version,
                            seq_no,
                            primary_term,
                        },
                    );
                    break 'segments;
                }
                doc = postings.advance();
            }
        }
    }
    Ok(out)
}
