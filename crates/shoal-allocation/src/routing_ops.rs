//! The only places allocation writes the routing table: assigning an unassigned copy and
//! starting a relocation. Both keep the copy vectors' order so `CopyRef` positions stay valid
//! during a reroute (a relocation target is appended).

use shoal_state::{ClusterState, RecoverySource, ShardRouting, ShardState};

/// A copy by position in `routing[index].shards[shard]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CopyRef {
    pub index: String,
    pub shard: u32,
    pub position: usize,
}

impl CopyRef {
    pub fn get<'a>(&self, state: &'a ClusterState) -> Option<&'a ShardRouting> {
        state
            .routing
            .get(&self.index)?
            .shards
            .get(self.shard as usize)?
            .get(self.position)
    }

    pub fn get_mut<'a>(&self, state: &'a mut ClusterState) -> Option<&'a mut ShardRouting> {
        state
            .routing
            .get_mut(&self.index)?
            .shards
            .get_mut(self.shard as usize)?
            .get_mut(self.position)
    }

    pub fn same_shard(&self, other: &CopyRef) -> bool {
        self.index == other.index && self.shard == other.shard
    }
}

/// Every copy matching `keep`, in routing-table order.
pub fn refs_where(state: &ClusterState, keep: impl Fn(&ShardRouting) -> bool) -> Vec<CopyRef> {
    let mut out = Vec::new();
    for (index, table) in &state.routing {
        for (shard, copies) in table.shards.iter().enumerate() {
            for (position, copy) in copies.iter().enumerate() {
                if keep(copy) {
                    out.push(CopyRef {
                        index: index.clone(),
                        shard: shard as u32,
                        position,
                    });
                }
            }
        }
    }
    out
}

/// The copies of one index matching `keep` (cheaper than `refs_where` in the balance loop).
pub fn refs_in_index(
    state: &ClusterState,
    index: &str,
    keep: impl Fn(&ShardRouting) -> bool,
) -> Vec<CopyRef> {
    let Some(table) = state.routing.get(index) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (shard, copies) in table.shards.iter().enumerate() {
        for (position, copy) in copies.iter().enumerate() {
            if keep(copy) {
                out.push(CopyRef {
                    index: index.to_string(),
                    shard: shard as u32,
                    position,
                });
            }
        }
    }
    out
}

/// Assigns an unassigned copy to `node`: INITIALIZING with a fresh allocation id. Primaries
/// recover from a store (`source` overrides the one recorded on the copy), replicas from their
/// primary. The unassigned info stays: health and explain still read it. Reopening an
/// existing store makes a new primary, so its term goes up. Returns false when the copy is
/// gone or not unassigned.
pub fn initialize(
    state: &mut ClusterState,
    at: &CopyRef,
    node: &str,
    source: Option<RecoverySource>,
) -> bool {
    if at
        .get(state)
        .is_none_or(|c| c.state != ShardState::Unassigned)
    {
        return false;
    }
    let allocation_id = state.new_allocation_id();
    let Some(copy) = at.get_mut(state) else {
        return false;
    };
    copy.state = ShardState::Initializing;
    copy.node = Some(node.to_string());
    copy.relocating_node = None;
    copy.allocation_id = Some(allocation_id);
    let recovery = if copy.primary {
        source
            .or(copy.recovery_source)
            .unwrap_or(RecoverySource::EmptyStore)
    } else {
        RecoverySource::Peer
    };
    copy.recovery_source = Some(recovery);
    // A restored primary writes above every term its data was written in.
    if copy.primary
        && matches!(
            recovery,
            RecoverySource::ExistingStore | RecoverySource::RemoteStore | RecoverySource::Snapshot
        )
    {
        bump_primary_term(state, &at.index, at.shard);
    }
    true
}

/// Starts moving a STARTED copy to `target`: the source becomes RELOCATING towards the target,
/// and an INITIALIZING target copy (same primary flag, peer recovery) points back at it.
pub fn relocate(state: &mut ClusterState, at: &CopyRef, target: &str) -> bool {
    let Some(source) = at
        .get(state)
        .filter(|c| c.state == ShardState::Started)
        .cloned()
    else {
        return false;
    };
    let Some(source_node) = source.node.clone() else {
        return false;
    };
    let allocation_id = state.new_allocation_id();
    if let Some(copy) = at.get_mut(state) {
        copy.state = ShardState::Relocating;
        copy.relocating_node = Some(target.to_string());
    }
    let target_copy = ShardRouting {
        index: source.index.clone(),
        shard: source.shard,
        primary: source.primary,
        state: ShardState::Initializing,
        node: Some(target.to_string()),
        relocating_node: Some(source_node),
        allocation_id: Some(allocation_id),
        recovery_source: Some(RecoverySource::Peer),
        bootstrap_new_history_uuid: false,
        unassigned: None,
    };
    match state
        .routing
        .get_mut(&at.index)
        .and_then(|t| t.shards.get_mut(at.shard as usize))
    {
        Some(copies) => {
            copies.push(target_copy);
            true
        }
        None => false,
    }
}

/// A new primary was chosen for the shard: replicas must reject operations of older terms.
pub fn bump_primary_term(state: &mut ClusterState, index: &str, shard: u32) {
    if let Some(meta) = state.metadata.indices.get_mut(index) {
        meta.normalize();
        if let Some(term) = meta.primary_terms.get_mut(shard as usize) {
            *term += 1;
        }
    }
}
