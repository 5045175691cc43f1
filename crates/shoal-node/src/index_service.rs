//! One index on this node: its metadata, its mapping, and its shard engines.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use shoal_engine::{Engine, EngineConfig};
use shoal_mapping::{DocumentParser, MapperError, Mapping};
use tantivy::TantivyDocument;

use crate::error::{ApiError, ApiResult};
use crate::metadata::{IndexMetadata, IndexMetadataExt, IndexState, NodePaths};
use crate::recovery::progress::{RecoveryProgress, RecoveryRecord};
use crate::routing;
use crate::shard::IndexShard;

/// Search-side counters of an index (`_stats.search`).
#[derive(Debug, Default)]
pub struct SearchCounters {
    pub query_total: AtomicU64,
    pub query_time_nanos: AtomicU64,
    pub query_current: AtomicU64,
    pub fetch_total: AtomicU64,
    pub fetch_time_nanos: AtomicU64,
    pub scroll_total: AtomicU64,
    pub scroll_current: AtomicU64,
    pub scroll_time_nanos: AtomicU64,
}

/// The metadata this node installed from its applied cluster state (the state's own `Arc`, not
/// a copy) and the mapping parsed from it, swapped together so a reader sees one version.
struct Installed {
    meta: Arc<IndexMetadata>,
    mapping: Arc<Mapping>,
}

impl Installed {
    fn derive(meta: Arc<IndexMetadata>, previous: Option<&Installed>) -> ApiResult<Installed> {
        let mapping = mapping_of(&meta, previous)?;
        Ok(Installed { meta, mapping })
    }
}

/// The parsed mapping of `meta`: the one `installed` holds when it is of the same mapping
/// version (the only place a mapping is parsed from metadata, once per version, whatever else
/// of the metadata changes).
fn mapping_of(meta: &IndexMetadata, installed: Option<&Installed>) -> ApiResult<Arc<Mapping>> {
    match installed {
        Some(i) if i.meta.uuid == meta.uuid && i.meta.mapping_version == meta.mapping_version => {
            Ok(i.mapping.clone())
        }
        _ => Ok(Arc::new(Mapping::from_json(&meta.mappings)?)),
    }
}

/// What an index service needs of its node to change its own metadata (a dynamic mapping
/// update): the node checks the blocks, publishes through the cluster manager and applies.
/// A trait the node implements, so that the index service, which the core's registry holds,
/// depends on no node; it is held weakly, so an index never keeps a stopped node alive.
pub trait MetadataPublisher: Send + Sync {
    /// The node's name (failpoints are scoped by it).
    fn node_name(&self) -> String;
    /// Refuses a metadata write that the cluster's or the index's blocks forbid.
    fn check_metadata_write(&self, index: &str) -> ApiResult<()>;
    /// Publishes a change of an index's metadata and waits until this node applied it.
    fn publish_index(&self, meta: IndexMetadata) -> ApiResult<()>;
    /// Waits until `check` holds, checking after each cluster state this node applies, or
    /// until `timeout`.
    fn wait_applied(&self, timeout: Duration, check: &mut dyn FnMut() -> bool);
}

#[cfg(feature = "failpoints")]
impl crate::failpoints::Scope for Weak<dyn MetadataPublisher> {
    fn node_name(&self) -> String {
        self.upgrade()
            .map(|node| node.node_name())
            .unwrap_or_default()
    }
}

pub struct IndexService {
    installed: RwLock<Installed>,
    /// The local copies by shard number; `None` where no copy of the shard is on this node.
    shards: RwLock<Vec<Option<Arc<IndexShard>>>>,
    /// Serializes metadata changes of this index (mapping updates, settings).
    pub update_lock: Mutex<()>,
    pub search: SearchCounters,
    /// Recovery records of copies of this index no longer open here, by (shard, allocation
    /// id): a closed index, a copy failed or closed for a file-based recovery. `_recovery`
    /// shows them while the state assigns their copy here; they go with the index.
    retired_recoveries: Mutex<BTreeMap<(usize, String), RecoveryProgress>>,
    paths: NodePaths,
    /// Publishes metadata changes through the cluster manager.
    node: Weak<dyn MetadataPublisher>,
}

impl IndexService {
    /// A service with no shard open yet; the cluster-state applier opens the copies
    /// assigned to this node.
    pub fn new(
        meta: Arc<IndexMetadata>,
        paths: NodePaths,
        node: Weak<dyn MetadataPublisher>,
    ) -> ApiResult<IndexService> {
        let shards = meta.settings().number_of_shards();
        Ok(IndexService {
            installed: RwLock::new(Installed::derive(meta, None)?),
            shards: RwLock::new(vec![None; shards]),
            update_lock: Mutex::new(()),
            search: SearchCounters::default(),
            retired_recoveries: Mutex::new(BTreeMap::new()),
            paths,
            node,
        })
    }

    /// Opens one shard's engine (creating an empty one or replaying its translog) unless it is
    /// open already; keeps the primary term current (a bump waits for the writes in flight).
    /// A copy that is not the primary of a segment-replicated index opens without an index
    /// writer (it copies the primary's segments); it gets one when promoted.
    pub fn ensure_shard_open(
        &self,
        shard: usize,
        primary_term: i64,
        primary: bool,
    ) -> ApiResult<()> {
        if let Some(copy) = self.shards.read().get(shard).cloned().flatten() {
            if copy.engine().primary_term() < primary_term {
                crate::failpoints::failpoint!(self.node, "before_term_bump");
            }
            return copy.bump_primary_term(primary_term);
        }
        let (meta, mapping) = self.meta_and_mapping();
        let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
        let parse = |id: &str, source: &[u8]| -> Result<TantivyDocument, MapperError> {
            Ok(DocumentParser::new(&mapping, &schema)
                .parse(id, source)?
                .doc)
        };
        let mut config = self.engine_config(&meta, shard);
        config.segment_replica = !primary && meta.settings().segment_replication();
        // Checkpoints pinned for segment replication before a restart pin nothing now.
        let _ = std::fs::remove_dir_all(config.path.join("segrep"));
        let engine = Engine::open(config, primary_term, &parse).map_err(|e| {
            ApiError::internal(format!(
                "failed to open shard [{}][{shard}]: {e}",
                meta.name
            ))
        })?;
        let copy = IndexShard::new(
            &meta.name,
            shoal_types::ShardId::new(meta.uuid.clone(), shard as u32),
            Arc::new(engine),
        );
        let mut shards = self.shards.write();
        if shards.len() <= shard {
            shards.resize(shard + 1, None);
        }
        shards[shard] = Some(Arc::new(copy));
        Ok(())
    }

    /// The replication state of the local copy of `shard`, if one is open.
    pub fn replication(&self, shard: usize) -> Option<Arc<crate::replication::ShardReplication>> {
        self.copy(shard).ok()?.replication()
    }

    /// The replication state of the local copy `allocation_id` of `shard`, created for it
    /// (a copy that came back under a new allocation id gets a new one).
    pub fn replication_for(
        &self,
        shard: usize,
        allocation_id: &str,
        global_checkpoint: i64,
    ) -> ApiResult<Arc<crate::replication::ShardReplication>> {
        Ok(self
            .copy(shard)?
            .replication_for(allocation_id, global_checkpoint))
    }

    /// Parses a replicated or recovered document against the current mapping. The primary
    /// acknowledged it, so a document this copy cannot index is kept by id and source.
    pub fn parse_for_replica(
        &self,
        schema: &shoal_mapping::ShardSchema,
        id: &str,
        source: &[u8],
    ) -> TantivyDocument {
        let mapping = self.mapping();
        match DocumentParser::new(&mapping, schema).parse(id, source) {
            Ok(parsed) => parsed.doc,
            Err(e) => {
                tracing::warn!(index = %self.name(), id, error = %e, "a replicated document does not parse; keeping its source only");
                TantivyDocument::default()
            }
        }
    }

    /// Parses a document against the current mapping (a promoted segment replica indexes
    /// the operations it only logged).
    pub fn parse_document(&self, id: &str, source: &[u8]) -> Result<TantivyDocument, MapperError> {
        let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
        Ok(DocumentParser::new(&self.mapping(), &schema)
            .parse(id, source)?
            .doc)
    }

    /// `index.replication.type: SEGMENT`: replicas copy the primary's segments.
    pub fn is_segment_replicated(&self) -> bool {
        self.with_meta(|m| m.settings().segment_replication())
    }

    /// Whether the index keeps its segments and translog in the remote store.
    pub fn is_remote_store(&self) -> bool {
        self.with_meta(|m| m.settings().remote_store())
    }

    /// Where the files of `shard` live on this node.
    pub fn shard_engine_config(&self, shard: usize) -> EngineConfig {
        self.engine_config(&self.meta(), shard)
    }

    /// Flushes and drops one shard's engine if it is open here.
    pub fn close_shard(&self, shard: usize) {
        if let Some(copy) = self.take_copy(shard) {
            if let Err(e) = copy.close_and_flush() {
                tracing::warn!(index = %self.name(), shard, error = %e, "flush at close failed");
            }
        }
    }

    /// Closes the local copy of `shard` because it left this node (moved to another node, or
    /// its index deleted): unlike a copy closing with its index, it stops its segment uploads.
    pub fn remove_copy(&self, shard: usize) {
        if let Ok(copy) = self.copy(shard) {
            copy.mark_removed();
        }
        self.close_shard(shard);
    }

    /// Drops the local copy of `shard` without flushing it: its engine failed, and nothing it
    /// holds beyond its last commit and translog may be persisted.
    pub fn discard_shard(&self, shard: usize) {
        if let Some(copy) = self.take_copy(shard) {
            copy.close();
        }
    }

    /// Takes the copy of `shard` out of the service; its recovery record stays with the index.
    fn take_copy(&self, shard: usize) -> Option<Arc<IndexShard>> {
        let copy = self.shards.write().get_mut(shard).and_then(Option::take)?;
        if let Some(progress) = copy.recovery() {
            self.keep_recovery(shard, progress);
        }
        Some(copy)
    }

    /// Keeps the recovery record of a copy that is no longer open here.
    pub fn keep_recovery(&self, shard: usize, progress: RecoveryProgress) {
        self.retired_recoveries
            .lock()
            .insert((shard, progress.allocation_id()), progress);
    }

    /// Gives an open copy back the record it had under `allocation_id` before it closed (an
    /// index closed and opened again); whether it has a record of that id now.
    pub fn restore_recovery(&self, shard: usize, copy: &IndexShard, allocation_id: &str) -> bool {
        if copy
            .recovery()
            .is_some_and(|p| p.allocation_id() == allocation_id)
        {
            return true;
        }
        let key = (shard, allocation_id.to_string());
        match self.retired_recoveries.lock().remove(&key) {
            Some(kept) => {
                copy.set_recovery(kept);
                true
            }
            None => false,
        }
    }

    /// The recovery records of this index here: of copies no longer open, then of open ones.
    pub fn recovery_records(&self) -> Vec<RecoveryRecord> {
        let retired: Vec<RecoveryRecord> = self
            .retired_recoveries
            .lock()
            .values()
            .map(RecoveryProgress::snapshot)
            .collect();
        let open = self
            .local_copies()
            .into_iter()
            .filter_map(|(_, copy)| copy.recovery())
            .map(|p| p.snapshot());
        retired.into_iter().chain(open).collect()
    }

    /// Closes the local copy of `shard` if open and deletes its directory: the shard is
    /// fully active on other nodes, so these files are redundant (OpenSearch's `IndicesStore`).
    pub fn delete_shard_data(&self, shard: usize) {
        self.remove_copy(shard);
        if self.remove_shard_files(shard) {
            tracing::info!(index = %self.name(), shard, "deleted the data of a copy that is active elsewhere");
        }
    }

    /// Deletes the directory of `shard` (its copy must be closed); whether there was one.
    pub fn remove_shard_files(&self, shard: usize) -> bool {
        let dir = self.paths.shard_dir(&self.uuid(), shard);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::warn!(index = %self.name(), shard, error = %e, "could not delete a shard's files");
                false
            }
        }
    }

    /// Whether `shard` has a directory on this node.
    pub fn shard_dir_exists(&self, shard: usize) -> bool {
        self.paths.shard_dir(&self.uuid(), shard).exists()
    }

    /// Shards of the index (copies here or not).
    pub fn shard_count(&self) -> usize {
        self.shards.read().len()
    }

    fn engine_config(&self, meta: &IndexMetadata, shard: usize) -> EngineConfig {
        let settings = meta.settings();
        let mut config = EngineConfig::new(self.paths.shard_dir(&meta.uuid, shard));
        config.codec = settings.codec();
        config.durability = settings.durability();
        config.flush_threshold_size = settings.flush_threshold_size();
        config.gc_deletes = settings.gc_deletes();
        config.check_on_startup = settings.check_on_startup();
        config.merge = shoal_engine::SharedMergeSettings::new(settings.merge_settings());
        // Two cores: one indexing thread per shard beyond the first keeps merges breathing.
        config.indexing_threads = if settings.number_of_shards() > 1 {
            1
        } else {
            2
        };
        config
    }

    /// Flushes and drops the engines (close index, node shutdown).
    pub fn close_shards(&self) -> ApiResult<()> {
        let copies: Vec<_> = (0..self.shard_count())
            .filter_map(|shard| self.take_copy(shard))
            .collect();
        // Every engine is closed even when one fails (a failed engine's flush is refused).
        let mut first_error = None;
        for copy in copies {
            if let Err(e) = copy.close_and_flush() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The installed metadata: the applied cluster state's value itself.
    pub fn meta(&self) -> Arc<IndexMetadata> {
        self.installed.read().meta.clone()
    }

    /// The installed metadata and the mapping parsed from it, of one version.
    pub fn meta_and_mapping(&self) -> (Arc<IndexMetadata>, Arc<Mapping>) {
        let installed = self.installed.read();
        (installed.meta.clone(), installed.mapping.clone())
    }

    pub fn with_meta<R>(&self, f: impl FnOnce(&IndexMetadata) -> R) -> R {
        f(&self.installed.read().meta)
    }

    pub fn name(&self) -> String {
        self.with_meta(|m| m.name.clone())
    }

    pub fn uuid(&self) -> String {
        self.with_meta(|m| m.uuid.clone())
    }

    pub fn is_open(&self) -> bool {
        self.with_meta(|m| m.state == IndexState::Open)
    }

    pub fn mapping(&self) -> Arc<Mapping> {
        self.installed.read().mapping.clone()
    }

    /// The engines of the shard copies open on this node.
    pub fn shards(&self) -> Vec<Arc<Engine>> {
        self.shards
            .read()
            .iter()
            .flatten()
            .map(|copy| copy.engine().clone())
            .collect()
    }

    /// The copies open on this node, with their shard numbers.
    pub fn local_copies(&self) -> Vec<(usize, Arc<IndexShard>)> {
        self.shards
            .read()
            .iter()
            .enumerate()
            .filter_map(|(n, copy)| Some((n, copy.clone()?)))
            .collect()
    }

    /// The shard copies open on this node, with their shard numbers.
    pub fn local_shards(&self) -> Vec<(usize, Arc<Engine>)> {
        self.shards
            .read()
            .iter()
            .enumerate()
            .filter_map(|(n, copy)| Some((n, copy.as_ref()?.engine().clone())))
            .collect()
    }

    pub fn shard(&self, shard: usize) -> ApiResult<Arc<Engine>> {
        self.copy(shard).map(|copy| copy.engine().clone())
    }

    /// The local copy of `shard` (a handler acting on a copy a request names uses
    /// [`NodeCore::local_copy`](crate::core::NodeCore::local_copy), which also checks uuid and allocation).
    pub fn copy(&self, shard: usize) -> ApiResult<Arc<IndexShard>> {
        let shards = self.shards.read();
        match shards.get(shard).cloned().flatten() {
            Some(copy) => Ok(copy),
            None => {
                let meta = self.meta();
                if meta.state == IndexState::Close {
                    return Err(ApiError::index_closed(&meta.name, &meta.uuid));
                }
                // Open index, no copy here (any more): it failed or moved a moment ago, so the
                // request can be retried on the copy the next cluster state names.
                Err(ApiError::new(
                    503,
                    "shard_not_found_exception",
                    format!("no such shard [{}][{shard}] on this node", meta.name),
                ))
            }
        }
    }

    /// Replaces the metadata and persists it first, so what is acknowledged is durable.
    /// Publishes a change of this index's metadata through the cluster manager. `change` edits
    /// this node's copy; if that copy was stale (a change made through another node not yet
    /// applied here) the manager refuses it, and the change is made again on the newer copy.
    pub fn update_meta(
        &self,
        mut change: impl FnMut(&mut IndexMetadata) -> ApiResult<()>,
    ) -> ApiResult<Arc<IndexMetadata>> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| ApiError::new(503, "node_closed_exception", "node is shutting down"))?;
        // Every refusal means another change landed, so the retries make progress; they end
        // at the cluster manager timeout like any other metadata change.
        let deadline = Instant::now() + crate::config::CLUSTER_MANAGER_TIMEOUT;
        loop {
            // The one copy of a change: the edit needs an owned value to publish.
            let mut updated = IndexMetadata::clone(&self.meta());
            let based_on = updated.version;
            change(&mut updated)?;
            updated.version += 1;
            let name = updated.name.clone();
            // Publishing waits until this node's applier has installed the agreed metadata
            // (with the cluster manager's primary terms), so there is nothing left to install here.
            match node.publish_index(updated) {
                Ok(()) => return Ok(self.meta()),
                Err(e)
                    if e.error_type == shoal_state::STALE_INDEX_METADATA
                        && Instant::now() < deadline =>
                {
                    tracing::debug!(index = %name, based_on, "index metadata changed meanwhile; editing the newer copy");
                    node.wait_applied(crate::config::CLUSTER_MANAGER_TIMEOUT, &mut || {
                        self.with_meta(|m| m.version) > based_on
                    });
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Installs metadata agreed by the cluster (no publication): the applied state's own value.
    /// The mapping is parsed again only when its version changed.
    pub fn replace_meta(&self, meta: Arc<IndexMetadata>) -> ApiResult<()> {
        if Arc::ptr_eq(&self.meta(), &meta) {
            return Ok(());
        }
        let shards = meta.settings().number_of_shards();
        let merge = meta.settings().merge_settings();
        {
            let mut installed = self.installed.write();
            *installed = Installed::derive(meta, Some(&installed))?;
        }
        for (_, engine) in self.local_shards() {
            engine.set_merge_settings(merge);
        }
        let mut engines = self.shards.write();
        if engines.len() < shards {
            engines.resize(shards, None);
        }
        Ok(())
    }

    /// Merges a dynamic mapping update durably. Returns the new mapping.
    pub fn merge_mapping(&self, update: &Mapping) -> ApiResult<Arc<Mapping>> {
        let _guard = self.update_lock.lock();
        let mut merged = (*self.mapping()).clone();
        merged.merge(update)?;
        // Checked on the merged mapping even when nothing changes, as OpenSearch checks
        // every mapping update (a lowered limit refuses the next put mapping).
        let limits = self.with_meta(|m| m.settings().mapping_limits());
        merged.check_limits(&limits)?;
        if merged == *self.mapping() {
            return Ok(self.mapping());
        }
        // A dynamic mapping update is a metadata write (OpenSearch's auto put-mapping).
        if let Some(node) = self.node.upgrade() {
            node.check_metadata_write(&self.name())?;
        }
        self.update_meta(|meta| {
            // Merged again on the copy being published: it may be newer than the one above.
            let mut merged = (*mapping_of(meta, Some(&self.installed.read()))?).clone();
            merged.merge(update)?;
            merged.check_limits(&meta.settings().mapping_limits())?;
            meta.mappings = merged.to_json();
            meta.mapping_version += 1;
            Ok(())
        })?;
        Ok(self.mapping())
    }

    /// The shard a document with this routing value (or id) belongs to.
    pub fn route(&self, routing_value: &str) -> usize {
        self.with_meta(|meta| {
            let settings = meta.settings();
            routing::shard_id(
                routing_value,
                settings.number_of_shards(),
                settings.routing_num_shards(),
            )
        })
    }

    pub fn count_search(&self, started: Instant) {
        let nanos = started.elapsed().as_nanos() as u64;
        self.search.query_total.fetch_add(1, Ordering::Relaxed);
        self.search
            .query_time_nanos
            .fetch_add(nanos, Ordering::Relaxed);
        self.search.fetch_total.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(mappings: serde_json::Value) -> IndexMetadata {
        serde_json::from_value(json!({
            "name": "i", "uuid": "u", "state": "open", "settings": {}, "mappings": mappings,
            "primary_terms": [1]
        }))
        .expect("index metadata")
    }

    #[test]
    fn the_mapping_is_parsed_once_per_mapping_version() {
        let keyword = json!({"properties": {"a": {"type": "keyword"}}});
        let first = Installed::derive(Arc::new(meta(keyword)), None).expect("first");
        assert!(first.mapping.field("a").is_some());

        let mut settings_changed = IndexMetadata::clone(&first.meta);
        settings_changed.version += 1;
        settings_changed
            .settings
            .insert("index.refresh_interval".into(), json!("5s"));
        let second = Installed::derive(Arc::new(settings_changed), Some(&first)).expect("second");
        assert!(Arc::ptr_eq(&first.mapping, &second.mapping));

        let mut mapping_changed = IndexMetadata::clone(&second.meta);
        mapping_changed.version += 1;
        mapping_changed.mapping_version += 1;
        mapping_changed.mappings =
            json!({"properties": {"a": {"type": "keyword"}, "b": {"type": "long"}}});
        let third = Installed::derive(Arc::new(mapping_changed), Some(&second)).expect("third");
        assert!(third.mapping.field("b").is_some());
    }

    #[test]
    fn a_mapping_that_does_not_parse_is_an_error_not_an_empty_mapping() {
        let bad = json!({"properties": {"a": {"type": "no_such_type"}}});
        assert!(Installed::derive(Arc::new(meta(bad)), None).is_err());
    }
}
