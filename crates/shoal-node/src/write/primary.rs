//! The primary role: one shard's batch on the node holding its primary. Wait for the active
//! copies the request asks for, take an operation permit, apply under the primary term,
//! replicate to the tracked copies while fsyncing, and answer each item.

use std::sync::Arc;

use shoal_engine::{Engine, OpKind, Origin, WriteOp};
use shoal_translog::Durability;

use crate::documents::{LocalItem, Prepared, Refresh, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::replication::primary::ReplicationSummary;
use crate::write::coordinator::Slots;
use crate::write::WriteService;

/// The shard batch being written, as the steps after parsing see it.
struct Batch<'a> {
    service: &'a Arc<IndexService>,
    shard: usize,
    engine: &'a Arc<Engine>,
    ids: &'a [String],
}

/// What the primary applied, before its items are answered.
struct Applied {
    outcomes: Vec<Result<shoal_engine::OpResult, shoal_engine::EngineError>>,
    /// Acknowledged only if this holds: the primary's fsync and the replication both done.
    durable: ApiResult<ReplicationSummary>,
}

/// The primary role of the write service.
impl WriteService {
    /// Applies one shard's batch here and fills its items' slots; refreshes when the request
    /// asks (see [`WriteService::refresh_for_request`]).
    pub(crate) fn write_on_primary(
        &self,
        shard: usize,
        group: Vec<LocalItem>,
        options: &WriteOptions,
        results: &mut Slots,
    ) {
        let service = group[0].1.clone();
        let fail_all = |group: Vec<LocalItem>, e: ApiError, results: &mut Slots| {
            for (slot, _, _) in group {
                results[slot] = Some(Err(e.clone()));
            }
        };
        if let Err(e) =
            self.replication
                .wait_for_active_shards(&service, shard, options, group.len())
        {
            fail_all(group, e, results);
            return;
        }
        let pressure = self.segrep.check_pressure(&service, shard);
        if let Err(e) = pressure.and_then(|()| self.remote.check_pressure(&service, shard)) {
            fail_all(group, e, results);
            return;
        }
        // The shard-level half of the write holds a `write` slot while it parses and applies;
        // a full queue fails the shard's items with 429.
        let task = format!("shard bulk [{}][{shard}]", service.name());
        let write_slot = match self.core.pressure.write_permit(&task) {
            Ok(slot) => slot,
            Err(e) => {
                fail_all(group, e, results);
                return;
            }
        };
        // Parsed before the permit is taken: a new field's mapping update waits for this
        // node's applier, which may itself wait for the permits to drain (a term bump).
        let prepared: Vec<Prepared> = group
            .into_iter()
            .filter_map(|(slot, service, item)| {
                crate::documents::prepare(&service, item, slot)
                    .map_err(|e| results[slot] = Some(Err(e)))
                    .ok()
            })
            .collect();
        if prepared.is_empty() {
            return;
        }
        // The permit is held until the batch is replicated: the primary's term cannot be
        // bumped between applying the batch and sending it to the copies.
        let (engine, permit) = match service
            .copy(shard)
            .and_then(|copy| Ok((copy.engine().clone(), copy.acquire_primary_permit()?)))
        {
            Ok(held) => held,
            Err(e) => {
                for p in prepared {
                    results[p.slot] = Some(Err(e.clone()));
                }
                return;
            }
        };
        let (slots, ids_ops): (Vec<usize>, Vec<(String, WriteOp)>) =
            prepared.into_iter().map(|p| (p.slot, (p.id, p.op))).unzip();
        let (ids, ops): (Vec<String>, Vec<WriteOp>) = ids_ops.into_iter().unzip();
        let batch = Batch {
            service: &service,
            shard,
            engine: &engine,
            ids: &ids,
        };
        let applied = self.apply_and_replicate(batch, ops, write_slot, options);
        answer_items(&service, shard, slots, ids, applied, options, results);
        drop(permit);
        if options.refresh != Refresh::False {
            self.refresh_for_request(&service, shard, &engine);
        }
    }

    /// `refresh=true|wait_for`: the write is searchable on the primary, and on its segment
    /// replicas too once each has copied the commit (Shoal keeps read-after-write on every
    /// copy under SEGMENT; document replication refreshes replicas with the batch).
    fn refresh_for_request(&self, service: &IndexService, shard: usize, engine: &Engine) {
        if let Err(e) = engine.refresh() {
            tracing::warn!(index = %service.name(), shard, error = %e, "refresh after write failed");
            return;
        }
        if service.is_segment_replicated() {
            self.segrep.sync_segment_replicas(service, shard);
        }
    }

    /// A remote-backed primary acknowledges only what its translog repository holds.
    fn upload_translog(
        &self,
        service: &IndexService,
        shard: usize,
        outcomes: &[Result<shoal_engine::OpResult, shoal_engine::EngineError>],
    ) -> ApiResult<()> {
        let Some(max_seq_no) = outcomes.iter().flatten().map(|r| r.seq_no).max() else {
            return Ok(());
        };
        if !service.is_remote_store() {
            return Ok(());
        }
        let copy = service.copy(shard)?;
        self.remote.sync_translog(service, shard, &copy, max_seq_no)
    }

    fn apply_and_replicate(
        &self,
        batch: Batch<'_>,
        ops: Vec<WriteOp>,
        write_slot: crate::pressure::Permit,
        options: &WriteOptions,
    ) -> Applied {
        let Batch {
            service,
            shard,
            engine,
            ids,
        } = batch;
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
        // Not held while waiting for replicas and fsync (see `pressure`).
        drop(write_slot);
        let max_location = outcomes.iter().flatten().filter_map(|r| r.location).max();
        let in_flight = replication.as_ref().map(|_| {
            let ops = crate::documents::replica_ops(ids, sent, &outcomes);
            let refresh = options.refresh != Refresh::False;
            self.replication
                .start_replication(service, shard, engine, targets, &ops, refresh)
        });
        // The primary's fsync overlaps the copies' work; nothing is acknowledged before
        // both are done.
        let fsynced = match (
            service.with_meta(|m| m.settings().durability()),
            max_location,
        ) {
            (Durability::Request, Some(location)) => engine
                .sync_to(&location)
                .map_err(ApiError::from)
                .and_then(|()| self.upload_translog(service, shard, &outcomes)),
            _ => Ok(()),
        };
        let durable = match (fsynced, &replication, in_flight) {
            (Ok(()), Some(replication), Some(in_flight)) => {
                self.replication
                    .finish_replication(service, shard, engine, replication, in_flight)
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
