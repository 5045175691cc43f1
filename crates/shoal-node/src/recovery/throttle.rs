//! Peer recovery's limits, OpenSearch's dynamic cluster settings:
//! - `indices.recovery.max_bytes_per_sec` (40mb; `0` or `-1` for none): one budget per node for
//!   every file chunk its recoveries pull, read at each chunk so a change applies at once;
//! - `indices.recovery.chunk_size` (512kb): bytes per streamed chunk (per chunk request to a
//!   source of protocol version 1);
//! - `indices.recovery.max_concurrent_file_chunks` (2, 1–8): files streamed at once (the one
//!   being written and the next ones; chunk requests in flight per file from a version-1
//!   source).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::settings::parse_byte_size;

pub const MAX_BYTES_PER_SEC: &str = "indices.recovery.max_bytes_per_sec";
/// Segment replication's own rate; `-1` (the default) takes the recovery rate.
pub const REPLICATION_MAX_BYTES_PER_SEC: &str = "indices.replication.max_bytes_per_sec";
/// The merged-segment pre-copy's own rate; `-1` (the default) takes the replication rate.
pub const WARMER_MAX_BYTES_PER_SEC: &str = "indices.replication.merges.warmer.max_bytes_per_sec";
pub const CHUNK_SIZE: &str = "indices.recovery.chunk_size";
pub const MAX_CONCURRENT_FILE_CHUNKS: &str = "indices.recovery.max_concurrent_file_chunks";

/// The largest chunk a source serves (a bound on the memory one request can ask for).
pub const MAX_CHUNK_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryLimits {
    /// `None`: unthrottled.
    pub bytes_per_sec: Option<u64>,
    pub chunk_bytes: u64,
    pub concurrent_chunks: usize,
}

/// Parses `indices.recovery.max_bytes_per_sec`: a byte size, `0`/`-1` meaning no limit.
pub fn parse_rate(text: &str) -> ApiResult<Option<u64>> {
    if matches!(text.trim(), "-1" | "0") {
        return Ok(None);
    }
    let bytes = parse_byte_size(text).map_err(|e| {
        ApiError::bad_request(format!(
            "failed to parse setting [{MAX_BYTES_PER_SEC}] with value [{text}]: {e}"
        ))
    })?;
    Ok((bytes > 0).then_some(bytes))
}

pub fn parse_chunk_size(text: &str) -> ApiResult<u64> {
    let bytes = parse_byte_size(text).map_err(|e| {
        ApiError::bad_request(format!(
            "failed to parse setting [{CHUNK_SIZE}] with value [{text}]: {e}"
        ))
    })?;
    if bytes == 0 || bytes > MAX_CHUNK_BYTES {
        return Err(ApiError::bad_request(format!(
            "failed to parse value [{text}] for setting [{CHUNK_SIZE}] must be between 1b and 64mb"
        )));
    }
    Ok(bytes)
}

pub fn parse_concurrent_chunks(text: &str) -> ApiResult<usize> {
    match text.trim().parse::<usize>() {
        Ok(n @ 1..=8) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "failed to parse value [{text}] for setting [{MAX_CONCURRENT_FILE_CHUNKS}] must be between 1 and 8"
        ))),
    }
}

/// Checks a value set through `PUT /_cluster/settings` (null resets, always fine).
pub fn validate(key: &str, value: &serde_json::Value) -> ApiResult<()> {
    let text = match value {
        serde_json::Value::Null => return Ok(()),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match key {
        MAX_BYTES_PER_SEC | REPLICATION_MAX_BYTES_PER_SEC | WARMER_MAX_BYTES_PER_SEC => {
            parse_rate(&text).map(drop)
        }
        CHUNK_SIZE => parse_chunk_size(&text).map(drop),
        MAX_CONCURRENT_FILE_CHUNKS => parse_concurrent_chunks(&text).map(drop),
        _ => Ok(()),
    }
}

/// Spaces out the bytes of every recovery into this node to a rate (OpenSearch's
/// `SimpleRateLimiter`): each chunk reserves the time its bytes take at the rate, after the
/// chunks before it. Idle time up to [`BURST`] counts as credit (a token bucket), so a short
/// transfer after a pause — a segment replication round of a few MB every second, far under
/// the rate on average — is not paced chunk by chunk; over any longer window the rate holds.
#[derive(Debug)]
pub struct RateLimiter {
    next_free: Mutex<Instant>,
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter {
            next_free: Mutex::new(Instant::now()),
        }
    }
}

/// How much idle time a limiter keeps as credit.
pub const BURST: Duration = Duration::from_millis(250);

impl RateLimiter {
    /// Reserves `bytes` at `bytes_per_sec`; returns how long to wait before sending them.
    pub fn reserve(&self, bytes: u64, bytes_per_sec: u64) -> Duration {
        let mut next_free = self.next_free.lock();
        let now = Instant::now();
        let earliest = now.checked_sub(BURST).unwrap_or(now);
        let start = (*next_free).max(earliest);
        *next_free = start + Duration::from_secs_f64(bytes as f64 / bytes_per_sec as f64);
        start.saturating_duration_since(now)
    }

    /// Reserves `bytes` and returns how long to wait before sending them (`None`: no
    /// limit, no wait).
    pub fn delay(&self, bytes: u64, bytes_per_sec: Option<u64>) -> Duration {
        bytes_per_sec.map_or(Duration::ZERO, |rate| self.reserve(bytes, rate))
    }

    /// Waits until `bytes` fit the rate (`None`: no limit, no wait); returns how long.
    pub fn pace(&self, bytes: u64, bytes_per_sec: Option<u64>) -> Duration {
        let wait = self.delay(bytes, bytes_per_sec);
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        wait
    }
}

/// A repository's fixed rate (`None`: unlimited) and the limiter this node's transfers held
/// to it share.
#[derive(Debug, Default)]
pub struct Rate {
    pub bytes_per_sec: Option<u64>,
    limiter: RateLimiter,
}

impl Rate {
    /// The rate setting `key` taken out of the settings of repository `repository`, or
    /// `default` when it is not there.
    pub fn take(
        repository: &str,
        settings: &mut std::collections::BTreeMap<String, String>,
        key: &str,
        default: Option<u64>,
    ) -> ApiResult<Rate> {
        let bytes_per_sec = match settings.remove(key) {
            None => default,
            Some(text) => parse_rate(&text).map_err(|_| {
                ApiError::new(
                    400,
                    "repository_exception",
                    format!("[{repository}] failed to parse [{key}] with value [{text}]: give a byte size per second such as [40mb], or [0] for no limit"),
                )
            })?,
        };
        Ok(Rate {
            bytes_per_sec,
            limiter: RateLimiter::default(),
        })
    }

    /// Reserves `bytes`; how long to wait before moving them.
    pub fn delay(&self, bytes: u64) -> Duration {
        self.limiter.delay(bytes, self.bytes_per_sec)
    }

    pub fn limiter(&self) -> &RateLimiter {
        &self.limiter
    }
}

impl NodeCore {
    /// The recovery limits as the cluster settings say now (defaults when unset; a value
    /// that does not parse, which validation keeps out, counts as the default).
    pub(crate) fn recovery_limits(&self) -> RecoveryLimits {
        let setting = |key: &str| self.cluster_setting(key).unwrap_or_default();
        RecoveryLimits {
            bytes_per_sec: parse_rate(&setting(MAX_BYTES_PER_SEC)).unwrap_or(Some(40 << 20)),
            chunk_bytes: parse_chunk_size(&setting(CHUNK_SIZE)).unwrap_or(512 << 10),
            concurrent_chunks: parse_concurrent_chunks(&setting(MAX_CONCURRENT_FILE_CHUNKS))
                .unwrap_or(2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_like_opensearch() {
        assert_eq!(parse_rate("40mb").unwrap(), Some(40 << 20));
        assert_eq!(parse_rate("41943040b").unwrap(), Some(41_943_040));
        assert_eq!(parse_rate("0").unwrap(), None);
        assert_eq!(parse_rate("-1").unwrap(), None);
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_chunk_size("524272b").unwrap(), 524_272);
        assert!(parse_chunk_size("1gb").is_err());
        assert_eq!(parse_concurrent_chunks("3").unwrap(), 3);
        assert!(parse_concurrent_chunks("9").is_err());
        assert!(validate(MAX_BYTES_PER_SEC, &serde_json::json!("x")).is_err());
        assert!(validate(MAX_BYTES_PER_SEC, &serde_json::Value::Null).is_ok());
    }

    #[test]
    fn the_limiter_spaces_reservations_at_the_rate_after_a_quarter_second_of_credit() {
        let limiter = RateLimiter::default();
        std::thread::sleep(BURST);
        let rate = 1_000_000;
        // Idle for the whole burst: 250 kB go at once.
        assert!(limiter.reserve(250_000, rate) < Duration::from_millis(5));
        let second = limiter.reserve(500_000, rate);
        assert!(second < Duration::from_millis(5), "{second:?}");
        let third = limiter.reserve(500_000, rate);
        assert!(
            third > Duration::from_millis(450) && third <= Duration::from_millis(500),
            "{third:?}"
        );
        let fourth = limiter.reserve(1, rate);
        assert!(fourth > Duration::from_millis(950), "{fourth:?}");
    }
}
