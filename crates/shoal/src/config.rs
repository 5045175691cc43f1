//! Settings loading (`config/shoal.yml`, then `-E` overrides) and logging setup.

use std::path::Path;

use serde_json::Value;
use shoal_node::settings::FlatSettings;

/// Loads settings: the YAML file (nested or dotted keys), then `-E key=value` on top.
pub fn load(config: Option<&Path>, overrides: &[String]) -> Result<FlatSettings, String> {
    let mut settings = FlatSettings::new();
    let default_path = Path::new("config/shoal.yml");
    let path = config.or_else(|| default_path.exists().then_some(default_path));
    if let Some(path) = path {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let yaml: serde_yaml::Value = serde_yaml::from_str(&text)
            .map_err(|e| format!("invalid YAML in {}: {e}", path.display()))?;
        let json: Value = serde_json::to_value(yaml)
            .map_err(|e| format!("unsupported YAML in {}: {e}", path.display()))?;
        if !json.is_null() {
            settings =
                shoal_node::settings::flatten_settings(&json, false).map_err(|e| e.reason)?;
        }
    }
    for item in overrides {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("setting [{item}] must be in the form key=value"));
        };
        let value = if value.starts_with('[') && value.ends_with(']') {
            Value::Array(
                value[1..value.len() - 1]
                    .split(',')
                    .map(|v| Value::String(v.trim().to_string()))
                    .filter(|v| v.as_str() != Some(""))
                    .collect(),
            )
        } else {
            Value::String(value.to_string())
        };
        settings.insert(key.trim().to_string(), value);
    }
    Ok(settings)
}

/// Logs to stderr, and also to `<path.logs>/<cluster.name>.log` when `path.logs` is set.
pub fn init_logging(settings: &FlatSettings) -> Result<(), String> {
    use tracing_subscriber::fmt;
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tantivy=warn,openraft=warn"));
    let stderr = fmt::layer().with_writer(std::io::stderr).with_target(false);
    let file_layer = match settings.get("path.logs").and_then(Value::as_str) {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create path.logs {dir}: {e}"))?;
            let cluster = settings
                .get("cluster.name")
                .and_then(Value::as_str)
                .unwrap_or("shoal");
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(Path::new(dir).join(format!("{cluster}.log")))
                .map_err(|e| e.to_string())?;
            Some(
                fmt::layer()
                    .with_writer(std::sync::Mutex::new(file))
                    .with_ansi(false)
                    .with_target(false),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(file_layer)
        .try_init()
        .map_err(|e| e.to_string())
}

/// The memory all shards' tantivy writers share: OpenSearch's `indices.memory.index_buffer_size`
/// (default 10%). A percentage is of the machine's RAM (OpenSearch: of the JVM heap, itself
/// usually half the RAM), kept within `indices.memory.min_index_buffer_size` (48mb) and
/// `indices.memory.max_index_buffer_size` (unbounded in OpenSearch; 1gb here unless set, as
/// Shoal's share of RAM would otherwise be twice OpenSearch's).
pub fn index_buffer_size(settings: &FlatSettings) -> Result<usize, String> {
    let text = |key: &str| {
        settings
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let bytes = |key: &str, text: &str| {
        shoal_node::settings::parse_byte_size(text)
            .map_err(|e| format!("failed to parse setting [{key}] with value [{text}]: {e}"))
    };
    let key = "indices.memory.index_buffer_size";
    let value = text(key).unwrap_or_else(|| "10%".to_string());
    let Some(percent) = value.trim().strip_suffix('%') else {
        return Ok(bytes(key, &value)? as usize);
    };
    let percent: f64 = percent
        .trim()
        .parse()
        .ok()
        .filter(|p| (0.0..=100.0).contains(p))
        .ok_or_else(|| format!("failed to parse setting [{key}] with value [{value}]"))?;
    let min_key = "indices.memory.min_index_buffer_size";
    let max_key = "indices.memory.max_index_buffer_size";
    let min = bytes(min_key, &text(min_key).unwrap_or_else(|| "48mb".into()))?;
    let max = match text(max_key) {
        Some(max) => bytes(max_key, &max)?,
        None => 1024 * 1024 * 1024,
    };
    let of_ram = (shoal_node::pressure::indexing::memory_budget() as f64 * percent / 100.0) as u64;
    Ok(of_ram.max(min).min(max.max(min)) as usize)
}
