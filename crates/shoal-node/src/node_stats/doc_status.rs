//! `indexing.doc_status` of `_nodes/stats`: the status classes of the document writes this
//! node coordinated (each bulk item, index, update and delete request), as OpenSearch 2.11+
//! counts them.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

/// Counts of write results by HTTP status class (`1xx` … `5xx`).
#[derive(Debug, Default)]
pub struct DocStatusCounts([AtomicU64; 5]);

impl DocStatusCounts {
    /// A write this node coordinated answered `status`.
    pub fn record(&self, status: u16) {
        let class = usize::from(status / 100);
        if let Some(count) = class.checked_sub(1).and_then(|i| self.0.get(i)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The classes seen so far with their counts (OpenSearch leaves out the classes at zero).
    pub fn section(&self) -> Value {
        let classes: Map<String, Value> = self
            .0
            .iter()
            .enumerate()
            .map(|(i, count)| (format!("{}xx", i + 1), count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .map(|(class, count)| (class, Value::from(count)))
            .collect();
        Value::Object(classes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_counted_by_status_class_and_empty_classes_are_left_out() {
        let counts = DocStatusCounts::default();
        assert_eq!(counts.section(), serde_json::json!({}));
        for status in [200, 201, 201, 404, 409, 429, 503, 99, 600] {
            counts.record(status);
        }
        assert_eq!(
            counts.section(),
            serde_json::json!({"2xx": 3, "4xx": 3, "5xx": 1})
        );
    }
}
