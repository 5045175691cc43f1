//! The node's own settings: `config/shoal.yml` and `-E key=value`, as the node starts with them.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::settings::{self, FlatSettings};

/// How long a metadata change may wait for the cluster manager (OpenSearch's
/// `cluster_manager_timeout` default).
pub const CLUSTER_MANAGER_TIMEOUT: Duration = Duration::from_secs(30);

/// Node settings, from `config/shoal.yml` and `-E key=value`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub cluster_name: String,
    pub node_name: String,
    pub data_path: PathBuf,
    pub http_host: String,
    pub http_port: u16,
    pub transport_port: u16,
    /// Every setting given, flat (for `_nodes` and index defaults such as `index.codec`).
    pub settings: FlatSettings,
}

impl NodeConfig {
    pub fn from_settings(settings: FlatSettings) -> ApiResult<NodeConfig> {
        settings::validate_node_settings(&settings)?;
        let get = |k: &str| settings.get(k).and_then(Value::as_str).map(str::to_string);
        let port = |k: &str, default: u16| -> ApiResult<u16> {
            match get(k) {
                Some(p) => p.parse().map_err(|_| {
                    ApiError::bad_request(format!("Failed to parse value [{p}] for setting [{k}]"))
                }),
                None => Ok(default),
            }
        };
        Ok(NodeConfig {
            cluster_name: get("cluster.name").unwrap_or_else(|| "shoal".to_string()),
            node_name: get("node.name").unwrap_or_else(|| hostname()),
            data_path: PathBuf::from(get("path.data").unwrap_or_else(|| "data".to_string())),
            http_host: get("http.host")
                .or_else(|| get("network.host"))
                .unwrap_or_else(|| "127.0.0.1".to_string()),
            http_port: port("http.port", 9200)?,
            transport_port: port("transport.port", 9300)?,
            settings,
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.get(key).and_then(Value::as_str)
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "shoal-node".to_string())
}
