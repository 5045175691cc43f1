//! Shard-side collection: tantivy's segment aggregation collectors for the native
//! aggregations, and Shoal's filter buckets (a document goes into a bucket when the bucket's
//! query scorer, advanced in document order, lands on it).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tantivy::aggregation::agg_result::{
    AggregationResult, AggregationResults, BucketEntries, BucketResult, MetricResult,
};
use tantivy::aggregation::intermediate_agg_result::{IntermediateAggregationResults, PruneMode};
use tantivy::aggregation::{AggregationLimitsGuard, AggregationSegmentCollector};
use tantivy::collector::SegmentCollector;
use tantivy::query::{EnableScoring, Query, Scorer, Weight};
use tantivy::schema::OwnedValue;
use tantivy::{DocId, DocSet, Searcher, SegmentOrdinal, SegmentReader, TERMINATED};

use super::plan::{AggLevel, AggPlan, NativeNode, PlanNode};
use super::terms_reduce::{shard_terms_errors, TermsErrors};
use crate::QueryError;

/// The mergeable result of one level of aggregations.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct LevelFruit {
    pub native: Option<IntermediateAggregationResults>,
    /// Per filter node of the level: per bucket, its document count and sub-results.
    pub filters: Vec<Vec<(u64, LevelFruit)>>,
    /// The error bookkeeping of the level's `terms` aggregations, by name (set per shard).
    #[serde(default)]
    pub terms: HashMap<String, TermsErrors>,
    /// The shards merged into this result (0 while a shard is still collecting segments).
    #[serde(default)]
    pub shards: u32,
}

impl LevelFruit {
    /// Merges another shard's or segment's result of the same plan.
    pub fn merge(&mut self, other: LevelFruit) -> Result<(), QueryError> {
        match (&mut self.native, other.native) {
            (Some(mine), Some(theirs)) => mine.merge_fruits(theirs)?,
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        self.shards += other.shards;
        for (name, errors) in other.terms {
            match self.terms.get_mut(&name) {
                Some(mine) => mine.merge(errors),
                None => {
                    self.terms.insert(name, errors);
                }
            }
        }
        if self.filters.is_empty() {
            self.filters = other.filters;
            return Ok(());
        }
        for (mine, theirs) in self.filters.iter_mut().zip(other.filters) {
            for ((count, fruit), (their_count, their_fruit)) in mine.iter_mut().zip(theirs) {
                *count += their_count;
                fruit.merge(their_fruit)?;
            }
        }
        Ok(())
    }
}

struct FilterWeights {
    buckets: Vec<Box<dyn Weight>>,
    child: LevelWeights,
}

struct LevelWeights {
    filters: Vec<FilterWeights>,
}

fn level_weights(
    level: &AggLevel,
    searcher: &Searcher,
    build: &crate::search::BuildQuery<'_>,
) -> Result<LevelWeights, QueryError> {
    let mut filters = Vec::new();
    for node in &level.nodes {
        if let PlanNode::Filter(filter) = node {
            let mut buckets = Vec::new();
            for (_, query) in &filter.queries {
                let query = build(query)?;
                buckets.push(query.weight(EnableScoring::disabled_from_searcher(searcher))?);
            }
            filters.push(FilterWeights {
                buckets,
                child: level_weights(&filter.child, searcher, build)?,
            });
        }
    }
    Ok(LevelWeights { filters })
}

/// Collects a plan's aggregations on one shard.
pub(crate) struct AggCollector<'p> {
    plan: &'p AggPlan,
    weights: LevelWeights,
}

impl<'p> AggCollector<'p> {
    /// `build` turns the filter buckets' query DSL into tantivy queries.
    pub fn new(
        plan: &'p AggPlan,
        searcher: &Searcher,
        build: &crate::search::BuildQuery<'_>,
    ) -> Result<AggCollector<'p>, QueryError> {
        Ok(AggCollector {
            plan,
            weights: level_weights(&plan.root, searcher, build)?,
        })
    }

    pub fn for_segment(
        &self,
        ordinal: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> Result<LevelSegment, QueryError> {
        LevelSegment::new(&self.plan.root, &self.weights, self.plan, ordinal, reader)
    }
}

struct FilterSegment {
    scorers: Vec<Box<dyn Scorer>>,
    counts: Vec<u64>,
    /// One per bucket, plus the `other` bucket last when asked for.
    children: Vec<LevelSegment>,
    other: bool,
}

/// One level of aggregations collecting one segment.
pub(crate) struct LevelSegment {
    native: Option<AggregationSegmentCollector>,
    filters: Vec<FilterSegment>,
}

impl LevelSegment {
    fn new(
        level: &AggLevel,
        weights: &LevelWeights,
        plan: &AggPlan,
        ordinal: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> Result<LevelSegment, QueryError> {
        let native = if level.native_req.is_empty() {
            None
        } else {
            Some(AggregationSegmentCollector::from_agg_req_and_reader(
                &level.collect_req,
                reader,
                ordinal,
                &plan.context,
            )?)
        };
        let mut filters = Vec::new();
        let filter_nodes = level.nodes.iter().filter_map(|n| match n {
            PlanNode::Filter(f) => Some(f),
            PlanNode::Native(_) => None,
        });
        for (node, weights) in filter_nodes.zip(&weights.filters) {
            let mut scorers = Vec::new();
            for weight in &weights.buckets {
                scorers.push(weight.scorer(reader, 1.0)?);
            }
            let other = node.other_bucket_key.is_some();
            let buckets = scorers.len() + other as usize;
            let mut children = Vec::with_capacity(buckets);
            for _ in 0..buckets {
                children.push(LevelSegment::new(
                    &node.child,
                    &weights.child,
                    plan,
                    ordinal,
                    reader,
                )?);
            }
            filters.push(FilterSegment {
                counts: vec![0; buckets],
                scorers,
                children,
                other,
            });
        }
        Ok(LevelSegment { native, filters })
    }

    /// Adds a matching document (documents must come in increasing order).
    pub fn collect(&mut self, doc: DocId) {
        if let Some(native) = &mut self.native {
            native.collect(doc, 0.0);
        }
        for filter in &mut self.filters {
            let mut matched = false;
            for (i, scorer) in filter.scorers.iter_mut().enumerate() {
                let mut current = scorer.doc();
                if current < doc && current != TERMINATED {
                    current = scorer.seek(doc);
                }
                if current == doc {
                    matched = true;
                    filter.counts[i] += 1;
                    filter.children[i].collect(doc);
                }
            }
            if filter.other && !matched {
                let last = filter.counts.len() - 1;
                filter.counts[last] += 1;
                filter.children[last].collect(doc);
            }
        }
    }

    pub fn harvest(self) -> Result<LevelFruit, QueryError> {
        let native = match self.native {
            Some(native) => Some(native.harvest()?),
            None => None,
        };
        let mut filters = Vec::new();
        for filter in self.filters {
            let mut buckets = Vec::new();
            for (count, child) in filter.counts.into_iter().zip(filter.children) {
                buckets.push((count, child.harvest()?));
            }
            filters.push(buckets);
        }
        Ok(LevelFruit {
            native,
            filters,
            ..LevelFruit::default()
        })
    }
}

/// Ends a shard's collection: every `terms` aggregation keeps its best `shard_size` buckets
/// (segments were counted in full, so the shard's counts are exact) and records what
/// OpenSearch's reduce needs to bound the error across shards.
pub(crate) fn finish_shard(plan: &AggPlan, fruit: &mut LevelFruit) -> Result<(), QueryError> {
    finish_level(&plan.root, fruit)?;
    fruit.shards = 1;
    Ok(())
}

fn finish_level(level: &AggLevel, fruit: &mut LevelFruit) -> Result<(), QueryError> {
    if let Some(native) = &mut fruit.native {
        native.prune_intermediate_results(&level.native_req, PruneMode::Intermediate)?;
    }
    let nodes: Vec<&NativeNode> = level
        .nodes
        .iter()
        .filter_map(|n| match n {
            PlanNode::Native(native) => Some(native),
            PlanNode::Filter(_) => None,
        })
        .collect();
    // A shard without segments still counts as a shard that sent no buckets.
    fruit.terms = shard_terms_errors(&nodes, fruit.native.as_ref());
    let filter_nodes = level.nodes.iter().filter_map(|n| match n {
        PlanNode::Filter(f) => Some(f),
        PlanNode::Native(_) => None,
    });
    for (node, buckets) in filter_nodes.zip(&mut fruit.filters) {
        for (_, child) in buckets {
            finish_level(&node.child, child)?;
        }
    }
    Ok(())
}

/// The `_id`s of the documents the shard's `top_hits` aggregations picked.
pub(crate) fn collect_top_hits_ids(
    plan: &AggPlan,
    fruit: &LevelFruit,
) -> Result<Vec<String>, QueryError> {
    let mut ids = Vec::new();
    level_ids(&plan.root, fruit, &mut ids)?;
    Ok(ids)
}

fn level_ids(
    level: &AggLevel,
    fruit: &LevelFruit,
    ids: &mut Vec<String>,
) -> Result<(), QueryError> {
    if !level.native_req.is_empty() {
        let native = fruit.native.clone().unwrap_or_default();
        let results = native.into_final_result(
            level.native_req.clone(),
            AggregationLimitsGuard::new(None, Some(u32::MAX)),
        )?;
        results_ids(&results, ids);
    }
    let filter_nodes = level.nodes.iter().filter_map(|n| match n {
        PlanNode::Filter(f) => Some(f),
        PlanNode::Native(_) => None,
    });
    for (node, buckets) in filter_nodes.zip(&fruit.filters) {
        for (_, child) in buckets {
            level_ids(&node.child, child, ids)?;
        }
    }
    Ok(())
}

fn results_ids(results: &AggregationResults, ids: &mut Vec<String>) {
    for result in results.0.values() {
        match result {
            AggregationResult::MetricResult(MetricResult::TopHits(top)) => {
                for hit in &top.hits {
                    if let Some(id) = hit.doc_value_fields.get("_id").and_then(first_str) {
                        ids.push(id);
                    }
                }
            }
            AggregationResult::MetricResult(_) => {}
            AggregationResult::BucketResult(bucket) => match bucket {
                BucketResult::Terms { buckets, .. } => buckets
                    .iter()
                    .for_each(|b| results_ids(&b.sub_aggregation, ids)),
                BucketResult::Histogram { buckets } => match buckets {
                    BucketEntries::Vec(v) => {
                        v.iter().for_each(|b| results_ids(&b.sub_aggregation, ids))
                    }
                    BucketEntries::HashMap(m) => m
                        .values()
                        .for_each(|b| results_ids(&b.sub_aggregation, ids)),
                },
                BucketResult::Range { buckets } => match buckets {
                    BucketEntries::Vec(v) => {
                        v.iter().for_each(|b| results_ids(&b.sub_aggregation, ids))
                    }
                    BucketEntries::HashMap(m) => m
                        .values()
                        .for_each(|b| results_ids(&b.sub_aggregation, ids)),
                },
                BucketResult::Filter(f) => results_ids(&f.sub_aggregations, ids),
                _ => {}
            },
        }
    }
}

pub(crate) fn first_str(value: &OwnedValue) -> Option<String> {
    match value {
        OwnedValue::Str(s) => Some(s.clone()),
        OwnedValue::Array(items) => items.iter().find_map(first_str),
        _ => None,
    }
}
