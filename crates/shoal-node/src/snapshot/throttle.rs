//! A repository's snapshot and restore rates, as OpenSearch names them in its settings:
//! `max_snapshot_bytes_per_sec` (40mb by default) paces every node's uploads of shard files,
//! `max_restore_bytes_per_sec` (unlimited by default) its downloads, which
//! `indices.recovery.max_bytes_per_sec` also paces (a restore is a recovery). `0` or `-1`:
//! unlimited. Each node paces its own transfers, per repository.

use std::collections::BTreeMap;

use crate::error::{ApiError, ApiResult};
use crate::recovery::throttle::{parse_rate, RateLimiter};

pub const MAX_SNAPSHOT_BYTES_PER_SEC: &str = "max_snapshot_bytes_per_sec";
pub const MAX_RESTORE_BYTES_PER_SEC: &str = "max_restore_bytes_per_sec";
const DEFAULT_SNAPSHOT_RATE: u64 = 40 << 20;

/// The rates of one repository, and the limiters that keep this node's transfers to them.
#[derive(Default)]
pub(crate) struct Throttles {
    /// `None`: unlimited.
    pub snapshot_rate: Option<u64>,
    pub restore_rate: Option<u64>,
    pub snapshot: RateLimiter,
    pub restore: RateLimiter,
}

impl Throttles {
    /// The rates a repository's settings give, and the settings without them (what the
    /// storage layer opens the repository with).
    pub(crate) fn split(
        name: &str,
        settings: &BTreeMap<String, String>,
    ) -> ApiResult<(Throttles, BTreeMap<String, String>)> {
        let mut rest = settings.clone();
        let mut rate = |key: &str, default: Option<u64>| {
            match rest.remove(key) {
            None => Ok(default),
            Some(text) => parse_rate(&text).map_err(|_| {
                ApiError::new(
                    400,
                    "repository_exception",
                    format!("[{name}] failed to parse [{key}] with value [{text}]: give a byte size per second such as [40mb], or [0] for no limit"),
                )
            }),
        }
        };
        let throttles = Throttles {
            snapshot_rate: rate(MAX_SNAPSHOT_BYTES_PER_SEC, Some(DEFAULT_SNAPSHOT_RATE))?,
            restore_rate: rate(MAX_RESTORE_BYTES_PER_SEC, None)?,
            ..Throttles::default()
        };
        Ok((throttles, rest))
    }
}

/// The tighter of two rates (`None` is unlimited).
pub(crate) fn tighter(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (one, other) => one.or(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::settings_map as settings;

    #[test]
    fn rates_default_as_opensearch_and_leave_the_storage_settings() {
        let (throttles, rest) = Throttles::split("r", &settings(&[("location", "x")])).unwrap();
        assert_eq!(throttles.snapshot_rate, Some(40 << 20));
        assert_eq!(throttles.restore_rate, None);
        assert_eq!(rest, settings(&[("location", "x")]));
        let given = settings(&[
            ("location", "x"),
            (MAX_SNAPSHOT_BYTES_PER_SEC, "0"),
            (MAX_RESTORE_BYTES_PER_SEC, "10mb"),
        ]);
        let (throttles, rest) = Throttles::split("r", &given).unwrap();
        assert_eq!(
            (throttles.snapshot_rate, throttles.restore_rate),
            (None, Some(10 << 20))
        );
        assert_eq!(rest.len(), 1);
        let bad = settings(&[(MAX_SNAPSHOT_BYTES_PER_SEC, "fast")]);
        let Err(e) = Throttles::split("r", &bad) else {
            panic!("a rate that is no byte size is refused");
        };
        assert_eq!(e.status, 400);
    }

    #[test]
    fn the_tighter_rate_wins_and_none_is_unlimited() {
        assert_eq!(tighter(Some(5), Some(3)), Some(3));
        assert_eq!(tighter(None, Some(3)), Some(3));
        assert_eq!(tighter(None, None), None);
    }
}
