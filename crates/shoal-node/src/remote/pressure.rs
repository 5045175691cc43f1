//! Remote segment backpressure, with OpenSearch's settings: a remote-backed primary whose
//! uploads fall behind refuses new writes (429) before the gap grows without bound.
//!
//! With `remote_store.segment.pressure.enabled` (default true), a write is refused when the
//! last `remote_store.segment.pressure.consecutive_failures.limit` uploads failed, when the
//! bytes refreshed but not uploaded exceed `….bytes_lag.variance_factor` times the average
//! upload, or when the oldest unfinished upload started more than
//! `….time_lag.variance_factor` times the average upload time ago. The lag checks wait for a
//! few uploads to have an average (OpenSearch waits for its moving window the same way).

use std::sync::atomic::Ordering;

use super::layout::now_millis;
use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::shard::remote::UploadStats;

pub const ENABLED: &str = "remote_store.segment.pressure.enabled";
pub const FAILURES_LIMIT: &str = "remote_store.segment.pressure.consecutive_failures.limit";
pub const BYTES_VARIANCE: &str = "remote_store.segment.pressure.bytes_lag.variance_factor";
pub const TIME_VARIANCE: &str = "remote_store.segment.pressure.time_lag.variance_factor";

/// Successful uploads needed before the lag limits apply.
const MIN_UPLOADS_FOR_AVERAGE: u64 = 5;

impl RemoteStoreService {
    /// Refuses a write to the local primary of `shard` when its segment uploads lag (and the
    /// pressure setting is on); counts the refusal.
    pub(crate) fn check_pressure(&self, service: &IndexService, shard: usize) -> ApiResult<()> {
        if !service.is_remote_store() || self.setting(ENABLED).as_deref() == Some("false") {
            return Ok(());
        }
        let copy = service.copy(shard)?;
        let Some(reason) = self.lag_reason(&copy.remote.stats) else {
            return Ok(());
        };
        UploadStats::add(&copy.remote.stats.rejections, 1);
        Err(ApiError::new(
            429,
            "rejected_execution_exception",
            format!(
                "rejected execution on primary shard:[{}][{shard}] due to remote segments lagging behind local segments.{reason}",
                service.name()
            ),
        ))
    }

    fn lag_reason(&self, stats: &UploadStats) -> Option<String> {
        let number = |key: &str, default: f64| {
            self.setting(key)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(default)
        };
        let failures = UploadStats::get(&stats.consecutive_segment_failures);
        let failure_limit = number(FAILURES_LIMIT, 5.0) as u64;
        if failures >= failure_limit.max(1) {
            return Some(format!(
                "failure_streak_count:{failures} min_consecutive_failure_threshold:{failure_limit}"
            ));
        }
        let uploads = UploadStats::get(&stats.segment_uploads_succeeded);
        if uploads < MIN_UPLOADS_FOR_AVERAGE {
            return None;
        }
        let average_bytes = UploadStats::get(&stats.segment_bytes_uploaded) as f64 / uploads as f64;
        let bytes_lag = stats.bytes_lag.load(Ordering::Relaxed) as f64;
        let bytes_threshold = number(BYTES_VARIANCE, 10.0) * average_bytes.max(1.0);
        if bytes_lag > bytes_threshold {
            return Some(format!(
                "bytes_lag:{bytes_lag} dynamic_bytes_lag_threshold:{bytes_threshold}"
            ));
        }
        let pending_since = stats.pending_since.load(Ordering::Relaxed);
        let average_millis = UploadStats::get(&stats.segment_upload_millis) as f64 / uploads as f64;
        // A floor of a second: an upload of a few milliseconds must not make a scheduling
        // hiccup look like a lagging store.
        let time_threshold = (number(TIME_VARIANCE, 10.0) * average_millis).max(1000.0);
        let time_lag = match pending_since {
            0 => 0.0,
            since => now_millis().saturating_sub(since) as f64,
        };
        (time_lag > time_threshold).then(|| {
            format!("time_lag:{time_lag} ms dynamic_time_lag_threshold:{time_threshold} ms")
        })
    }

    fn setting(&self, key: &str) -> Option<String> {
        self.core.cluster_setting(key)
    }
}
