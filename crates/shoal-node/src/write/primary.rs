//! The primary role: one shard's batch on the node holding its primary. Wait for the active
//! copies the request asks for, take an operation permit, apply under the primary term,
//! replicate to the tracked copies while fsyncing, and answer each item.

use std::sync::Arc;

use shoal_engine::{Engine, OpKind, Origin, WriteOp};
use shoal_translog::Durability;

use crate::documents::{Prepared, Refresh, Slots, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::node::Node;
use crate::replication::primary::ReplicationSummary;

/// What the primary applied, before its items are answered.
struct Applied {
    outcomes: Vec<Result<shoal_engine::OpResult, shoal_engine::EngineError>>,
    /// Acknowledged only if this holds: the primary's fsync and the replication both done.
    durable: ApiResult<ReplicationSummary>,
}

impl Node {
    /// Applies one shard's batch here and fills its items' slots; returns the engine when
    /// anything was applied (the coordinator refreshes it if the request asks).
    pub(crate) fn write_on_primary(
        &self,
        shard: usize,
        group: Vec<Prepared>,
        options: &WriteOptions,
        results: &mut Slots,
    ) -> Option<Arc<Engine>> {
        let service = group[0].service.clone();
        // The permit is held until the batch is replicated: the primary's term cannot be
        // bumped between applying the batch and sending it to the copies.
        let (engine, _permit) = match self
            .wait_for_active_shards(
                &service,
                shard,
                options.wait_for_active_shards,
                options.timeout,
                group.len(),
            )
            .and_then(|()| service.copy(shard))
            .and_then(|copy| Ok((copy.engine().clone(), copy.acquire_primary_permit()?)))
        {
            Ok(held) => held,
            Err(e) => {
                for p in group {
                    results[p.slot] = Some(Err(e.clone()));
                }
                return None;
            }
        };
        let (slots, ids_ops): (Vec<usize>, Vec<(String, WriteOp)>) =
            group.into_iter().map(|p| (p.slot, (p.id, p.op))).unzip();
        let (ids, ops): (Vec<String>, Vec<WriteOp>) = ids_ops.into_iter().unzip();
        let applied = self.apply_and_replicate(&service, shard, &engine, &ids, ops, options);
        answer_items(&service, shard, slots, ids, applied, options, results);
        Some(engine)
    }

    fn apply_and_replicate(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        engine: &Arc<Engine>,
        ids: &[String],
        ops: Vec<WriteOp>,
        options: &WriteOptions,
    ) -> Applied {
        let replication = service.replication(shard);
        let (outcomes, targets, sent) = {
            // Held until the targets are known: a recovery starting to track a copy
            // waits, so this batch is either replicated to it or in its replayed history.
            let _in_flight = replication.as_ref().map(|r| r.ops_lock.read());
            let targets = replication
                .as_ref()
                .map(|r| r.tracker.lock().replication_targets())
                .unwrap_or_default();
            let sent: Vec<(OpKind, Option<String>, Vec<u8>)> = if targets.is_empty() {
                Vec::new()
            } else {
                ops.iter().map(crate::documents::replicated_part).collect()
            };
            (engine.apply(ops, Origin::Primary), targets, sent)
        };
        let max_location = outcomes.iter().flatten().filter_map(|r| r.location).max();
        let in_flight = replication.as_ref().map(|_| {
            let ops = crate::documents::replica_ops(ids, sent, &outcomes);
            let refresh = options.refresh != Refresh::False;
            self.start_replication(service, shard, engine, targets, &ops, refresh)
        });
        // The primary's fsync overlaps the copies' work; nothing is acknowledged before
        // both are done.
        let fsynced = match (
            service.with_meta(|m| m.settings().durability()),
            max_location,
        ) {
            (Durability::Request, Some(location)) => {
                engine.sync_to(&location).map_err(ApiError::from)
            }
            _ => Ok(()),
        };
        let durable = match (fsynced, &replication, in_flight) {
            (Ok(()), Some(replication), Some(in_flight)) => {
                self.finish_replication(service, shard, engine, replication, in_flight)
            }
            (Ok(()), _, _) => {
                engine.update_global_checkpoint(engine.local_checkpoint());
                Ok(ReplicationSummary::default())
            }
            (Err(e), _, _) => Err(e),
        };
        Applied { outcomes, durable }
    }
}

/// Fills each item's slot from the engine's outcome, once the batch is durable.
fn answer_items(
    service: &IndexService,
    shard: usize,
    slots: Vec<usize>,
    ids: Vec<String>,
    applied: Applied,
    options: &WriteOptions,
    results: &mut Slots,
) {
    let (name, uuid, replicas) = service.with_meta(|m| {
        (
            m.name.clone(),
            m.uuid.clone(),
            m.settings().number_of_replicas(),
        )
    });
    for ((slot, id), outcome) in slots.into_iter().zip(ids).zip(applied.outcomes) {
        let result = match (&applied.durable, outcome) {
            (Err(e), _) => Err(e.clone()),
            (Ok(summary), Ok(result)) => Ok(WriteOutcome {
                index: name.clone(),
                id,
                shard,
                result,
                shards_total: 1 + replicas,
                shards_successful: 1 + summary.successful,
                shards_failed: summary.failed,
                forced_refresh: options.refresh == Refresh::True,
            }),
            (
                Ok(_),
                Err(shoal_engine::EngineError::VersionConflict {
                    id: conflict_id,
                    detail,
                }),
            ) => Err(ApiError::version_conflict(
                &name,
                &uuid,
                shard,
                format!("[{conflict_id}]: version conflict, {detail}"),
            )),
            (Ok(_), Err(e)) => Err(ApiError::from(e)),
        };
        results[slot] = Some(result);
    }
}
