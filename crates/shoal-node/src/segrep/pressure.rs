//! Segment replication backpressure, with OpenSearch's settings: a primary whose replicas
//! fall too far behind refuses new writes (429) before the gap grows without bound, and
//! replicas stale for too long are failed so they recover afresh.
//!
//! A replica is stale when it is more than `segrep.pressure.checkpoint.limit` checkpoints
//! behind and the oldest of them was published more than `segrep.pressure.time.limit` ago.
//! With `segrep.pressure.enabled`, a write to a primary at least
//! `segrep.pressure.replica.stale.limit` of whose replicas are stale is refused. A replica
//! behind for longer than `segrep.replication.time.limit` (0: never) is failed.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::SegrepService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::shard::IndexShard;

pub const ENABLED: &str = "segrep.pressure.enabled";
pub const CHECKPOINT_LIMIT: &str = "segrep.pressure.checkpoint.limit";
pub const TIME_LIMIT: &str = "segrep.pressure.time.limit";
pub const STALE_LIMIT: &str = "segrep.pressure.replica.stale.limit";
pub const REPLICATION_TIME_LIMIT: &str = "segrep.replication.time.limit";

/// How often a primary refusing writes publishes its checkpoint again to its stale replicas.
const REPUBLISH_EVERY: Duration = Duration::from_secs(1);

/// How often a primary looks for replicas to fail (OpenSearch's 30 s task).
const STALE_CHECK_EVERY: Duration = Duration::from_secs(30);

struct Limits {
    checkpoints: usize,
    time: Duration,
    stale_share: f64,
}

impl SegrepService {
    /// Refuses a write to the local primary of `shard` when too many of its segment replicas
    /// are stale (and `segrep.pressure.enabled`); counts the refusal.
    pub(crate) fn check_pressure(&self, service: &IndexService, shard: usize) -> ApiResult<()> {
        if !self.setting_is(ENABLED, "true") || !service.is_segment_replicated() {
            return Ok(());
        }
        let copy = service.copy(shard)?;
        let Some(replication) = copy.replication() else {
            return Ok(());
        };
        let targets = replication.tracker.lock().replication_targets();
        if targets.is_empty() {
            return Ok(());
        }
        let limits = self.pressure_limits();
        let stale = stale_replicas(&copy, &targets, limits.checkpoints, limits.time);
        if stale.is_empty() || (stale.len() as f64) < limits.stale_share * targets.len() as f64 {
            return Ok(());
        }
        copy.segrep.rejected.fetch_add(1, Ordering::Relaxed);
        // A replica that missed a publication catches up with the next one, and refused
        // writes make no next one: publish the current checkpoint to it again.
        if copy.segrep.republish_due(REPUBLISH_EVERY) {
            super::source::queue_publication(&self.me, &service.name(), &service.uuid(), shard);
        }
        Err(ApiError::new(
            429,
            "rejected_execution_exception",
            format!(
                "rejected execution on primary shard:[{}][{shard}] Stale Replicas: [{}]]",
                service.name(),
                stale.join(", ")
            ),
        )
        .with_kind(crate::error::ErrorKind::Rejected))
    }

    /// The replicas of this node's segment-replicated primaries of `service` that have been
    /// behind for longer than `segrep.replication.time.limit` (0: never), each primary looked
    /// at every 30 s: (shard, allocation id, primary term). The node fails them.
    pub(crate) fn stale_replicas_to_fail(
        &self,
        service: &IndexService,
    ) -> Vec<(usize, String, i64)> {
        let limit = self
            .core
            .cluster_setting(REPLICATION_TIME_LIMIT)
            .and_then(|text| crate::settings::parse_time(&text).ok().flatten());
        let Some(limit) = limit.filter(|l| !l.is_zero()) else {
            return Vec::new();
        };
        if !service.is_segment_replicated() {
            return Vec::new();
        }
        let mut stale = Vec::new();
        for (shard, copy) in service.local_copies() {
            if !copy.segrep.stale_check_due(STALE_CHECK_EVERY) {
                continue;
            }
            let Some(targets) = copy.primary_targets() else {
                continue;
            };
            let term = copy.engine().primary_term();
            for allocation_id in stale_replicas(&copy, &targets, 0, limit) {
                stale.push((shard, allocation_id, term));
            }
        }
        stale
    }

    fn pressure_limits(&self) -> Limits {
        let setting = |key: &str| self.core.cluster_setting(key).unwrap_or_default();
        Limits {
            checkpoints: setting(CHECKPOINT_LIMIT).parse().unwrap_or(4),
            time: crate::settings::parse_time(&setting(TIME_LIMIT))
                .ok()
                .flatten()
                .unwrap_or(Duration::from_secs(300)),
            stale_share: setting(STALE_LIMIT).parse().unwrap_or(0.5),
        }
    }

    fn setting_is(&self, key: &str, value: &str) -> bool {
        self.core.cluster_setting(key).is_some_and(|v| v == value)
    }
}

/// The replicas among `targets` more than `checkpoints` checkpoints behind whose oldest
/// pending checkpoint was published more than `time` ago.
fn stale_replicas(
    copy: &IndexShard,
    targets: &[String],
    checkpoints: usize,
    time: Duration,
) -> Vec<String> {
    let now = Instant::now();
    let lags = copy.segrep.replicas.lock();
    targets
        .iter()
        .filter(|a| {
            lags.get(*a).is_some_and(|lag| {
                lag.checkpoints_behind() > checkpoints && lag.current_lag(now) > time
            })
        })
        .cloned()
        .collect()
}
