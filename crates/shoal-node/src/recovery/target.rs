//! The target side of a peer recovery: one task per copy on the `replication` pool, retried
//! while the source is in a passing state, that copies files (or not), opens the copy,
//! finalizes with the source and reports the copy started (or failed).

use std::sync::Arc;
use std::time::Instant;

use shoal_state::ShardRouting;
use tracing::{debug, info, warn};

use super::ops_recovery::history_offer;
use super::progress::{RecoveryRecord, RecoveryType, Stage};
use super::*;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;

impl RecoveryService {
    /// Starts recovering a local copy in the background, once per allocation id.
    pub(crate) fn start_peer_recovery(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
    ) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        if !self.incoming.lock().insert(allocation_id.clone()) {
            return;
        }
        let (recoveries, service, copy) = (self.clone(), service.clone(), copy.clone());
        // On the bounded `replication` pool, never refused; the allocation deciders bound how
        // many recoveries a node runs (`node_concurrent_recoveries`).
        self.core.pressure.spawn_forced(crate::pressure::settings::REPLICATION, move || {
            let started = Instant::now();
            let outcome = recoveries.recover_copy_retrying(&service, &copy);
            recoveries.end_recovery_record(&service, copy.shard as usize, &allocation_id);
            match outcome {
                Ok(stats) => {
                    info!(index = %copy.index, shard = copy.shard, allocation_id, files = stats.0, bytes = stats.1, ops = stats.2, took_ms = started.elapsed().as_millis() as u64, "peer recovery done");
                    recoveries.reports.report_started(&copy);
                }
                Err(e) => recoveries.recovery_failed(&service, &copy, &allocation_id, &e),
            }
        });
    }

    /// A recovery that did not finish: a cancelled one (its copy moved) only lets go; a failed
    /// one closes what it opened and reports the copy failed.
    fn recovery_failed(
        &self,
        service: &IndexService,
        copy: &ShardRouting,
        allocation_id: &str,
        e: &ApiError,
    ) {
        self.incoming.lock().remove(allocation_id);
        if e.kind == ErrorKind::Moved && !self.still_assigned_here(copy) {
            info!(index = %copy.index, shard = copy.shard, allocation_id, "peer recovery cancelled: the copy is no longer assigned here");
            return;
        }
        warn!(index = %copy.index, shard = copy.shard, allocation_id, error = %e, "peer recovery failed");
        // Only this recovery's files: a newer copy of the shard may be open.
        if service
            .replication(copy.shard as usize)
            .is_none_or(|r| r.allocation_id == allocation_id)
        {
            service.close_shard(copy.shard as usize);
        }
        self.reports
            .report_failed(copy, &format!("failed recovery: {}", e.reason));
    }

    /// [`RecoveryService::recover_copy`], tried again while the failure is the source's transient state
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
        let shard_lock = self.shard_lock(&copy.index, shard);
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
            &self.core.node_id,
        );
        fresh.source_node = Some(source_node);
        let progress = self.record_recovery(fresh);
        let term = service.with_meta(|m| m.primary_terms.get(shard).copied().unwrap_or(1)) as i64;
        let start = self.core.call::<StartAction>(
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
        replication.apply_cluster_state(&self.core.cluster_state(), &service.name(), shard);
        crate::failpoints::failpoint!(self.core, "recovery_before_finalize");
        let reply = self.core.call::<FinalizeAction>(
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
            // A remote store lagging behind the commit this recovery copied
            // (`RepositoryBehind`): the copy searches that commit until the repository
            // holds a newer one.
            true => self
                .segrep
                .sync_segments(crate::segrep::CopyTarget {
                    index: service.name(),
                    index_uuid: service.uuid(),
                    shard,
                    allocation_id: allocation_id.clone(),
                })
                .map(drop)?,
        }
        record(&|r| {
            r.ops_total = reply.ops_replayed as u64;
            r.ops_recovered = reply.ops_replayed as u64;
            r.finish();
        });
        Ok((files, bytes, reply.ops_replayed))
    }

    /// Whether the latest cluster state still places this copy (by allocation id) here.
    pub(super) fn still_assigned_here(&self, copy: &ShardRouting) -> bool {
        self.core
            .cluster_state()
            .copies(&copy.index, copy.shard)
            .iter()
            .any(|c| {
                c.allocation_id == copy.allocation_id
                    && c.node.as_deref() == Some(self.core.node_id.as_str())
            })
    }

    /// The node a copy recovers from (id, transport address): a relocation's source, or the
    /// primary.
    fn recovery_source_address(&self, copy: &ShardRouting) -> ApiResult<(String, String)> {
        let state = self.core.cluster_state();
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
