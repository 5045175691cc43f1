//! Restoring from the remote store (`POST _remotestore/_restore`): the cluster state puts the
//! chosen shards back to unassigned with a primary to restore; the node that gets such a
//! primary downloads the newest metadata file's segments, opens them, and replays the
//! translog batches above them, so every acknowledged write is back.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use serde_json::{json, Value};
use shoal_state::Command;

use super::layout::ShardKeys;
use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::recovery::progress::{copied_totals, FileDetail};
use crate::replication::{ReplicaOp, ReplicaOpHeader};
use crate::transfer::target::{Differing, FileTransfer, Progress, TransferControl};

/// How long `wait_for_completion=true` waits for the restored primaries.
const RESTORE_WAIT: Duration = Duration::from_secs(1800);

/// What `_remotestore/_restore` was asked.
#[derive(Debug, Clone)]
pub struct RestoreRequest {
    pub indices: Vec<String>,
    pub restore_all_shards: bool,
    pub wait_for_completion: bool,
}

impl RemoteStoreService {
    /// Validates a restore, has the cluster manager reset the shards, and (when asked) waits
    /// for their primaries; answers OpenSearch's body.
    pub fn restore(&self, request: RestoreRequest) -> ApiResult<Value> {
        self.repositories()?;
        if request.indices.is_empty() {
            return Err(ApiError::bad_request(
                "[indices] is required: name the indices to restore from the remote store",
            ));
        }
        let state = self.core.cluster_state();
        for name in &request.indices {
            let meta = state
                .metadata
                .indices
                .get(name)
                .ok_or_else(|| ApiError::index_not_found(name))?;
            if !meta.settings().remote_store() {
                return Err(ApiError::bad_request(format!(
                    "cannot restore index [{name}] because remote store is not enabled for it"
                )));
            }
            let open = meta.state == shoal_state::IndexState::Open;
            if request.restore_all_shards && open {
                return Err(ApiError::bad_request(format!(
                    "cannot restore index [{name}] because an open index with same name/uuid already exists in the cluster. Close the existing index to restore all its shards"
                )));
            }
        }
        let stored_terms =
            self.stored_terms_of(&state, &request.indices, request.restore_all_shards)?;
        tracing::info!(indices = ?request.indices, all_shards = request.restore_all_shards, stored_terms = ?stored_terms, "remote store restore started");
        let command = Command::RestoreRemoteStore {
            indices: request.indices.clone(),
            all_shards: request.restore_all_shards,
            stored_terms,
        };
        self.core.runtime.block_on(
            self.core
                .cluster
                .propose(command, crate::config::CLUSTER_MANAGER_TIMEOUT),
        )?;
        if !request.wait_for_completion {
            return Ok(json!({ "accepted": true }));
        }
        let (total, failed) = self.core.wait_for_restored(&request.indices, RESTORE_WAIT);
        Ok(json!({
            "remote_store": {
                "indices": request.indices,
                "shards": { "total": total, "failed": failed, "successful": total - failed }
            }
        }))
    }

    /// Per index to restore, per shard: the highest primary term its remote store holds. The
    /// cluster metadata can be older than that history (the remote cluster state is uploaded
    /// asynchronously): the restore's command raises each restored primary's term past it.
    /// Shards the restore leaves alone (an active primary, without `restore_all_shards`) are
    /// not listed.
    fn stored_terms_of(
        &self,
        state: &shoal_state::ClusterState,
        indices: &[String],
        all_shards: bool,
    ) -> ApiResult<BTreeMap<String, Vec<u64>>> {
        let mut terms = BTreeMap::new();
        for name in indices {
            let meta = state
                .metadata
                .indices
                .get(name)
                .ok_or_else(|| ApiError::index_not_found(name))?;
            let restored: Vec<bool> = (0..meta.number_of_shards())
                .map(|shard| {
                    all_shards || !state.primary(name, shard).is_some_and(|p| p.is_active())
                })
                .collect();
            terms.insert(name.clone(), self.stored_terms(&meta.uuid, &restored)?);
        }
        Ok(terms)
    }

    /// Fills the local store of a primary to restore with the newest remote checkpoint (an
    /// empty store when the shard never uploaded one), before the engine opens it; refuses when
    /// the repository holds history of `term` or a newer one.
    pub(crate) fn download_store(
        &self,
        service: &IndexService,
        shard: usize,
        term: i64,
    ) -> ApiResult<Vec<FileDetail>> {
        self.check_stored_term(service, shard, term)?;
        let source = self.segment_source(ShardKeys::new(&service.uuid(), shard))?;
        let config = service.shard_engine_config(shard);
        let _ = std::fs::remove_dir_all(&config.path);
        std::fs::create_dir_all(config.index_dir())?;
        let Some((key, metadata)) = self.newest_metadata(&source.repository, &source.keys)? else {
            tracing::info!(index = %service.name(), shard, "nothing uploaded for this shard yet: it restores empty and replays its translog");
            return Ok(Vec::new());
        };
        let files = crate::segrep::target::file_list(&metadata.checkpoint);
        // Restores keep to the repository's download rate alone: the index has no copy at all,
        // so the recovery rate does not hold them back.
        let limiter = crate::recovery::throttle::RateLimiter::default();
        let installed = install_store(
            &self.core,
            &config,
            (&source, &files),
            &metadata.checkpoint.meta,
            term,
            InstallPace {
                limiter: &limiter,
                rate: None,
            },
        )?;
        let (copied, bytes) = copied_totals(&installed);
        tracing::info!(index = %service.name(), shard, metadata = %key, files = copied, bytes, "segments restored from the remote store");
        Ok(installed)
    }

    /// Replays the translog batches above the restored commit into the newly opened primary,
    /// then fills the gaps (operations never acknowledged) so its checkpoint can advance.
    pub(crate) fn replay_translog(&self, service: &IndexService, shard: usize) -> ApiResult<usize> {
        let copy = service.copy(shard)?;
        let engine = copy.engine();
        let keys = ShardKeys::new(&service.uuid(), shard);
        let ops = self.remote_operations(&keys, engine.local_checkpoint())?;
        let replayed = ops.len();
        // Any of them may update a document the restored segments hold: none may take the
        // append-only path, which skips looking the id up (and would index a second copy).
        if let Some(last) = ops.iter().map(|op| op.seq_no).max() {
            engine.advance_max_seq_no_of_updates(last);
        }
        let writes: Vec<_> = ops
            .into_iter()
            .map(|op| {
                let ReplicaOp { header, source } = ReplicaOp::from_translog(op);
                to_write(service, engine, &header, source)
            })
            .collect();
        for result in engine.apply(writes, shoal_engine::Origin::Replica) {
            result.map_err(ApiError::from)?;
        }
        engine.sync_translog()?;
        let filled = engine.fill_seq_no_gaps(engine.primary_term())?;
        engine.refresh()?;
        tracing::info!(index = %service.name(), shard, replayed, filled, local_checkpoint = engine.local_checkpoint(), "translog restored from the remote store");
        Ok(replayed)
    }
}

/// How fast a store installs: at most `rate` bytes a second (`None`: full speed) through
/// `limiter`, which other transfers to the same rate share.
pub(crate) struct InstallPace<'a> {
    pub limiter: &'a crate::recovery::throttle::RateLimiter,
    pub rate: Option<u64>,
}

/// Copies a commit's files from `source` into the (empty) store of `config`, writes its
/// `meta.json` and binds the store to a new translog of `term`: the engine can open it.
pub(crate) fn install_store(
    core: &crate::core::NodeCore,
    config: &shoal_engine::EngineConfig,
    (source, files): (
        &dyn crate::transfer::FileSource,
        &[crate::transfer::FileMeta],
    ),
    meta_json: &str,
    term: i64,
    pace: InstallPace<'_>,
) -> ApiResult<Vec<FileDetail>> {
    let control = Paced {
        rate: pace.rate,
        files: Mutex::default(),
    };
    let transfer = FileTransfer {
        dir: &config.index_dir(),
        source,
        runtime: &core.runtime,
        limiter: pace.limiter,
        control: &control,
        differing: Differing::Replace,
        files_in_flight: core.recovery_limits().concurrent_chunks,
    };
    transfer.run(files)?;
    std::fs::write(config.index_dir().join("meta.json"), meta_json)?;
    shoal_engine::recovery::bind_recovered_store(config, term)?;
    // The commit point came with the files (as Lucene's `segments_N` does): it counts as one.
    let mut installed = control.files.into_inner();
    installed.push(FileDetail::copied("meta.json", meta_json.len() as u64));
    Ok(installed)
}

fn to_write(
    service: &IndexService,
    engine: &shoal_engine::Engine,
    header: &ReplicaOpHeader,
    source: Vec<u8>,
) -> shoal_engine::WriteOp {
    crate::replication::replica::replica_write(service, engine.schema(), header, source, true)
}

/// A restore's transfer: nothing to cancel it (nothing else runs on the shard yet), paced at
/// its rate; it notes each file reused or copied (`_recovery?detailed=true`).
struct Paced {
    rate: Option<u64>,
    files: Mutex<Vec<FileDetail>>,
}

impl TransferControl for Paced {
    fn check(&self) -> ApiResult<()> {
        Ok(())
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        self.rate
    }

    fn progress(&self, event: Progress<'_>) {
        let detail = match event {
            Progress::Reused(file) => FileDetail::reused(&file.name, file.length),
            Progress::Copied(file) => FileDetail::copied(&file.name, file.length),
            Progress::Received { .. } => return,
        };
        self.files.lock().push(detail);
    }
}
