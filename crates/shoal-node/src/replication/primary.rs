//! The primary sending its operations to the other copies of the shard.

use std::sync::Arc;

use shoal_engine::Engine;
use shoal_state::Command;

use super::ReplicationService;
use super::{ReplicaOp, ShardReplication};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;

/// Replica batches sent and not yet answered (see [`ReplicationService::start_replication`]).
pub(crate) struct InFlightReplication(Vec<(String, super::replica::PendingReply)>);

/// What replication of one batch achieved: copies that acknowledged, and copies failed.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplicationSummary {
    pub successful: usize,
    pub failed: usize,
}

impl ReplicationService {
    /// Sends `ops` (already applied on the primary) to `targets` in parallel; the primary
    /// makes them durable while they travel (as OpenSearch's post-write actions do), then
    /// [`ReplicationService::finish_replication`] collects the answers.
    pub(crate) fn start_replication(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        engine: &Engine,
        targets: Vec<String>,
        ops: &[ReplicaOp],
        refresh: bool,
    ) -> InFlightReplication {
        if ops.is_empty() {
            return InFlightReplication(Vec::new());
        }
        let options = super::replica::BatchOptions {
            refresh,
            resync: false,
        };
        InFlightReplication(
            targets
                .into_iter()
                .map(|target| {
                    let reply = super::replica::send_replica_batch(
                        &self.core, service, shard, engine, &target, ops, options,
                    );
                    (target, reply)
                })
                .collect(),
        )
    }

    /// Waits for the copies' answers. A copy that fails is removed from the in-sync set
    /// through the cluster manager before this returns, so a write is acknowledged only once
    /// every in-sync copy has it or is fenced. An error means the primary could not fence a
    /// copy: the write must not be acknowledged.
    pub(crate) fn finish_replication(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        engine: &Engine,
        replication: &ShardReplication,
        in_flight: InFlightReplication,
    ) -> ApiResult<ReplicationSummary> {
        let mut summary = ReplicationSummary::default();
        let index = service.name();
        let pending = in_flight.0;
        for (target, reply) in pending {
            let outcome = super::replica::wait_replica_reply(&self.core, reply);
            match outcome {
                Ok(reply) => {
                    let mut tracker = replication.tracker.lock();
                    tracker.update_local_checkpoint(&target, reply.local_checkpoint);
                    tracker.update_copy_global_checkpoint(&target, reply.global_checkpoint);
                    summary.successful += 1;
                }
                // The copy is the primary now: this node was deposed, not the copy broken.
                Err(error) if error.kind == ErrorKind::Moved => {
                    return Err(ApiError::new(
                        503,
                        "shard_not_in_primary_mode_exception",
                        format!("[{index}][{shard}] the primary moved to another copy; retry the request"),
                    ));
                }
                Err(error) => {
                    self.fail_copy(&index, shard, &target, engine.primary_term(), &error)?;
                    replication.tracker.lock().remove_copy(&target);
                    summary.failed += 1;
                }
            }
        }
        self.advance_global_checkpoint(engine, replication);
        Ok(summary)
    }

    /// Sends the global checkpoint to the copies whose known one lags it (no write carried
    /// it there: the index went idle). Answers update the tracker; a failure is left to the
    /// next write, which fails the copy if it still cannot be reached.
    pub(crate) fn sync_global_checkpoint(&self, service: &Arc<IndexService>, shard: usize) {
        let (Some(replication), Ok(engine)) = (service.replication(shard), service.shard(shard))
        else {
            return;
        };
        let lagging = {
            let tracker = replication.tracker.lock();
            if !tracker.is_primary_mode() {
                return;
            }
            tracker.copies_needing_global_checkpoint_sync()
        };
        for target in lagging {
            let pending = super::replica::send_replica_batch(
                &self.core,
                service,
                shard,
                &engine,
                &target,
                &[],
                super::replica::BatchOptions::default(),
            );
            let replication = replication.clone();
            self.core.runtime.spawn(async move {
                match pending.await {
                    Ok(Ok(reply)) => {
                        let mut tracker = replication.tracker.lock();
                        tracker.update_local_checkpoint(&target, reply.local_checkpoint);
                        tracker.update_copy_global_checkpoint(&target, reply.global_checkpoint);
                    }
                    Ok(Err(error)) => {
                        tracing::debug!(target, error = %error, "global checkpoint sync failed")
                    }
                    Err(error) => {
                        tracing::debug!(target, error = %error, "global checkpoint sync failed")
                    }
                }
            });
        }
    }

    /// The primary's own checkpoint into the tracker, and the tracker's global checkpoint
    /// into the engine (which persists it with the next commit).
    pub(crate) fn advance_global_checkpoint(
        &self,
        engine: &Engine,
        replication: &ShardReplication,
    ) {
        let mut tracker = replication.tracker.lock();
        tracker.update_local_checkpoint(&replication.allocation_id, engine.local_checkpoint());
        engine.update_global_checkpoint(tracker.global_checkpoint());
    }

    /// Asks the cluster manager to fail a copy and waits until it is out of the in-sync set.
    /// If this primary turns out to be deposed (a newer term exists: the copy refused it for
    /// that reason, say), the copy is left alone and the write must not be acknowledged.
    pub(crate) fn fail_copy(
        &self,
        index: &str,
        shard: usize,
        allocation_id: &str,
        primary_term: i64,
        error: &ApiError,
    ) -> ApiResult<()> {
        tracing::warn!(index, shard, allocation_id, error = %error, "replication to a copy failed; failing the copy");
        let command = Command::ShardFailed {
            index: index.to_string(),
            shard: shard as u32,
            allocation_id: allocation_id.to_string(),
            reason: format!(
                "failed to perform indices:data/write/bulk[s] on replica: {}",
                error.reason
            ),
            primary_term: Some(primary_term as u64),
        };
        let state = self.core.propose(command).map_err(|e| {
            ApiError::new(
                503,
                "unavailable_shards_exception",
                format!(
                    "[{index}][{shard}] could not fail copy [{allocation_id}] after a replication failure: {}",
                    e.reason
                ),
            )
        })?;
        let current = state.primary_term(index, shard as u32).unwrap_or(0) as i64;
        if current > primary_term {
            return Err(ApiError::new(
                503,
                "shard_not_in_primary_mode_exception",
                format!("[{index}][{shard}] this copy is no longer the primary (term {primary_term}, current {current}); retry the request"),
            ));
        }
        Ok(())
    }
}
