//! A copy applying its primary's operations.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_engine::{DocRequest, OpKind, Origin, WriteOp};
use shoal_transport::WireAction;

use super::ReplicationService;
use super::{ReplicaOp, ReplicaOpHeader};
use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::metadata::IndexMetadataExt;

pub const ACTION_REPLICA_OPS: &str = <ReplicaOpsAction as WireAction>::NAME;

/// A primary sends a batch of operations to one of its copies. The request is framed (see
/// `crate::wire`): the batch as JSON, then the documents' sources as they are.
pub struct ReplicaOpsAction;
impl WireAction for ReplicaOpsAction {
    const NAME: &'static str = super::action_names::REPLICA_OPS;
    type Request = ReplicaFrame;
    type Response = ReplicaReply;

    fn encode_request(request: &ReplicaFrame) -> Result<Bytes, String> {
        let blobs: Vec<Option<&[u8]>> = request.sources.iter().map(Option::as_deref).collect();
        Ok(crate::wire::frame(&request.batch, &blobs))
    }

    fn decode_request(body: Bytes) -> Result<ReplicaFrame, String> {
        let (batch, sources) = crate::wire::unframe(body)?;
        Ok(ReplicaFrame { batch, sources })
    }

    fn encode_response(response: &ReplicaReply) -> Result<Bytes, String> {
        serde_json::to_vec(response)
            .map(Bytes::from)
            .map_err(|e| e.to_string())
    }

    fn decode_response(body: Bytes) -> Result<ReplicaReply, String> {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }
}

/// A batch and the sources of its operations (`None`: an operation without one).
pub struct ReplicaFrame {
    pub batch: ReplicaBatch,
    pub sources: Vec<Option<Bytes>>,
}

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &std::sync::Arc<ReplicationService>,
) {
    actions.register_on::<ReplicaOpsAction, _>(
        std::sync::Arc::downgrade(service),
        ReplicationService::handle_replica_batch,
    );
}

/// The error type a copy answers when it is the primary itself: the sender was deposed (its
/// kind is `Moved`).
const NOT_A_REPLICA: &str = "shard_not_in_replica_mode_exception";

/// Where a batch of replica operations goes and under which primary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaBatch {
    pub index: String,
    pub index_uuid: String,
    pub shard: usize,
    pub target_allocation_id: String,
    pub primary_term: i64,
    pub global_checkpoint: i64,
    /// The primary's max_seq_no_of_updates, read after it applied `ops`: a copy that has
    /// processed every operation up to it adds new documents without looking their ids up.
    #[serde(default = "unknown_max_seq_no_of_updates")]
    pub max_seq_no_of_updates: i64,
    /// The write asked for `refresh=true|wait_for`: make it searchable on this copy too.
    #[serde(default)]
    pub refresh: bool,
    /// The first batch of a new primary's resync: the copy refuses it if its own history
    /// above the global checkpoint diverged from the new primary's ([`super::resync`]).
    #[serde(default)]
    pub resync: bool,
    /// With `resync`: (seq_no, term) of the new primary's whole history above the global
    /// checkpoint, of which `ops` is the first chunk (empty: `ops` is all of it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resync_history: Vec<(i64, i64)>,
    /// The primary's peer-recovery retention leases: the copy retains the same history, so
    /// it can serve the other copies' operation-based recoveries if it is promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_leases: Option<shoal_replication::RetentionLeases>,
    pub ops: Vec<ReplicaOpHeader>,
}

/// A batch without the field (from an older sender) may hold updates anywhere.
fn unknown_max_seq_no_of_updates() -> i64 {
    i64::MAX
}

/// How a batch is to be applied on the copy.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchOptions {
    pub refresh: bool,
    pub resync: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicaReply {
    pub local_checkpoint: i64,
    pub global_checkpoint: i64,
}

/// How long a copy may take to apply a batch before the primary gives up on it.
const REPLICA_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A batch in flight to a copy; resolves to the copy's checkpoints.
pub(crate) type PendingReply = tokio::task::JoinHandle<ApiResult<ReplicaReply>>;

/// Sends operations (live writes or a recovery's replay) from the local primary copy of
/// `shard` to the copy `target`, under the engine's current term and global checkpoint.
/// Every role that sends to a copy (the primary, a recovery's replay, a resync) goes through
/// here; it needs only the node's transport and applied state.
pub(crate) fn send_replica_batch(
    core: &NodeCore,
    service: &crate::index_service::IndexService,
    shard: usize,
    engine: &shoal_engine::Engine,
    target: &str,
    ops: &[ReplicaOp],
    options: BatchOptions,
) -> PendingReply {
    send_resync_batch(
        core,
        service,
        shard,
        engine,
        target,
        ops,
        options,
        Vec::new(),
    )
}

/// [`send_replica_batch`] with the new primary's history for a resync's first batch.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_resync_batch(
    core: &NodeCore,
    service: &crate::index_service::IndexService,
    shard: usize,
    engine: &shoal_engine::Engine,
    target: &str,
    ops: &[ReplicaOp],
    options: BatchOptions,
    resync_history: Vec<(i64, i64)>,
) -> PendingReply {
    let batch = ReplicaBatch {
        index: service.name(),
        index_uuid: service.uuid(),
        shard,
        target_allocation_id: target.to_string(),
        primary_term: engine.primary_term(),
        global_checkpoint: engine.global_checkpoint(),
        max_seq_no_of_updates: engine.max_seq_no_of_updates(),
        refresh: options.refresh,
        resync: options.resync,
        resync_history,
        retention_leases: service.replication(shard).and_then(|r| r.leases_to_sync()),
        ops: ops.iter().map(|op| op.header.clone()).collect(),
    };
    let blobs: Vec<Option<&[u8]>> = ops.iter().map(|op| Some(op.source.as_slice())).collect();
    let body = crate::wire::frame(&batch, &blobs);
    let address = super::copy_address(&core.cluster_state(), &batch.index, shard, target);
    // Framed here from the borrowed sources (no copy into a `ReplicaFrame`).
    let pending = address.map(|a| core.send_encoded::<ReplicaOpsAction>(&a, body, REPLICA_TIMEOUT));
    core.runtime.spawn(async move {
        let Some(pending) = pending else {
            return Err(ApiError::new(
                404,
                "shard_not_found_exception",
                "the copy is not in the routing table",
            ));
        };
        pending
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
    })
}

/// Waits for a batch sent with [`send_replica_batch`].
pub(crate) fn wait_replica_reply(
    core: &NodeCore,
    pending: PendingReply,
) -> ApiResult<ReplicaReply> {
    core.runtime
        .block_on(pending)
        .unwrap_or_else(|e| Err(ApiError::internal(e.to_string())))
}

impl ReplicationService {
    /// Applies a batch from the primary to the local copy it names.
    fn handle_replica_batch(&self, frame: ReplicaFrame) -> ApiResult<ReplicaReply> {
        // Counted, never refused: a refused batch would fail an in-sync copy.
        let bytes = frame.sources.iter().flatten().map(|b| b.len() as u64).sum();
        let _in_flight = self.core.pressure.indexing.replica(bytes);
        self.apply_replica_batch(&frame.batch, frame.sources)
    }

    fn apply_replica_batch(
        &self,
        batch: &ReplicaBatch,
        sources: Vec<Option<Bytes>>,
    ) -> ApiResult<ReplicaReply> {
        let copy = self.replica_copy(batch)?;
        let (service, engine) = (copy.service.clone(), copy.engine().clone());
        if batch.primary_term > engine.primary_term() {
            crate::failpoints::failpoint!(self.core, "before_term_bump");
        }
        // Held until the batch is applied: the copy's term cannot move under it, so a batch
        // of a deposed primary either applies before the bump or is refused after it.
        let _permit = copy.shard.acquire_replica_permit(batch.primary_term)?;
        crate::failpoints::failpoint!(self.core, "replica_apply_after_term_check");
        if batch.resync {
            super::resync::check_not_diverged(&engine, batch)?;
        }
        // A segment replica only logs the operations: its documents come with the segments.
        let parse = !engine.is_writer_less();
        let ops: Vec<WriteOp> = batch
            .ops
            .iter()
            .zip(sources)
            .map(|(header, source)| {
                let source = source.map(|b| b.to_vec()).unwrap_or_default();
                replica_write(&service, engine.schema(), header, source, parse)
            })
            .collect();
        engine.advance_max_seq_no_of_updates(batch.max_seq_no_of_updates);
        let mut last_location = None;
        for result in engine.apply(ops, Origin::Replica) {
            let result = result.map_err(ApiError::from)?;
            last_location = last_location.max(result.location);
        }
        if let Some(location) = last_location {
            if service.with_meta(|m| m.settings().durability()) == shoal_engine::Durability::Request
            {
                engine.sync_to(&location)?;
            }
        }
        engine.update_global_checkpoint(batch.global_checkpoint.min(engine.local_checkpoint()));
        if batch.refresh {
            engine.refresh()?;
        }
        if let Some(replication) = &copy.replication {
            adopt_primary_state(replication, &engine, batch);
        }
        Ok(ReplicaReply {
            local_checkpoint: engine.local_checkpoint(),
            global_checkpoint: engine.global_checkpoint(),
        })
    }

    /// The local copy a batch names, unless it is the primary itself: a relocation handed the
    /// primary role to this copy, so the sender is no longer the primary and must not fail
    /// this copy for refusing.
    fn replica_copy(&self, batch: &ReplicaBatch) -> ApiResult<crate::shard::lookup::LocalCopy> {
        let shard_id = shoal_types::ShardId::new(batch.index_uuid.clone(), batch.shard as u32);
        let target = shoal_types::AllocationId::from(batch.target_allocation_id.as_str());
        let copy = self
            .core
            .local_copy(&batch.index, &shard_id, Some(&target))?;
        if copy
            .replication
            .as_ref()
            .is_some_and(|r| r.tracker.lock().is_primary_mode())
        {
            return Err(ApiError::new(
                409,
                NOT_A_REPLICA,
                format!(
                    "[{}][{}] this copy is the primary now",
                    batch.index, batch.shard
                ),
            )
            .with_kind(ErrorKind::Moved));
        }
        Ok(copy)
    }
}

/// A replica follows the global checkpoint and the retention leases its primary sent along.
fn adopt_primary_state(
    replication: &super::ShardReplication,
    engine: &shoal_engine::Engine,
    batch: &ReplicaBatch,
) {
    let adopted = {
        let mut tracker = replication.tracker.lock();
        tracker.update_global_checkpoint_on_replica(batch.global_checkpoint);
        // A batch that raced this copy's own promotion must not replace its set.
        !tracker.is_primary_mode()
            && batch
                .retention_leases
                .as_ref()
                .is_some_and(|leases| tracker.leases.adopt_from_primary(leases))
    };
    if adopted {
        replication.apply_retention_floor(engine);
    }
}

/// The engine operation for a replicated one, parsed against this copy's mapping unless
/// `parse` is false (a segment replica, which never indexes it).
pub(crate) fn replica_write(
    service: &crate::index_service::IndexService,
    schema: &shoal_mapping::ShardSchema,
    header: &ReplicaOpHeader,
    source: Vec<u8>,
    parse: bool,
) -> WriteOp {
    match header.kind {
        OpKind::Index => WriteOp::Index {
            doc: match parse {
                true => service.parse_for_replica(schema, &header.id, &source),
                false => tantivy::TantivyDocument::default(),
            },
            id: header.id.clone(),
            routing: header.routing.clone(),
            source,
            request: DocRequest::default(),
            seq_no: header.seq_no,
            primary_term: header.primary_term,
            version: header.version,
        },
        OpKind::Delete => WriteOp::Delete {
            id: header.id.clone(),
            routing: header.routing.clone(),
            request: DocRequest::default(),
            seq_no: header.seq_no,
            primary_term: header.primary_term,
            version: header.version,
        },
        OpKind::NoOp => WriteOp::NoOp {
            seq_no: header.seq_no,
            primary_term: header.primary_term,
            reason: "replicated no-op".into(),
        },
    }
}
