//! The source side of a peer recovery: the primary (or a relocation's source) answers
//! `start_recovery` (operations only, or a pinned commit's files), serves file chunks, and
//! at `finalize` starts tracking the copy and replays the history above what it copied.
//! A recovery whose target is gone is dropped by [`RecoveryService::drop_abandoned`], so a
//! target that died mid-way does not pin files or translog on the source for good.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use shoal_engine::recovery::{snapshot_commit, CommitSnapshot};
use shoal_engine::store::FileCheckError;
use shoal_state::{ClusterState, ShardState};
use tracing::{debug, info};

use super::ops_recovery::{accepts_offer, hold_history_for_recovery, release_history};
use super::*;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::replication::ReplicaOp;
use crate::transfer::peer::{serve_file, FileStreamRequest, ServedFiles};
use crate::transfer::ByteStream;

/// A recovery this node serves as the source.
pub(super) struct Outgoing {
    service: Arc<IndexService>,
    shard: usize,
    target_allocation_id: String,
    /// The pinned commit of a file-based recovery.
    snapshot: Option<CommitSnapshot>,
    /// The first seq_no finalize replays.
    replay_from: i64,
    /// The retention lease holding that history until finalize.
    lease: String,
    /// When the target last asked for something (start, a chunk, finalize).
    last_used: Mutex<Instant>,
}

impl Outgoing {
    fn new(
        service: Arc<IndexService>,
        shard: usize,
        target_allocation_id: String,
        lease: String,
    ) -> Outgoing {
        Outgoing {
            service,
            shard,
            target_allocation_id,
            snapshot: None,
            replay_from: 0,
            lease,
            last_used: Mutex::new(Instant::now()),
        }
    }

    /// Whether the cluster state still has the target copy waiting for this recovery.
    fn target_still_recovering(&self, state: &ClusterState) -> bool {
        state
            .copies(&self.service.name(), self.shard as u32)
            .iter()
            .any(|copy| {
                copy.allocation_id.as_deref() == Some(self.target_allocation_id.as_str())
                    && copy.state == ShardState::Initializing
            })
    }

    fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }

    /// Releases the pinned files and the history lease.
    fn release(&self) {
        if let Some(snapshot) = &self.snapshot {
            snapshot.release();
        }
        if let (Some(replication), Ok(engine)) = (
            self.service.replication(self.shard),
            self.service.shard(self.shard),
        ) {
            release_history(&replication, &engine, &self.lease);
        }
    }
}

/// The pinned commit's files, streamed to the target.
impl ServedFiles for Outgoing {
    fn path(&self, name: &str) -> Option<PathBuf> {
        let snapshot = self.snapshot.as_ref()?;
        snapshot
            .files
            .iter()
            .any(|(n, _)| n == name)
            .then(|| snapshot.dir.join(name))
    }

    fn touch(&self) {
        Outgoing::touch(self);
    }
}

impl RecoveryService {
    /// Streams a file of a recovery's pinned commit; chunks are read on the `replication`
    /// pool. The stream holds the recovery, so it is not dropped as abandoned while it runs.
    pub(super) fn serve_file_stream(
        self: &Arc<Self>,
        request: FileStreamRequest,
    ) -> ApiResult<ByteStream> {
        let outgoing = self.outgoing(&request.session)?;
        let pool = self
            .core
            .pressure
            .pool(crate::pressure::settings::REPLICATION)
            .clone();
        serve_file(outgoing, request, pool)
    }

    pub(super) fn serve_start(&self, request: StartRequest) -> ApiResult<StartReply> {
        let shard_id = shoal_types::ShardId::new(request.index_uuid.clone(), request.shard as u32);
        let copy = self.core.local_copy(&request.index, &shard_id, None)?;
        let (service, engine) = (copy.service.clone(), copy.engine().clone());
        self.wait_ready_to_serve(&service, &request)?;
        let replication = service
            .replication(request.shard)
            .ok_or_else(|| crate::shard::lookup::shard_not_found(&request.index, request.shard))?;
        let recovery_id = shoal_cluster::new_id();
        let lease = shoal_replication::recovery_lease_id(&recovery_id);
        let mut outgoing = Outgoing::new(
            service.clone(),
            request.shard,
            request.target_allocation_id.clone(),
            lease.clone(),
        );
        // The history is leased before it is compared, so a flush cannot trim it between
        // the check and the replay.
        if let Some(offer) = &request.history {
            hold_history_for_recovery(&replication, &engine, &lease, offer.compared_from());
            if accepts_offer(&engine, offer).inspect_err(|_| {
                release_history(&replication, &engine, &lease);
            })? {
                outgoing.replay_from = offer.replay_from();
                info!(index = %request.index, shard = request.shard, target = %request.target_allocation_id, from = outgoing.replay_from, "operation-based recovery: the copy's history matches, replaying what it missed");
                self.register_outgoing(&recovery_id, outgoing);
                return Ok(StartReply {
                    recovery_id,
                    files: Vec::new(),
                    replay_from: Some(offer.replay_from()),
                    streams_files: true,
                });
            }
            debug!(index = %request.index, shard = request.shard, "the copy's history cannot be replayed onto: recovering from files");
        }
        // History above the commit about to be taken is replayed at finalize.
        let before_commit = engine.local_checkpoint().min(engine.global_checkpoint()) + 1;
        hold_history_for_recovery(&replication, &engine, &lease, before_commit);
        let dir = engine.config().path.join("recovery").join(&recovery_id);
        let (snapshot, files) = pin_commit(&engine, &dir).inspect_err(|_| {
            release_history(&replication, &engine, &lease);
        })?;
        outgoing.replay_from = snapshot.payload.local_checkpoint + 1;
        outgoing.snapshot = Some(snapshot);
        self.register_outgoing(&recovery_id, outgoing);
        Ok(StartReply {
            recovery_id,
            files,
            replay_from: None,
            streams_files: true,
        })
    }

    /// Waits until this copy acts as the primary and knows the target (its applier may lag
    /// the state the target acted on): only then can it start tracking the target.
    fn wait_ready_to_serve(&self, service: &IndexService, request: &StartRequest) -> ApiResult<()> {
        let ready = self
            .core
            .wait_until_applied(Duration::from_secs(10), |_, _| {
                service
                    .replication(request.shard)
                    .is_some_and(|r| {
                        let tracker = r.tracker.lock();
                        tracker.is_primary_mode() && tracker.knows(&request.target_allocation_id)
                    })
                    .then_some(())
            })
            .is_some();
        if ready {
            return Ok(());
        }
        Err(ApiError::new(
            409,
            "illegal_state_exception",
            format!(
                "[{}][{}] is not ready to be recovered from: not the primary, or copy [{}] is unknown here",
                request.index, request.shard, request.target_allocation_id
            ),
        ))
    }

    fn register_outgoing(&self, recovery_id: &str, outgoing: Outgoing) {
        self.outgoing
            .lock()
            .insert(recovery_id.to_string(), Arc::new(outgoing));
    }

    fn outgoing(&self, recovery_id: &str) -> ApiResult<Arc<Outgoing>> {
        self.outgoing
            .lock()
            .get(recovery_id)
            .inspect(|outgoing| outgoing.touch())
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "resource_not_found_exception",
                    format!("no recovery [{recovery_id}]"),
                )
            })
    }

    pub(super) fn serve_chunk(&self, request: ChunkRequest) -> ApiResult<Bytes> {
        let outgoing = self.outgoing(&request.recovery_id)?;
        let path = outgoing
            .path(&request.name)
            .filter(|_| request.length <= crate::recovery::throttle::MAX_CHUNK_BYTES)
            .ok_or_else(|| {
                ApiError::bad_request(format!("no file [{}] in recovery", request.name))
            })?;
        let mut file = std::fs::File::open(path)?;
        file.seek(SeekFrom::Start(request.offset))?;
        let mut buffer = vec![0u8; request.length as usize];
        file.read_exact(&mut buffer)?;
        Ok(Bytes::from(buffer))
    }

    pub(super) fn serve_finalize(&self, request: FinalizeRequest) -> ApiResult<FinalizeReply> {
        let outgoing = self.outgoing(&request.recovery_id)?;
        let result = self.finalize_recovery(&outgoing);
        outgoing.release();
        self.outgoing.lock().remove(&request.recovery_id);
        result
    }

    fn finalize_recovery(&self, outgoing: &Outgoing) -> ApiResult<FinalizeReply> {
        let (service, shard, target) = (
            &outgoing.service,
            outgoing.shard,
            &outgoing.target_allocation_id,
        );
        let engine = service.shard(shard)?;
        let replication = service
            .replication(shard)
            .ok_or_else(|| crate::shard::lookup::shard_not_found(&service.name(), shard))?;
        let end = {
            let _no_writes_in_flight = replication.ops_lock.write();
            replication
                .tracker
                .lock()
                .initiate_tracking(target)
                .map_err(|e| ApiError::new(409, "illegal_state_exception", e.to_string()))?;
            engine.max_seq_no()
        };
        let (replayed, local_checkpoint) = self.replay_history(outgoing, &engine, end)?;
        let mut refused = None;
        let in_sync = wait_for(Duration::from_secs(30), || {
            match replication
                .tracker
                .lock()
                .mark_in_sync(target, local_checkpoint)
            {
                Ok(outcome) => outcome == shoal_replication::InSyncOutcome::InSync,
                Err(e) => refused.insert(e).to_string().is_empty(),
            }
        });
        if let Some(e) = refused {
            return Err(ApiError::new(409, "illegal_state_exception", e.to_string()));
        }
        if !in_sync {
            return Err(ApiError::internal(
                "the recovered copy did not reach the global checkpoint",
            ));
        }
        if self.is_primary_relocation_target(service, shard, target) {
            service.copy(shard)?.hand_off_primary()?;
            tracing::info!(index = %service.name(), shard, target, "primary handed off to its relocation target");
        }
        Ok(FinalizeReply {
            ops_replayed: replayed,
        })
    }

    /// Sends the target every operation from the recovery's start to `end`, in batches; the
    /// last (or only, possibly empty) batch also brings back the target's local checkpoint.
    /// Returns (operations replayed, the target's local checkpoint).
    fn replay_history(
        &self,
        outgoing: &Outgoing,
        engine: &Arc<shoal_engine::Engine>,
        end: i64,
    ) -> ApiResult<(usize, i64)> {
        let (service, shard, target) = (
            &outgoing.service,
            outgoing.shard,
            &outgoing.target_allocation_id,
        );
        let from = outgoing.replay_from;
        let replay = |ops: &[ReplicaOp]| -> ApiResult<i64> {
            let pending = crate::replication::replica::send_replica_batch(
                &self.core,
                service,
                shard,
                engine,
                target,
                ops,
                crate::replication::replica::BatchOptions::default(),
            );
            Ok(
                crate::replication::replica::wait_replica_reply(&self.core, pending)?
                    .local_checkpoint,
            )
        };
        let mut replayed = 0;
        let mut batch = Vec::with_capacity(REPLAY_BATCH);
        let mut local_checkpoint = shoal_replication::UNASSIGNED_SEQ_NO;
        if from <= end {
            for op in engine.history(from, end).map_err(ApiError::from)? {
                batch.push(ReplicaOp::from_translog(
                    op.map_err(|e| ApiError::internal(e.to_string()))?,
                ));
                if batch.len() == REPLAY_BATCH {
                    local_checkpoint = replay(&batch)?;
                    replayed += batch.len();
                    batch.clear();
                }
            }
        }
        if !batch.is_empty() || replayed == 0 {
            local_checkpoint = replay(&batch)?;
            replayed += batch.len();
        }
        Ok((replayed, local_checkpoint))
    }

    /// Whether `target` is the relocation target of this node's primary of `shard`.
    fn is_primary_relocation_target(
        &self,
        service: &IndexService,
        shard: usize,
        target: &str,
    ) -> bool {
        self.core
            .cluster_state()
            .copies(&service.name(), shard as u32)
            .iter()
            .any(|c| {
                c.primary
                    && c.relocating_node.is_some()
                    && c.allocation_id.as_deref() == Some(target)
            })
    }

    /// Drops the recoveries this node serves whose target no longer waits for them (its
    /// recovery failed or was cancelled, its node left) or that went without a request for
    /// `indices.recovery.recovery_activity_timeout` (30m), releasing their pinned files and
    /// history leases. A recovery with a request in flight is left alone.
    pub(crate) fn drop_abandoned(&self) {
        let state = self.core.cluster_state();
        let timeout = self
            .core
            .cluster_setting(RECOVERY_ACTIVITY_TIMEOUT)
            .and_then(|text| crate::settings::parse_time(&text).ok().flatten())
            .unwrap_or(Duration::from_secs(30 * 60));
        let abandoned: Vec<(String, Arc<Outgoing>)> = {
            let mut outgoing = self.outgoing.lock();
            let ids: Vec<String> = outgoing
                .iter()
                .filter(|(_, o)| Arc::strong_count(o) == 1)
                .filter(|(_, o)| {
                    !o.target_still_recovering(&state) || o.last_used.lock().elapsed() > timeout
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| outgoing.remove(&id).map(|o| (id, o)))
                .collect()
        };
        for (recovery_id, outgoing) in abandoned {
            info!(index = %outgoing.service.name(), shard = outgoing.shard, target = %outgoing.target_allocation_id, recovery_id, "dropping a recovery its target abandoned: releasing its files and history");
            outgoing.release();
        }
    }

    /// The number of recoveries this node serves as the source (diagnostics and tests).
    pub fn outgoing_count(&self) -> usize {
        self.outgoing.lock().len()
    }

    /// Peer recoveries this node serves from copies of `index`.
    pub(super) fn outgoing_for(&self, index: &str, shard: Option<usize>) -> u64 {
        let outgoing = self.outgoing.lock();
        outgoing
            .values()
            .filter(|o| o.service.name() == index && shard.is_none_or(|s| o.shard == s))
            .count() as u64
    }
}

/// Pins the engine's last commit under `dir` and lists its files, each verified against the
/// checksum recorded when it was written.
fn pin_commit(
    engine: &Arc<shoal_engine::Engine>,
    dir: &std::path::Path,
) -> ApiResult<(CommitSnapshot, Vec<FileMeta>)> {
    let snapshot = snapshot_commit(engine, dir).map_err(ApiError::from)?;
    let files = snapshot
        .files
        .iter()
        .map(|(name, _)| {
            store_file(&snapshot.dir.join(name), name).map_err(|e| match e {
                // This copy's own store is damaged: it must not serve anyone.
                FileCheckError::Corrupted(reason) => ApiError::from(engine.fail_corrupted(reason)),
                FileCheckError::Unreadable(reason) => ApiError::internal(reason),
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok((snapshot, files))
}

/// OpenSearch's limit on a recovery's silence before the source gives up on it.
const RECOVERY_ACTIVITY_TIMEOUT: &str = "indices.recovery.recovery_activity_timeout";
