//! A repository's snapshot and restore rates, as OpenSearch names them in its settings:
//! `max_snapshot_bytes_per_sec` (40mb by default) paces every node's uploads of shard files,
//! `max_restore_bytes_per_sec` (unlimited by default) its downloads, which
//! `indices.recovery.max_bytes_per_sec` also paces (a restore is a recovery). `0` or `-1`:
//! unlimited. Each node paces its own transfers, per repository.

use std::collections::BTreeMap;

use crate::error::ApiResult;
use crate::recovery::throttle::Rate;

pub const MAX_SNAPSHOT_BYTES_PER_SEC: &str = "max_snapshot_bytes_per_sec";
pub const MAX_RESTORE_BYTES_PER_SEC: &str = "max_restore_bytes_per_sec";
const DEFAULT_SNAPSHOT_RATE: u64 = 40 << 20;

/// The rates of one repository, with the limiters that keep this node's transfers to them.
#[derive(Default)]
pub(crate) struct Throttles {
    pub snapshot: Rate,
    pub restore: Rate,
}

impl Throttles {
    /// The rates a repository's settings give, and the settings without them (what the
    /// storage layer opens the repository with).
    pub(crate) fn split(
        name: &str,
        settings: &BTreeMap<String, String>,
    ) -> ApiResult<(Throttles, BTreeMap<String, String>)> {
        let mut rest = settings.clone();
        let throttles = Throttles {
            snapshot: Rate::take(
                name,
                &mut rest,
                MAX_SNAPSHOT_BYTES_PER_SEC,
                Some(DEFAULT_SNAPSHOT_RATE),
            )?,
            restore: Rate::take(name, &mut rest, MAX_RESTORE_BYTES_PER_SEC, None)?,
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
        assert_eq!(throttles.snapshot.bytes_per_sec, Some(40 << 20));
        assert_eq!(throttles.restore.bytes_per_sec, None);
        assert_eq!(rest, settings(&[("location", "x")]));
        let given = settings(&[
            ("location", "x"),
            (MAX_SNAPSHOT_BYTES_PER_SEC, "0"),
            (MAX_RESTORE_BYTES_PER_SEC, "10mb"),
        ]);
        let (throttles, rest) = Throttles::split("r", &given).unwrap();
        assert_eq!(
            (
                throttles.snapshot.bytes_per_sec,
                throttles.restore.bytes_per_sec
            ),
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
