//! Disk usage input of the disk threshold decider (OpenSearch's `InternalClusterInfoService`):
//! every data node measures the filesystem of its `path.data` every
//! `cluster.info.update.interval` and reports it to the cluster state. A report is a Raft entry,
//! so a node only reports when the numbers moved by more than [`REPORT_THRESHOLD`] of the disk
//! since the report the state holds (a node that (re)joins has none, so it reports at once).

use std::sync::{Arc, Weak};
use std::time::Duration;

use shoal_state::{ClusterState, Command, DiskUsage};
use tracing::debug;

use crate::core::NodeCore;

/// Fraction of the disk the usage must move by before a new report.
pub const REPORT_THRESHOLD: f64 = 0.01;

/// `cluster.info.update.interval`'s default.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// Retry delay until the first report got through (the node may not have joined yet).
const STARTUP_RETRY: Duration = Duration::from_secs(1);

/// Whether `current` differs enough from the last report to be worth a Raft entry: no report
/// yet, or total, available or shard bytes moved by more than the threshold of the disk.
pub fn should_report(previous: Option<&DiskUsage>, current: &DiskUsage) -> bool {
    let Some(previous) = previous else {
        return true;
    };
    let scale = previous.total_bytes.max(current.total_bytes) as f64;
    let moved = |a: u64, b: u64| a.abs_diff(b) as f64 > scale * REPORT_THRESHOLD;
    moved(previous.total_bytes, current.total_bytes)
        || moved(previous.available_bytes, current.available_bytes)
        || moved(previous.shards_bytes, current.shards_bytes)
}

pub use shoal_cluster::raft::reserve::filesystem_space;

impl NodeCore {
    /// This node's disk usage now: its data path's filesystem and the size of its shards.
    /// Walks the shard directories: call it off the async runtime.
    pub fn measure_disk_usage(&self) -> Option<DiskUsage> {
        let (total_bytes, available_bytes) = filesystem_space(&self.config.data_path)?;
        let shards_bytes = self
            .all_indices()
            .iter()
            .flat_map(|index| index.shards())
            .map(|engine| engine.stats().store_size_in_bytes)
            .sum();
        Some(DiskUsage {
            total_bytes,
            available_bytes,
            shards_bytes,
        })
    }

    /// Disk usage of a node for `_cat/allocation` and explain: measured now for this node,
    /// the last report in the cluster state for the others.
    pub fn disk_usage_of(&self, state: &ClusterState, node_id: &str) -> Option<DiskUsage> {
        if node_id == self.node_id {
            return self
                .measure_disk_usage()
                .or_else(|| state.disk_usage.get(node_id).copied());
        }
        state.disk_usage.get(node_id).copied()
    }

    fn info_update_interval(&self) -> Duration {
        self.cluster_setting("cluster.info.update.interval")
            .and_then(|v| crate::settings::parse_time(&v).ok().flatten())
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_INTERVAL)
    }

    /// One round: measure, compare with the state's last report, propose if it moved.
    /// Returns false while the node cannot report yet (not joined, no cluster manager).
    pub(crate) async fn report_disk_usage(self: Arc<Self>) -> bool {
        let state = self.cluster_state();
        if !state.nodes.contains_key(&self.node_id) || !self.cluster.has_cluster_manager() {
            return false;
        }
        let node = self.clone();
        let measured = tokio::task::spawn_blocking(move || node.measure_disk_usage()).await;
        let Ok(Some(usage)) = measured else {
            return true; // nothing measurable here: do not retry every second
        };
        if !should_report(state.disk_usage.get(&self.node_id), &usage) {
            return true;
        }
        let command = Command::DiskUsage {
            node_id: self.node_id.clone(),
            usage,
        };
        match self.cluster.propose(command, Duration::from_secs(30)).await {
            Ok(_) => true,
            Err(e) => {
                debug!(error = %e, "could not report disk usage");
                false
            }
        }
    }
}

/// Starts the reporter on data nodes: a first report as soon as the node has joined, then one
/// check every `cluster.info.update.interval` (read each round: the setting is dynamic). It
/// runs while `owner` (the node) lives, and holds neither between rounds.
pub(crate) fn spawn_reporter<T: Send + Sync + 'static>(core: &Arc<NodeCore>, owner: Weak<T>) {
    if !core.cluster.local().is_data() {
        return;
    }
    let weak: Weak<NodeCore> = Arc::downgrade(core);
    core.runtime.spawn(async move {
        let mut reported_once = false;
        loop {
            let delay = {
                let (Some(_owner), Some(core)) = (owner.upgrade(), weak.upgrade()) else {
                    return;
                };
                reported_once |= core.clone().report_disk_usage().await;
                if reported_once {
                    core.info_update_interval()
                } else {
                    STARTUP_RETRY
                }
            };
            tokio::time::sleep(delay).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1 << 30;

    fn usage(total: u64, available: u64, shards: u64) -> DiskUsage {
        DiskUsage {
            total_bytes: total,
            available_bytes: available,
            shards_bytes: shards,
        }
    }

    #[test]
    fn first_measurement_is_always_reported() {
        assert!(should_report(None, &usage(100 * GB, 50 * GB, 0)));
    }

    #[test]
    fn changes_within_one_percent_of_the_disk_are_not_reported() {
        let last = usage(100 * GB, 50 * GB, GB);
        assert!(!should_report(Some(&last), &last));
        assert!(!should_report(
            Some(&last),
            &usage(100 * GB, 50 * GB - GB / 2, GB)
        ));
        assert!(!should_report(
            Some(&last),
            &usage(100 * GB, 50 * GB + GB, GB + GB / 2)
        ));
    }

    #[test]
    fn changes_beyond_one_percent_are_reported() {
        let last = usage(100 * GB, 50 * GB, GB);
        assert!(should_report(Some(&last), &usage(100 * GB, 48 * GB, GB)));
        assert!(should_report(Some(&last), &usage(100 * GB, 52 * GB, GB)));
        assert!(should_report(
            Some(&last),
            &usage(100 * GB, 50 * GB, 3 * GB)
        ));
        assert!(should_report(Some(&last), &usage(200 * GB, 50 * GB, GB)));
    }

    #[test]
    fn the_filesystem_of_a_directory_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let (total, available) = filesystem_space(dir.path()).expect("statvfs");
        assert!(total > 0 && available <= total);
        assert!(filesystem_space(&dir.path().join("missing")).is_none());
    }
}
