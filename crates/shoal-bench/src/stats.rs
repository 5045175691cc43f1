//! Latency histograms (microseconds, 3 significant digits) reported in milliseconds.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            hist: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
        }
    }
}

impl Latency {
    pub fn record_micros(&mut self, micros: u64) {
        self.hist.saturating_record(micros.max(1));
    }

    pub fn add(&mut self, other: &Latency) {
        self.hist.add(&other.hist).expect("same bounds");
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// `{count, mean, p50, p90, p99, p99_9, max}` in milliseconds.
    pub fn to_json(&self) -> Value {
        let ms = |v: u64| (v as f64 / 1000.0 * 1000.0).round() / 1000.0;
        if self.hist.is_empty() {
            return json!({"count": 0});
        }
        json!({
            "count": self.hist.len(),
            "mean": (self.hist.mean() / 1000.0 * 1000.0).round() / 1000.0,
            "p50": ms(self.hist.value_at_quantile(0.50)),
            "p90": ms(self.hist.value_at_quantile(0.90)),
            "p99": ms(self.hist.value_at_quantile(0.99)),
            "p99_9": ms(self.hist.value_at_quantile(0.999)),
            "max": ms(self.hist.max()),
        })
    }
}

pub fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
