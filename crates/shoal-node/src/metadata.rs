//! The node's reading of index metadata (the cluster state's own type, which the Raft group
//! persists) and the node's own state file (`path.data/_state/node.json`: its id).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::settings::IndexSettings;

/// The cluster state's types are the node's: one index metadata type, shared with the applied
/// state (see `IndexService`, which also keeps the mapping parsed from it).
pub use shoal_state::{AliasMetadata, IndexMetadata, IndexState};

/// Parses an alias body of a request (`PUT /{index}/_alias/{name}`, `_aliases` actions, create
/// index): `routing` sets both routings, an unknown field is refused.
pub fn parse_alias(body: &Value) -> ApiResult<AliasMetadata> {
    let mut alias = AliasMetadata::default();
    let Some(map) = body.as_object() else {
        return Ok(alias);
    };
    for (key, value) in map {
        match key.as_str() {
            "filter" => alias.filter = Some(value.clone()),
            "routing" => {
                let r = value_to_string(value);
                alias.index_routing = Some(r.clone());
                alias.search_routing = Some(r);
            }
            "index_routing" => alias.index_routing = Some(value_to_string(value)),
            "search_routing" => alias.search_routing = Some(value_to_string(value)),
            "is_write_index" => alias.is_write_index = value.as_bool(),
            "is_hidden" => alias.is_hidden = value.as_bool(),
            other => {
                return Err(ApiError::parsing(format!(
                    "[aliases] unknown field [{other}]"
                )))
            }
        }
    }
    Ok(alias)
}

fn value_to_string(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

/// The node's typed reading of the cluster state's index metadata (the settings registry and
/// the engine's types live in this crate, not in `shoal-state`).
pub trait IndexMetadataExt {
    /// Typed accessors over the flat settings.
    fn settings(&self) -> IndexSettings<'_>;
    /// `index.creation_date` in milliseconds (0 when absent).
    fn creation_date(&self) -> i64;
}

impl IndexMetadataExt for IndexMetadata {
    fn settings(&self) -> IndexSettings<'_> {
        IndexSettings(&self.settings)
    }

    fn creation_date(&self) -> i64 {
        self.settings
            .get("index.creation_date")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

/// Where a node keeps its files.
#[derive(Debug, Clone)]
pub struct NodePaths {
    pub data: PathBuf,
}

impl NodePaths {
    pub fn state_dir(&self) -> PathBuf {
        self.data.join("_state")
    }

    pub fn indices_dir(&self) -> PathBuf {
        self.data.join("indices")
    }

    pub fn index_dir(&self, uuid: &str) -> PathBuf {
        self.indices_dir().join(uuid)
    }

    pub fn shard_dir(&self, uuid: &str, shard: usize) -> PathBuf {
        self.index_dir(uuid).join(shard.to_string())
    }

    pub fn load_node_state(&self) -> ApiResult<Option<Value>> {
        match std::fs::read(self.state_dir().join("node.json")) {
            Ok(bytes) => {
                Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
                    ApiError::internal(format!("corrupt node state: {e}"))
                })?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub fn persist_node_state(&self, state: &Value) -> ApiResult<()> {
        write_atomically(
            &self.state_dir().join("node.json"),
            &serde_json::to_vec_pretty(state).expect("json"),
        )
    }
}

/// Writes a file so that a crash leaves either the old or the new content.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> ApiResult<()> {
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}
