//! Settings: flattening OpenSearch settings bodies, validating index settings, and typed
//! access to the ones Shoal acts on.

pub mod behaviour;
mod honoured;
mod registry;
pub mod typed;
mod values;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};
use shoal_codec::SourceCodec;
use shoal_translog::Durability;

pub use registry::{registry, SettingDef};
pub use values::{format_bytes, format_date_millis, format_time, parse_byte_size, parse_time};

use crate::error::{ApiError, ApiResult};

/// Flat settings: `index.number_of_shards` → `"1"`. Scalars are kept as strings, as
/// OpenSearch returns them; lists stay JSON arrays of strings.
pub type FlatSettings = BTreeMap<String, Value>;

/// Flattens a settings body (`{"index": {"refresh_interval": "1s"}}`, `{"number_of_shards": 1}`,
/// or flat keys) and prefixes keys with `index.` when `index_scope` is set.
pub fn flatten_settings(body: &Value, index_scope: bool) -> ApiResult<FlatSettings> {
    let mut flat = FlatSettings::new();
    match body {
        Value::Object(map) => flatten_into("", map, &mut flat),
        Value::Null => {}
        other => {
            return Err(ApiError::parse_exception(format!(
                "Failed to load settings from [{other}]"
            )))
        }
    }
    if !index_scope {
        return Ok(flat);
    }
    Ok(flat
        .into_iter()
        .map(|(k, v)| {
            if k.starts_with("index.") {
                (k, v)
            } else {
                (format!("index.{k}"), v)
            }
        })
        .collect())
}

fn flatten_into(prefix: &str, map: &Map<String, Value>, out: &mut FlatSettings) {
    for (key, value) in map {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Object(inner) => flatten_into(&full, inner, out),
            Value::Array(items) => {
                out.insert(
                    full,
                    Value::Array(items.iter().map(scalar_to_setting).collect()),
                );
            }
            other => {
                out.insert(full, scalar_to_setting(other));
            }
        }
    }
}

fn scalar_to_setting(value: &Value) -> Value {
    match value {
        Value::String(_) | Value::Null => value.clone(),
        Value::Array(_) | Value::Object(_) => Value::String(value.to_string()),
        other => Value::String(other.to_string()),
    }
}

/// Renders flat settings as OpenSearch's nested form (`flat_settings=false`).
pub fn nest_settings(flat: &FlatSettings) -> Value {
    let mut root = Map::new();
    for (key, value) in flat {
        let parts: Vec<&str> = key.split('.').collect();
        insert_nested(&mut root, &parts, value.clone());
    }
    Value::Object(root)
}

fn insert_nested(map: &mut Map<String, Value>, parts: &[&str], value: Value) {
    if parts.len() == 1 {
        // A leaf that collides with an object (`index.codec` and `index.codec.compression_level`)
        // is kept under the object only in flat form; nested form keeps both like OpenSearch.
        match map.get_mut(parts[0]) {
            Some(Value::Object(existing)) => {
                existing.insert(String::new(), value);
            }
            _ => {
                map.insert(parts[0].to_string(), value);
            }
        }
        return;
    }
    let entry = map
        .entry(parts[0].to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        let leaf = entry.take();
        let mut object = Map::new();
        object.insert(String::new(), leaf);
        *entry = Value::Object(object);
    }
    if let Value::Object(inner) = entry {
        insert_nested(inner, &parts[1..], value);
    }
}

/// Drops the `""` keys `insert_nested` uses for leaf/object collisions by renaming them
/// to the joined flat key, as OpenSearch does (`"codec": "zstd", "codec.compression_level"` is
/// rendered `"codec": {..}` — we keep the leaf at `codec` and the child at `codec.compression_level`).
pub fn nest_settings_opensearch(flat: &FlatSettings) -> Value {
    let mut value = nest_settings(flat);
    fix_collisions(&mut value);
    value
}

fn fix_collisions(value: &mut Value) {
    let Value::Object(map) = value else { return };
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let Some(Value::Object(inner)) = map.get_mut(&key) else {
            continue;
        };
        if let Some(leaf) = inner.remove("") {
            let children = std::mem::take(inner);
            map.insert(key.clone(), leaf);
            for (child, child_value) in flatten_children(&children) {
                map.insert(format!("{key}.{child}"), child_value);
            }
        } else if let Some(v) = map.get_mut(&key) {
            fix_collisions(v);
        }
    }
}

fn flatten_children(map: &Map<String, Value>) -> Vec<(String, Value)> {
    let mut flat = FlatSettings::new();
    flatten_into("", map, &mut flat);
    flat.into_iter().collect()
}

/// Validates index settings given at creation; returns them normalized.
pub fn validate_new_index_settings(settings: &FlatSettings) -> ApiResult<()> {
    for (key, value) in settings {
        check_known_index_setting(key)?;
        if !value.is_null() {
            check_honoured_index_setting(key, value)?;
            validate_value(key, value)?;
        }
    }
    codec_of(settings)?;
    Ok(())
}

/// Validates an update of index settings on an existing index.
pub fn validate_settings_update(
    update: &FlatSettings,
    index_name: &str,
    index_uuid: &str,
    open: bool,
) -> ApiResult<()> {
    let mut non_dynamic = Vec::new();
    for (key, value) in update {
        let def = check_known_index_setting(key)?;
        let is_final = def.is_final
            || def.private
            || key == "index.number_of_shards"
            || key == "index.number_of_routing_shards";
        // On open indices OpenSearch reports final settings as non-dynamic ones.
        if is_final && !open {
            return Err(ApiError::bad_request(format!(
                "final index setting [{key}], not updateable"
            )));
        }
        if !def.dynamic {
            non_dynamic.push(key.clone());
        }
        if !value.is_null() {
            check_honoured_index_setting(key, value)?;
            validate_value(key, value)?;
        }
    }
    if open && !non_dynamic.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Can't update non dynamic settings [[{}]] for open indices [[{index_name}/{index_uuid}]]",
            non_dynamic.join(", ")
        )));
    }
    Ok(())
}

fn check_known_index_setting(key: &str) -> ApiResult<&'static SettingDef> {
    match registry().get(key) {
        Some(def) if def.index_scope => Ok(def),
        _ => Err(ApiError::bad_request(format!(
            "unknown setting [{key}] please check that any required plugins are installed, or check the breaking changes documentation for removed settings"
        ))),
    }
}

fn check_honoured_index_setting(key: &str, value: &Value) -> ApiResult<()> {
    if typed::honoured_index_setting(key) {
        Ok(())
    } else if behaviour::is_fixed(key) {
        let text = setting_text(value).unwrap_or_else(|| value.to_string());
        behaviour::check_fixed(key, &text)
    } else {
        Err(typed::not_supported(key))
    }
}

fn failed_to_parse(key: &str, value: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Failed to parse value [{value}] for setting [{key}]"
    ))
}

fn validate_value(key: &str, value: &Value) -> ApiResult<()> {
    let text = value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string());
    match key {
        behaviour::DEFAULT_FIELD => behaviour::check_default_field(value),
        shoal_allocation::auto_expand::SETTING => shoal_allocation::auto_expand::parse(&text)
            .map(|_| ())
            .map_err(ApiError::bad_request),
        "index.number_of_shards"
        | "index.number_of_replicas"
        | "index.max_result_window"
        | "index.number_of_routing_shards" => check_count(key, &text),
        "index.refresh_interval"
        | "index.translog.sync_interval"
        | "index.gc_deletes"
        | "index.soft_deletes.retention_lease.period"
        | "index.unassigned.node_left.delayed_timeout" => check_time(key, &text),
        "index.translog.flush_threshold_size" | "index.translog.generation_threshold_size" => {
            parse_byte_size(&text).map(|_| ()).map_err(|reason| {
                ApiError::parse_exception(format!("failed to parse setting [{key}] with value [{text}] as a size in bytes: {reason}"))
            })
        }
        "index.translog.durability" | "index.shard.check_on_startup" | "index.replication.type" => {
            check_enum(key, &text)
        }
        "index.blocks.read_only"
        | "index.blocks.write"
        | "index.blocks.read"
        | "index.blocks.metadata"
        | "index.blocks.read_only_allow_delete"
        | "index.hidden" => check_bool(&text),
        _ => typed::check_value(key, &text),
    }
}

/// A shard, replica or window count: an integer, at least 0 for replicas and 1 otherwise;
/// at most 1024 shards.
fn check_count(key: &str, text: &str) -> ApiResult<()> {
    let min = if key == "index.number_of_replicas" {
        0
    } else {
        1
    };
    let n: i64 = text.parse().map_err(|_| failed_to_parse(key, text))?;
    if n < min {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be >= {min}"
        )));
    }
    if key == "index.number_of_shards" && n > 1024 {
        return Err(ApiError::bad_request(format!(
            "Failed to parse value [{text}] for setting [{key}] must be <= 1024"
        )));
    }
    Ok(())
}

/// A time value; the translog's sync interval is at least 100ms.
fn check_time(key: &str, text: &str) -> ApiResult<()> {
    let parsed = parse_time(text).map_err(|reason| {
        ApiError::bad_request(format!(
            "failed to parse setting [{key}] with value [{text}] as a time value: {reason}"
        ))
    })?;
    if key == "index.translog.sync_interval"
        && parsed.is_some_and(|d| d < Duration::from_millis(100))
    {
        return Err(ApiError::bad_request(format!(
            "failed to parse value [{text}] for setting [{key}], must be >= [100ms]"
        )));
    }
    Ok(())
}

/// One of an enumeration's names, refused with the message of the Java enum OpenSearch parses.
fn check_enum(key: &str, text: &str) -> ApiResult<()> {
    let known = match key {
        "index.translog.durability" => text.parse::<Durability>().is_ok(),
        "index.shard.check_on_startup" => {
            shoal_engine::store::CheckOnStartup::parse(text).is_some()
        }
        _ => matches!(text, "DOCUMENT" | "SEGMENT"),
    };
    if known {
        return Ok(());
    }
    Err(ApiError::bad_request(match key {
        "index.translog.durability" => format!(
            "No enum constant org.opensearch.index.translog.Translog.Durability.{}",
            text.to_uppercase()
        ),
        "index.shard.check_on_startup" => format!(
            "unknown value for [index.shard.check_on_startup] must be one of [true, false, checksum] but was: {text}"
        ),
        _ => format!(
            "No enum constant org.opensearch.indices.replication.common.ReplicationType.{text}"
        ),
    }))
}

fn check_bool(text: &str) -> ApiResult<()> {
    if matches!(text, "true" | "false") {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "Failed to parse value [{text}] as only [true] or [false] are allowed."
    )))
}

/// Validates `PUT /_cluster/settings`: every key known, dynamic and honoured by Shoal, every
/// value of its type and range, and the disk watermarks consistent once the update applies.
/// `effective` gives a setting's value before the update.
pub fn validate_cluster_update(
    persistent: &FlatSettings,
    transient: &FlatSettings,
    effective: impl Fn(&str) -> Option<String>,
) -> ApiResult<()> {
    let scoped = persistent
        .iter()
        .map(|kv| ("persistent", kv))
        .chain(transient.iter().map(|kv| ("transient", kv)));
    for (scope, (key, value)) in scoped {
        // `"cluster.routing.*": null` resets a group; wildcards are not validated (OpenSearch).
        if value.is_null() && key.ends_with('*') {
            continue;
        }
        let def = registry().get(key).filter(|d| !d.index_scope);
        if def.is_none() && !typed::recognised_node_setting(key) {
            return Err(ApiError::bad_request(format!(
                "{scope} setting [{key}], not recognized"
            )));
        }
        // Settings registered at run time (`thread_pool.*`) are all static node settings.
        if !def.is_some_and(|d| d.dynamic) {
            return Err(ApiError::bad_request(format!(
                "{scope} setting [{key}], not dynamically updateable"
            )));
        }
        // A reset is always fine: nothing is stored.
        let Some(text) = setting_text(value) else {
            continue;
        };
        if !typed::honoured_cluster_setting(key) {
            return Err(typed::not_supported(key));
        }
        typed::check_value(key, &text)?;
    }
    let after = |key: &str| -> Option<String> {
        for update in [transient, persistent] {
            if let Some(value) = update.get(key) {
                return setting_text(value)
                    .or_else(|| registry().get(key).map(|d| d.default.clone()));
            }
        }
        effective(key)
    };
    let touched = [typed::DISK_LOW, typed::DISK_HIGH, typed::DISK_FLOOD]
        .iter()
        .any(|k| persistent.contains_key(*k) || transient.contains_key(*k));
    if touched {
        let get = |k: &str| after(k).unwrap_or_default();
        typed::check_watermarks(
            &get(typed::DISK_LOW),
            &get(typed::DISK_HIGH),
            &get(typed::DISK_FLOOD),
        )?;
    }
    Ok(())
}

/// Validates the settings a node is started with (`config/shoal.yml`, `-E`): unknown
/// settings stop the start as in OpenSearch, and so do settings Shoal would ignore.
/// Gives a new index the node's `cluster.indices.replication.strategy` when it names no
/// replication type, and refuses one that names another type while
/// `cluster.index.restrict.replication.type` is set (OpenSearch's words).
pub fn apply_replication_strategy(node: &FlatSettings, index: &mut FlatSettings) -> ApiResult<()> {
    let text = |key: &str| node.get(key).and_then(setting_text);
    let strategy = text(typed::REPLICATION_STRATEGY)
        .unwrap_or_else(|| "DOCUMENT".into())
        .to_ascii_uppercase();
    let restricted = text(typed::RESTRICT_REPLICATION_TYPE).is_some_and(|v| v == "true");
    let key = "index.replication.type";
    match index.get(key).and_then(setting_text) {
        Some(given) if restricted && !given.eq_ignore_ascii_case(&strategy) => {
            Err(ApiError::bad_request(format!(
                "index setting [{key}] is not allowed to be set as [{}=true]",
                typed::RESTRICT_REPLICATION_TYPE
            )))
        }
        Some(_) => Ok(()),
        None => {
            index.insert(key.to_string(), Value::String(strategy));
            Ok(())
        }
    }
}

pub fn validate_node_settings(settings: &FlatSettings) -> ApiResult<()> {
    for (key, value) in settings {
        if key.starts_with("index.") {
            check_known_index_setting(key)?;
            if !value.is_null() {
                check_honoured_index_setting(key, value)?;
                validate_value(key, value)?;
            }
            continue;
        }
        if !typed::recognised_node_setting(key) {
            return Err(typed::unknown_setting(key));
        }
        if !typed::honoured_node_setting(key) {
            return Err(typed::not_supported(key));
        }
        if let Some(text) = setting_text(value).filter(|_| !value.is_array()) {
            typed::check_value(key, &text)?;
        }
    }
    let value = |k: &str| {
        settings
            .get(k)
            .and_then(setting_text)
            .or_else(|| registry().get(k).map(|d| d.default.clone()))
            .unwrap_or_default()
    };
    typed::check_watermarks(
        &value(typed::DISK_LOW),
        &value(typed::DISK_HIGH),
        &value(typed::DISK_FLOOD),
    )
}

fn setting_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The `_source` codec chosen by `index.codec` and `index.codec.compression_level`.
pub fn codec_of(settings: &FlatSettings) -> ApiResult<SourceCodec> {
    let codec = settings.get("index.codec").and_then(Value::as_str);
    let level = match settings
        .get("index.codec.compression_level")
        .and_then(Value::as_str)
    {
        Some(text) => Some(
            text.parse::<i64>()
                .map_err(|_| failed_to_parse("index.codec.compression_level", text))?,
        ),
        None => None,
    };
    SourceCodec::from_optional_settings(codec, level)
        .map_err(|e| ApiError::new(400, e.error_type(), e.message()))
}

/// Typed view of an index's settings.
#[derive(Debug, Clone)]
pub struct IndexSettings<'a>(pub &'a FlatSettings);

impl IndexSettings<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn get_or_default(&self, key: &str) -> String {
        self.get(key)
            .map(str::to_string)
            .or_else(|| registry().get(key).map(|d| d.default.clone()))
            .unwrap_or_default()
    }

    pub fn number_of_shards(&self) -> usize {
        self.get_or_default("index.number_of_shards")
            .parse()
            .unwrap_or(1)
    }

    /// `index.write.wait_for_active_shards`: a count or `all`.
    pub fn write_wait_for_active_shards(&self) -> String {
        self.get_or_default("index.write.wait_for_active_shards")
    }

    pub fn number_of_replicas(&self) -> usize {
        self.get_or_default("index.number_of_replicas")
            .parse()
            .unwrap_or(1)
    }

    /// `None` when refresh is disabled (`-1`).
    pub fn refresh_interval(&self) -> Option<Duration> {
        parse_time(&self.get_or_default("index.refresh_interval"))
            .ok()
            .flatten()
    }

    pub fn durability(&self) -> Durability {
        self.get_or_default("index.translog.durability")
            .parse()
            .unwrap_or(Durability::Request)
    }

    /// `index.soft_deletes.retention_lease.period`: how long the history leased to a node
    /// that no longer holds a copy is kept.
    pub fn retention_lease_period(&self) -> Duration {
        parse_time(&self.get_or_default("index.soft_deletes.retention_lease.period"))
            .ok()
            .flatten()
            .unwrap_or(Duration::from_secs(12 * 3600))
    }

    /// `index.global_checkpoint_sync.interval`: how often an idle primary tells its copies
    /// the global checkpoint.
    pub fn global_checkpoint_sync_interval(&self) -> Duration {
        parse_time(&self.get_or_default("index.global_checkpoint_sync.interval"))
            .ok()
            .flatten()
            .unwrap_or(Duration::from_secs(30))
    }

    pub fn sync_interval(&self) -> Duration {
        parse_time(&self.get_or_default("index.translog.sync_interval"))
            .ok()
            .flatten()
            .unwrap_or(Duration::from_secs(5))
    }

    pub fn flush_threshold_size(&self) -> u64 {
        parse_byte_size(&self.get_or_default("index.translog.flush_threshold_size"))
            .unwrap_or(512 * 1024 * 1024)
    }

    pub fn max_result_window(&self) -> usize {
        self.get_or_default("index.max_result_window")
            .parse()
            .unwrap_or(10_000)
    }

    pub fn gc_deletes(&self) -> Duration {
        parse_time(&self.get_or_default("index.gc_deletes"))
            .ok()
            .flatten()
            .unwrap_or(Duration::from_secs(60))
    }

    /// `index.replication.type: SEGMENT`: replicas copy the primary's segments.
    /// `index.remote_store.enabled`: segments and translog also go to the node's repositories.
    pub fn remote_store(&self) -> bool {
        self.get_or_default("index.remote_store.enabled") == "true"
    }

    pub fn segment_replication(&self) -> bool {
        self.get_or_default("index.replication.type")
            .eq_ignore_ascii_case("SEGMENT")
    }

    /// `index.shard.check_on_startup` (Shoal's default is `checksum`, see ARCHITECTURE.md).
    pub fn check_on_startup(&self) -> shoal_engine::store::CheckOnStartup {
        shoal_engine::store::CheckOnStartup::parse(
            &self.get_or_default("index.shard.check_on_startup"),
        )
        .unwrap_or_default()
    }

    pub fn codec(&self) -> SourceCodec {
        codec_of(self.0).unwrap_or_default()
    }

    pub fn is_true(&self, key: &str) -> bool {
        self.get(key) == Some("true")
    }

    /// `index.number_of_routing_shards`, defaulting like OpenSearch so that the index can be
    /// split by powers of two up to 1024 shards.
    pub fn routing_num_shards(&self) -> usize {
        if let Some(n) = self
            .get("index.number_of_routing_shards")
            .and_then(|v| v.parse().ok())
        {
            return n;
        }
        default_routing_num_shards(self.number_of_shards())
    }
}

/// OpenSearch's `MetadataCreateIndexService.calculateNumRoutingShards` for new indices.
pub fn default_routing_num_shards(number_of_shards: usize) -> usize {
    let shards = number_of_shards.max(1) as u32;
    let log2_max = 10u32;
    let log2_shards = 32 - (shards - 1).leading_zeros();
    let splits = log2_max.saturating_sub(log2_shards);
    (shards as usize) << splits
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flat(pairs: &[(&str, &str)]) -> FlatSettings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect()
    }

    #[test]
    fn new_indices_take_the_node_replication_strategy_and_a_restricted_node_refuses_others() {
        let node = flat(&[("cluster.indices.replication.strategy", "segment")]);
        let mut index = FlatSettings::new();
        apply_replication_strategy(&node, &mut index).unwrap();
        assert_eq!(index["index.replication.type"], json!("SEGMENT"));

        let mut chosen = flat(&[("index.replication.type", "DOCUMENT")]);
        apply_replication_strategy(&node, &mut chosen).unwrap();
        assert_eq!(chosen["index.replication.type"], json!("DOCUMENT"));

        let restricted = flat(&[
            ("cluster.indices.replication.strategy", "SEGMENT"),
            ("cluster.index.restrict.replication.type", "true"),
        ]);
        let error = apply_replication_strategy(&restricted, &mut chosen).unwrap_err();
        assert_eq!(error.status, 400);
        assert_eq!(
            error.reason,
            "index setting [index.replication.type] is not allowed to be set as [cluster.index.restrict.replication.type=true]"
        );
        let mut default = FlatSettings::new();
        apply_replication_strategy(&FlatSettings::new(), &mut default).unwrap();
        assert_eq!(default["index.replication.type"], json!("DOCUMENT"));
    }

    #[test]
    fn nested_and_short_forms_flatten_to_index_keys() {
        let flat = flatten_settings(
            &json!({"number_of_shards": 3, "index": {"refresh_interval": "5s"}}),
            true,
        )
        .unwrap();
        assert_eq!(flat.get("index.number_of_shards"), Some(&json!("3")));
        assert_eq!(flat.get("index.refresh_interval"), Some(&json!("5s")));
    }

    #[test]
    fn unknown_index_settings_are_refused() {
        let flat = flatten_settings(&json!({"index.bogus": 1}), true).unwrap();
        let err = validate_new_index_settings(&flat).unwrap_err();
        assert!(
            err.reason.starts_with("unknown setting [index.bogus]"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn static_settings_refused_on_open_index() {
        let flat = flatten_settings(&json!({"index.codec": "best_compression"}), true).unwrap();
        let err = validate_settings_update(&flat, "i", "u", true).unwrap_err();
        assert_eq!(
            err.reason,
            "Can't update non dynamic settings [[index.codec]] for open indices [[i/u]]"
        );
        assert!(validate_settings_update(&flat, "i", "u", false).is_ok());
        let flat = flatten_settings(&json!({"index.number_of_shards": 2}), true).unwrap();
        assert_eq!(
            validate_settings_update(&flat, "i", "u", false)
                .unwrap_err()
                .reason,
            "final index setting [index.number_of_shards], not updateable"
        );
    }

    #[test]
    fn routing_shards_default_matches_opensearch() {
        assert_eq!(default_routing_num_shards(1), 1024);
        assert_eq!(default_routing_num_shards(3), 768);
        assert_eq!(default_routing_num_shards(5), 640);
    }

    #[test]
    fn nested_rendering_keeps_leaf_and_child() {
        let flat: FlatSettings = [
            ("index.codec".to_string(), json!("zstd")),
            ("index.codec.compression_level".to_string(), json!("3")),
        ]
        .into();
        assert_eq!(
            nest_settings_opensearch(&flat),
            json!({"index": {"codec": "zstd", "codec.compression_level": "3"}})
        );
    }
}
