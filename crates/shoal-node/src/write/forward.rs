//! Forwarding a write to the node that holds its primary: where the primary is, the shard
//! bulk action that carries a batch there, and waiting for its answer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::documents::{DocWrite, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::replication::active_shards::DEFAULT_WRITE_TIMEOUT;
use crate::rpc::{NodeActions, Pending};
use crate::write::WriteService;

/// How much longer than the request's remaining time a coordinator waits for a forwarded
/// batch: the receiver answers when its own wait ends, and the answer needs time to travel.
const ANSWER_MARGIN: Duration = Duration::from_secs(5);

/// A coordinator forwards the writes of a `_bulk` (or a single write) to the node holding
/// their primaries; the answer has one result per item, in order.
pub struct ShardBulkAction;
impl shoal_transport::Action for ShardBulkAction {
    const NAME: &'static str = "indices:data/write/bulk[s]";
    type Request = ShardBulk;
    type Response = Vec<ApiResult<WriteOutcome>>;
}

/// Registers the shard bulk handler: it runs on this node's [`WriteService`].
pub(crate) fn register_actions(actions: &mut NodeActions, writes: &Arc<WriteService>) {
    actions
        .register_on::<ShardBulkAction, _>(Arc::downgrade(writes), WriteService::handle_shard_bulk);
}

/// A batch of writes forwarded to the node holding the primaries they route to.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ShardBulk {
    items: Vec<DocWrite>,
    options: WriteOptions,
}

impl ShardBulk {
    /// The document bytes it carries (what indexing pressure counts).
    fn source_bytes(&self) -> u64 {
        self.items
            .iter()
            .map(|item| match item {
                DocWrite::Index { source, .. } => source.len() as u64,
                DocWrite::Delete { id, .. } => id.len() as u64,
            })
            .sum()
    }
}

/// A batch in flight to another node: where to, which items, the answer to come.
pub(crate) struct Sent {
    address: String,
    slots: Vec<usize>,
    pending: Pending<Vec<ApiResult<WriteOutcome>>>,
}

pub(crate) type Forwarded = Vec<Sent>;

impl WriteService {
    /// `None` when the primary of the shard is open on this node; the primary's transport
    /// address otherwise. Waits for an inactive primary (a promotion in progress) until the
    /// request's deadline.
    pub(crate) fn primary_location(
        &self,
        index: &str,
        shard: usize,
        options: &WriteOptions,
    ) -> ApiResult<Option<String>> {
        let core = &self.core;
        let located = core.wait_until_applied(options.remaining_time(), |state, _| {
            let Some(primary) = state.primary(index, shard as u32).filter(|p| p.is_active()) else {
                // Not in the cluster state (yet): let the local path answer.
                return (!state.metadata.indices.contains_key(index)).then_some(None);
            };
            let node = primary.node.as_deref().unwrap_or_default();
            if node == core.node_id {
                // The latest state may name this copy primary before the applier made it one
                // (term, tracker): wait for that, or it would write under the old term.
                let ready = core.index(index).is_some_and(|s| {
                    s.shard(shard).is_ok()
                        && s.replication(shard)
                            .is_some_and(|r| r.tracker.lock().is_primary_mode())
                });
                return ready.then_some(None);
            }
            state
                .nodes
                .get(node)
                .map(|n| Some(n.transport_address.clone()))
        });
        located.ok_or_else(|| primary_not_active(index, shard, options.timeout))
    }

    /// Sends each node's items as one shard bulk; the receiver gets what is left of the
    /// request's time.
    pub(crate) fn forward_writes(
        &self,
        remote: BTreeMap<String, Vec<(usize, DocWrite)>>,
        options: &WriteOptions,
    ) -> Forwarded {
        let options = options.forwarded();
        remote
            .into_iter()
            .map(|(address, batch)| {
                let (slots, items): (Vec<usize>, Vec<_>) = batch.into_iter().unzip();
                let bulk = ShardBulk {
                    items,
                    options: options.clone(),
                };
                let timeout = options.remaining_time() + ANSWER_MARGIN;
                let pending = self.core.send::<ShardBulkAction>(&address, &bulk, timeout);
                Sent {
                    address,
                    slots,
                    pending,
                }
            })
            .collect()
    }

    /// The answers of the forwarded batches, each with the slots of its items.
    pub(crate) fn collect_forwarded(
        &self,
        forwarded: Forwarded,
    ) -> Vec<(Vec<usize>, ApiResult<Vec<ApiResult<WriteOutcome>>>)> {
        forwarded
            .into_iter()
            .map(|sent| {
                let outcome = self.core.wait_unless_gone(&sent.address, sent.pending);
                (sent.slots, outcome)
            })
            .collect()
    }

    /// Executes a forwarded batch on this node's primaries, once. An item whose primary is
    /// not here (any more) fails as moved and its coordinator reroutes it: a batch is never
    /// forwarded on from here, because a coordinator that gave up on this node (it left the
    /// cluster) has already sent the items again, and a copy sent on later could overwrite
    /// newer writes of the same documents.
    fn handle_shard_bulk(&self, bulk: ShardBulk) -> ApiResult<Vec<ApiResult<WriteOutcome>>> {
        // Primary bytes from another coordinator; over the limit every item of it gets 429.
        let _in_flight = self.core.pressure.indexing.primary(bulk.source_bytes())?;
        // The budget counts from now: every wait here (primary mode, active copies) ends at
        // the same deadline instead of each taking the whole budget.
        let options = bulk
            .options
            .with_deadline(Instant::now() + bulk.options.remaining_time());
        Ok(self.write_on_local_primaries(bulk.items, &options))
    }
}

/// OpenSearch's answer for a write whose shard had no active, reachable primary within the
/// request's `timeout`.
pub(crate) fn primary_not_active(index: &str, shard: usize, timeout: Option<Duration>) -> ApiError {
    let timeout = crate::settings::format_time(timeout.unwrap_or(DEFAULT_WRITE_TIMEOUT));
    ApiError::new(
        503,
        "unavailable_shards_exception",
        format!("[{index}][{shard}] primary shard is not active Timeout: [{timeout}]"),
    )
    .with_kind(ErrorKind::Unavailable)
}

/// A forwarded item whose primary is on another node by this node's cluster state.
pub(crate) fn primary_not_here(index: &str, shard: usize, address: &str) -> ApiError {
    ApiError::new(
        503,
        "shard_not_in_primary_mode_exception",
        format!("[{index}][{shard}] the primary is not on this node (it is on [{address}]); retry the request"),
    )
    .with_kind(ErrorKind::Moved)
}
