//! The balance model and node choice of `BalancedShardsAllocator`: a node's weight for an
//! index is `θshard·(shards(node) − avg) + θindex·(shards(node, index) − avg(index))`, and a
//! copy goes to the allowed node with the lowest weight. Allocation adds OpenSearch's
//! constraints (a node already at its fair share of an index, and with `prefer_primary` of
//! its primaries, weighs a million more) so new indices spread instead of piling onto the
//! emptiest node.

use std::collections::BTreeMap;

use serde_json::Value;
use shoal_state::{ClusterState, ShardRouting, ShardState};

use crate::context::AllocationContext;
use crate::deciders;
use crate::decision::{DebugMode, DecisionKind, Decisions};
use crate::settings::BalanceSettings;

const CONSTRAINT_WEIGHT: f32 = 1_000_000.0;

#[derive(Debug, Clone, Default)]
struct ModelIndex {
    shards: usize,
    /// Shard ids of the primaries of this index on the node (the ring tie-break needs the
    /// highest one).
    primary_ids: Vec<u32>,
}

#[derive(Debug, Clone, Default)]
struct ModelNode {
    shards: usize,
    primaries: usize,
    indices: BTreeMap<String, ModelIndex>,
}

/// Where copies are, as the balancer sees it: assigned copies minus relocation sources
/// (their target is counted instead), plus throttled decisions simulated so that later
/// choices in the same round account for them.
#[derive(Debug, Clone)]
pub struct BalanceModel {
    nodes: BTreeMap<String, ModelNode>,
    total_shards: usize,
    /// Index → (configured copies, configured primaries).
    configured: BTreeMap<String, (usize, usize)>,
    configured_primaries: usize,
    balance: BalanceSettings,
}

impl BalanceModel {
    pub fn build(state: &ClusterState, balance: &BalanceSettings) -> BalanceModel {
        let nodes = state
            .nodes
            .values()
            .filter(|n| n.is_data())
            .map(|n| (n.id.clone(), ModelNode::default()))
            .collect();
        let configured: BTreeMap<String, (usize, usize)> = state
            .metadata
            .indices
            .values()
            .map(|m| {
                let shards = m.number_of_shards() as usize;
                (
                    m.name.clone(),
                    (shards * (m.number_of_replicas() as usize + 1), shards),
                )
            })
            .collect();
        let mut model = BalanceModel {
            nodes,
            total_shards: 0,
            configured_primaries: configured.values().map(|(_, p)| p).sum(),
            configured,
            balance: balance.clone(),
        };
        for copy in state.all_copies() {
            if let Some(node) = copy
                .node
                .as_deref()
                .filter(|_| copy.state != ShardState::Relocating)
            {
                model.add(node, &copy.index, copy.shard, copy.primary);
            }
        }
        model
    }

    pub fn node_ids(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    pub fn add(&mut self, node: &str, index: &str, shard: u32, primary: bool) {
        let Some(model) = self.nodes.get_mut(node) else {
            return;
        };
        model.shards += 1;
        if !model.indices.contains_key(index) {
            model
                .indices
                .insert(index.to_string(), ModelIndex::default());
        }
        let Some(entry) = model.indices.get_mut(index) else {
            return;
        };
        entry.shards += 1;
        if primary {
            model.primaries += 1;
            entry.primary_ids.push(shard);
        }
        self.total_shards += 1;
    }

    pub fn remove(&mut self, node: &str, index: &str, shard: u32, primary: bool) {
        let Some(model) = self.nodes.get_mut(node) else {
            return;
        };
        model.shards = model.shards.saturating_sub(1);
        if let Some(entry) = model.indices.get_mut(index) {
            entry.shards = entry.shards.saturating_sub(1);
            if primary {
                if let Some(at) = entry.primary_ids.iter().position(|id| *id == shard) {
                    entry.primary_ids.swap_remove(at);
                    model.primaries = model.primaries.saturating_sub(1);
                }
            }
        }
        self.total_shards = self.total_shards.saturating_sub(1);
    }

    pub fn shards(&self, node: &str) -> usize {
        self.nodes.get(node).map(|n| n.shards).unwrap_or(0)
    }

    pub fn index_shards(&self, node: &str, index: &str) -> usize {
        self.index_entry(node, index).map(|i| i.shards).unwrap_or(0)
    }

    pub fn index_primaries(&self, node: &str, index: &str) -> usize {
        self.index_entry(node, index)
            .map(|i| i.primary_ids.len())
            .unwrap_or(0)
    }

    pub fn primaries(&self, node: &str) -> usize {
        self.nodes.get(node).map(|n| n.primaries).unwrap_or(0)
    }

    fn index_entry(&self, node: &str, index: &str) -> Option<&ModelIndex> {
        self.nodes.get(node)?.indices.get(index)
    }

    /// The highest primary shard id of `index` on `node`, -1 without any.
    fn highest_primary(&self, node: &str, index: &str) -> i64 {
        self.index_entry(node, index)
            .and_then(|i| i.primary_ids.iter().max())
            .map(|id| i64::from(*id))
            .unwrap_or(-1)
    }

    fn node_count(&self) -> f32 {
        self.nodes.len().max(1) as f32
    }

    fn avg_index_shards(&self, index: &str) -> f32 {
        self.configured
            .get(index)
            .map(|(copies, _)| *copies)
            .unwrap_or(0) as f32
            / self.node_count()
    }

    fn avg_index_primaries(&self, index: &str) -> f32 {
        self.configured
            .get(index)
            .map(|(_, primaries)| *primaries)
            .unwrap_or(0) as f32
            / self.node_count()
    }

    /// The plain weight function.
    pub fn weight(&self, node: &str, index: &str) -> f32 {
        let avg_shards = self.total_shards as f32 / self.node_count();
        self.balance.theta_shard * (self.shards(node) as f32 - avg_shards)
            + self.balance.theta_index
                * (self.index_shards(node, index) as f32 - self.avg_index_shards(index))
    }

    fn index_primaries_breached(&self, node: &str, index: &str) -> bool {
        self.index_primaries(node, index) as f32 > self.avg_index_primaries(index).ceil()
    }

    fn cluster_primaries_breached(&self, node: &str) -> bool {
        let avg = self.configured_primaries as f32 / self.node_count();
        self.primaries(node) as f32 > (avg * (1.0 + self.balance.primary_buffer)).ceil()
    }

    /// Weight used to place unassigned copies.
    pub fn allocation_weight(&self, node: &str, index: &str) -> f32 {
        let mut breaches = 0u8;
        if self.index_shards(node, index) as f32 >= self.avg_index_shards(index).ceil() {
            breaches += 1;
        }
        if self.balance.prefer_primary {
            breaches += u8::from(self.index_primaries_breached(node, index));
            breaches += u8::from(self.cluster_primaries_breached(node));
        }
        self.weight(node, index) + CONSTRAINT_WEIGHT * f32::from(breaches)
    }

    /// Weight used to move and rebalance.
    pub fn rebalance_weight(&self, node: &str, index: &str) -> f32 {
        let mut breaches = 0u8;
        if self.balance.prefer_primary {
            breaches += u8::from(self.index_primaries_breached(node, index));
        }
        if self.balance.rebalance_primaries {
            breaches += u8::from(self.cluster_primaries_breached(node));
        }
        self.weight(node, index) + CONSTRAINT_WEIGHT * f32::from(breaches)
    }

    /// `nodes` by rebalance weight for `index`, lightest first (node id breaks ties).
    pub fn sorted_by_weight(&self, index: &str, nodes: &[String]) -> Vec<(String, f32)> {
        let mut weighted: Vec<(String, f32)> = nodes
            .iter()
            .map(|n| (n.clone(), self.rebalance_weight(n, index)))
            .collect();
        weighted.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        weighted
    }

    /// Among two equally weighted nodes, whether `candidate` beats `current` for `copy`:
    /// OpenSearch's ring rule (prefer the node whose highest primary of the index is the next
    /// id after this shard, which lays copies out as 0 1 2 / 1 2 0 / 2 0 1), then fewer
    /// primaries; otherwise the earlier node id stays.
    fn prefer_on_tie(&self, copy: &ShardRouting, candidate: &str, current: &str) -> bool {
        let rep = i64::from(copy.shard);
        let ring = |a: i64, b: i64| {
            (((a > rep && b > rep) || (a < rep && b < rep)) && a < b) || (a > rep && b < rep)
        };
        let (c, m) = (
            self.highest_primary(candidate, &copy.index),
            self.highest_primary(current, &copy.index),
        );
        if ring(c, m) {
            return true;
        }
        if ring(m, c) {
            return false;
        }
        self.primaries(candidate) < self.primaries(current)
    }
}

/// What a node would say in an explanation (`AllocationDecision` of one node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeOutcome {
    Yes,
    Throttled,
    No,
    WorseBalance,
}

impl NodeOutcome {
    pub fn from_kind(kind: DecisionKind) -> NodeOutcome {
        match kind {
            DecisionKind::Yes => NodeOutcome::Yes,
            DecisionKind::Throttle => NodeOutcome::Throttled,
            DecisionKind::No => NodeOutcome::No,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeOutcome::Yes => "yes",
            NodeOutcome::Throttled => "throttled",
            NodeOutcome::No => "no",
            NodeOutcome::WorseBalance => "worse_balance",
        }
    }
}

/// One node's part of a decision, kept only when explaining.
#[derive(Debug, Clone)]
pub struct NodeResult {
    pub node_id: String,
    pub outcome: NodeOutcome,
    pub decisions: Option<Decisions>,
    /// 1 = best weight; 0 = not ranked.
    pub weight_ranking: usize,
    /// `store` object of primaries recovering existing data.
    pub store: Option<Value>,
}

/// Where an unassigned copy should go (`AllocateUnassignedDecision` from the balancer).
#[derive(Debug, Clone)]
pub struct AllocateDecision {
    pub kind: DecisionKind,
    /// The chosen node for YES, the node it would go to for THROTTLE.
    pub target: Option<String>,
    pub nodes: Vec<NodeResult>,
}

fn holds_copy_of_shard(ctx: &AllocationContext<'_>, copy: &ShardRouting, node: &str) -> bool {
    ctx.assigned_copies(&copy.index, copy.shard)
        .any(|c| c.node.as_deref() == Some(node))
}

/// `decideAllocateUnassigned`: the lowest-weight node whose deciders say YES (or THROTTLE).
pub fn decide_allocate_unassigned(
    ctx: &AllocationContext<'_>,
    model: &BalanceModel,
    copy: &ShardRouting,
    mode: DebugMode,
) -> AllocateDecision {
    let explaining = mode.explaining();
    let mut best: Option<(String, f32, DecisionKind)> = None;
    let mut evaluated: Vec<(NodeResult, f32)> = Vec::new();
    for node in ctx.data_nodes() {
        if !explaining && holds_copy_of_shard(ctx, copy, &node.id) {
            continue;
        }
        let weight = model.allocation_weight(&node.id, &copy.index);
        if !explaining && best.as_ref().is_some_and(|(_, w, _)| weight > *w) {
            continue;
        }
        let decisions = deciders::can_allocate(copy, node, ctx, mode);
        let kind = decisions.kind();
        if explaining {
            let result = NodeResult {
                node_id: node.id.clone(),
                outcome: NodeOutcome::from_kind(kind),
                decisions: Some(decisions),
                weight_ranking: 0,
                store: None,
            };
            evaluated.push((result, weight));
        }
        if kind == DecisionKind::No {
            continue;
        }
        let better = match &best {
            None => true,
            Some((current, w, current_kind)) if weight == *w => {
                if kind == *current_kind {
                    model.prefer_on_tie(copy, &node.id, current)
                } else {
                    kind == DecisionKind::Yes
                }
            }
            Some((_, w, _)) => weight < *w,
        };
        if better {
            best = Some((node.id.clone(), weight, kind));
        }
    }
    evaluated.sort_by(|a, b| {
        a.1.total_cmp(&b.1)
            .then_with(|| a.0.node_id.cmp(&b.0.node_id))
    });
    let nodes = evaluated
        .into_iter()
        .enumerate()
        .map(|(rank, (mut result, _))| {
            result.weight_ranking = rank + 1;
            result
        })
        .collect();
    match best {
        Some((node, _, kind)) => AllocateDecision {
            kind,
            target: Some(node),
            nodes,
        },
        None => AllocateDecision {
            kind: DecisionKind::No,
            target: None,
            nodes,
        },
    }
}

/// A started copy that may not remain where it is (`decideMove`).
#[derive(Debug, Clone)]
pub struct MoveDecision {
    pub can_remain: Decisions,
    /// Best verdict over the other nodes (NO when the copy may remain: nothing was tried).
    pub best: DecisionKind,
    pub target: Option<String>,
    pub nodes: Vec<NodeResult>,
}

impl MoveDecision {
    pub fn must_move(&self) -> bool {
        self.can_remain.kind() == DecisionKind::No
    }
}

/// Checks whether `copy` may stay; if not, walks the nodes lightest first and takes the first
/// that says YES. Throttled nodes are not waited for: the move is retried on the next reroute.
pub fn decide_move(
    ctx: &AllocationContext<'_>,
    model: &BalanceModel,
    copy: &ShardRouting,
    mode: DebugMode,
) -> MoveDecision {
    let mut out = MoveDecision {
        can_remain: Decisions::default(),
        best: DecisionKind::No,
        target: None,
        nodes: Vec::new(),
    };
    let Some(current) = copy.node.as_deref().and_then(|id| ctx.node(id)) else {
        return out;
    };
    out.can_remain = deciders::can_remain(copy, current, ctx, mode);
    if !out.must_move() {
        return out;
    }
    for (rank, (node_id, _)) in model
        .sorted_by_weight(&copy.index, &model.node_ids())
        .into_iter()
        .filter(|(id, _)| id != &current.id)
        .enumerate()
    {
        let Some(node) = ctx.node(&node_id) else {
            continue;
        };
        let decisions = deciders::can_allocate(copy, node, ctx, mode);
        let kind = decisions.kind();
        if mode.explaining() {
            out.nodes.push(NodeResult {
                node_id: node_id.clone(),
                outcome: NodeOutcome::from_kind(kind),
                decisions: Some(decisions),
                weight_ranking: rank + 1,
                store: None,
            });
        }
        if kind < out.best {
            out.best = kind;
            if kind == DecisionKind::Yes {
                out.target = Some(node_id);
                if !mode.explaining() {
                    break;
                }
            }
        }
    }
    out
}
