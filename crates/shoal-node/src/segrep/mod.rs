//! Segment replication between nodes (`index.replication.type: SEGMENT`): only the primary
//! indexes; its replicas log the operations they are sent (the write path is unchanged, see
//! `replication/`) and copy the primary's segment files after each of its refreshes.
//!
//! ```text
//! primary                                          replica (writer-less engine)
//! refresh ─▶ refresh listener ─▶ publish_checkpoint ──▶ remembers the newest (term, version);
//!                                                       one copy task per copy at a time:
//!            pins the commit's files (hard links) ◀──── get_checkpoint_info
//!            streams a pinned file                ◀──── file_stream, per file it lacks
//!                                                       install_checkpoint (reader swapped,
//!                                                       translog trimmed)
//!            drops the pin                        ◀──── release
//! ```
//! The source side is [`source`], the target side [`target`]. A promoted replica opens an
//! index writer and indexes what it only logged ([`ensure_writer`]) before it resyncs.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shoal_engine::{Engine, SegmentCheckpoint};

use crate::core::NodeCore;
use crate::error::ApiResult;
use crate::index_service::IndexService;
use crate::recovery::throttle::RateLimiter;
use crate::remote::RemoteStoreService;

pub mod precopy;
pub mod pressure;
mod round;
pub mod source;
pub mod stats;
pub mod target;

pub use crate::shard::segrep::CopyState;
pub use target::RoundEnd;

/// Every segment-replication action name starts with this (they run on the `replication`
/// pool, like recoveries).
pub const ACTION_PREFIX: &str = crate::replication::action_names::SEGREP_PREFIX;

/// The primary tells a replica it has a newer checkpoint (after a refresh).
pub struct PublishCheckpointAction;
impl shoal_transport::Action for PublishCheckpointAction {
    const NAME: &'static str = "internal:index/shard/replication/publish_checkpoint";
    type Request = PublishedCheckpoint;
    type Response = ();
}

/// A replica asks the primary for its latest checkpoint; the primary pins its files.
pub struct CheckpointInfoAction;
impl shoal_transport::Action for CheckpointInfoAction {
    const NAME: &'static str = "internal:index/shard/replication/get_checkpoint_info";
    type Request = CopyTarget;
    type Response = CheckpointInfo;
}

/// A replica is done with a pinned checkpoint.
pub struct ReleaseCheckpointAction;
impl shoal_transport::Action for ReleaseCheckpointAction {
    const NAME: &'static str = "internal:index/shard/replication/release";
    type Request = String;
    type Response = ();
}

/// The primary asks a replica to copy its current checkpoint now and answers once it has
/// (a write with `refresh=true|wait_for`).
pub struct SegmentsSyncAction;
impl shoal_transport::Action for SegmentsSyncAction {
    const NAME: &'static str = "internal:index/shard/replication/segments_sync";
    type Request = CopyTarget;
    type Response = target::RoundEnd;
}

/// A replica searches a newer checkpoint (lag statistics on the primary).
pub struct VisibleCheckpointAction;
impl shoal_transport::Action for VisibleCheckpointAction {
    const NAME: &'static str = "internal:index/shard/replication/update_visible_checkpoint";
    type Request = stats::VisibleCheckpoint;
    type Response = ();
}

/// The replicas of a node's primaries and how far behind they are (`_cat/segment_replication`).
pub struct ReplicaRowsAction;
impl shoal_transport::Action for ReplicaRowsAction {
    const NAME: &'static str = "internal:index/shard/replication/stats";
    type Request = Option<Vec<String>>;
    type Response = Vec<stats::ReplicaRow>;
}

crate::transfer::peer::file_stream_action!(
    /// Streams one file of a pinned checkpoint.
    FileStreamAction,
    "internal:index/shard/replication/file_stream",
    min_version = 1
);

/// Registers the segment replication actions this node serves (the file stream is registered
/// by the node, whose stream registration takes it).
pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<SegrepService>,
) {
    let weak = Arc::downgrade(service);
    actions.register_on::<PublishCheckpointAction, _>(
        weak.clone(),
        SegrepService::handle_published_checkpoint,
    );
    actions
        .register_on::<CheckpointInfoAction, _>(weak.clone(), SegrepService::serve_checkpoint_info);
    actions.register_on::<ReleaseCheckpointAction, _>(
        weak.clone(),
        SegrepService::release_pinned_checkpoint,
    );
    actions.register_on::<SegmentsSyncAction, _>(weak.clone(), SegrepService::sync_segments);
    actions.register_on::<VisibleCheckpointAction, _>(
        weak.clone(),
        SegrepService::handle_visible_checkpoint,
    );
    actions.register_on::<precopy::PublishMergedSegmentAction, _>(
        weak.clone(),
        SegrepService::receive_merged_segment,
    );
    actions.register_on::<ReplicaRowsAction, _>(weak, SegrepService::serve_replica_rows);
}

/// Segment replication on this node: publishing and pinning checkpoints as a primary,
/// copying and installing them as a replica, lag and backpressure. It holds the node's core
/// and its own rate limiter (`indices.replication.max_bytes_per_sec` paces segment copies
/// apart from recoveries, as in OpenSearch), and one for merged-segment pre-copies.
pub struct SegrepService {
    core: Arc<NodeCore>,
    limiter: RateLimiter,
    /// Remote-backed indices publish only uploaded checkpoints, and their replicas copy from
    /// the repository.
    remote: Arc<RemoteStoreService>,
    /// Itself, for work it schedules (a publication retried after a failed upload).
    me: std::sync::Weak<SegrepService>,
    precopy_limiter: RateLimiter,
    warmer: precopy::WarmerCounters,
}

impl SegrepService {
    /// The remote store this service copies from for remote-backed indices.
    pub(crate) fn remote(&self) -> &Arc<RemoteStoreService> {
        &self.remote
    }

    pub fn new(core: Arc<NodeCore>, remote: Arc<RemoteStoreService>) -> Arc<SegrepService> {
        Arc::new_cyclic(|me| SegrepService {
            core,
            limiter: RateLimiter::default(),
            precopy_limiter: RateLimiter::default(),
            warmer: precopy::WarmerCounters::default(),
            remote,
            me: me.clone(),
        })
    }
}

/// The copy a segment-replication message is about.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyTarget {
    pub index: String,
    pub index_uuid: String,
    pub shard: usize,
    /// The replica's allocation id.
    pub allocation_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishedCheckpoint {
    pub target: CopyTarget,
    pub primary_term: i64,
    pub version: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointInfo {
    /// Names the pinned files on the primary (file streams and the release use it).
    pub session: String,
    pub checkpoint: SegmentCheckpoint,
}

/// Gives a promoted segment replica an index writer: the operations it only logged are
/// indexed on top of the last segments it copied, so it holds every operation it
/// acknowledged before it acts as the primary. A failure fails the engine (the copy is then
/// reported and another one promoted).
pub(crate) fn ensure_writer(service: &IndexService, engine: &Engine) -> ApiResult<()> {
    if !engine.is_writer_less() {
        return Ok(());
    }
    let parse = |id: &str, source: &[u8]| service.parse_document(id, source);
    match engine.promote_to_writer(&parse) {
        Ok(indexed) => {
            tracing::info!(index = %service.name(), indexed, "segment replica took the primary role");
            Ok(())
        }
        Err(e) => {
            let reason = engine.fail_engine(format!("promotion of a segment replica failed: {e}"));
            Err(crate::error::ApiError::internal(reason))
        }
    }
}

/// `(term, version)` of a checkpoint, the order copies compare them in.
pub(crate) fn position(checkpoint: &SegmentCheckpoint) -> (i64, u64) {
    (checkpoint.primary_term, checkpoint.version)
}
