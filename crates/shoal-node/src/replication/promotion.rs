//! Which replica replaces a lost primary: the in-sync copy that is most caught up — under
//! segment replication the highest visible (installed) checkpoint first, as a promoted copy
//! opens its writer on the segments it copied and replays only its translog above them; then
//! the highest local checkpoint.
//! OpenSearch picks by node version; Shoal asks the copies (the cluster state does not carry
//! checkpoints, which move with every write) just before the cluster manager removes the
//! node, so the promoted copy keeps the most of the operations in flight when it died. Every
//! in-sync copy holds everything acknowledged, so this choice only saves unacknowledged
//! work (and the resync traffic it would take to drop it); the state machine falls back to
//! its default order for shards left out.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use serde::{Deserialize, Serialize};
use shoal_state::{ClusterState, PromotionChoice, ShardRouting};

use super::ReplicationService;
use crate::error::ApiResult;

/// The cluster manager asks a copy for its local checkpoint before choosing whom to promote.
pub struct LocalCheckpointAction;
impl shoal_transport::Action for LocalCheckpointAction {
    const NAME: &'static str = super::action_names::LOCAL_CHECKPOINT;
    type Request = CheckpointRequest;
    type Response = CheckpointReply;
}

pub const ACTION_LOCAL_CHECKPOINT: &str = <LocalCheckpointAction as shoal_transport::Action>::NAME;
const ASK_TIMEOUT: Duration = Duration::from_millis(300);

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<ReplicationService>,
) {
    actions.register_on::<LocalCheckpointAction, _>(
        Arc::downgrade(service),
        ReplicationService::handle_local_checkpoint,
    );
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointRequest {
    index: String,
    index_uuid: String,
    shard: usize,
    allocation_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointReply {
    local_checkpoint: i64,
    /// A segment replica's installed checkpoint (primary term, version); none under document
    /// replication, and from nodes that predate it.
    #[serde(default)]
    visible_checkpoint: Option<(i64, u64)>,
}

/// How caught up a copy is: visible checkpoint first, then local checkpoint.
type CaughtUp = (Option<(i64, u64)>, i64);

/// The cluster layer's [`shoal_cluster::PromotionAdvisor`], backed by this node's replication
/// service.
pub(crate) struct CheckpointAdvisor(pub Weak<ReplicationService>);

impl shoal_cluster::PromotionAdvisor for CheckpointAdvisor {
    fn choose(
        &self,
        state: Arc<ClusterState>,
        leaving_node: String,
    ) -> BoxFuture<'static, Vec<PromotionChoice>> {
        let node = self.0.clone();
        Box::pin(async move {
            match node.upgrade() {
                Some(service) => service.choose_promotions(&state, &leaving_node).await,
                None => Vec::new(),
            }
        })
    }
}

/// The active in-sync replicas that could replace a primary on `leaving_node`, per shard with
/// more than one such candidate (with one, there is nothing to choose).
fn contested_shards(
    state: &ClusterState,
    leaving_node: &str,
) -> Vec<(String, u32, Vec<ShardRouting>)> {
    let mut out = Vec::new();
    for primary in state
        .all_copies()
        .filter(|c| c.primary && c.node.as_deref() == Some(leaving_node))
    {
        let in_sync = state
            .metadata
            .indices
            .get(&primary.index)
            .and_then(|m| m.in_sync_allocations.get(primary.shard as usize));
        let candidates: Vec<ShardRouting> = state
            .copies(&primary.index, primary.shard)
            .iter()
            .filter(|c| !c.primary && c.is_active() && c.node.as_deref() != Some(leaving_node))
            .filter(|c| {
                c.allocation_id
                    .as_ref()
                    .is_some_and(|id| in_sync.is_some_and(|s| s.contains(id)))
            })
            .cloned()
            .collect();
        if candidates.len() > 1 {
            out.push((primary.index.clone(), primary.shard, candidates));
        }
    }
    out
}

/// The copy with the highest answered position, if exactly one has it (a tie, or no
/// answer at all, leaves the choice to the default order).
fn most_caught_up<'a>(
    candidates: &'a [ShardRouting],
    answers: &[Option<CaughtUp>],
) -> Option<(&'a ShardRouting, CaughtUp)> {
    let best = answers.iter().flatten().max()?;
    let mut leaders = candidates
        .iter()
        .zip(answers)
        .filter(|(_, answer)| answer.as_ref() == Some(best));
    let (leader, _) = leaders.next()?;
    leaders.next().is_none().then_some((leader, *best))
}

impl ReplicationService {
    async fn choose_promotions(
        self: &Arc<Self>,
        state: &ClusterState,
        leaving_node: &str,
    ) -> Vec<PromotionChoice> {
        let mut choices = Vec::new();
        for (index, shard, candidates) in contested_shards(state, leaving_node) {
            let asked = candidates
                .iter()
                .map(|c| self.ask_local_checkpoint(state, c));
            let answers: Vec<Option<CaughtUp>> = join_all(asked).await;
            if let Some((best, (visible, local))) = most_caught_up(&candidates, &answers) {
                tracing::info!(index, shard, allocation_id = ?best.allocation_id, visible_checkpoint = ?visible, local_checkpoint = local, "promoting the most caught-up copy");
                choices.push(PromotionChoice {
                    index: index.clone(),
                    shard,
                    allocation_id: best.allocation_id.clone().unwrap_or_default(),
                });
            }
        }
        choices
    }

    /// How caught up a copy is, asked of its node (`None` if it does not answer in time).
    async fn ask_local_checkpoint(
        &self,
        state: &ClusterState,
        copy: &ShardRouting,
    ) -> Option<CaughtUp> {
        let address = state
            .nodes
            .get(copy.node.as_deref()?)?
            .transport_address
            .clone();
        let request = CheckpointRequest {
            index: copy.index.clone(),
            index_uuid: state.metadata.indices.get(&copy.index)?.uuid.clone(),
            shard: copy.shard as usize,
            allocation_id: copy.allocation_id.clone()?,
        };
        let reply = self
            .core
            .transport
            .send::<LocalCheckpointAction>(&address, &request, ASK_TIMEOUT)
            .await
            .ok()?;
        Some((reply.visible_checkpoint, reply.local_checkpoint))
    }

    /// Serves [`ACTION_LOCAL_CHECKPOINT`] for a local copy.
    fn handle_local_checkpoint(&self, request: CheckpointRequest) -> ApiResult<CheckpointReply> {
        let shard_id = shoal_types::ShardId::new(request.index_uuid, request.shard as u32);
        let allocation = shoal_types::AllocationId::from(request.allocation_id);
        let copy = self
            .core
            .local_copy(&request.index, &shard_id, Some(&allocation))?;
        let visible_checkpoint = match copy.service.is_segment_replicated() {
            true => *copy.shard.segrep.installed.lock(),
            false => None,
        };
        Ok(CheckpointReply {
            local_checkpoint: copy.engine().local_checkpoint(),
            visible_checkpoint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copies(n: usize) -> Vec<ShardRouting> {
        (0..n)
            .map(|i| {
                let mut copy = ShardRouting::unassigned(
                    "idx",
                    0,
                    false,
                    shoal_state::UnassignedInfo::new(
                        shoal_state::UnassignedReason::IndexCreated,
                        0,
                    ),
                );
                copy.allocation_id = Some(format!("a{i}"));
                copy
            })
            .collect()
    }

    fn local(checkpoint: i64) -> Option<CaughtUp> {
        Some((None, checkpoint))
    }

    #[test]
    fn the_copy_with_the_highest_checkpoint_is_chosen() {
        let c = copies(3);
        let (best, (_, checkpoint)) = most_caught_up(&c, &[local(40), local(42), None]).unwrap();
        assert_eq!(
            (best.allocation_id.as_deref(), checkpoint),
            (Some("a1"), 42)
        );
    }

    #[test]
    fn a_segment_replica_with_the_newest_visible_checkpoint_wins_over_a_higher_local_checkpoint() {
        let c = copies(3);
        let answers = [
            Some((Some((2, 7)), 90)),
            Some((Some((2, 9)), 80)),
            Some((Some((1, 12)), 95)),
        ];
        let (best, caught_up) = most_caught_up(&c, &answers).unwrap();
        assert_eq!(
            (best.allocation_id.as_deref(), caught_up),
            (Some("a1"), (Some((2, 9)), 80))
        );
        // Same visible checkpoint: the local checkpoint decides.
        let answers = [Some((Some((2, 9)), 81)), Some((Some((2, 9)), 80)), None];
        let (best, _) = most_caught_up(&c, &answers).unwrap();
        assert_eq!(best.allocation_id.as_deref(), Some("a0"));
    }

    #[test]
    fn a_tie_or_silence_leaves_the_default_order() {
        let c = copies(3);
        assert!(most_caught_up(&c, &[local(42), local(42), local(7)]).is_none());
        assert!(most_caught_up(&c, &[None, None, None]).is_none());
    }
}
