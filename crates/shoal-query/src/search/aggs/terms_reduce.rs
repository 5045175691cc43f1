//! OpenSearch's distributed `terms` bookkeeping. A shard counts every term exactly (tantivy
//! segments are not truncated) and sends only its best `shard_size` buckets; the coordinator
//! then bounds the error of each count the way OpenSearch's `InternalTerms#reduce` does: a
//! shard that sent a full page of buckets ordered by `_count desc` may have left out up to the
//! smallest count it sent for any term, and the per-bucket bound adds up what the shards that
//! did not send the term may have left out.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tantivy::aggregation::intermediate_agg_result::{
    IntermediateAggregationResult, IntermediateAggregationResults, IntermediateBucketResult,
};
use tantivy::aggregation::Key;

use super::plan::{NativeKind, NativeNode, OrderKey};

/// The error bookkeeping of one `terms` aggregation, summed over the shards merged so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TermsErrors {
    /// The sum of the shards' errors (meaningless once `unbounded`).
    pub sum: u64,
    /// A shard's order (e.g. `_count asc`, a sub-aggregation) gives no bound: OpenSearch's -1.
    pub unbounded: bool,
    /// Per term sent by some shard: the sum of the errors of the shards that sent it.
    pub sent_by: HashMap<String, u64>,
    pub shards: u32,
}

impl TermsErrors {
    /// The bookkeeping of one shard that sent `counts` (its pruned buckets).
    pub fn of_shard(
        keys_and_counts: &[(String, u64)],
        shard_size: usize,
        order: &[(OrderKey, bool)],
    ) -> TermsErrors {
        let error = shard_error(keys_and_counts, shard_size, order);
        TermsErrors {
            sum: error.unwrap_or(0),
            unbounded: error.is_none(),
            sent_by: keys_and_counts
                .iter()
                .map(|(k, _)| (k.clone(), error.unwrap_or(0)))
                .collect(),
            shards: 1,
        }
    }

    pub fn merge(&mut self, other: TermsErrors) {
        self.sum += other.sum;
        self.unbounded |= other.unbounded;
        self.shards += other.shards;
        for (key, error) in other.sent_by {
            *self.sent_by.entry(key).or_default() += error;
        }
    }

    /// The aggregation's `doc_count_error_upper_bound`: -1 when unbounded, 0 from one shard
    /// (its counts are exact), else the sum of the shards' errors.
    pub fn total(&self) -> i64 {
        if self.unbounded {
            -1
        } else if self.shards <= 1 {
            0
        } else {
            self.sum as i64
        }
    }

    /// A bucket's `doc_count_error_upper_bound`: what the shards that did not send the term
    /// may have left out.
    pub fn of_bucket(&self, key: &str) -> i64 {
        if self.unbounded {
            return -1;
        }
        let sent = self.sent_by.get(key).copied().unwrap_or(0);
        self.sum.saturating_sub(sent) as i64
    }
}

/// OpenSearch's per-shard error: none when the shard sent fewer buckets than it could or
/// ordered them by key; the smallest count sent under `_count desc`; unbounded otherwise.
fn shard_error(
    keys_and_counts: &[(String, u64)],
    shard_size: usize,
    order: &[(OrderKey, bool)],
) -> Option<u64> {
    if keys_and_counts.is_empty() || keys_and_counts.len() < shard_size {
        return Some(0);
    }
    match order.first() {
        Some((OrderKey::Key, _)) => Some(0),
        Some((OrderKey::Count, true)) | None => keys_and_counts.iter().map(|(_, c)| *c).min(),
        _ => None,
    }
}

/// The rendered key of a term, as `render` sees it after tantivy's final conversion.
pub(crate) fn key_text(key: &Key) -> String {
    key.to_string()
}

/// The bookkeeping of the `terms` aggregations among `nodes`, from one shard's pruned results.
pub(crate) fn shard_terms_errors(
    nodes: &[&NativeNode],
    results: Option<&IntermediateAggregationResults>,
) -> HashMap<String, TermsErrors> {
    let mut out = HashMap::new();
    for node in nodes {
        let NativeKind::Terms {
            shard_size, order, ..
        } = &node.kind
        else {
            continue;
        };
        let sent: Vec<(String, u64)> = match results.and_then(|r| r.get(&node.name)) {
            Some(IntermediateAggregationResult::Bucket(IntermediateBucketResult::Terms {
                buckets,
            })) => buckets
                .entries()
                .iter()
                .map(|(k, e)| (key_text(&Key::from(k.clone())), e.doc_count))
                .collect(),
            _ => Vec::new(),
        };
        out.insert(
            node.name.clone(),
            TermsErrors::of_shard(&sent, *shard_size, order),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_desc() -> Vec<(OrderKey, bool)> {
        vec![(OrderKey::Count, true), (OrderKey::Key, false)]
    }

    fn shard(terms: &[(&str, u64)], shard_size: usize) -> TermsErrors {
        let sent: Vec<_> = terms.iter().map(|(k, c)| (k.to_string(), *c)).collect();
        TermsErrors::of_shard(&sent, shard_size, &count_desc())
    }

    #[test]
    fn one_shard_is_exact_even_when_it_sent_a_full_page() {
        let one = shard(&[("a", 10), ("b", 7), ("c", 5)], 3);
        assert_eq!(one.total(), 0);
        assert_eq!(one.of_bucket("a"), 0);
    }

    #[test]
    fn a_shard_with_a_full_page_may_have_left_out_its_smallest_count() {
        let mut merged = shard(&[("a", 10), ("b", 7), ("c", 5)], 3);
        merged.merge(shard(&[("a", 9), ("d", 4)], 3));
        merged.merge(shard(&[("b", 8), ("d", 6), ("e", 2)], 3));
        // shards' errors: 5, 0 (fewer than shard_size sent), 2
        assert_eq!(merged.total(), 7);
        // "a" was not sent by the third shard: it may hold up to 2 more
        assert_eq!(merged.of_bucket("a"), 2);
        // "c" was sent only by the first shard: the third may hold up to 2
        assert_eq!(merged.of_bucket("c"), 2);
        // "d" was not sent by the first shard
        assert_eq!(merged.of_bucket("d"), 5);
        // "b" was sent by the first and the third
        assert_eq!(merged.of_bucket("b"), 0);
    }

    #[test]
    fn key_order_has_no_error_and_other_orders_are_unbounded() {
        let sent = vec![("a".to_string(), 1), ("b".to_string(), 9)];
        let by_key = TermsErrors::of_shard(&sent, 2, &[(OrderKey::Key, false)]);
        assert_eq!(by_key.sum, 0);
        let asc = TermsErrors::of_shard(&sent, 2, &[(OrderKey::Count, false)]);
        let mut merged = by_key.clone();
        merged.merge(asc);
        assert_eq!(merged.total(), -1);
        assert_eq!(merged.of_bucket("a"), -1);
        // a shard that sent less than a full page left nothing out, whatever the order
        let short = TermsErrors::of_shard(&sent, 5, &[(OrderKey::Count, false)]);
        assert!(!short.unbounded);
    }
}
