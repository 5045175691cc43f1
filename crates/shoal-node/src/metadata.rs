//! The node's view of index metadata (converted from the cluster state, which the Raft group
//! persists) and the node's own state file (`path.data/_state/node.json`: its id).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use shoal_mapping::Mapping;

use crate::error::{ApiError, ApiResult};
use crate::settings::FlatSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    Open,
    Close,
}

impl IndexState {
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Open => "open",
            IndexState::Close => "close",
        }
    }
}

/// An alias of one index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AliasMetadata {
    pub filter: Option<Value>,
    pub index_routing: Option<String>,
    pub search_routing: Option<String>,
    pub is_write_index: Option<bool>,
    pub is_hidden: Option<bool>,
}

impl AliasMetadata {
    pub fn from_json(body: &Value) -> ApiResult<AliasMetadata> {
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

    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        if let Some(f) = &self.filter {
            map.insert("filter".into(), f.clone());
        }
        if let Some(r) = &self.index_routing {
            map.insert("index_routing".into(), json!(r));
        }
        if let Some(r) = &self.search_routing {
            map.insert("search_routing".into(), json!(r));
        }
        if let Some(w) = self.is_write_index {
            map.insert("is_write_index".into(), json!(w));
        }
        if let Some(h) = self.is_hidden {
            map.insert("is_hidden".into(), json!(h));
        }
        Value::Object(map)
    }
}

fn value_to_string(value: &Value) -> String {
    value
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| value.to_string())
}

/// Everything known about one index.
#[derive(Debug, Clone)]
pub struct IndexMetadata {
    pub name: String,
    pub uuid: String,
    pub state: IndexState,
    /// Flat settings as given, plus `index.uuid`, `index.creation_date`, `index.provided_name`,
    /// `index.version.created`.
    pub settings: FlatSettings,
    pub mapping: Mapping,
    pub aliases: BTreeMap<String, AliasMetadata>,
    pub primary_terms: Vec<i64>,
    pub version: u64,
    pub mapping_version: u64,
    pub settings_version: u64,
    pub aliases_version: u64,
}

impl IndexMetadata {
    pub fn settings(&self) -> crate::settings::IndexSettings<'_> {
        crate::settings::IndexSettings(&self.settings)
    }

    pub fn creation_date(&self) -> i64 {
        self.settings
            .get("index.creation_date")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "uuid": self.uuid,
            "state": self.state.as_str(),
            "settings": self.settings,
            "mappings": self.mapping.to_json(),
            "aliases": self.aliases.iter().map(|(k, v)| (k.clone(), v.to_json())).collect::<Map<String, Value>>(),
            "primary_terms": self.primary_terms,
            "version": self.version,
            "mapping_version": self.mapping_version,
            "settings_version": self.settings_version,
            "aliases_version": self.aliases_version,
        })
    }

    pub fn from_json(value: &Value) -> ApiResult<IndexMetadata> {
        let str_field = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| ApiError::internal(format!("index metadata lacks [{k}]")))
        };
        let settings: FlatSettings = value
            .get("settings")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let aliases = value
            .get("aliases")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), AliasMetadata::from_json(v)?)))
                    .collect::<ApiResult<BTreeMap<_, _>>>()
            })
            .transpose()?
            .unwrap_or_default();
        let u64_field = |k: &str| value.get(k).and_then(Value::as_u64).unwrap_or(1);
        Ok(IndexMetadata {
            name: str_field("name")?,
            uuid: str_field("uuid")?,
            state: if value.get("state").and_then(Value::as_str) == Some("close") {
                IndexState::Close
            } else {
                IndexState::Open
            },
            settings,
            mapping: Mapping::from_json(value.get("mappings").unwrap_or(&Value::Null))?,
            aliases,
            primary_terms: value
                .get("primary_terms")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default(),
            version: u64_field("version"),
            mapping_version: u64_field("mapping_version"),
            settings_version: u64_field("settings_version"),
            aliases_version: u64_field("aliases_version"),
        })
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
