//! Peer recovery, as a service of its own ([`RecoveryService`], `Node.recoveries`): a new
//! copy catches up from the primary while writes continue.
//!
//! Target                                   Source (the primary, or a relocation's source)
//! 1. `start_recovery` ───────────────────▶ answers "replay from seq_no N" when the target's
//!    (with the history of a store it       store can catch up by operations alone
//!    already has, see [`ops_recovery`]); otherwise flushes and pins its last commit,
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

use crate::copy_reports::CopyReports;
use crate::core::NodeCore;
use crate::error::{ApiError, ErrorKind};
use crate::rpc::NodeActions;
use crate::segrep::SegrepService;
use crate::transfer::FileMeta;
use ops_recovery::HistoryOffer;
use shoal_transport::{Action, WireAction, WireStreamAction};

mod files;
pub mod ops_recovery;
pub mod progress;
mod records;
mod source;
mod target;
pub mod throttle;
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
pub const ACTION_PREFIX: &str = crate::replication::action_names::RECOVERY_PREFIX;

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

/// Registers the recovery actions this node serves, as the source and for the records.
pub(crate) fn register_actions(actions: &mut NodeActions, service: &Arc<RecoveryService>) {
    let weak = Arc::downgrade(service);
    actions.register_on::<StartAction, _>(weak.clone(), RecoveryService::serve_start);
    actions.register_on::<FileChunkAction, _>(weak.clone(), RecoveryService::serve_chunk);
    actions.register_stream_on::<FileStreamAction, _>(
        weak.clone(),
        RecoveryService::serve_file_stream,
    );
    actions.register_on::<FinalizeAction, _>(weak.clone(), RecoveryService::serve_finalize);
    actions.register_on::<progress::RecoveryListAction, _>(
        weak,
        RecoveryService::handle_recovery_list,
    );
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

/// Peer recoveries on this node, as the source and as the target, with their records and
/// their throttle. It holds the node's core and, as narrow handles, what a recovery ends
/// with: the segment replication service (a segment replica copies its primary's latest
/// checkpoint before it is reported started) and the reports to the cluster manager.
pub struct RecoveryService {
    core: Arc<NodeCore>,
    segrep: Arc<SegrepService>,
    reports: Arc<CopyReports>,
    outgoing: Mutex<HashMap<String, Arc<Outgoing>>>,
    /// `indices.recovery.max_bytes_per_sec` for every recovery into this node.
    limiter: throttle::RateLimiter,
    /// Allocation ids of local copies recovering or recovered (until reported started).
    incoming: Mutex<HashSet<String>>,
    /// Serializes recoveries writing the same shard directory.
    shard_locks: Mutex<HashMap<(String, usize), Arc<Mutex<()>>>>,
    /// The records of the peer recoveries running into this node, by allocation id (their
    /// copy adopts the record once it opens).
    targets: Mutex<HashMap<String, progress::RecoveryProgress>>,
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

impl RecoveryService {
    pub(crate) fn new(
        core: Arc<NodeCore>,
        segrep: Arc<SegrepService>,
        reports: Arc<CopyReports>,
    ) -> RecoveryService {
        RecoveryService {
            core,
            segrep,
            reports,
            outgoing: Default::default(),
            limiter: Default::default(),
            incoming: Default::default(),
            shard_locks: Default::default(),
            targets: Default::default(),
        }
    }

    /// The lock a recovery holds while it writes a shard's directory (deleting a shard's
    /// data takes it too).
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
