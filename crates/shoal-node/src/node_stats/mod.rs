//! `_nodes/stats`: every node reports its own sections (indices, os, process, fs, thread pools,
//! indexing pressure, transport…) through `cluster:monitor/nodes/stats[n]`; the coordinating
//! node asks the nodes a request selects, all at once, and REST renders their answers beside
//! what the cluster state says of each node.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::core::NodeCore;
use crate::error::ApiResult;
use crate::segrep::SegrepService;

/// Transport action answering a node's own `_nodes/stats` sections.
pub struct NodesStatsAction;
impl shoal_transport::Action for NodesStatsAction {
    const NAME: &'static str = "cluster:monitor/nodes/stats[n]";
    /// The sections wanted, by their key (`indices`, `os`, `breakers`…).
    type Request = Vec<String>;
    type Response = Value;
}

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<NodeStatsService>,
) {
    actions.register_on::<NodesStatsAction, _>(Arc::downgrade(service), |service, sections| {
        Ok(service.local_sections(&sections))
    });
}

/// This node's statistics, and the fan-out that gathers other nodes' for `_nodes/stats`.
pub struct NodeStatsService {
    core: Arc<NodeCore>,
    /// Replica lag of this node's segment-replicated primaries, and the merged-segment warmer.
    segrep: Arc<SegrepService>,
}

impl NodeStatsService {
    pub(crate) fn new(core: Arc<NodeCore>, segrep: Arc<SegrepService>) -> NodeStatsService {
        NodeStatsService { core, segrep }
    }

    /// The `sections` of each node of `ids`, in that order; a node that does not answer is an
    /// error in its place.
    pub fn nodes_stats(
        &self,
        ids: &[String],
        sections: &[String],
        timeout: Duration,
    ) -> Vec<(String, ApiResult<Value>)> {
        let sections = sections.to_vec();
        self.core
            .ask_each_node::<NodesStatsAction>(ids, &sections, timeout, || {
                self.local_sections(&sections)
            })
    }

    /// This node's `_nodes/stats` sections of these keys, each gathered only when asked for
    /// (the index sections read every local copy's statistics).
    pub fn local_sections(&self, sections: &[String]) -> Value {
        let now = crate::node::now_millis();
        let mut out = serde_json::Map::new();
        out.insert("timestamp".into(), json!(now));
        for key in sections {
            let section = match key.as_str() {
                "indices" => self.indices_section(),
                "os" => os_section(now),
                "jvm" => jvm_section(now, self.core.started.elapsed()),
                "process" => process_section(now),
                "fs" => self.fs_section(now),
                "thread_pool" => self.core.pressure.stats(),
                "indexing_pressure" => self.core.pressure.indexing.stats(),
                "transport" => self.transport_section(),
                "breakers" => json!({}),
                "http" => json!({"current_open": 0, "total_opened": 0}),
                _ => continue,
            };
            out.insert(key.clone(), section);
        }
        Value::Object(out)
    }

    /// The `_stats` sections summed over this node's copies, with segment replication's lag
    /// under `segments` and the merged-segment warmer under `merges`.
    fn indices_section(&self) -> Value {
        let mut indices = crate::stats::zero_section();
        for service in self.core.all_indices() {
            let summed = crate::stats::sum_engine_stats(&service);
            crate::stats::add_sections(
                &mut indices,
                &crate::stats::stats_section(&service, &summed),
            );
        }
        if let Some(segments) = indices.get_mut("segments").and_then(Value::as_object_mut) {
            segments.insert("segment_replication".into(), self.segment_replication());
        }
        // OpenSearch 3.3+ reports its merged segment warmer under `merges`.
        if let Some(merges) = indices.get_mut("merges").and_then(Value::as_object_mut) {
            merges.insert(
                "merged_segment_warmer".into(),
                json!(self.segrep.warmer_stats()),
            );
        }
        indices
    }

    /// How far behind the replicas of this node's segment-replicated primaries are (OpenSearch's
    /// `segments.segment_replication`: bytes, and the lag in milliseconds).
    fn segment_replication(&self) -> Value {
        let rows = self.segrep.local_replica_rows(None);
        json!({
            "max_bytes_behind": rows.iter().map(|r| r.bytes_behind).max().unwrap_or(0),
            "total_bytes_behind": rows.iter().map(|r| r.bytes_behind).sum::<u64>(),
            "max_replication_lag": rows.iter().map(|r| r.current_lag_ms).max().unwrap_or(0),
        })
    }

    fn fs_section(&self, now: i64) -> Value {
        let path = &self.core.paths.data;
        let (total, available) = crate::disk_usage::filesystem_space(path).unwrap_or((0, 0));
        json!({"timestamp": now,
            "total": {"total_in_bytes": total, "free_in_bytes": available, "available_in_bytes": available},
            "data": [{"path": path.display().to_string(), "total_in_bytes": total,
                      "free_in_bytes": available, "available_in_bytes": available}]})
    }

    /// Node-to-node messages and their payload bytes (request and reply bodies, not framing).
    fn transport_section(&self) -> Value {
        let counts = self.core.transport.stats();
        json!({
            "rx_count": counts.rx_count, "rx_size_in_bytes": counts.rx_bytes,
            "tx_count": counts.tx_count, "tx_size_in_bytes": counts.tx_bytes,
        })
    }
}

/// No JVM here; the section exists because tools (opensearch-benchmark) read it.
fn jvm_section(now: i64, uptime: Duration) -> Value {
    json!({"timestamp": now, "uptime_in_millis": uptime.as_millis() as u64,
        "mem": {"heap_used_in_bytes": 0, "heap_used_percent": 0, "heap_committed_in_bytes": 0,
                "heap_max_in_bytes": 0, "non_heap_used_in_bytes": 0, "non_heap_committed_in_bytes": 0,
                "pools": {}},
        "threads": {"count": 0, "peak_count": 0},
        "gc": {"collectors": {"young": {"collection_count": 0, "collection_time_in_millis": 0},
                              "old": {"collection_count": 0, "collection_time_in_millis": 0}}}})
}

fn process_section(now: i64) -> Value {
    const PAGE: u64 = 4096;
    const TICKS_PER_SECOND: u64 = 100;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut pages = statm
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let virt = pages.next().unwrap_or(0) * PAGE;
    let rss = pages.next().unwrap_or(0) * PAGE;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<u64> = after_comm
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0);
    json!({"timestamp": now, "open_file_descriptors": open_fds, "max_file_descriptors": 1048576,
        "cpu": {"percent": 0, "total_in_millis": ticks * 1000 / TICKS_PER_SECOND},
        "mem": {"total_virtual_in_bytes": virt, "resident_in_bytes": rss}})
}

fn os_section(now: i64) -> Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let read = |key: &str| -> u64 {
        meminfo
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
            * 1024
    };
    let (total, free) = (read("MemTotal:"), read("MemAvailable:"));
    let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect();
    let percent = |part: u64| (part * 100).checked_div(total).unwrap_or(0);
    // `available_processors` is not in OpenSearch's section: `_cluster/stats` sums it.
    let processors = std::thread::available_parallelism().map_or(1, |n| n.get());
    json!({"timestamp": now, "available_processors": processors,
        "cpu": {"percent": 0, "load_average": {"1m": load.first(), "5m": load.get(1), "15m": load.get(2)}},
        "mem": {"total_in_bytes": total, "free_in_bytes": free, "used_in_bytes": total.saturating_sub(free),
                "free_percent": percent(free), "used_percent": percent(total.saturating_sub(free))}})
}
