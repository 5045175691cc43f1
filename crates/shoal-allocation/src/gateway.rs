//! Copies that have data somewhere (OpenSearch's `GatewayAllocator`): a primary reopening its
//! existing store may only go where that store is, and a replica whose node left goes back
//! there when the node returns, or waits `index.unassigned.node_left.delayed_timeout` for it.
//! Shoal knows where data is from `UnassignedInfo::last_node`.

use serde_json::json;
use shoal_state::{DiscoveryNode, ShardRouting, UnassignedReason};

use crate::balancer::{NodeOutcome, NodeResult};
use crate::context::AllocationContext;
use crate::deciders;
use crate::decision::{DebugMode, DecisionKind};

/// The result of deciding for an unassigned copy (`AllocateUnassignedDecision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Yes,
    Throttled,
    No,
    /// A primary whose data is on no live node.
    NoValidShardCopy,
    /// A replica waiting for its node to come back.
    Delayed {
        remaining_millis: i64,
        configured_millis: i64,
    },
    /// Nothing to reuse: the balancer decides.
    NotTaken,
}

impl Outcome {
    fn from_kind(kind: DecisionKind) -> Outcome {
        match kind {
            DecisionKind::Yes => Outcome::Yes,
            DecisionKind::Throttle => Outcome::Throttled,
            DecisionKind::No => Outcome::No,
        }
    }

    /// `last_allocation_status` for a copy left unassigned with this outcome.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Yes | Outcome::NotTaken => "no_attempt",
            Outcome::Throttled => "throttled",
            Outcome::No => "no",
            Outcome::NoValidShardCopy => "no_valid_shard_copy",
            Outcome::Delayed { .. } => "delayed",
        }
    }
}

#[derive(Debug, Clone)]
pub struct UnassignedOutcome {
    pub outcome: Outcome,
    pub target: Option<String>,
    pub nodes: Vec<NodeResult>,
    /// The refusal concerned nodes holding an in-sync copy (changes the explanation).
    pub reuse_store: bool,
    /// The existing copy reused by a primary allocated to its data.
    pub allocation_id: Option<String>,
}

impl UnassignedOutcome {
    fn new(outcome: Outcome, nodes: Vec<NodeResult>) -> UnassignedOutcome {
        UnassignedOutcome {
            outcome,
            target: None,
            nodes,
            reuse_store: false,
            allocation_id: None,
        }
    }
}

/// A live data node by id.
fn live_data_node<'a>(ctx: &AllocationContext<'a>, id: Option<&str>) -> Option<&'a DiscoveryNode> {
    id.and_then(|id| ctx.node(id)).filter(|n| n.is_data())
}

/// A primary recovering its existing store (`PrimaryShardAllocator`): only the node that held
/// it qualifies; if the deciders refuse, the primary is forced there anyway unless a decider
/// that never yields (same shard, max retries) objects, because elsewhere means data loss.
pub fn decide_existing_primary(
    ctx: &AllocationContext<'_>,
    copy: &ShardRouting,
    mode: DebugMode,
) -> UnassignedOutcome {
    let last = copy
        .unassigned
        .as_ref()
        .and_then(|u| u.last_node.as_deref());
    let holder = live_data_node(ctx, last);
    let mut nodes = Vec::new();
    if mode.explaining() {
        for node in ctx
            .data_nodes()
            .filter(|n| Some(n.id.as_str()) != holder.map(|h| h.id.as_str()))
        {
            nodes.push(NodeResult {
                node_id: node.id.clone(),
                outcome: NodeOutcome::No,
                decisions: None,
                weight_ranking: 0,
                store: Some(json!({"found": false})),
            });
        }
    }
    let Some(holder) = holder else {
        return UnassignedOutcome::new(Outcome::NoValidShardCopy, nodes);
    };
    let mut decisions = deciders::can_allocate(copy, holder, ctx, mode);
    if decisions.kind() == DecisionKind::No {
        let forced = deciders::can_force_allocate_primary(copy, holder, ctx, mode);
        if forced.kind() != DecisionKind::No {
            decisions = forced;
        }
    }
    let kind = decisions.kind();
    nodes.push(NodeResult {
        node_id: holder.id.clone(),
        outcome: NodeOutcome::from_kind(kind),
        decisions: Some(decisions),
        weight_ranking: 0,
        store: Some(json!({"in_sync": true, "allocation_id": copy.allocation_id})),
    });
    let mut out = UnassignedOutcome::new(Outcome::from_kind(kind), nodes);
    out.reuse_store = true;
    if kind != DecisionKind::No {
        out.target = Some(holder.id.clone());
    }
    if kind == DecisionKind::Yes {
        out.allocation_id = copy.allocation_id.clone();
    }
    out
}

/// A replica (`ReplicaShardAllocator`): first, can it go anywhere at all? Then, if its node
/// left and is back, it returns there (its data is there); if the node is still away and the
/// delay runs, it waits. Otherwise the balancer places it.
pub fn decide_replica(
    ctx: &AllocationContext<'_>,
    copy: &ShardRouting,
    mode: DebugMode,
    now_millis: i64,
) -> UnassignedOutcome {
    let mut best = DecisionKind::No;
    let mut nodes = Vec::new();
    for node in ctx.data_nodes() {
        let decisions = deciders::can_allocate(copy, node, ctx, mode);
        best = best.min(decisions.kind());
        if mode.explaining() {
            nodes.push(NodeResult {
                node_id: node.id.clone(),
                outcome: NodeOutcome::from_kind(decisions.kind()),
                decisions: Some(decisions),
                weight_ranking: 0,
                store: None,
            });
        } else if best == DecisionKind::Yes {
            break;
        }
    }
    if best != DecisionKind::Yes {
        return UnassignedOutcome::new(Outcome::from_kind(best), nodes);
    }
    let info = copy.unassigned.as_ref();
    let returning = info
        .filter(|u| u.reason == UnassignedReason::NodeLeft)
        .and_then(|u| live_data_node(ctx, u.last_node.as_deref()));
    if let Some(node) = returning {
        let kind = deciders::can_allocate(copy, node, ctx, DebugMode::Off).kind();
        if kind != DecisionKind::No {
            let mut out = UnassignedOutcome::new(Outcome::from_kind(kind), nodes);
            out.target = Some(node.id.clone());
            out.reuse_store = true;
            return out;
        }
    }
    if let Some(info) = info.filter(|u| u.delayed) {
        let configured = ctx
            .index(&copy.index)
            .map(|m| m.node_left_delay_millis().max(0))
            .unwrap_or(0);
        let remaining = (info.at_millis.saturating_add(configured) - now_millis).max(0);
        return UnassignedOutcome::new(
            Outcome::Delayed {
                remaining_millis: remaining,
                configured_millis: configured,
            },
            nodes,
        );
    }
    UnassignedOutcome::new(Outcome::NotTaken, nodes)
}
