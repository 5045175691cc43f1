//! Peer recovery: a new copy catches up from the primary while writes continue.
//!
//! Target                                   Source (the primary, or a relocation's source)
//! 1. `start_recovery` ───────────────────▶ answers "replay from seq_no N" when the target's
//!    (with the history of a store it       store can catch up by operations alone
//!    already has, see [`super::ops_recovery`]); otherwise flushes and pins its last commit,
//!                                          and lists the files
//! 2. `file_chunk`s for the files it lacks ▶ reads the pinned files (name, offset, length)
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
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use shoal_engine::recovery::bind_recovered_store;
use shoal_state::ShardRouting;
use tracing::{debug, info, warn};

use super::ops_recovery::{history_offer, HistoryOffer};
use super::progress::{RecoveryRecord, RecoveryType, Stage};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;
use crate::node::Node;
use crate::rpc::NodeActions;
use shoal_transport::{Action, WireAction};

mod source;
use source::Outgoing;

pub const ACTION_START: &str = <StartAction as Action>::NAME;
pub const ACTION_FILE_CHUNK: &str = <FileChunkAction as WireAction>::NAME;
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
pub const ACTION_PREFIX: &str = "internal:index/shard/recovery/";

/// One chunk of a file of the pinned commit; the answer is the chunk's raw bytes.
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

pub(crate) fn register_actions(actions: &mut NodeActions) {
    actions.register::<StartAction>(Node::serve_start);
    actions.register::<FileChunkAction>(Node::serve_chunk);
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
    files: Vec<StoreFile>,
    /// Set when the source accepted the target's history: no files, operations from here.
    #[serde(default)]
    replay_from: Option<i64>,
}

/// A file of the pinned commit: the target reuses its own copy only if all three match
/// (deletion files of one segment have the same length on every copy, not the same bits).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoreFile {
    name: String,
    length: u64,
    crc32c: u32,
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
            None => self.recover_files(service, copy, &source, &start, term)?,
        };
        record(&|r| r.stage = Stage::Translog);
        service.ensure_shard_open(shard, term)?;
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
        // Searchable before the copy is reported started.
        engine.refresh()?;
        record(&|r| {
            r.ops_total = reply.ops_replayed as u64;
            r.ops_recovered = reply.ops_replayed as u64;
            r.finish();
        });
        Ok((files, bytes, reply.ops_replayed))
    }

    /// The file phase of a file-based recovery: replaces the local store with the source's
    /// pinned commit, copying only the files it lacks; returns (files, bytes) copied.
    fn recover_files(
        &self,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
        source: &str,
        start: &StartReply,
        term: i64,
    ) -> ApiResult<(usize, u64)> {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        let record = |f: &dyn Fn(&mut RecoveryRecord)| {
            self.update_recovery(&copy.index, shard, &allocation_id, f)
        };
        service.close_shard(shard);
        if !self.still_assigned_here(copy) {
            return Err(cancelled());
        }
        let config = service.shard_engine_config(shard);
        let index_dir = config.index_dir();
        std::fs::create_dir_all(&index_dir)?;
        let wanted: HashMap<&str, u64> = start
            .files
            .iter()
            .map(|f| (f.name.as_str(), f.length))
            .collect();
        if let Some(reason) = shoal_engine::store::read_marker(&index_dir) {
            // Nothing of a store found damaged is reused: every file is copied again.
            warn!(index = %copy.index, shard, reason, "discarding a store marked corrupted before recovering it");
            remove_unwanted_files(&index_dir, &HashMap::new())?;
        }
        remove_unwanted_files(&index_dir, &wanted)?;
        // Until the copy is complete the directory has no commit, so a recovery cut short
        // leaves nothing that opens as a store (and is offered for an operation-based one).
        let _ = std::fs::remove_file(index_dir.join(COMMIT_FILE));
        record(&|r| {
            r.stage = Stage::Index;
            r.files_total = start.files.len() as u64;
            r.bytes_total = start.files.iter().map(|f| f.length).sum();
        });
        let (mut files, mut bytes) = (0usize, 0u64);
        let commit_last = start
            .files
            .iter()
            .filter(|f| f.name != COMMIT_FILE)
            .chain(start.files.iter().filter(|f| f.name == COMMIT_FILE));
        for file in commit_last {
            let path = index_dir.join(&file.name);
            let reusable =
                file.name != COMMIT_FILE && store_file(&path, &file.name).is_ok_and(|f| f == *file);
            if reusable {
                record(&|r| {
                    r.files_reused += 1;
                    r.bytes_reused += file.length;
                });
                continue;
            }
            self.copy_file(copy, source, &start.recovery_id, file, &path)?;
            record(&|r| {
                r.files_recovered += 1;
                r.bytes_recovered += file.length;
            });
            files += 1;
            bytes += file.length;
        }
        bind_recovered_store(&config, term).map_err(ApiError::from)?;
        Ok((files, bytes))
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

    /// Copies one file in chunks, `max_concurrent_file_chunks` requests in flight and paced by
    /// `max_bytes_per_sec`, and checks it against the source's checksum.
    fn copy_file(
        &self,
        copy: &ShardRouting,
        source: &str,
        recovery_id: &str,
        wanted: &StoreFile,
        path: &PathBuf,
    ) -> ApiResult<()> {
        let (name, length) = (wanted.name.as_str(), wanted.length);
        let partial = path.with_extension("recovering");
        let mut file = std::fs::File::create(&partial)?;
        let mut crc = 0u32;
        let mut requested = 0;
        let mut in_flight = std::collections::VecDeque::new();
        while requested < length || !in_flight.is_empty() {
            // Checked on every chunk: a copy failed, moved or deleted meanwhile stops copying
            // now rather than after the whole store (its partial file is left to be removed).
            if !self.still_assigned_here(copy) {
                return Err(cancelled());
            }
            let limits = self.recovery_limits();
            if requested < length && in_flight.len() < limits.concurrent_chunks {
                let request = ChunkRequest {
                    recovery_id: recovery_id.to_string(),
                    name: name.to_string(),
                    offset: requested,
                    length: limits.chunk_bytes.min(length - requested),
                };
                self.throttle_recovery(request.length);
                crate::failpoints::failpoint!(self, "recovery_before_file_chunk");
                requested += request.length;
                let pending = self.send::<FileChunkAction>(source, &request, CALL_TIMEOUT);
                in_flight.push_back((request, pending));
                continue;
            }
            // Chunks are written in order: wait for the oldest.
            let (request, pending) = in_flight.pop_front().expect("a chunk in flight");
            let chunk = self.wait(pending)?;
            if chunk.len() as u64 != request.length {
                return Err(ApiError::internal(format!(
                    "recovery of [{name}] got {} bytes at offset {}, expected {}",
                    chunk.len(),
                    request.offset,
                    request.length
                )));
            }
            file.write_all(&chunk)?;
            crate::failpoints::failpoint!(self, "recovery_after_file_chunk");
            crc = crc32c::crc32c_append(crc, &chunk);
        }
        if crc != wanted.crc32c {
            return Err(ApiError::internal(format!(
                "recovered file [{name}] is corrupted: checksum {crc:08x}, expected {:08x}",
                wanted.crc32c
            )));
        }
        file.sync_all()?;
        std::fs::rename(&partial, path)?;
        Ok(())
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
) -> Result<StoreFile, shoal_engine::store::FileCheckError> {
    let (length, crc32c) = shoal_engine::store::checksum_file(path)?;
    Ok(StoreFile {
        name: name.to_string(),
        length,
        crc32c,
    })
}

/// Deletes files of a previous copy that the commit being recovered does not list.
fn remove_unwanted_files(dir: &std::path::Path, wanted: &HashMap<&str, u64>) -> ApiResult<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted.contains_key(name.as_str()) && entry.path().is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
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
