//! One local shard copy ([`IndexShard`]) and the one way handlers find it ([`lookup`]).
//!
//! A copy owns its engine, its replication state, its operation permits, its lifecycle, its
//! recovery record (`_cat/recovery`) and the schedule of its periodic work ([`schedule`]).
//! Every write on it holds a permit while it applies and replicates; a primary term bump
//! blocks new permits and waits for those in flight, so a batch is applied wholly under one
//! term.

pub mod lookup;
pub mod remote;
pub mod schedule;
pub mod segrep;

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_engine::Engine;
use shoal_shard::{Lifecycle, OperationPermit, OperationPermits, PermitError, ShardState};
use shoal_types::{ErrorKind, ShardId};

use crate::error::{ApiError, ApiResult};
use crate::recovery::progress::RecoveryProgress;
use crate::replication::ShardReplication;
use schedule::{Due, Intervals, Schedule};

/// How long a write waits for a term bump to finish, and a term bump for the writes in
/// flight to drain. Both are short in practice: replica batches apply in milliseconds, and
/// a primary's batch holds its permit at most for one replication round.
const PERMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// One shard copy open on this node.
pub struct IndexShard {
    shard_id: ShardId,
    index: String,
    engine: Arc<Engine>,
    permits: OperationPermits,
    lifecycle: Mutex<Lifecycle>,
    /// The copy's replication state (tracker, leases, the recovery ordering lock), for the
    /// allocation id the cluster state gives it; set by the applier once the engine is open.
    replication: Mutex<Option<Arc<ShardReplication>>>,
    /// How the copy got its data (from its store, or from a peer), for `_cat/recovery`.
    recovery: Mutex<Option<RecoveryProgress>>,
    schedule: Mutex<Schedule>,
    /// Set when this primary handed its role to a relocation target: it takes no primary
    /// write again (they fail as moved and their coordinators reroute them to the target).
    relocated: std::sync::atomic::AtomicBool,
    /// Set when the copy leaves this node for good (moved to another node, its index deleted),
    /// as opposed to closing with its index.
    removed: std::sync::atomic::AtomicBool,
    /// Segment replication: checkpoints pinned (primary), copied and installed (replica).
    pub segrep: segrep::CopyState,
    /// Remote-backed storage: what the repository holds of this copy (as its primary).
    pub remote: remote::RemoteCopyState,
}

impl IndexShard {
    /// A copy whose engine has just been opened (from its store or for a peer recovery).
    pub fn new(index: &str, shard_id: ShardId, engine: Arc<Engine>) -> IndexShard {
        let mut lifecycle = Lifecycle::default();
        lifecycle
            .move_to(ShardState::Recovering)
            .expect("a new copy starts recovering");
        IndexShard {
            shard_id,
            index: index.to_string(),
            engine,
            permits: OperationPermits::new(),
            lifecycle: Mutex::new(lifecycle),
            replication: Mutex::new(None),
            recovery: Mutex::new(None),
            schedule: Mutex::new(Schedule::new(Instant::now())),
            relocated: std::sync::atomic::AtomicBool::new(false),
            removed: std::sync::atomic::AtomicBool::new(false),
            segrep: Default::default(),
            remote: Default::default(),
        }
    }

    pub fn shard_id(&self) -> &ShardId {
        &self.shard_id
    }

    /// The name of the copy's index.
    pub fn index_name(&self) -> &str {
        &self.index
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The copies this copy replicates to, while it acts as the primary (`None` otherwise).
    pub fn primary_targets(&self) -> Option<Vec<String>> {
        let replication = self.replication()?;
        let tracker = replication.tracker.lock();
        tracker
            .is_primary_mode()
            .then(|| tracker.replication_targets())
    }

    /// The copy's replication state, once the applier has set it up.
    pub fn replication(&self) -> Option<Arc<ShardReplication>> {
        self.replication.lock().clone()
    }

    /// The replication state of this copy under `allocation_id`, created for it (a copy that
    /// came back under a new allocation id starts a new one).
    pub fn replication_for(
        &self,
        allocation_id: &str,
        global_checkpoint: i64,
    ) -> Arc<ShardReplication> {
        let mut current = self.replication.lock();
        match current.as_ref() {
            Some(existing) if existing.allocation_id == allocation_id => existing.clone(),
            _ => {
                let created = Arc::new(ShardReplication::new(allocation_id, global_checkpoint));
                *current = Some(created.clone());
                created
            }
        }
    }

    pub fn state(&self) -> ShardState {
        self.lifecycle.lock().state()
    }

    /// Records progress through recovery (never backwards; a closed copy stays closed).
    pub fn advance_to(&self, state: ShardState) {
        if let Err(e) = self.lifecycle.lock().advance_to(state) {
            tracing::debug!(index = %self.index, shard = self.shard_id.shard, error = %e, "lifecycle move skipped");
        }
    }

    /// A permit for a write the primary applies and replicates under its current term.
    pub fn acquire_primary_permit(&self) -> ApiResult<OperationPermit> {
        let permit = self.acquire_permit()?;
        // Checked with the permit held: a hand-off sets it while no permit is out, so a write
        // either finished before the hand-off (and reached the target) or sees the flag.
        if self.is_relocated() {
            return Err(ApiError::new(
                503,
                "shard_not_in_primary_mode_exception",
                format!(
                    "[{}][{}] this primary handed its role to its relocation target; retry the request",
                    self.index, self.shard_id.shard
                ),
            )
            .with_kind(ErrorKind::Moved));
        }
        Ok(permit)
    }

    fn acquire_permit(&self) -> ApiResult<OperationPermit> {
        self.permits
            .acquire(PERMIT_TIMEOUT)
            .map_err(|e| self.permit_error(e))
    }

    /// Ends this primary's role for a relocation: waits for the writes in flight (each has
    /// reached the target, which is tracked and in sync), then refuses every new primary write.
    /// OpenSearch's relocation hand-off; without it both copies would act as primary of the
    /// same term between the target's start and this copy's close, issuing the same seq_nos.
    pub fn hand_off_primary(&self) -> ApiResult<()> {
        self.permits
            .block_operations(PERMIT_TIMEOUT, || {
                self.relocated
                    .store(true, std::sync::atomic::Ordering::Release)
            })
            .map_err(|e| self.permit_error(e))
    }

    /// Whether this primary handed its role off (see [`IndexShard::hand_off_primary`]).
    pub fn is_relocated(&self) -> bool {
        self.relocated.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The copy leaves this node for good (moved away, or its index deleted): work it started
    /// as primary and would finish later stops, since another copy may act as primary by now.
    pub fn mark_removed(&self) {
        self.removed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether this copy no longer acts as the primary it may have been: it left the node, or
    /// handed its role to a relocation target. A segment upload it started stops then: a late
    /// metadata file of its last commit would read as newer than the commits the new primary
    /// uploads until its own versions pass it.
    pub fn stopped_acting_as_primary(&self) -> bool {
        self.removed.load(std::sync::atomic::Ordering::Acquire) || self.is_relocated()
    }

    /// A relocation cancelled after its hand-off (the target failed before it started): this
    /// copy is still the primary and takes writes again. The target never acted as primary,
    /// since only the cluster state that removes this copy makes it one.
    pub fn resume_after_cancelled_relocation(&self) {
        if self
            .relocated
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            tracing::info!(index = %self.index, shard = self.shard_id.shard, "relocation cancelled after its hand-off; this copy takes primary writes again");
        }
    }

    /// A permit for a batch the primary of `op_term` sent: a newer term is adopted first
    /// (waiting for the batches of the old term in flight), an older one is refused. While
    /// the permit is held the copy's term cannot change.
    pub fn acquire_replica_permit(&self, op_term: i64) -> ApiResult<OperationPermit> {
        loop {
            if op_term > self.engine.primary_term() {
                self.bump_primary_term(op_term)?;
            }
            let permit = self.acquire_permit()?;
            let current = self.engine.primary_term();
            if op_term < current {
                return Err(ApiError::new(
                    409,
                    "illegal_state_exception",
                    format!(
                        "[{}][{}] operation primary term [{op_term}] is too old (current [{current}])",
                        self.index, self.shard_id.shard
                    ),
                ));
            }
            if op_term == current {
                return Ok(permit);
            }
            // Another bump landed between ours and the permit, to a term still below
            // `op_term`: adopt `op_term` again.
        }
    }

    /// Raises the primary term once no write is in flight; a lower or equal term is ignored.
    pub fn bump_primary_term(&self, term: i64) -> ApiResult<()> {
        if term <= self.engine.primary_term() {
            return Ok(());
        }
        self.permits
            .block_operations(PERMIT_TIMEOUT, || {
                if self.engine.primary_term() < term {
                    self.engine.set_primary_term(term);
                }
            })
            .map_err(|e| self.permit_error(e))
    }

    /// Hears every commit of this copy's engine (segment replication's checkpoint publisher and
    /// the remote store's uploader attach here).
    pub fn add_refresh_listener(&self, listener: shoal_engine::RefreshListener) {
        self.engine.add_refresh_listener(listener);
    }

    /// Refuses every future permit; writes in flight finish.
    pub fn close(&self) {
        self.permits.close();
        self.advance_to(ShardState::Closed);
    }

    /// Closes the copy for good: no new permit, then the engine flushes what it holds and
    /// lets go of its store (close index, a copy moved away, shutdown).
    pub fn close_and_flush(&self) -> ApiResult<()> {
        self.close();
        self.engine.close().map_err(ApiError::from)
    }

    /// The record of how this copy was recovered, once it has one.
    pub fn recovery(&self) -> Option<RecoveryProgress> {
        self.recovery.lock().clone()
    }

    /// Attaches the record of this copy's recovery (a peer recovery's, shared with the
    /// recovery still updating it, or one of its own store).
    pub fn set_recovery(&self, progress: RecoveryProgress) {
        *self.recovery.lock() = Some(progress);
    }

    /// The periodic work due on this copy now (counted as done).
    pub fn take_due_work(&self, intervals: &Intervals) -> Due {
        self.schedule.lock().take_due(Instant::now(), intervals)
    }

    fn permit_error(&self, error: PermitError) -> ApiError {
        // A closed copy is gone from here (ask the newer cluster state where it is); busy
        // permits free up once the term bump or engine swap ends.
        let (error_type, kind) = match error {
            PermitError::Closed => ("index_shard_closed_exception", ErrorKind::Moved),
            PermitError::BlockedTimeout(_) | PermitError::DrainTimeout { .. } => {
                ("unavailable_shards_exception", ErrorKind::Unavailable)
            }
        };
        ApiError::new(
            503,
            error_type,
            format!("[{}][{}] {error}", self.index, self.shard_id.shard),
        )
        .with_kind(kind)
    }
}

#[cfg(test)]
mod tests;
