//! Operation-based peer recovery: a copy that comes back with a store (its node restarted
//! or left for a while) replays the operations it missed instead of copying files.
//!
//! The target offers what it holds: its history uuid, its local and global checkpoints and
//! the (seq_no, term) of every operation above min(local, global checkpoint). The primary
//! accepts when
//! - both stores belong to the same history (a forced primary starts a new one),
//! - both translogs hold every operation above that point (leases keep the primary's), and
//! - every operation the target holds above it is in the primary's history with the same
//!   term: nothing the target has diverged (an unacknowledged write of an old primary).
//!
//! Everything at or below the target's global checkpoint is on every in-sync copy, so the
//! target then lacks exactly the operations above its local checkpoint, which the primary
//! replays. Otherwise the recovery copies files.
//!
//! A tantivy copy keeps only its last commit, which can hold operations above its global
//! checkpoint; `history_complete_from` tells whether the translog still lists them all.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shoal_engine::Engine;

use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;

/// What a returning copy holds, sent with its recovery request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct HistoryOffer {
    /// Empty from a sender that predates history uuids: never accepted.
    #[serde(default)]
    pub history_uuid: String,
    pub local_checkpoint: i64,
    pub global_checkpoint: i64,
    /// (seq_no, primary term) of every operation above [`HistoryOffer::compared_from`] - 1.
    pub ops: Vec<(i64, i64)>,
}

impl HistoryOffer {
    /// The first seq_no whose operations are compared: everything below is at or under the
    /// target's global checkpoint and its local checkpoint.
    pub fn compared_from(&self) -> i64 {
        self.local_checkpoint.min(self.global_checkpoint) + 1
    }

    /// The first seq_no the primary replays.
    pub fn replay_from(&self) -> i64 {
        self.local_checkpoint + 1
    }
}

/// On the target: the offer of the store this copy already has, opening it if needed.
/// `None` for a copy with nothing to offer (a new copy, or a store whose history above
/// its checkpoints is not all in its translog): it recovers from files.
pub(super) fn history_offer(
    service: &IndexService,
    shard: usize,
    primary_term: i64,
) -> Option<HistoryOffer> {
    let engine = match service.shard(shard) {
        Ok(engine) => engine,
        Err(_) => {
            let config = service.shard_engine_config(shard);
            let payload = shoal_engine::recovery::read_payload(&config.index_dir()).ok()?;
            if payload.local_checkpoint < 0 {
                return None;
            }
            service.ensure_shard_open(shard, primary_term, false).ok()?;
            service.shard(shard).ok()?
        }
    };
    // An operation-based recovery keeps this store as it is: only a verified one is offered
    // (a damaged one fails here, is marked, and the recovery copies every file).
    engine.verify_store().ok()?;
    let offer = HistoryOffer {
        history_uuid: engine.history_uuid(),
        local_checkpoint: engine.local_checkpoint(),
        global_checkpoint: engine.global_checkpoint(),
        ops: Vec::new(),
    };
    if offer.local_checkpoint < 0 || engine.history_complete_from() > offer.compared_from() {
        return None;
    }
    let ops = history_terms(&engine, offer.compared_from()).ok()?;
    Some(HistoryOffer {
        ops: ops.into_iter().collect(),
        ..offer
    })
}

/// On the primary: whether `offer` can be served by replaying operations (see the module
/// documentation). The caller holds a lease from `offer.compared_from()` first, so the
/// history checked here is still there when it is replayed.
pub(super) fn accepts_offer(engine: &Engine, offer: &HistoryOffer) -> ApiResult<bool> {
    if offer.history_uuid != engine.history_uuid() {
        return Ok(false);
    }
    let from = offer.compared_from();
    if engine.history_complete_from() > from || engine.local_checkpoint() < from - 1 {
        return Ok(false);
    }
    let primary_ops = history_terms(engine, from)?;
    Ok(offer.ops.iter().all(|op| primary_ops.contains(op)))
}

/// (seq_no, term) of every operation in the engine's translog from `from` on.
fn history_terms(engine: &Engine, from: i64) -> ApiResult<BTreeSet<(i64, i64)>> {
    let to = engine.max_seq_no();
    let mut ops = BTreeSet::new();
    if from > to {
        return Ok(ops);
    }
    for op in engine.history(from.max(0), to)? {
        let op = op.map_err(|e| ApiError::internal(e.to_string()))?;
        ops.insert((op.seq_no, op.primary_term));
    }
    Ok(ops)
}

/// Replaces lease `id` on the primary with one retaining from `from` (a recovery's hold on
/// the history it will compare or replay) and applies it to the engine at once.
pub(super) fn hold_history_for_recovery(
    replication: &crate::replication::ShardReplication,
    engine: &Engine,
    id: &str,
    from: i64,
) {
    {
        let mut tracker = replication.tracker.lock();
        tracker.leases.remove(id);
        tracker.hold_history(id, from.max(0), crate::replication::leases::now_millis());
    }
    replication.apply_retention_floor(engine);
}

/// Drops a recovery's hold on the history.
pub(super) fn release_history(
    replication: &crate::replication::ShardReplication,
    engine: &Arc<Engine>,
    id: &str,
) {
    replication.tracker.lock().leases.remove(id);
    replication.apply_retention_floor(engine);
}
