//! Peer recovery: a new copy catches up from the primary while writes continue.
//!
//! Target                                   Source (the primary, or a relocation's source)
//! 1. `start_recovery` ───────────────────▶ answers "replay from seq_no N" when the target's
//!    (with the history of a store it       store can catch up by operations alone
//!    already has, see [`super::ops_recovery`]); otherwise flushes and pins its last commit,
//!                                          and lists the files
//! 2. `file_stream` per file it lacks ─────▶ streams the pinned file in chunks (see
//!    ([`crate::transfer`]; `file_chunk`      [`crate::transfer`])
//!    requests to a source that predates it)
//! 3. binds the files to a new translog and opens the copy (an operation-based recovery skips
//!    2 and 3 and keeps its store)
//! 4. `finalize` ─────────────────────────▶ starts tracking the copy (live operations flow),
//!                                          replays the history above the commit, marks the
//!                                          copy in sync once it reaches the global checkpoint
//! 5. reports the copy started; the cluster manager adds it to the in-sync set.
//!
//! Files already on the target with the same name, length and crc32c are reused (tantivy
//! segment files are immutable and uniquely named), so a returning copy copies only what
//! changed. Both sides check files against the checksum recorded when they were written
//! (`shoal_engine::store::checksum_file`): the source before it lists them, the target before
//! it reuses one; a target whose store is marked corrupted copies every file.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use shoal_state::ShardRouting;
use tracing::{debug, info, warn};

use super::ops_recovery::{history_offer, HistoryOffer};
use super::progress::{RecoveryRecord, RecoveryType, Stage};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;
use crate::node::Node;
use crate::rpc::NodeActions;
use crate::transfer::FileMeta;
use shoal_transport::{Action, WireAction, WireStreamAction};

mod files;
mod records;
mod source;
use source::Outgoing;

pub const ACTION_START: &str = <StartAction as Action>::NAME;
pub const ACTION_FILE_CHUNK: &str = <FileChunkAction as WireAction>::NAME;
pub const ACTION_FILE_STREAM: &str = <FileStreamAction as WireStreamAction>::NAME;
pub const ACTION_FINALIZE: &str = <FinalizeAction as Action>::NAME;

/// The target asks the source to start a recovery: the source pins a commit and answers its
/// files (or accepts the target's history for an operation-based recovery).
struct StartAction;
impl Action for StartAction {
    const NAME: &'static str = "internal:index/shard/recovery/start_recovery";
    type Request = StartRequest;
    type Response = StartReply;
}

/// What every recovery action's name starts with (they run on the `replication` pool).
pub const ACTION_PREFIX: &str = super::action_names::RECOVERY_PREFIX;

crate::transfer::peer::file_stream_action!(
    /// A file of the pinned commit from an offset on, streamed in chunks of raw bytes. A
    /// source announces it in its `start_recovery` answer (`streams_files`); older sources
    /// do not, and their targets ask chunk by chunk with [`FileChunkAction`].
    FileStreamAction,
    "internal:index/shard/recovery/file_stream",
    min_version = 1
);

/// One chunk of a file of the pinned commit; the answer is the chunk's raw bytes. Kept for
/// targets that predate [`FileStreamAction`], and used towards sources that do.
struct FileChunkAction;
impl WireAction for FileChunkAction {
    const NAME: &'static str = "internal:index/shard/recovery/file_chunk";
    type Request = ChunkRequest;
    type Response = Bytes;

    fn encode_request(request: &ChunkRequest) -> Result<Bytes, String> {
        Ok(crate::rpc::json_bytes(request))
    }

    fn decode_request(body: Bytes) -> Result<ChunkRequest, String> {
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }

    fn encode_response(chunk: &Bytes) -> Result<Bytes, String> {
        Ok(chunk.clone())
    }

    fn decode_response(chunk: Bytes) -> Result<Bytes, String> {
        Ok(chunk)
    }
}

/// The source replays the operations above the copied commit and releases the recovery.
struct FinalizeAction;
impl Action for FinalizeAction {
    const NAME: &'static str = "internal:index/shard/recovery/finalize";
    type Request = FinalizeRequest;
    type Response = FinalizeReply;
}

pub(crate) fn register_actions(actions: &mut NodeActions<Node>) {
    actions.register::<StartAction>(Node::serve_start);
    actions.register::<FileChunkAction>(Node::serve_chunk);
    actions.register_stream::<FileStreamAction>(source::serve_file_stream);
    actions.register::<FinalizeAction>(Node::serve_finalize);
    actions.register::<super::progress::RecoveryListAction>(Node::handle_recovery_list);
}

/// tantivy's commit point: the list of segments and the commit's payload.
const COMMIT_FILE: &str = "meta.json";

/// Operations per replayed batch.
const REPLAY_BATCH: usize = 500;
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StartRequest {
    index: String,
    index_uuid: String,
    shard: usize,
    target_allocation_id: String,
    /// What the target's existing store holds (operation-based recovery).
    #[serde(default)]
    history: Option<HistoryOffer>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StartReply {
    recovery_id: String,
    /// The files of the pinned commit: the target reuses its own copy of one only if name,
    /// length and crc32c all match (deletion files of one segment have the same length on
    /// every copy, not the same bits).
    files: Vec<FileMeta>,
    /// Set when the source accepted the target's history: no files, operations from here.
    #[serde(default)]
    replay_from: Option<i64>,
    /// The source serves [`FileStreamAction`]; a source that predates it leaves this out.
    #[serde(default)]
    streams_files: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChunkRequest {
    recovery_id: String,
    name: String,
    offset: u64,
    length: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FinalizeRequest {
    recovery_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct FinalizeReply {
    ops_replayed: usize,
}

/// The recoveries of this node, as source and as target.
#[derive(Default)]
pub struct Recoveries {
    outgoing: Mutex<HashMap<String, Arc<Outgoing>>>,
    /// `indices.recovery.max_bytes_per_sec` for every recovery into this node.
    pub(crate) limiter: super::throttle::RateLimiter,
    /// Allocation ids of local copies recovering or recovered (until reported started).
    incoming: Mutex<HashSet<String>>,
    /// Serializes recoveries writing the same shard directory.
    shard_locks: Mutex<HashMap<(String, usize), Arc<Mutex<()>>>>,
    /// The records of the peer recoveries running into this node, by allocation id (their
    /// copy adopts the record once it opens).
    pub(crate) targets: Mutex<HashMap<String, super::progress::RecoveryProgress>>,
}

/// A recovery stopped because its copy is no longer assigned here (not a failure to report).
fn cancelled() -> ApiError {
    ApiError::new(
        409,
        "recovery_cancelled_exception",
        "the copy is no longer assigned here",
    )
    .with_kind(ErrorKind::Moved)
}

impl Recoveries {
    pub(crate) fn shard_lock(&self, index: &str, shard: usize) -> Arc<Mutex<()>> {
        self.shard_locks
            .lock()
            .entry((index.to_string(), shard))
            .or_default()
            .clone()
    }

    pub fn is_recovering(&self, allocation_id: &str) -> bool {
        self.incoming.lock().contains(allocation_id)
    }
}

/// A copy that must be recovered from another copy before it can serve: an initializing
/// replica, or the target of a relocation.
pub fn needs_peer_recovery(copy: &ShardRouting) -> bool {
    copy.state == shoal_state::ShardState::Initializing
        && (copy.recovery_source == Some(shoal_state::RecoverySource::Peer)
            || !copy.primary
            || copy.relocating_node.is_some())
}

impl Node {
    /// Starts recovering a local copy in the background, once per allocation id.
    pub(crate) fn start_peer_recovery(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
    ) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        if !self
            .recoveries
            .incoming
            .lock()
            .insert(allocation_id.clone())
        {
            return;
        }
        let (node, service, copy) = (self.clone(), service.clone(), copy.clone());
        // On the bounded `replication` pool, never refused; the allocation deciders bound how
        // many recoveries a node runs (`node_concurrent_recoveries`).
        let pool = self
            .pressure
            .pool(crate::pressure::settings::REPLICATION)
            .clone();
        let queued = pool.spawn(crate::pressure::Admission::Force, move || {
            let started = Instant::now();
            let outcome = node.recover_copy_retrying(&service, &copy);
            node.end_recovery_record(&service, copy.shard as usize, &allocation_id);
            match outcome {
                Ok(stats) => {
                    info!(index = %copy.index, shard = copy.shard, allocation_id, files = stats.0, bytes = stats.1, ops = stats.2, took_ms = started.elapsed().as_millis() as u64, "peer recovery done");
                    node.report_started(&copy);
                }
                Err(e) if e.kind == ErrorKind::Moved && !node.still_assigned_here(&copy) => {
                    info!(index = %copy.index, shard = copy.shard, allocation_id, "peer recovery cancelled: the copy is no longer assigned here");
                    node.recoveries.incoming.lock().remove(&allocation_id);
                }
                Err(e) => {
                    warn!(index = %copy.index, shard = copy.shard, allocation_id, error = %e, "peer recovery failed");
                    node.recoveries.incoming.lock().remove(&allocation_id);
                    // Only this recovery's files: a newer copy of the shard may be open.
                    if service.replication(copy.shard as usize).is_none_or(|r| r.allocation_id == allocation_id) {
                        service.close_shard(copy.shard as usize);
                    }
                    node.report_failed(&copy, &format!("failed recovery: {}", e.reason));
                }
            }
        });
        debug_assert!(queued.is_ok(), "forced work is never rejected");
    }

    /// [`Node::recover_copy`], tried again while the failure is the source's transient state
    /// (unreachable, restarting, not yet acting as primary) and the copy is still assigned
    /// here: failing at once would burn `index.allocation.max_retries` in milliseconds.
    fn recover_copy_retrying(
        &self,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
    ) -> ApiResult<(usize, u64, usize)> {
        let mut attempt = 1;
        loop {
            match self.recover_copy(service, copy) {
                Err(e)
                    if attempt < RECOVERY_ATTEMPTS
                        && is_transient(&e)
                        && self.still_assigned_here(copy) =>
                {
                    debug!(index = %copy.index, shard = copy.shard, attempt, error = %e, "peer recovery will be retried");
                    attempt += 1;
                    std::thread::sleep(RECOVERY_RETRY_DELAY);
                }
                outcome => return outcome,
            }
        }
    }

    /// The target side; returns (files copied, bytes copied, operations replayed).
    fn recover_copy(
        &self,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
    ) -> ApiResult<(usize, u64, usize)> {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        // One recovery at a time writes a shard's directory; a recovery whose copy was
        // failed or moved meanwhile (a newer one may be queued) stops here.
        let shard_lock = self.recoveries.shard_lock(&copy.index, shard);
        let _writing = shard_lock.lock();
        if !self.still_assigned_here(copy) {
            return Err(cancelled());
        }
        let (source_node, source) = self.recovery_source_address(copy)?;
        let source_id = source_node.clone();
        let (index, record) = (service.name(), |f: &dyn Fn(&mut RecoveryRecord)| {
            self.update_recovery(&copy.index, shard, &allocation_id, f)
        });
        let mut fresh = RecoveryRecord::new(
            &index,
            shard,
            &allocation_id,
            copy.primary,
            RecoveryType::Peer,
            &self.node_id,
        );
        fresh.source_node = Some(source_node);
        let progress = self.record_recovery(fresh);
        let term = service.with_meta(|m| m.primary_terms.get(shard).copied().unwrap_or(1)) as i64;
        let start = self.call::<StartAction>(
            &source,
            &StartRequest {
                index: service.name(),
                index_uuid: service.uuid(),
                shard,
                target_allocation_id: allocation_id.clone(),
                history: history_offer(service, shard, term),
            },
            CALL_TIMEOUT,
        )?;
        let (files, bytes) = match start.replay_from {
            Some(_) => (0, 0),
            None => self.recover_files(service, copy, (&source_id, &source), &start, term)?,
        };
        record(&|r| r.stage = Stage::Translog);
        service.ensure_shard_open(shard, term, false)?;
        let local = service.copy(shard)?;
        local.set_recovery(progress);
        let engine = local.engine().clone();
        let replication = local.replication_for(&allocation_id, engine.global_checkpoint());
        replication.apply_cluster_state(&self.cluster_state(), &service.name(), shard);
        crate::failpoints::failpoint!(self, "recovery_before_finalize");
        let reply = self.call::<FinalizeAction>(
            &source,
            &FinalizeRequest {
                recovery_id: start.recovery_id,
            },
            CALL_TIMEOUT,
        )?;
        // Searchable before the copy is reported started: a segment replica copies what its
        // primary searches now (the recovery's commit may be older).
        match engine.is_writer_less() {
            false => engine.refresh().map(|_| ())?,
            true => self.segrep.sync_segments(crate::segrep::CopyTarget {
                index: service.name(),
                index_uuid: service.uuid(),
                shard,
                allocation_id: allocation_id.clone(),
            })?,
        }
        record(&|r| {
            r.ops_total = reply.ops_replayed as u64;
            r.ops_recovered = reply.ops_replayed as u64;
            r.finish();
        });
        Ok((files, bytes, reply.ops_replayed))
    }

    /// Whether the latest cluster state still places this copy (by allocation id) here.
    fn still_assigned_here(&self, copy: &ShardRouting) -> bool {
        self.cluster_state()
            .copies(&copy.index, copy.shard)
            .iter()
            .any(|c| {
                c.allocation_id == copy.allocation_id
                    && c.node.as_deref() == Some(self.node_id.as_str())
            })
    }

    /// The node a copy recovers from (id, transport address): a relocation's source, or the
    /// primary.
    fn recovery_source_address(&self, copy: &ShardRouting) -> ApiResult<(String, String)> {
        let state = self.cluster_state();
        // A primary's relocation target recovers from the relocating primary; every other
        // copy (a replica's relocation target too) from the primary, the only copy that
        // can start tracking it.
        let node = match &copy.relocating_node {
            Some(source) if copy.primary => Some(source.clone()),
            _ => state
                .primary(&copy.index, copy.shard)
                .filter(|p| p.is_active())
                .and_then(|p| p.node.clone()),
        };
        node.and_then(|n| state.nodes.get(&n))
            .map(|n| (n.id.clone(), n.transport_address.clone()))
            .ok_or_else(|| {
                ApiError::new(
                    503,
                    "no_shard_available_action_exception",
                    format!(
                        "[{}][{}] no active copy to recover from",
                        copy.index, copy.shard
                    ),
                )
            })
    }
}

/// Attempts of one peer recovery before the copy is reported failed, and the pause between.
const RECOVERY_ATTEMPTS: u32 = 10;
const RECOVERY_RETRY_DELAY: Duration = Duration::from_secs(1);

/// Failures that come from the source's state of the moment, not from the copy: it is
/// unreachable or not ready, busy, no longer the primary, or does not know the index yet.
fn is_transient(error: &ApiError) -> bool {
    error.kind.is_retryable() || error.kind == ErrorKind::NotFound
}

/// Polls `ready` until it holds or `timeout` passes.
fn wait_for(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !ready() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A local file's name, length and crc32c, once its bytes match the checksum recorded when
/// it was written (tantivy's footer; the payload checksum for the commit). The source sends
/// only verified files and a target reuses only verified ones.
fn store_file(
    path: &std::path::Path,
    name: &str,
) -> Result<FileMeta, shoal_engine::store::FileCheckError> {
    let (length, crc32c) = shoal_engine::store::checksum_file(path)?;
    Ok(FileMeta {
        name: name.to_string(),
        length,
        crc32c,
    })
}

#[cfg(test)]
mod pool_tests {
    use super::*;
    use crate::pressure::{pool_for_action, settings::REPLICATION, Admission};

    #[test]
    fn every_recovery_action_runs_on_the_replication_pool_and_is_never_rejected() {
        for name in [
            <StartAction as Action>::NAME,
            <FileChunkAction as WireAction>::NAME,
            <FinalizeAction as Action>::NAME,
        ] {
            assert!(name.starts_with(ACTION_PREFIX), "{name}");
            let (pool, admission) = pool_for_action(name);
            assert_eq!(pool, REPLICATION, "{name}");
            assert!(matches!(admission, Admission::Force), "{name}");
        }
    }
}
