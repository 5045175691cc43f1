//! Computed columns for tantivy's aggregations (dates as epoch milliseconds, booleans as
//! 0/1, dates rounded to histogram buckets in any time zone and calendar interval), and the
//! exact percentile computation used while a distribution is small.

use tantivy::aggregation::{ValueSource, ValueSourceProvider};
use tantivy::columnar::{Cardinality, Column, ColumnType, MonotonicallyMappableToU64, RowId};
use tantivy::{DocId, SegmentReader};

use crate::search::datemath::Rounding;

/// How a computed column derives its values from a physical one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Transform {
    /// A date column as epoch milliseconds.
    DateMillis,
    /// A boolean column as 0/1.
    BoolAsLong,
    /// A date column rounded down to the start of its histogram bucket (epoch millis).
    Round(Rounding),
}

/// Registered under a synthetic field name; opens the physical column per segment.
pub(crate) struct DerivedProvider {
    pub column: String,
    pub transform: Transform,
}

impl ValueSourceProvider for DerivedProvider {
    fn for_segment(
        &self,
        reader: &SegmentReader,
        _allowed_column_types: Option<&[ColumnType]>,
    ) -> tantivy::Result<Option<Box<dyn ValueSource>>> {
        let input: &[ColumnType] = match self.transform {
            Transform::BoolAsLong => &[ColumnType::Bool],
            _ => &[ColumnType::DateTime, ColumnType::I64],
        };
        Ok(reader
            .fast_fields()
            .u64_lenient_for_type(Some(input), &self.column)?
            .map(|(column, column_type)| {
                Box::new(DerivedSource {
                    column,
                    column_type,
                    transform: self.transform,
                    as_f64: false,
                }) as Box<dyn ValueSource>
            }))
    }
}

struct DerivedSource {
    column: Column<u64>,
    column_type: ColumnType,
    transform: Transform,
    as_f64: bool,
}

impl std::fmt::Debug for DerivedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivedSource")
            .field("transform", &self.transform)
            .field("as_f64", &self.as_f64)
            .finish()
    }
}

impl DerivedSource {
    #[inline]
    fn derive(&self, raw: u64) -> i64 {
        let millis = |raw: u64| match self.column_type {
            ColumnType::DateTime => i64::from_u64(raw).div_euclid(1_000_000),
            ColumnType::I64 => i64::from_u64(raw),
            _ => raw as i64,
        };
        match self.transform {
            Transform::DateMillis => millis(raw),
            Transform::BoolAsLong => raw as i64,
            Transform::Round(rounding) => rounding.round(millis(raw)),
        }
    }
}

impl ValueSource for DerivedSource {
    fn column_type(&self) -> ColumnType {
        if self.as_f64 {
            ColumnType::F64
        } else {
            ColumnType::I64
        }
    }

    fn load_block(
        &mut self,
        docs: &[DocId],
        values: &mut Vec<u64>,
        docids: &mut Vec<DocId>,
        row_ids: &mut Vec<RowId>,
    ) -> Cardinality {
        let mut physical = (&self.column, self.column_type);
        let cardinality = physical.load_block(docs, values, docids, row_ids);
        for value in values.iter_mut() {
            let derived = self.derive(*value);
            *value = if self.as_f64 {
                (derived as f64).to_u64()
            } else {
                derived.to_u64()
            };
        }
        cardinality
    }

    fn to_f64(self: Box<Self>) -> Box<dyn ValueSource> {
        Box::new(DerivedSource {
            as_f64: true,
            ..*self
        })
    }
}

/// Percentiles of an exactly known distribution (sorted `(value, count)` pairs), computed the
/// way OpenSearch's t-digest does while every sample is its own centroid: interpolation
/// between neighbouring samples, the minimum below the first half-sample, the maximum
/// above the last.
pub(crate) fn exact_percentile(sorted: &[(f64, u64)], percent: f64) -> Option<f64> {
    let total: u64 = sorted.iter().map(|(_, c)| c).sum();
    if total == 0 {
        return None;
    }
    let first = sorted.first()?.0;
    let last = sorted.last()?.0;
    if total == 1 {
        return Some(first);
    }
    let index = percent / 100.0 * total as f64;
    if index < 0.5 {
        return Some(first);
    }
    if index >= total as f64 - 0.5 {
        return Some(last);
    }
    let position = index - 0.5;
    let lower = position.floor() as u64;
    let fraction = position - lower as f64;
    let at = |i: u64| {
        let mut seen = 0;
        for (value, count) in sorted {
            seen += count;
            if i < seen {
                return *value;
            }
        }
        last
    };
    let a = at(lower);
    if fraction == 0.0 {
        return Some(a);
    }
    let b = at(lower + 1);
    Some(a * (1.0 - fraction) + b * fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_percentiles_interpolate_like_the_t_digest() {
        let data: Vec<(f64, u64)> = [1.0, 51.0, 101.0, 151.0].iter().map(|v| (*v, 1)).collect();
        let p = |q| exact_percentile(&data, q).unwrap();
        assert_eq!(
            [p(1.0), p(5.0), p(25.0), p(50.0), p(75.0), p(95.0), p(99.0)],
            [1.0, 1.0, 26.0, 76.0, 126.0, 151.0, 151.0]
        );
        let ten: Vec<(f64, u64)> = (1..=10).map(|v| (v as f64, 1)).collect();
        assert_eq!(exact_percentile(&ten, 50.0), Some(5.5));
        assert_eq!(exact_percentile(&[(3.0, 2)], 50.0), Some(3.0));
        assert_eq!(exact_percentile(&[], 50.0), None);
    }
}
