//! What the applier must do to each local copy for a cluster state: a pure function of the
//! state and of what this node knows about itself, so it is tested without a node (the shape of
//! OpenSearch's `IndicesClusterStateService`, written against what it reads, not a service).

use shoal_state::{ClusterState, IndexMetadata, IndexState, ShardRouting, ShardState};

/// What one shard of an index needs on this node.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyAction {
    /// Open the copy from its store if it is not open, and follow the state: primary term,
    /// in-sync set, the primary role, the started report. With `current` false the state was
    /// persisted before this process started: the copy opens for reads and does nothing else.
    Follow { copy: ShardRouting, current: bool },
    /// Recover the copy from a peer (started once per allocation id), or follow the state
    /// while a recovered copy waits to be reported started.
    Recover(ShardRouting),
    /// No copy of the shard belongs here (or the index is closed): close any open one.
    Close,
    /// No copy belongs here and every copy the index asks for is started elsewhere: the local
    /// files of the shard are redundant.
    DeleteData,
}

/// What the applier knows of this node beyond the state.
pub struct LocalNode<'a> {
    pub node_id: &'a str,
    /// The state lists this node with the ephemeral id of this process.
    pub current_incarnation: bool,
    /// Allocation ids reported failed here: never reopened under that id.
    pub is_failed: &'a dyn Fn(&str) -> bool,
}

/// One action per shard of `meta` that needs one, in shard order.
pub fn copy_actions(
    state: &ClusterState,
    meta: &IndexMetadata,
    local: &LocalNode,
) -> Vec<(usize, CopyAction)> {
    let open = meta.state == IndexState::Open;
    (0..meta.number_of_shards() as usize)
        .filter_map(|shard| {
            let assigned = state
                .copies(&meta.name, shard as u32)
                .iter()
                .find(|c| c.node.as_deref() == Some(local.node_id))
                .filter(|_| open);
            let action = match assigned {
                None if open && fully_active_elsewhere(state, meta, shard) => {
                    Some(CopyAction::DeleteData)
                }
                None => Some(CopyAction::Close),
                Some(copy) => assigned_copy_action(copy, local),
            };
            action.map(|a| (shard, a))
        })
        .collect()
}

fn assigned_copy_action(copy: &ShardRouting, local: &LocalNode) -> Option<CopyAction> {
    if crate::recovery::needs_peer_recovery(copy) {
        // A copy of a state from before this process started is about to be failed and
        // recovered again under a new id: it does not recover on it.
        return local
            .current_incarnation
            .then(|| CopyAction::Recover(copy.clone()));
    }
    let allocation_id = copy.allocation_id.as_deref().unwrap_or_default();
    if (local.is_failed)(allocation_id) {
        // Reported failed: the cluster manager assigns it again under a new id.
        return None;
    }
    Some(CopyAction::Follow {
        copy: copy.clone(),
        current: local.current_incarnation,
    })
}

/// Whether every copy the index asks for of `shard` is started (none here): the local files
/// of the shard, if any, are then redundant.
fn fully_active_elsewhere(state: &ClusterState, meta: &IndexMetadata, shard: usize) -> bool {
    let copies = state.copies(&meta.name, shard as u32);
    let started = copies
        .iter()
        .filter(|c| c.state == ShardState::Started)
        .count();
    started == copies.len() && started == meta.number_of_replicas() as usize + 1
}

/// The local indices (name, uuid) the state no longer has: deleted, or replaced by a new index
/// of the same name.
pub fn gone_indices<'a>(
    state: &ClusterState,
    local: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(&'a str, &'a str)> {
    local
        .into_iter()
        .filter(|(name, uuid)| {
            state
                .metadata
                .indices
                .get(*name)
                .is_none_or(|m| m.uuid != *uuid)
        })
        .collect()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
