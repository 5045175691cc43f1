//! Setting values checked by type and range with OpenSearch's messages (`Setting.parseInt`,
//! `Booleans.parseBoolean`, `TimeValue`, `ByteSizeValue`, `RatioValue`, `MemorySizeValue`, the
//! disk watermark validators), and the settings Shoal honours: a setting OpenSearch knows but
//! Shoal would ignore is refused by name instead of being stored.

use std::time::Duration;

use crate::error::{ApiError, ApiResult};

use super::registry::registry;

/// The type of a setting's value, with its range.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
    },
    Time {
        min: Option<Duration>,
    },
    Bytes,
    /// A heap share (`70%`) or a byte size.
    MemorySize,
    /// A disk watermark: a percentage/ratio of used disk, or free bytes.
    Watermark,
    /// Allowed values (compared in lowercase) and the refusal's text for a value.
    Enum(fn(&str) -> String, &'static [&'static str]),
    /// `all` or a copy count (`ActiveShardCount.parseString`).
    ActiveShards,
    /// Free text (patterns, lists, names): nothing to check.
    Any,
}

pub const DISK_LOW: &str = "cluster.routing.allocation.disk.watermark.low";
pub const DISK_HIGH: &str = "cluster.routing.allocation.disk.watermark.high";
pub const DISK_FLOOD: &str = "cluster.routing.allocation.disk.watermark.flood_stage";
pub const SHARD_INDEXING_PRESSURE: &str = "shard_indexing_pressure.enabled";

const INT_MAX: i64 = i32::MAX as i64;

/// Settings whose type or range the registry's default alone does not tell.
fn explicit_kind(key: &str) -> Option<Kind> {
    numeric_kind(key)
        .or_else(|| enum_kind(key))
        .or_else(|| other_kind(key))
}

/// Numbers, times and watermarks with the range OpenSearch gives them.
fn numeric_kind(key: &str) -> Option<Kind> {
    let int = |min| Kind::Int { min, max: INT_MAX };
    let float = |min| Kind::Float {
        min,
        max: f64::INFINITY,
    };
    Some(match key {
        DISK_LOW | DISK_HIGH | DISK_FLOOD => Kind::Watermark,
        "cluster.info.update.interval" => Kind::Time {
            min: Some(Duration::from_secs(10)),
        },
        "cluster.routing.allocation.node_concurrent_recoveries"
        | "cluster.routing.allocation.node_concurrent_incoming_recoveries"
        | "cluster.routing.allocation.node_concurrent_outgoing_recoveries"
        | "cluster.routing.allocation.node_initial_primaries_recoveries"
        | "cluster.routing.allocation.node_initial_replicas_recoveries" => int(0),
        "cluster.routing.allocation.cluster_concurrent_rebalance"
        | "cluster.routing.allocation.total_shards_per_node"
        | "index.routing.allocation.total_shards_per_node" => int(-1),
        "cluster.max_shards_per_node" | "cluster.max_voting_config_exclusions" => int(1),
        "index.allocation.max_retries" => int(0),
        "segrep.pressure.checkpoint.limit" => int(1),
        "index.merge.policy.max_merge_at_once" => int(2),
        "index.merge.policy.segments_per_tier" => float(2.0),
        "index.merge.policy.deletes_pct_allowed" => Kind::Float {
            min: 5.0,
            max: 50.0,
        },
        "index.merge.policy.expunge_deletes_allowed" => Kind::Float {
            min: 0.0,
            max: 100.0,
        },
        "cluster.remote_store.index.segment_metadata.retention.max_count" => int(1),
        "remote_store.segment.pressure.consecutive_failures.limit" => int(1),
        "remote_store.segment.pressure.bytes_lag.variance_factor"
        | "remote_store.segment.pressure.time_lag.variance_factor" => float(1.0),
        "segrep.pressure.replica.stale.limit" => float(0.0),
        "cluster.routing.allocation.balance.shard"
        | "cluster.routing.allocation.balance.index"
        | "cluster.routing.allocation.balance.threshold" => float(0.0),
        _ => return None,
    })
}

/// Settings taking one of a few names, refused with OpenSearch's message.
fn enum_kind(key: &str) -> Option<Kind> {
    Some(match key {
        REPLICATION_STRATEGY => Kind::Enum(
            |v| {
                format!("No enum constant org.opensearch.indices.replication.common.ReplicationType.{v}")
            },
            &["document", "segment"],
        ),
        "cluster.routing.allocation.enable" | "index.routing.allocation.enable" => Kind::Enum(
            |v| format!("Illegal allocation.enable value [{v}]"),
            &["all", "primaries", "new_primaries", "none"],
        ),
        "cluster.routing.rebalance.enable" | "index.routing.rebalance.enable" => Kind::Enum(
            |v| format!("Illegal rebalance.enable value [{v}]"),
            &["all", "primaries", "replicas", "none"],
        ),
        // OpenSearch names the setting by printing it (its pretty JSON form).
        "cluster.routing.allocation.allow_rebalance" => Kind::Enum(
            |v| {
                format!(
                    "Illegal value for {{\n  \"key\" : \"cluster.routing.allocation.allow_rebalance\",\n  \"properties\" : [\n    \"Dynamic\",\n    \"NodeScope\"\n  ],\n  \"is_group_setting\" : false,\n  \"default\" : \"indices_all_active\"\n}}: {v}"
                )
            },
            &[
                "always",
                "indices_primaries_active",
                "indicesprimariesactive",
                "indices_all_active",
                "indicesallactive",
            ],
        ),
        SHARD_INDEXING_PRESSURE => Kind::Enum(
            |v| {
                if v.eq_ignore_ascii_case("true") {
                    format!("setting [{SHARD_INDEXING_PRESSURE}] is not supported by Shoal with value [true]: Shoal has node-level indexing pressure only (indexing_pressure.memory.limit); only [false] is accepted")
                } else {
                    format!("Failed to parse value [{v}] as only [true] or [false] are allowed.")
                }
            },
            &["false"],
        ),
        _ => return None,
    })
}

/// Active shard counts, mapping limits, and values of their own syntax.
fn other_kind(key: &str) -> Option<Kind> {
    Some(match key {
        "index.write.wait_for_active_shards" => Kind::ActiveShards,
        "index.mapping.total_fields.limit" => Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        "index.mapping.depth.limit" | "index.mapping.field_name_length.limit" => Kind::Int {
            min: 1,
            max: i64::MAX,
        },
        // `false` or a range `0-1`, `0-all` (shoal-allocation/src/auto_expand.rs).
        "index.auto_expand_replicas" => Kind::Any,
        // `true`, `false` or a list of `+pattern`/`-pattern`.
        "action.auto_create_index" => Kind::Any,
        "http.port" | "transport.port" => Kind::Any,
        _ => return None,
    })
}

/// The kind of a registered setting: explicit, else read off its default value. Defaults of
/// `-1` and `0` are shared by numbers, times and sizes, so they tell nothing.
pub fn kind_of(key: &str) -> Kind {
    if let Some(kind) = explicit_kind(key) {
        return kind;
    }
    let Some(def) = registry().get(key) else {
        return Kind::Any;
    };
    let default = def.default.as_str();
    if matches!(default, "true" | "false") {
        return Kind::Bool;
    }
    if matches!(default, "-1" | "0" | "") || def.prefix {
        return Kind::Any;
    }
    if default.parse::<i64>().is_ok() {
        return Kind::Int {
            min: i64::MIN,
            max: i64::MAX,
        };
    }
    if default.contains('.') && default.parse::<f64>().is_ok() {
        return Kind::Float {
            min: f64::NEG_INFINITY,
            max: f64::INFINITY,
        };
    }
    if default.ends_with('%') {
        return Kind::MemorySize;
    }
    if parse_time(key, default).is_ok() {
        return Kind::Time { min: None };
    }
    if parse_bytes(key, default).is_ok() {
        return Kind::Bytes;
    }
    Kind::Any
}

/// Checks one value against its setting's kind.
pub fn check_value(key: &str, text: &str) -> ApiResult<()> {
    match kind_of(key) {
        Kind::Bool => parse_bool(text).map(drop),
        Kind::Int { min, max } => parse_int(key, text, min, max).map(drop),
        Kind::Float { min, max } => parse_float(key, text, min, max).map(drop),
        Kind::Time { min } => {
            let value = parse_time(key, text)?;
            match (min, value) {
                (Some(min), Some(value)) if value < min => Err(ApiError::bad_request(format!(
                    "failed to parse value [{text}] for setting [{key}], must be >= [{}]",
                    super::format_time(min)
                ))),
                _ => Ok(()),
            }
        }
        Kind::Bytes => parse_bytes(key, text).map(drop),
        Kind::MemorySize => parse_memory_size(key, text),
        Kind::Watermark => parse_watermark(key, text).map(drop),
        Kind::Enum(refusal, allowed) => {
            if allowed.contains(&text.to_ascii_lowercase().as_str()) {
                Ok(())
            } else {
                Err(ApiError::bad_request(refusal(text)))
            }
        }
        Kind::ActiveShards => parse_active_shards(text),
        Kind::Any => Ok(()),
    }
}

fn parse_active_shards(text: &str) -> ApiResult<()> {
    if text == "all" {
        return Ok(());
    }
    match text.parse::<i64>() {
        Ok(n) if n < -1 => Err(ApiError::bad_request(
            "shardCount cannot be a negative value.",
        )),
        Ok(_) => Ok(()),
        Err(_) => Err(ApiError::bad_request(format!(
            "cannot parse ActiveShardCount[{text}]"
        ))),
    }
}

pub fn parse_bool(text: &str) -> ApiResult<bool> {
    match text {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] as only [true] or [false] are allowed."
        ))),
    }
}

fn not_a_number(key: &str, text: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Failed to parse value [{text}] for setting [{key}]"
    ))
    .caused_by(ApiError::new(
        400,
        "number_format_exception",
        format!("For input string: \"{text}\""),
    ))
}

pub fn parse_int(key: &str, text: &str, min: i64, max: i64) -> ApiResult<i64> {
    let value: i64 = text.trim().parse().map_err(|_| not_a_number(key, text))?;
    if value < min {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be >= {min}"
        )));
    }
    if value > max {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be <= {max}"
        )));
    }
    Ok(value)
}

fn parse_float(key: &str, text: &str, min: f64, max: f64) -> ApiResult<f64> {
    let value: f64 = text.trim().parse().map_err(|_| not_a_number(key, text))?;
    if value < min {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be >= {min:?}"
        )));
    }
    if value > max {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be <= {max:?}"
        )));
    }
    Ok(value)
}

/// `TimeValue.parseTimeValue`: whole numbers with a unit, `-1` (disabled) or `0`.
pub fn parse_time(key: &str, text: &str) -> ApiResult<Option<Duration>> {
    let lower = text.trim().to_ascii_lowercase();
    match lower.as_str() {
        "-1" => return Ok(None),
        "0" => return Ok(Some(Duration::ZERO)),
        _ => {}
    }
    let units: [(&str, f64); 7] = [
        ("nanos", 1e-9),
        ("micros", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
        ("d", 86400.0),
    ];
    for (suffix, seconds) in units {
        let Some(number) = lower.strip_suffix(suffix) else {
            continue;
        };
        let number = number.trim();
        return match number.parse::<i64>() {
            Ok(n) if n < -1 => Err(ApiError::bad_request(format!(
                "duration cannot be negative, was given [{n}]"
            ))),
            Ok(-1) => Ok(None),
            Ok(n) => Ok(Some(Duration::from_secs_f64(n as f64 * seconds))),
            Err(_) if number.parse::<f64>().is_ok() => Err(ApiError::bad_request(format!(
                "failed to parse [{text}], fractional time values are not supported"
            ))),
            Err(_) => Err(ApiError::bad_request(format!("failed to parse [{text}]"))),
        };
    }
    Err(ApiError::bad_request(format!(
        "failed to parse setting [{key}] with value [{text}] as a time value: unit is missing or unrecognized"
    )))
}

/// `ByteSizeValue.parseBytesSizeValue`; `-1` is "unbounded".
pub fn parse_bytes(key: &str, text: &str) -> ApiResult<i64> {
    let lower = text.trim().to_ascii_lowercase();
    match lower.as_str() {
        "-1" => return Ok(-1),
        "0" => return Ok(0),
        _ => {}
    }
    if let Some((number, multiplier)) = super::values::split_byte_unit(&lower) {
        let multiplier = multiplier as i64;
        let value = match number.parse::<i64>() {
            Ok(n) => n.saturating_mul(multiplier),
            Err(_) => match number.parse::<f64>() {
                Ok(f) => (f * multiplier as f64) as i64,
                Err(_) => {
                    return Err(ApiError::bad_request(format!("failed to parse [{text}]")));
                }
            },
        };
        if value < 0 {
            return Err(ApiError::bad_request(format!(
                "failed to parse setting [{key}] with value [{text}] as a size in bytes"
            )));
        }
        return Ok(value);
    }
    Err(ApiError::bad_request(format!(
        "failed to parse setting [{key}] with value [{text}] as a size in bytes: unit is missing or unrecognized"
    )))
}

/// `MemorySizeValue.parseBytesSizeValueOrHeapRatio`.
fn parse_memory_size(key: &str, text: &str) -> ApiResult<()> {
    let Some(percent) = text.trim().strip_suffix('%') else {
        return parse_bytes(key, text).map(drop);
    };
    let value: f64 = percent
        .parse()
        .map_err(|_| ApiError::bad_request(format!("failed to parse [{percent}] as a double")))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(ApiError::bad_request(format!(
            "percentage should be in [0-100], got [{percent}]"
        )));
    }
    Ok(())
}

/// A watermark value: the used-disk percentage, or the free bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Watermark {
    UsedPercent(f64),
    FreeBytes(i64),
}

/// `RatioValue.parseRatioValue`: `85%` or `0.85`.
fn parse_ratio(text: &str) -> Option<f64> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent.parse().ok()?;
        return (0.0..=100.0).contains(&value).then_some(value);
    }
    let ratio: f64 = text.parse().ok()?;
    (0.0..=1.0).contains(&ratio).then_some(ratio * 100.0)
}

/// `DiskThresholdSettings.validWatermarkSetting`: a ratio, else a byte size (whose error is
/// the one reported).
pub fn parse_watermark(key: &str, text: &str) -> ApiResult<Watermark> {
    if let Some(percent) = parse_ratio(text) {
        return Ok(Watermark::UsedPercent(percent));
    }
    parse_bytes(key, text).map(Watermark::FreeBytes)
}

/// The watermark validators: all three percentages with low <= high <= flood stage, or all
/// three free-byte sizes with low >= high >= flood stage.
pub fn check_watermarks(low: &str, high: &str, flood: &str) -> ApiResult<()> {
    let parsed = (
        parse_watermark(DISK_LOW, low)?,
        parse_watermark(DISK_HIGH, high)?,
        parse_watermark(DISK_FLOOD, flood)?,
    );
    let refuse = |text: String| Err(ApiError::bad_request(text));
    match parsed {
        (Watermark::UsedPercent(l), Watermark::UsedPercent(h), Watermark::UsedPercent(f)) => {
            if l > h {
                return refuse(format!(
                    "low disk watermark [{low}] more than high disk watermark [{high}]"
                ));
            }
            if h > f {
                return refuse(format!(
                    "high disk watermark [{high}] more than flood stage disk watermark [{flood}]"
                ));
            }
            Ok(())
        }
        (Watermark::FreeBytes(l), Watermark::FreeBytes(h), Watermark::FreeBytes(f)) => {
            if l < h {
                return refuse(format!(
                    "low disk watermark [{low}] less than high disk watermark [{high}]"
                ));
            }
            if h < f {
                return refuse(format!(
                    "high disk watermark [{high}] less than flood stage disk watermark [{flood}]"
                ));
            }
            Ok(())
        }
        _ => refuse(format!(
            "unable to consistently parse [{DISK_LOW}={low}], [{DISK_HIGH}={high}], and [{DISK_FLOOD}={flood}] as percentage or bytes"
        )),
    }
}
pub use super::honoured::{
    honoured_cluster_setting, honoured_index_setting, honoured_node_setting, not_supported,
    recognised_node_setting, unknown_setting, REPLICATION_STRATEGY, RESTRICT_REPLICATION_TYPE,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(key: &str, value: &str) -> String {
        check_value(key, value).unwrap_err().reason
    }

    #[test]
    fn watermarks_refuse_what_is_neither_ratio_nor_bytes() {
        assert_eq!(
            reason(DISK_HIGH, "x"),
            "failed to parse setting [cluster.routing.allocation.disk.watermark.high] with value [x] as a size in bytes: unit is missing or unrecognized"
        );
        assert_eq!(
            reason(DISK_LOW, "1s"),
            "failed to parse setting [cluster.routing.allocation.disk.watermark.low] with value [1s] as a size in bytes: unit is missing or unrecognized"
        );
        assert!(check_value(DISK_LOW, "0.5").is_ok());
        assert!(check_value(DISK_LOW, "500mb").is_ok());
        assert!(check_value(DISK_LOW, "85%").is_ok());
    }

    #[test]
    fn watermarks_must_be_ordered_and_of_one_kind() {
        assert!(check_watermarks("85%", "90%", "95%").is_ok());
        assert!(check_watermarks("10gb", "5gb", "1gb").is_ok());
        assert_eq!(
            check_watermarks("92%", "90%", "95%").unwrap_err().reason,
            "low disk watermark [92%] more than high disk watermark [90%]"
        );
        assert_eq!(
            check_watermarks("85%", "96%", "95%").unwrap_err().reason,
            "high disk watermark [96%] more than flood stage disk watermark [95%]"
        );
        assert_eq!(
            check_watermarks("1gb", "5gb", "1gb").unwrap_err().reason,
            "low disk watermark [1gb] less than high disk watermark [5gb]"
        );
        assert_eq!(
            check_watermarks("85%", "5gb", "95%").unwrap_err().reason,
            "unable to consistently parse [cluster.routing.allocation.disk.watermark.low=85%], [cluster.routing.allocation.disk.watermark.high=5gb], and [cluster.routing.allocation.disk.watermark.flood_stage=95%] as percentage or bytes"
        );
    }

    #[test]
    fn times_integers_and_booleans_use_opensearch_messages() {
        assert_eq!(
            reason("cluster.info.update.interval", "200%"),
            "failed to parse setting [cluster.info.update.interval] with value [200%] as a time value: unit is missing or unrecognized"
        );
        assert_eq!(
            reason("cluster.info.update.interval", "1s"),
            "failed to parse value [1s] for setting [cluster.info.update.interval], must be >= [10s]"
        );
        assert_eq!(
            reason("cluster.info.update.interval", "1.5s"),
            "failed to parse [1.5s], fractional time values are not supported"
        );
        let err = check_value(
            "cluster.routing.allocation.node_concurrent_recoveries",
            "90%",
        )
        .unwrap_err();
        assert_eq!(
            err.reason,
            "Failed to parse value [90%] for setting [cluster.routing.allocation.node_concurrent_recoveries]"
        );
        assert_eq!(err.caused_by.unwrap().error_type, "number_format_exception");
        assert_eq!(
            reason("cluster.max_shards_per_node", "0"),
            "Failed to parse value [0] for setting [cluster.max_shards_per_node] must be >= 1"
        );
        assert_eq!(
            reason("cluster.routing.allocation.disk.threshold_enabled", "yes"),
            "Failed to parse value [yes] as only [true] or [false] are allowed."
        );
        assert_eq!(
            reason("cluster.routing.allocation.enable", "some"),
            "Illegal allocation.enable value [some]"
        );
        assert!(
            reason("cluster.routing.allocation.allow_rebalance", "often")
                .ends_with("\"default\" : \"indices_all_active\"\n}: often")
        );
        assert!(check_value("cluster.routing.allocation.allow_rebalance", "always").is_ok());
        assert!(check_value("index.write.wait_for_active_shards", "all").is_ok());
        assert!(check_value("index.write.wait_for_active_shards", "2").is_ok());
        assert_eq!(
            reason("index.write.wait_for_active_shards", "most"),
            "cannot parse ActiveShardCount[most]"
        );
    }

    #[test]
    fn kinds_are_read_off_registry_defaults() {
        assert!(matches!(
            kind_of("action.destructive_requires_name"),
            Kind::Bool
        ));
        assert!(matches!(
            kind_of("search.default_search_timeout"),
            Kind::Any
        ));
        assert!(matches!(
            kind_of("indices.breaker.total.limit"),
            Kind::MemorySize
        ));
        assert!(matches!(
            kind_of("cluster.info.update.timeout"),
            Kind::Time { min: None }
        ));
        assert!(matches!(kind_of("http.max_content_length"), Kind::Bytes));
        assert!(matches!(kind_of("action.auto_create_index"), Kind::Any));
    }

    #[test]
    fn only_settings_shoal_acts_on_are_honoured() {
        assert!(honoured_cluster_setting(DISK_HIGH));
        assert!(honoured_cluster_setting(
            "cluster.routing.allocation.exclude._name"
        ));
        assert!(honoured_cluster_setting("search.max_buckets"));
        assert!(!honoured_cluster_setting("indices.breaker.total.limit"));
        assert!(honoured_node_setting("thread_pool.write.queue_size"));
        assert!(!honoured_node_setting("thread_pool.analyze.queue_size"));
        assert!(recognised_node_setting("thread_pool.analyze.queue_size"));
        assert!(!recognised_node_setting("bogus.setting"));
        assert!(honoured_node_setting("node.attr.zone"));
        assert!(honoured_index_setting(
            "index.routing.allocation.require.zone"
        ));
        assert!(!honoured_index_setting("index.routing_partition_size"));
        assert!(!honoured_index_setting("index.analysis.analyzer.a.type"));
    }
}
