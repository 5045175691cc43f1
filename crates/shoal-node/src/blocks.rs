//! Cluster blocks, as OpenSearch derives them from the metadata (`ClusterBlocks`): the
//! `index.blocks.*` settings of each index and the `cluster.blocks.*` cluster settings. Every
//! entry point asks one question here (`check_indices(level, names)`, `check_global(level)`,
//! `check_delete_indices(names)`) before it acts; the answer is OpenSearch's
//! `cluster_block_exception` with the same ids, texts and statuses.

use std::sync::Arc;

use shoal_state::ClusterState;

use crate::error::{ApiError, ApiResult};

/// What an operation does, as far as blocks are concerned (`ClusterBlockLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockLevel {
    Read,
    Write,
    MetadataRead,
    MetadataWrite,
    CreateIndex,
}

/// One block (`ClusterBlock`): id, description, status and the levels it blocks.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    pub id: u32,
    pub description: &'static str,
    pub status: u16,
    levels: &'static [BlockLevel],
    /// Deleting the index is still allowed (it frees disk).
    pub allow_release_resources: bool,
    /// The setting that puts the block in place.
    pub setting: &'static str,
}

impl Block {
    fn blocks(&self, level: BlockLevel) -> bool {
        self.levels.contains(&level)
    }

    fn describe(&self) -> String {
        format!(
            "{}/{}/{}",
            crate::error::status_name(self.status),
            self.id,
            self.description
        )
    }
}

use BlockLevel::*;

pub const INDEX_READ_ONLY: Block = Block {
    id: 5,
    description: "index read-only (api)",
    status: 403,
    levels: &[Write, MetadataWrite],
    allow_release_resources: false,
    setting: "index.blocks.read_only",
};
pub const INDEX_READ: Block = Block {
    id: 7,
    description: "index read (api)",
    status: 403,
    levels: &[Read],
    allow_release_resources: false,
    setting: "index.blocks.read",
};
pub const INDEX_WRITE: Block = Block {
    id: 8,
    description: "index write (api)",
    status: 403,
    levels: &[Write],
    allow_release_resources: false,
    setting: "index.blocks.write",
};
pub const INDEX_METADATA: Block = Block {
    id: 9,
    description: "index metadata (api)",
    status: 403,
    levels: &[MetadataWrite, MetadataRead],
    allow_release_resources: false,
    setting: "index.blocks.metadata",
};
pub const INDEX_READ_ONLY_ALLOW_DELETE: Block = Block {
    id: 12,
    description:
        "disk usage exceeded flood-stage watermark, index has read-only-allow-delete block",
    status: 429,
    levels: &[MetadataWrite, Write],
    allow_release_resources: true,
    setting: "index.blocks.read_only_allow_delete",
};
pub const CLUSTER_READ_ONLY: Block = Block {
    id: 6,
    description: "cluster read-only (api)",
    status: 403,
    levels: &[Write, MetadataWrite],
    allow_release_resources: false,
    setting: "cluster.blocks.read_only",
};
pub const CLUSTER_CREATE_INDEX: Block = Block {
    id: 10,
    description: "cluster create-index blocked (api)",
    status: 403,
    levels: &[CreateIndex],
    allow_release_resources: false,
    setting: "cluster.blocks.create_index",
};
pub const CLUSTER_READ_ONLY_ALLOW_DELETE: Block = Block {
    id: 13,
    description: "cluster read-only / allow delete (api)",
    status: 403,
    levels: &[Write, MetadataWrite],
    allow_release_resources: true,
    setting: "cluster.blocks.read_only_allow_delete",
};

/// In id order, so a message naming several blocks is stable.
const INDEX_BLOCKS: [&Block; 5] = [
    &INDEX_READ_ONLY,
    &INDEX_READ,
    &INDEX_WRITE,
    &INDEX_METADATA,
    &INDEX_READ_ONLY_ALLOW_DELETE,
];
const GLOBAL_BLOCKS: [&Block; 3] = [
    &CLUSTER_READ_ONLY,
    &CLUSTER_CREATE_INDEX,
    &CLUSTER_READ_ONLY_ALLOW_DELETE,
];

/// The blocks of one cluster state. Index blocks are read on demand, so a check costs a few
/// lookups for the indices it names, whatever the number of indices.
pub struct ClusterBlocks {
    state: Arc<ClusterState>,
    global: Vec<&'static Block>,
}

impl ClusterBlocks {
    /// `node_setting` supplies a cluster setting the state does not hold (the node's own
    /// configuration), as `NodeCore::cluster_setting` does.
    pub fn new(state: Arc<ClusterState>, node_setting: impl Fn(&str) -> Option<String>) -> Self {
        let global = GLOBAL_BLOCKS
            .into_iter()
            .filter(|b| {
                state
                    .settings()
                    .get(b.setting)
                    .or_else(|| node_setting(b.setting))
                    .is_some_and(|v| v == "true")
            })
            .collect();
        ClusterBlocks { state, global }
    }

    fn global(&self, level: BlockLevel) -> Vec<&'static Block> {
        self.global
            .iter()
            .copied()
            .filter(|b| b.blocks(level))
            .collect()
    }

    fn index_blocks(&self, level: BlockLevel, index: &str) -> Vec<&'static Block> {
        let Some(meta) = self.state.metadata.indices.get(index) else {
            return Vec::new();
        };
        INDEX_BLOCKS
            .into_iter()
            .filter(|b| b.blocks(level) && meta.setting(b.setting).as_deref() == Some("true"))
            .collect()
    }

    /// Whether the cluster-wide blocks stop `level` (`globalBlockedException`).
    pub fn check_global(&self, level: BlockLevel) -> ApiResult<()> {
        match self.global(level) {
            blocks if blocks.is_empty() => Ok(()),
            blocks => Err(global_exception(&blocks)),
        }
    }

    /// Whether `level` is blocked on any of `indices`, cluster-wide blocks included
    /// (`indicesBlockedException`).
    pub fn check_indices<S: AsRef<str>>(&self, level: BlockLevel, indices: &[S]) -> ApiResult<()> {
        let global = self.global(level);
        let mut blocked: Vec<(String, Vec<&'static Block>)> = Vec::new();
        for index in indices {
            let mut blocks = self.index_blocks(level, index.as_ref());
            if blocks.is_empty() && global.is_empty() {
                continue;
            }
            blocks.extend(global.iter().copied());
            blocked.push((index.as_ref().to_string(), sorted(blocks)));
        }
        if !blocked.is_empty() {
            return Err(index_exception(&blocked));
        }
        self.check_global(level)
    }

    /// Cluster-wide blocks first (their own message), then the indices' blocks: how actions
    /// that run on shards check (`checkGlobalBlock`, then `checkRequestBlock`).
    pub fn check_global_then_indices<S: AsRef<str>>(
        &self,
        level: BlockLevel,
        indices: &[S],
    ) -> ApiResult<()> {
        self.check_global(level)?;
        self.check_indices(level, indices)
    }

    pub fn check_index(&self, level: BlockLevel, index: &str) -> ApiResult<()> {
        self.check_indices(level, &[index])
    }

    /// Deleting indices frees disk, so blocks that allow releasing resources
    /// (`read_only_allow_delete`) let it through (`indicesAllowReleaseResources`).
    pub fn check_delete_indices<S: AsRef<str>>(&self, indices: &[S]) -> ApiResult<()> {
        let keep = |b: &&'static Block| !b.allow_release_resources;
        let global: Vec<&'static Block> = self
            .global(MetadataWrite)
            .into_iter()
            .filter(keep)
            .collect();
        let mut blocked = Vec::new();
        for index in indices {
            let mut blocks: Vec<&'static Block> = self
                .index_blocks(MetadataWrite, index.as_ref())
                .into_iter()
                .filter(keep)
                .collect();
            if blocks.is_empty() && global.is_empty() {
                continue;
            }
            blocks.extend(global.iter().copied());
            blocked.push((index.as_ref().to_string(), sorted(blocks)));
        }
        if !blocked.is_empty() {
            return Err(index_exception(&blocked));
        }
        match global {
            blocks if blocks.is_empty() => Ok(()),
            blocks => Err(global_exception(&blocks)),
        }
    }

    /// `PUT /{index}/_settings`: a request that touches `index.blocks.read_only` or
    /// `index.blocks.read_only_allow_delete` (or only `index.blocks.metadata`) is let through
    /// so a block can be lifted; cluster-wide blocks still apply
    /// (`TransportUpdateSettingsAction.checkBlock`).
    pub fn check_index_settings_update<S: AsRef<str>>(
        &self,
        keys: &[String],
        indices: &[S],
    ) -> ApiResult<()> {
        self.check_global(MetadataWrite)?;
        let has = |k: &str| keys.iter().any(|key| key == k);
        if (keys.len() == 1 && has(INDEX_METADATA.setting))
            || has(INDEX_READ_ONLY.setting)
            || has(INDEX_READ_ONLY_ALLOW_DELETE.setting)
        {
            return Ok(());
        }
        self.check_indices(MetadataWrite, indices)
    }

    /// `PUT /_cluster/settings`: a request whose only setting is `cluster.blocks.read_only` or
    /// `cluster.blocks.read_only_allow_delete` can lift the block
    /// (`TransportClusterUpdateSettingsAction.checkBlock`).
    pub fn check_cluster_settings_update(&self, keys: &[&str]) -> ApiResult<()> {
        if let [only] = keys {
            if *only == CLUSTER_READ_ONLY.setting || *only == CLUSTER_READ_ONLY_ALLOW_DELETE.setting
            {
                return Ok(());
            }
        }
        self.check_global(MetadataWrite)
    }

    /// Index creation: cluster-wide metadata blocks, then `cluster.blocks.create_index`.
    pub fn check_create_index(&self, index: &str) -> ApiResult<()> {
        self.check_index(MetadataWrite, index)?;
        self.check_global(CreateIndex)
    }
}

impl BlockLevel {
    fn as_str(self) -> &'static str {
        match self {
            Read => "read",
            Write => "write",
            MetadataRead => "metadata_read",
            MetadataWrite => "metadata_write",
            CreateIndex => "create_index",
        }
    }
}

/// A closed index carries this block in OpenSearch; Shoal refuses operations on closed
/// indices with `index_closed_exception` before blocks are asked, so it only shows in the
/// cluster state.
const INDEX_CLOSED: Block = Block {
    id: 4,
    description: "index closed",
    status: 400,
    levels: &[Read, Write],
    allow_release_resources: false,
    setting: "",
};

fn block_json(block: &Block) -> (String, serde_json::Value) {
    let mut levels = block.levels.to_vec();
    levels.sort_by_key(|l| *l as u8);
    let levels: Vec<&str> = levels.into_iter().map(BlockLevel::as_str).collect();
    (
        block.id.to_string(),
        serde_json::json!({"description": block.description, "retryable": false, "levels": levels}),
    )
}

impl ClusterBlocks {
    /// The `blocks` section of `GET /_cluster/state` for `indices`.
    pub fn to_json<S: AsRef<str>>(&self, indices: &[S]) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        if !self.global.is_empty() {
            let global = self.global.iter().map(|b| block_json(b)).collect();
            body.insert("global".into(), serde_json::Value::Object(global));
        }
        let mut per_index = serde_json::Map::new();
        for index in indices {
            let Some(meta) = self.state.metadata.indices.get(index.as_ref()) else {
                continue;
            };
            let closed = (meta.state == shoal_state::IndexState::Close).then_some(&INDEX_CLOSED);
            let blocks: serde_json::Map<String, serde_json::Value> = closed
                .into_iter()
                .chain(
                    INDEX_BLOCKS
                        .into_iter()
                        .filter(|b| meta.setting(b.setting).as_deref() == Some("true")),
                )
                .map(block_json)
                .collect();
            if !blocks.is_empty() {
                per_index.insert(
                    index.as_ref().to_string(),
                    serde_json::Value::Object(blocks),
                );
            }
        }
        if !per_index.is_empty() {
            body.insert("indices".into(), serde_json::Value::Object(per_index));
        }
        serde_json::Value::Object(body)
    }
}

impl crate::core::NodeCore {
    /// The blocks of the cluster state this node has applied.
    pub fn blocks(&self) -> ClusterBlocks {
        ClusterBlocks::new(self.cluster_state(), |key| {
            self.config.get(key).map(str::to_string)
        })
    }
}

fn sorted(mut blocks: Vec<&'static Block>) -> Vec<&'static Block> {
    blocks.sort_by_key(|b| b.id);
    blocks.dedup_by_key(|b| b.id);
    blocks
}

fn describe_all(blocks: &[&'static Block]) -> String {
    blocks
        .iter()
        .map(|b| b.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

fn global_exception(blocks: &[&'static Block]) -> ApiError {
    let blocks = sorted(blocks.to_vec());
    block_exception(format!("blocked by: [{}];", describe_all(&blocks)), &blocks)
}

fn index_exception(blocked: &[(String, Vec<&'static Block>)]) -> ApiError {
    let reason: String = blocked
        .iter()
        .map(|(index, blocks)| format!("index [{index}] blocked by: [{}];", describe_all(blocks)))
        .collect();
    let all: Vec<&'static Block> = blocked
        .iter()
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    block_exception(reason, &all)
}

fn block_exception(reason: String, blocks: &[&'static Block]) -> ApiError {
    ApiError::new(status_of(blocks), "cluster_block_exception", reason)
}

/// `ClusterBlockException.status()`: 429 when every block is retryable-by-waiting
/// (TOO_MANY_REQUESTS), otherwise the highest other status.
fn status_of(blocks: &[&'static Block]) -> u16 {
    blocks
        .iter()
        .map(|b| b.status)
        .filter(|s| *s != 429)
        .max()
        .unwrap_or(429)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state_with(index_settings: &[(&str, &str)], cluster: &[(&str, &str)]) -> Arc<ClusterState> {
        let mut state = ClusterState::default();
        let mut meta: shoal_state::IndexMetadata = serde_json::from_value(json!({
            "name": "b", "uuid": "u", "state": "open", "settings": {}, "mappings": {},
            "primary_terms": [1]
        }))
        .expect("index metadata");
        for (k, v) in index_settings {
            meta.settings.insert(k.to_string(), json!(v));
        }
        state.metadata.indices.insert("b".into(), meta);
        for (k, v) in cluster {
            state
                .metadata
                .persistent_settings
                .insert(k.to_string(), json!(v));
        }
        Arc::new(state)
    }

    fn blocks(index_settings: &[(&str, &str)], cluster: &[(&str, &str)]) -> ClusterBlocks {
        ClusterBlocks::new(state_with(index_settings, cluster), |_| None)
    }

    #[test]
    fn write_block_stops_writes_with_opensearch_text() {
        let b = blocks(&[("index.blocks.write", "true")], &[]);
        let err = b.check_index(Write, "b").unwrap_err();
        assert_eq!(err.status, 403);
        assert_eq!(err.error_type, "cluster_block_exception");
        assert_eq!(
            err.reason,
            "index [b] blocked by: [FORBIDDEN/8/index write (api)];"
        );
        assert!(b.check_index(Read, "b").is_ok());
        assert!(b.check_index(MetadataWrite, "b").is_ok());
    }

    #[test]
    fn flood_stage_block_is_429_and_allows_deleting_the_index() {
        let b = blocks(&[("index.blocks.read_only_allow_delete", "true")], &[]);
        let err = b.check_index(Write, "b").unwrap_err();
        assert_eq!(err.status, 429);
        assert_eq!(
            err.reason,
            "index [b] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block];"
        );
        assert!(b.check_delete_indices(&["b"]).is_ok());
        let b = blocks(&[("index.blocks.read_only", "true")], &[]);
        assert_eq!(b.check_delete_indices(&["b"]).unwrap_err().status, 403);
    }

    #[test]
    fn mixed_statuses_report_the_non_retryable_one() {
        let b = blocks(
            &[
                ("index.blocks.read_only_allow_delete", "true"),
                ("index.blocks.write", "true"),
            ],
            &[],
        );
        let err = b.check_index(Write, "b").unwrap_err();
        assert_eq!(err.status, 403);
        assert_eq!(
            err.reason,
            "index [b] blocked by: [FORBIDDEN/8/index write (api), TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete block];"
        );
    }

    #[test]
    fn cluster_read_only_blocks_every_index_and_can_be_lifted_alone() {
        let b = blocks(&[], &[("cluster.blocks.read_only", "true")]);
        assert_eq!(
            b.check_index(Write, "b").unwrap_err().reason,
            "index [b] blocked by: [FORBIDDEN/6/cluster read-only (api)];"
        );
        assert_eq!(
            b.check_global(Write).unwrap_err().reason,
            "blocked by: [FORBIDDEN/6/cluster read-only (api)];"
        );
        assert!(b
            .check_cluster_settings_update(&["cluster.blocks.read_only"])
            .is_ok());
        assert!(b
            .check_cluster_settings_update(&["cluster.blocks.read_only", "x"])
            .is_err());
        assert!(b.check_create_index("new").is_err());
    }

    #[test]
    fn cluster_state_lists_blocks_like_opensearch() {
        let b = blocks(
            &[("index.blocks.read_only", "true")],
            &[("cluster.blocks.read_only", "true")],
        );
        assert_eq!(
            b.to_json(&["b"]),
            json!({
                "global": {"6": {"description": "cluster read-only (api)", "retryable": false, "levels": ["write", "metadata_write"]}},
                "indices": {"b": {"5": {"description": "index read-only (api)", "retryable": false, "levels": ["write", "metadata_write"]}}}
            })
        );
        assert_eq!(blocks(&[], &[]).to_json(&["b"]), json!({}));
    }

    #[test]
    fn settings_updates_that_lift_a_block_go_through() {
        let b = blocks(&[("index.blocks.read_only", "true")], &[]);
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(b
            .check_index_settings_update(&keys(&["index.blocks.read_only"]), &["b"])
            .is_ok());
        assert!(b
            .check_index_settings_update(&keys(&["index.number_of_replicas"]), &["b"])
            .is_err());
        let b = blocks(&[("index.blocks.metadata", "true")], &[]);
        assert!(b
            .check_index_settings_update(&keys(&["index.blocks.metadata"]), &["b"])
            .is_ok());
        assert!(b
            .check_index_settings_update(
                &keys(&["index.blocks.metadata", "index.number_of_replicas"]),
                &["b"]
            )
            .is_err());
        assert_eq!(
            b.check_index(MetadataRead, "b").unwrap_err().reason,
            "index [b] blocked by: [FORBIDDEN/9/index metadata (api)];"
        );
    }
}
