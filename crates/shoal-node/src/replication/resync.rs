//! A copy taking over as primary (promotion after its primary failed, or the hand-over at the
//! end of a primary relocation) brings the other copies in line with its history before it
//! accepts a write (OpenSearch's `PrimaryReplicaSyncer`):
//!
//! 1. it fills the holes in its seq_nos below its max_seq_no with no-ops under its term (the
//!    operations that left them were never acknowledged: this in-sync copy lacked them);
//! 2. it sends every operation above the global checkpoint to every other in-sync copy, in
//!    batches of 500; the first carries the (seq_no, term) list of all of them. A copy compares
//!    that list with its own history above the global checkpoint before it applies anything:
//!    what it has must be there with the same term (and its translog must list all it has
//!    there, see `Engine::history_complete_from`). If it holds an operation the new primary
//!    lacks (an unacknowledged write of the old primary), its history diverged; it refuses,
//!    the new primary fails it, and it comes back through a file-based recovery, which
//!    replaces what diverged (Shoal's form of OpenSearch's rollback to the global checkpoint);
//! 3. only then does it act as primary. Writes routed to it wait until then
//!    (`WriteService::primary_location` waits for primary mode).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use shoal_engine::{Engine, NO_OPS_PERFORMED};

use super::replica::{BatchOptions, ReplicaBatch};
use super::ReplicationService;
use super::{ReplicaOp, ShardReplication};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;

/// The error a copy answers when its history above the global checkpoint diverged.
pub const DIVERGED: &str = "resync_diverged_exception";

impl ReplicationService {
    /// Starts the resync of a copy that became the primary, once (a later cluster state
    /// while it runs changes nothing). It waits on other nodes.
    pub(crate) fn start_primary_resync(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
        engine: Arc<Engine>,
        replication: Arc<ShardReplication>,
    ) {
        if replication.resyncing.swap(true, Ordering::AcqRel) {
            return;
        }
        let replication_service = Arc::clone(self);
        let service = Arc::clone(service);
        // On the `replication` pool, never refused: writes to this copy wait for it.
        self.core
            .pressure
            .spawn_forced(crate::pressure::settings::REPLICATION, move || {
                replication_service.resync_and_activate(&service, shard, &engine, &replication);
                replication.resyncing.store(false, Ordering::Release);
            });
    }

    /// Resyncs the other copies, then takes the primary role. A resync that fails (a copy
    /// that refused it could not be failed, say without a cluster manager) is tried again
    /// while this copy is still the primary of its term: acting as primary while a
    /// diverged copy is still in sync would let its stale operations survive.
    fn resync_and_activate(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        engine: &Engine,
        replication: &ShardReplication,
    ) {
        let index = service.name();
        if let Err(error) = crate::segrep::ensure_writer(service, engine) {
            // The engine failed: the scheduler reports the copy and another one is promoted.
            tracing::error!(index, shard, error = %error, "promoted segment replica cannot index");
            return;
        }
        let started = std::time::Instant::now();
        let mut backoff = RESYNC_FIRST_BACKOFF;
        let resynced = loop {
            match self.resync_copies(service, shard, engine, replication) {
                Ok(resynced) => break resynced,
                Err(error) => {
                    if !self.still_primary(service, shard, engine, replication) {
                        tracing::info!(index, shard, error = %error, "primary resync abandoned: this copy is no longer the primary");
                        return;
                    }
                    tracing::warn!(index, shard, error = %error, retry_in_ms = backoff.as_millis() as u64, "primary resync failed");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(RESYNC_MAX_BACKOFF);
                }
            }
        };
        replication.activate_primary(engine, &self.core.node_id);
        // Writes waiting for this copy to act as primary wait on the applied state, which
        // no new state may change for a while: wake them now.
        self.core.wake_applied_waiters();
        self.lease_history_to_copies(service, shard, engine, replication);
        // The commit a promoted segment replica made of what it only logged was not published
        // (it was not the primary yet): its replicas copy it now, not at the next write.
        self.segrep.publish_after_promotion(service, shard);
        let mut tracker = replication.tracker.lock();
        for (target, local_checkpoint) in &resynced.copies {
            tracker.update_local_checkpoint(target, *local_checkpoint);
        }
        engine.update_global_checkpoint(tracker.global_checkpoint());
        tracing::info!(
            index,
            shard,
            term = engine.primary_term(),
            gaps_filled = resynced.gaps_filled,
            ops = resynced.ops,
            copies = resynced.copies.len(),
            failed = resynced.failed,
            took_ms = started.elapsed().as_millis() as u64,
            "primary resync done"
        );
    }

    /// Whether the applied state still names this copy primary under the engine's term, and
    /// the engine is still the one this node serves for the shard.
    fn still_primary(
        &self,
        service: &IndexService,
        shard: usize,
        engine: &Engine,
        replication: &ShardReplication,
    ) -> bool {
        let state = self.core.cluster_state();
        let index = service.name();
        let named = state.primary(&index, shard as u32).is_some_and(|p| {
            p.allocation_id.as_deref() == Some(replication.allocation_id.as_str())
        });
        let term = state.primary_term(&index, shard as u32).map(|t| t as i64);
        let serving = service
            .shard(shard)
            .is_ok_and(|current| std::ptr::eq(Arc::as_ptr(&current), engine));
        named && term == Some(engine.primary_term()) && serving
    }

    fn resync_copies(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        engine: &Engine,
        replication: &ShardReplication,
    ) -> ApiResult<Resynced> {
        let term = engine.primary_term();
        let gaps_filled = engine.fill_seq_no_gaps(term)?;
        let ops = history_above_global_checkpoint(engine)?;
        let resync = Resync {
            service,
            shard,
            engine,
            replication,
            term,
            // Part of that history may sit only in a commit this copy recovered from files:
            // the batch would miss it, so the other copies recover from files instead.
            complete: !holds_history_above(engine, engine.global_checkpoint())
                || engine.history_complete_from() <= engine.global_checkpoint() + 1,
        };
        let history: Vec<(i64, i64)> = ops
            .iter()
            .map(|op| (op.header.seq_no, op.header.primary_term))
            .collect();
        let mut resynced = Resynced {
            gaps_filled,
            ops: ops.len(),
            copies: Vec::new(),
            failed: 0,
        };
        // The opening batch carries the whole (seq_no, term) list: a copy checks its history
        // against it before it applies anything. A copy that fails a batch gets no more.
        let opening_chunk = ops.chunks(RESYNC_CHUNK).next().unwrap_or(&[]);
        let batches = std::iter::once(opening_chunk).chain(ops.chunks(RESYNC_CHUNK).skip(1));
        let mut following: Vec<(String, i64)> = other_in_sync_copies(replication)
            .into_iter()
            .map(|target| (target, NO_OPS_PERFORMED))
            .collect();
        for (round, chunk) in batches.enumerate() {
            let opening = BatchOptions {
                refresh: false,
                resync: true,
            };
            let (options, resync_history) = match round {
                0 => (opening, history.clone()),
                _ => (BatchOptions::default(), Vec::new()),
            };
            let batch = (chunk, options, resync_history);
            following = self.resync_round(&resync, batch, following, &mut resynced)?;
        }
        resynced.copies = following;
        Ok(resynced)
    }

    /// Sends one batch to every copy still following the resync and waits for them; returns
    /// the copies that took it, with their local checkpoints (the others are failed).
    fn resync_round(
        &self,
        resync: &Resync<'_>,
        (chunk, options, resync_history): (&[ReplicaOp], BatchOptions, Vec<(i64, i64)>),
        following: Vec<(String, i64)>,
        resynced: &mut Resynced,
    ) -> ApiResult<Vec<(String, i64)>> {
        let (service, shard) = (resync.service, resync.shard);
        let pending: Vec<_> = following
            .into_iter()
            .map(|(target, _)| {
                crate::failpoints::failpoint!(self.core, "primary_resync_before_batch");
                let reply = resync.complete.then(|| {
                    super::replica::send_resync_batch(
                        &self.core,
                        service,
                        shard,
                        resync.engine,
                        &target,
                        chunk,
                        options,
                        resync_history.clone(),
                    )
                });
                (target, reply)
            })
            .collect();
        let mut took = Vec::new();
        for (target, reply) in pending {
            let reply = match reply {
                Some(pending) => super::replica::wait_replica_reply(&self.core, pending),
                None => Err(incomplete_history(service, shard)),
            };
            match reply {
                Ok(reply) => took.push((target, reply.local_checkpoint)),
                Err(error) => self.fail_resync_target(resync, &target, &error, resynced)?,
            }
        }
        Ok(took)
    }

    /// A copy that refused or missed the resync is failed (it recovers from the primary).
    fn fail_resync_target(
        &self,
        resync: &Resync<'_>,
        target: &str,
        error: &ApiError,
        resynced: &mut Resynced,
    ) -> ApiResult<()> {
        let index = resync.service.name();
        self.fail_copy(&index, resync.shard, target, resync.term, error)?;
        resync.replication.tracker.lock().remove_copy(target);
        resynced.failed += 1;
        Ok(())
    }
}

/// One resync, as its rounds see it.
struct Resync<'a> {
    service: &'a Arc<IndexService>,
    shard: usize,
    engine: &'a Engine,
    replication: &'a ShardReplication,
    /// The new primary's term.
    term: i64,
    /// Whether this copy's translog lists its whole history above the global checkpoint (if
    /// not, every other copy is failed and recovers from files).
    complete: bool,
}

/// The in-sync copies other than this one: those a new primary resyncs.
fn other_in_sync_copies(replication: &ShardReplication) -> Vec<String> {
    let tracker = replication.tracker.lock();
    tracker
        .in_sync_ids()
        .into_iter()
        .filter(|id| *id != replication.allocation_id)
        .collect()
}

/// Operations per resync batch.
const RESYNC_CHUNK: usize = 500;

const RESYNC_FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);
const RESYNC_MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(2);

struct Resynced {
    gaps_filled: usize,
    ops: usize,
    /// The copies that took the resync, with their local checkpoints.
    copies: Vec<(String, i64)>,
    failed: usize,
}

/// Whether the engine holds any operation above `seq_no`.
fn holds_history_above(engine: &Engine, seq_no: i64) -> bool {
    engine.max_seq_no() > seq_no
}

fn incomplete_history(service: &IndexService, shard: usize) -> ApiError {
    ApiError::new(
        409,
        DIVERGED,
        format!(
            "[{}][{}] the new primary's history above the global checkpoint is partly in a commit copied from files and cannot be resynced; the copy must recover from the primary",
            service.name(),
            shard
        ),
    )
}

/// The operations above the engine's global checkpoint, one per seq_no (the translog may
/// hold one twice, from a replay).
fn history_above_global_checkpoint(engine: &Engine) -> ApiResult<Vec<ReplicaOp>> {
    let from = engine.global_checkpoint() + 1;
    let to = engine.max_seq_no();
    let mut by_seq_no = std::collections::BTreeMap::new();
    if from <= to {
        for op in engine.history(from.max(0), to)? {
            let op = op.map_err(|e| ApiError::internal(e.to_string()))?;
            by_seq_no.insert(op.seq_no, ReplicaOp::from_translog(op));
        }
    }
    Ok(by_seq_no.into_values().collect())
}

/// On the copy: whether its own history above the global checkpoint is all in the new
/// primary's resync batch with the same terms. Returns the refusal when it is not.
pub(crate) fn check_not_diverged(engine: &Engine, batch: &ReplicaBatch) -> ApiResult<()> {
    let primary_ops: HashMap<i64, i64> = if batch.resync_history.is_empty() {
        batch
            .ops
            .iter()
            .map(|op| (op.seq_no, op.primary_term))
            .collect()
    } else {
        batch.resync_history.iter().copied().collect()
    };
    let from = batch.global_checkpoint.max(engine.global_checkpoint()) + 1;
    let to = engine.max_seq_no();
    if from > to {
        return Ok(());
    }
    if engine.history_complete_from() > from {
        // Operations above the checkpoint that sit only in a commit copied from an earlier
        // primary cannot be checked: recovering from the new primary settles it.
        return Err(ApiError::new(
            409,
            DIVERGED,
            format!(
                "[{}][{}] this copy's history above the global checkpoint [{}] is partly in its commit only and cannot be compared with the new primary's; it must recover from the primary",
                batch.index, batch.shard, from - 1
            ),
        ));
    }
    for op in engine.history(from.max(0), to)? {
        let op = op.map_err(|e| ApiError::internal(e.to_string()))?;
        if primary_ops.get(&op.seq_no) != Some(&op.primary_term) {
            return Err(ApiError::new(
                409,
                DIVERGED,
                format!(
                    "[{}][{}] this copy holds operation [{}] of term [{}] that the new primary (term [{}]) does not have; it must recover from the primary",
                    batch.index, batch.shard, op.seq_no, op.primary_term, batch.primary_term
                ),
            ));
        }
    }
    Ok(())
}
