//! OpenSearch's `IndexingPressure`: the bytes of write requests in flight on this node. New
//! coordinating and primary bytes over `indexing_pressure.memory.limit` are rejected (429);
//! replica bytes are counted and never rejected (refusing them would fail an in-sync copy).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::settings::FlatSettings;

pub const LIMIT_SETTING: &str = "indexing_pressure.memory.limit";

#[derive(Default)]
struct Counters {
    combined: AtomicU64,
    coordinating: AtomicU64,
    primary: AtomicU64,
    replica: AtomicU64,
}

/// The node's indexing pressure; share it with `Arc`.
pub struct IndexingPressure {
    limit: u64,
    current: Counters,
    total: Counters,
    coordinating_rejections: AtomicU64,
    primary_rejections: AtomicU64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Coordinating,
    /// A primary operation that came from another node (checked against the limit).
    Primary,
    Replica,
}

/// Bytes held until the operation ends.
pub struct InFlight {
    pressure: Arc<IndexingPressure>,
    bytes: u64,
    stage: Stage,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let c = &self.pressure.current;
        let b = self.bytes;
        match self.stage {
            Stage::Coordinating => {
                c.combined.fetch_sub(b, Ordering::Relaxed);
                c.coordinating.fetch_sub(b, Ordering::Relaxed);
            }
            Stage::Primary => {
                c.combined.fetch_sub(b, Ordering::Relaxed);
                c.primary.fetch_sub(b, Ordering::Relaxed);
            }
            Stage::Replica => {
                c.replica.fetch_sub(b, Ordering::Relaxed);
            }
        }
    }
}

impl IndexingPressure {
    pub fn new(limit: u64) -> Arc<IndexingPressure> {
        Arc::new(IndexingPressure {
            limit,
            current: Counters::default(),
            total: Counters::default(),
            coordinating_rejections: AtomicU64::new(0),
            primary_rejections: AtomicU64::new(0),
        })
    }

    /// From `indexing_pressure.memory.limit`: bytes, or a share of the node's memory budget
    /// (the machine's RAM, the base `indices.memory.index_buffer_size` uses).
    pub fn from_settings(settings: &FlatSettings) -> ApiResult<Arc<IndexingPressure>> {
        let text = settings
            .get(LIMIT_SETTING)
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_else(|| "10%".to_string());
        crate::settings::typed::check_value(LIMIT_SETTING, &text)?;
        let limit = match text.trim().strip_suffix('%') {
            Some(percent) => {
                let percent: f64 = percent.trim().parse().unwrap_or(10.0);
                (memory_budget() as f64 * percent / 100.0) as u64
            }
            None => crate::settings::parse_byte_size(&text).map_err(|e| {
                ApiError::bad_request(format!(
                    "failed to parse setting [{LIMIT_SETTING}] with value [{text}]: {e}"
                ))
            })?,
        };
        Ok(IndexingPressure::new(limit))
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// A request this node coordinates (`_bulk`, a document write).
    pub fn coordinating(self: &Arc<Self>, bytes: u64) -> ApiResult<InFlight> {
        self.admit(bytes, Stage::Coordinating)
    }

    /// A shard-level write forwarded by another coordinating node.
    pub fn primary(self: &Arc<Self>, bytes: u64) -> ApiResult<InFlight> {
        self.admit(bytes, Stage::Primary)
    }

    /// Operations a primary sends this replica: never rejected.
    pub fn replica(self: &Arc<Self>, bytes: u64) -> InFlight {
        self.current.replica.fetch_add(bytes, Ordering::Relaxed);
        self.total.replica.fetch_add(bytes, Ordering::Relaxed);
        self.hold(bytes, Stage::Replica)
    }

    fn hold(self: &Arc<Self>, bytes: u64, stage: Stage) -> InFlight {
        InFlight {
            pressure: self.clone(),
            bytes,
            stage,
        }
    }

    fn admit(self: &Arc<Self>, bytes: u64, stage: Stage) -> ApiResult<InFlight> {
        let combined = self.current.combined.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let replica = self.current.replica.load(Ordering::Relaxed);
        if combined + replica > self.limit {
            self.current.combined.fetch_sub(bytes, Ordering::Relaxed);
            let (what, rejections) = match stage {
                Stage::Coordinating => ("coordinating", &self.coordinating_rejections),
                _ => ("primary", &self.primary_rejections),
            };
            rejections.fetch_add(1, Ordering::Relaxed);
            let before = combined - bytes;
            return Err(super::rejected_execution(format!(
                "rejected execution of {what} operation [coordinating_and_primary_bytes={before}, replica_bytes={replica}, all_bytes={}, {what}_operation_bytes={bytes}, max_coordinating_and_primary_bytes={}]",
                before + replica,
                self.limit
            )));
        }
        let counter = match stage {
            Stage::Coordinating => (&self.current.coordinating, &self.total.coordinating),
            _ => (&self.current.primary, &self.total.primary),
        };
        counter.0.fetch_add(bytes, Ordering::Relaxed);
        counter.1.fetch_add(bytes, Ordering::Relaxed);
        self.total.combined.fetch_add(bytes, Ordering::Relaxed);
        Ok(self.hold(bytes, stage))
    }

    /// The `indexing_pressure` section of `_nodes/stats` (`IndexingPressureStats`).
    pub fn stats(&self) -> Value {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let section = |c: &Counters| {
            json!({
                "combined_coordinating_and_primary_in_bytes": get(&c.combined),
                "coordinating_in_bytes": get(&c.coordinating),
                "primary_in_bytes": get(&c.primary),
                "replica_in_bytes": get(&c.replica),
                "all_in_bytes": get(&c.combined) + get(&c.replica),
            })
        };
        let mut total = section(&self.total);
        total["coordinating_rejections"] = json!(get(&self.coordinating_rejections));
        total["primary_rejections"] = json!(get(&self.primary_rejections));
        total["replica_rejections"] = json!(0);
        json!({"memory": {"current": section(&self.current), "total": total, "limit_in_bytes": self.limit}})
    }
}

/// The machine's RAM (`MemTotal`), or 4 GB when /proc/meminfo cannot be read: the same base as
/// the indexing buffer's percentage (Shoal has no heap).
fn memory_budget() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(4 * 1024 * 1024 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinating_bytes_over_the_limit_are_rejected_with_opensearch_text() {
        let pressure = IndexingPressure::new(100);
        let held = pressure.coordinating(60).unwrap();
        let _replica = pressure.replica(30);
        let err = pressure.coordinating(20).err().unwrap();
        assert_eq!(
            (err.status, err.error_type.as_str()),
            (429, "rejected_execution_exception")
        );
        assert_eq!(
            err.reason,
            "rejected execution of coordinating operation [coordinating_and_primary_bytes=60, replica_bytes=30, all_bytes=90, coordinating_operation_bytes=20, max_coordinating_and_primary_bytes=100]"
        );
        drop(held);
        let _ok = pressure.coordinating(20).unwrap();
        let stats = pressure.stats();
        assert_eq!(stats["memory"]["current"]["coordinating_in_bytes"], 20);
        assert_eq!(stats["memory"]["current"]["all_in_bytes"], 50);
        assert_eq!(stats["memory"]["total"]["coordinating_in_bytes"], 80);
        assert_eq!(stats["memory"]["total"]["coordinating_rejections"], 1);
    }

    #[test]
    fn replica_bytes_are_never_rejected() {
        let pressure = IndexingPressure::new(10);
        let _a = pressure.replica(1000);
        let _b = pressure.replica(1000);
        assert_eq!(
            pressure.stats()["memory"]["current"]["replica_in_bytes"],
            2000
        );
        assert!(
            pressure.primary(1).is_err(),
            "replica bytes count against new primary bytes"
        );
        assert_eq!(pressure.stats()["memory"]["total"]["primary_rejections"], 1);
    }

    #[test]
    fn the_limit_is_bytes_or_a_share_of_memory() {
        let settings = |v: &str| -> FlatSettings {
            [(LIMIT_SETTING.to_string(), serde_json::json!(v))]
                .into_iter()
                .collect()
        };
        assert_eq!(
            IndexingPressure::from_settings(&settings("1kb"))
                .unwrap()
                .limit(),
            1024
        );
        assert!(
            IndexingPressure::from_settings(&settings("10%"))
                .unwrap()
                .limit()
                > 0
        );
        assert!(IndexingPressure::from_settings(&settings("lots")).is_err());
    }
}
