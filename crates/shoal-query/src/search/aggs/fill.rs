//! Empty buckets of a `histogram` with `min_doc_count: 0`, made by Shoal rather than tantivy:
//! tantivy allocates every bucket between the bounds before any limit applies, so a wide range
//! with a small interval exhausted its memory limit (a 500) where OpenSearch answers
//! `too_many_buckets_exception`. Here the number of buckets is known before any is made.

use serde::{Deserialize, Serialize};

use crate::QueryError;

/// The parameters that place a histogram's buckets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistogramGrid {
    pub interval: f64,
    pub offset: f64,
    pub extended_bounds: Option<(f64, f64)>,
    pub hard_bounds: Option<(f64, f64)>,
}

impl HistogramGrid {
    /// The position of the bucket holding `value`.
    pub fn index_of(&self, value: f64) -> f64 {
        ((value - self.offset) / self.interval).floor()
    }

    /// The position of the bucket whose key is `key` (rounded: keys are computed in floats).
    pub fn index_of_key(&self, key: f64) -> f64 {
        ((key - self.offset) / self.interval).round()
    }

    pub fn key_at(&self, index: f64) -> f64 {
        index * self.interval + self.offset
    }

    /// Every bucket position from the first to the last bucket with documents, widened to the
    /// extended bounds and narrowed to the hard bounds. Fails before making anything when
    /// `already + count` passes `max_buckets`.
    pub fn filled_indices(
        &self,
        with_docs: &[f64],
        already: usize,
        max_buckets: usize,
    ) -> Result<Vec<f64>, QueryError> {
        let mut first = with_docs.iter().copied().reduce(f64::min);
        let mut last = with_docs.iter().copied().reduce(f64::max);
        if let Some((min, max)) = self.extended_bounds {
            let (min, max) = (self.index_of(min), self.index_of(max));
            first = Some(first.map_or(min, |f| f.min(min)));
            last = Some(last.map_or(max, |l| l.max(max)));
        }
        let (Some(mut first), Some(mut last)) = (first, last) else {
            return Ok(Vec::new());
        };
        if let Some((min, max)) = self.hard_bounds {
            first = first.max(self.index_of(min));
            last = last.min(self.index_of(max));
        }
        if !(first <= last) {
            return Ok(Vec::new());
        }
        let count = last - first + 1.0;
        if !count.is_finite() || count + already as f64 > max_buckets as f64 {
            let count = if count.is_finite() && count < usize::MAX as f64 {
                count as usize
            } else {
                usize::MAX - already
            };
            return Err(QueryError::TooManyBuckets {
                count: already + count,
                max: max_buckets,
            });
        }
        Ok((0..count as usize).map(|i| first + i as f64).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(interval: f64) -> HistogramGrid {
        HistogramGrid {
            interval,
            offset: 0.0,
            extended_bounds: None,
            hard_bounds: None,
        }
    }

    #[test]
    fn gaps_between_buckets_with_documents_are_filled() {
        let g = grid(5.0);
        let filled = g.filled_indices(&[0.0, 3.0], 0, 100).unwrap();
        assert_eq!(filled, vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(g.key_at(3.0), 15.0);
    }

    #[test]
    fn extended_bounds_widen_and_hard_bounds_narrow() {
        let g = HistogramGrid {
            extended_bounds: Some((-10.0, 42.0)),
            ..grid(10.0)
        };
        assert_eq!(
            g.filled_indices(&[1.0], 0, 100).unwrap(),
            vec![-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]
        );
        let g = HistogramGrid {
            hard_bounds: Some((0.0, 20.0)),
            ..g
        };
        assert_eq!(
            g.filled_indices(&[1.0], 0, 100).unwrap(),
            vec![0.0, 1.0, 2.0]
        );
    }

    #[test]
    fn too_many_buckets_fail_before_any_is_made() {
        let g = HistogramGrid {
            extended_bounds: Some((0.0, 1e15)),
            ..grid(1.0)
        };
        match g.filled_indices(&[0.0], 10, 65_535) {
            Err(QueryError::TooManyBuckets { count, max }) => {
                assert_eq!(max, 65_535);
                assert!(count > 65_535);
            }
            other => panic!("expected too many buckets, got {other:?}"),
        }
        assert_eq!(g.filled_indices(&[], 0, 65_535).unwrap_err().status(), 400);
    }
}
