//! Index settings whose values describe what Shoal does, read where Shoal acts on them:
//! the mapping limits, and settings for which Shoal has no knob because it always does
//! one thing (no request cache, no query cache, no slow log...). Those
//! accept exactly the values that describe Shoal's behaviour and refuse the others
//! naming what Shoal does, so nothing is accepted and then ignored.

use shoal_engine::MergeSettings;
use shoal_mapping::MappingLimits;

use super::{typed, IndexSettings};
use crate::error::{ApiError, ApiResult};

impl IndexSettings<'_> {
    /// `index.mapping.total_fields.limit`, `depth.limit`, `field_name_length.limit`.
    pub fn mapping_limits(&self) -> MappingLimits {
        let defaults = MappingLimits::default();
        let read = |key: &str, default: i64| self.get_or_default(key).parse().unwrap_or(default);
        MappingLimits {
            total_fields: read("index.mapping.total_fields.limit", defaults.total_fields),
            depth: read("index.mapping.depth.limit", defaults.depth),
            field_name_length: read(
                "index.mapping.field_name_length.limit",
                defaults.field_name_length,
            ),
        }
    }
}

impl IndexSettings<'_> {
    /// `index.merge.policy.*`: the tiered merge policy's settings (OpenSearch's defaults).
    pub fn merge_settings(&self) -> MergeSettings {
        let defaults = MergeSettings::default();
        let number = |key: &str, default: f64| {
            self.get_or_default(key)
                .trim()
                .parse::<f64>()
                .unwrap_or(default)
        };
        let bytes = |key: &str, default: u64| {
            super::parse_byte_size(&self.get_or_default(key)).unwrap_or(default)
        };
        MergeSettings {
            segments_per_tier: number(
                "index.merge.policy.segments_per_tier",
                defaults.segments_per_tier,
            ),
            max_merge_at_once: number(
                "index.merge.policy.max_merge_at_once",
                defaults.max_merge_at_once as f64,
            ) as usize,
            floor_segment: bytes("index.merge.policy.floor_segment", defaults.floor_segment),
            max_merged_segment: bytes(
                "index.merge.policy.max_merged_segment",
                defaults.max_merged_segment,
            ),
            deletes_pct_allowed: number(
                "index.merge.policy.deletes_pct_allowed",
                defaults.deletes_pct_allowed,
            ),
            expunge_deletes_allowed: number(
                "index.merge.policy.expunge_deletes_allowed",
                defaults.expunge_deletes_allowed,
            ),
        }
    }
}

impl IndexSettings<'_> {
    /// `index.query.default_field` (`*`, every field, unless set).
    pub fn query_default_fields(&self) -> Vec<(String, f32)> {
        self.0
            .get(DEFAULT_FIELD)
            .and_then(|value| shoal_query::context::parse_default_fields(value).ok())
            .unwrap_or_else(shoal_query::context::all_fields)
    }
}

pub const DEFAULT_FIELD: &str = "index.query.default_field";

/// `index.query.default_field`: a field name or a list of them, each with an optional `^boost`.
pub fn check_default_field(value: &serde_json::Value) -> ApiResult<()> {
    shoal_query::context::parse_default_fields(value)
        .map(drop)
        .map_err(|e| {
            ApiError::bad_request(format!("failed to parse setting [{DEFAULT_FIELD}]: {e}"))
        })
}

/// A setting Shoal has no knob for: the values that say what Shoal does, and what it does.
struct Fixed {
    key: &'static str,
    describes_shoal: fn(&str) -> bool,
    accepted: &'static str,
    behaviour: &'static str,
}

const SLOWLOG_DISABLED: &str =
    "Shoal has no slow log, so every slow log threshold is disabled (-1)";

const FIXED: &[Fixed] = &[
    Fixed {
        key: "index.requests.cache.enable",
        describes_shoal: |v| v == "false",
        accepted: "false",
        behaviour: "Shoal has no shard request cache: every search runs on the shards",
    },
    Fixed {
        key: "index.queries.cache.enabled",
        describes_shoal: |v| v == "false",
        accepted: "false",
        behaviour: "Shoal has no query cache: every query runs against the segments",
    },
    Fixed {
        key: "index.merge.policy",
        describes_shoal: |v| v == "default" || v == "tiered",
        accepted: "tiered",
        behaviour: "Shoal merges segments with the tiered merge policy (index.merge.policy.*)",
    },
    Fixed {
        key: "index.merge.scheduler.max_thread_count",
        describes_shoal: |v| v.trim() == "4",
        accepted: "4",
        behaviour: "Shoal merges each shard on tantivy's pool of 4 merge threads",
    },
    Fixed {
        key: "index.merge.scheduler.auto_throttle",
        describes_shoal: |v| v == "false",
        accepted: "false",
        behaviour: "Shoal does not throttle merges",
    },
    Fixed {
        key: "index.translog.generation_threshold_size",
        describes_shoal: |v| {
            typed::parse_bytes("index.translog.generation_threshold_size", v).ok()
                == Some(shoal_translog::DEFAULT_GENERATION_THRESHOLD_SIZE as i64)
        },
        accepted: "64mb",
        behaviour: "Shoal rolls translog generations at 64mb",
    },
    Fixed {
        key: "index.store.type",
        describes_shoal: |v| v == "mmapfs",
        accepted: "mmapfs",
        behaviour: "Shoal reads every index file through mmap",
    },
];

/// The slow log thresholds: Shoal logs no slow operation, which is what `-1` asks for.
fn is_slowlog_threshold(key: &str) -> bool {
    (key.starts_with("index.search.slowlog.threshold.")
        || key.starts_with("index.indexing.slowlog.threshold."))
        && super::registry().get(key).is_some()
}

/// Whether `key` is a setting whose value can describe what Shoal always does.
pub fn is_fixed(key: &str) -> bool {
    is_slowlog_threshold(key) || FIXED.iter().any(|f| f.key == key)
}

/// Accepts `text` for a fixed setting if it describes Shoal's behaviour, after the type
/// check OpenSearch makes; else refuses naming the setting and what Shoal does.
pub fn check_fixed(key: &str, text: &str) -> ApiResult<()> {
    if is_slowlog_threshold(key) {
        let disabled = typed::parse_time(key, text)?.is_none();
        return if disabled {
            Ok(())
        } else {
            Err(refusal(key, "-1", SLOWLOG_DISABLED))
        };
    }
    let Some(fixed) = FIXED.iter().find(|f| f.key == key) else {
        return Err(typed::not_supported(key));
    };
    typed::check_value(key, text)?;
    if (fixed.describes_shoal)(text) {
        Ok(())
    } else {
        Err(refusal(key, fixed.accepted, fixed.behaviour))
    }
}

fn refusal(key: &str, accepted: &str, behaviour: &str) -> ApiError {
    ApiError::bad_request(format!(
        "setting [{key}] can only be [{accepted}] on Shoal: {behaviour}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_describing_shoal_are_accepted_and_others_refused_by_name() {
        assert!(check_fixed("index.requests.cache.enable", "false").is_ok());
        assert_eq!(
            check_fixed("index.requests.cache.enable", "true").unwrap_err().reason,
            "setting [index.requests.cache.enable] can only be [false] on Shoal: Shoal has no shard request cache: every search runs on the shards"
        );
        assert!(check_fixed("index.queries.cache.enabled", "false").is_ok());
        assert!(check_fixed("index.queries.cache.enabled", "true").is_err());
        assert!(check_fixed("index.translog.generation_threshold_size", "64mb").is_ok());
        assert!(check_fixed("index.translog.generation_threshold_size", "65536kb").is_ok());
        assert!(check_fixed("index.translog.generation_threshold_size", "128mb").is_err());
        assert!(check_fixed("index.search.slowlog.threshold.query.warn", "-1").is_ok());
        assert!(check_fixed("index.indexing.slowlog.threshold.index.info", "-1").is_ok());
        assert!(
            check_fixed("index.search.slowlog.threshold.query.warn", "10s")
                .unwrap_err()
                .reason
                .contains("Shoal has no slow log")
        );
    }

    #[test]
    fn a_malformed_value_gets_the_type_error_first() {
        assert_eq!(
            check_fixed("index.requests.cache.enable", "yes")
                .unwrap_err()
                .reason,
            "Failed to parse value [yes] as only [true] or [false] are allowed."
        );
    }

    #[test]
    fn only_listed_settings_are_fixed() {
        assert!(is_fixed("index.store.type"));
        assert!(is_fixed("index.search.slowlog.threshold.fetch.debug"));
        assert!(!is_fixed("index.search.slowlog.level"));
        assert!(!is_fixed("index.routing_partition_size"));
    }
}
