//! One reroute (`AllocationService.reroute` + `BalancedShardsAllocator.allocate`): expire
//! delays, apply flood-stage blocks, place unassigned copies (existing data first, then the
//! balancer), move copies that may not stay, then rebalance. Every step reads the state
//! through the deciders and writes through `routing_ops`, so all nodes computing it from the
//! same state reach the same result.

use shoal_state::{ClusterState, RecoverySource, ShardRouting, ShardState};

use crate::balancer::{decide_allocate_unassigned, decide_move, BalanceModel};
use crate::context::{primary_node_of, AllocationContext, RoutingStats};
use crate::deciders;
use crate::decision::{DebugMode, DecisionKind};
use crate::disk_monitor;
use crate::gateway::{decide_existing_primary, decide_replica, Outcome};
use crate::routing_ops::{self, refs_in_index, refs_where, CopyRef};
use crate::settings::AllocationSettings;

/// Stops a pathological balance loop; a real cluster converges in far fewer steps.
const MAX_BALANCE_STEPS: usize = 100_000;

pub fn reroute(state: &mut ClusterState, now_millis: i64) -> bool {
    let settings = AllocationSettings::from_state(state);
    let mut changed = expire_delays(state, now_millis);
    changed |= crate::auto_expand::adapt_replicas(state, &settings, now_millis);
    changed |= disk_monitor::update_read_only_blocks(state, &settings);
    let mut run = Run::new(state, settings, now_millis);
    if run.model.node_ids().is_empty() {
        run.refuse_new_primaries();
    } else {
        run.allocate_unassigned();
        run.move_shards();
        run.rebalance();
    }
    changed | run.changed
}

/// When the earliest delayed replica stops waiting (`at + index.unassigned.node_left.delayed_timeout`),
/// so the cluster manager can propose a `Tick` then; `None` when nothing waits.
pub fn next_delay_expiry(state: &ClusterState) -> Option<i64> {
    state
        .routing
        .iter()
        .flat_map(|(name, table)| {
            let delay = state
                .metadata
                .indices
                .get(name)
                .map(|m| m.node_left_delay_millis().max(0))
                .unwrap_or(0);
            table.shards.iter().flatten().filter_map(move |c| {
                c.unassigned
                    .as_ref()
                    .filter(|u| u.delayed)
                    .map(|u| u.at_millis.saturating_add(delay))
            })
        })
        .min()
}

/// Replicas stop waiting when their node is back or the delay has run out.
fn expire_delays(state: &mut ClusterState, now_millis: i64) -> bool {
    let mut changed = false;
    for (name, table) in state.routing.iter_mut() {
        let delay = state
            .metadata
            .indices
            .get(name)
            .map(|m| m.node_left_delay_millis().max(0))
            .unwrap_or(0);
        for copy in table.shards.iter_mut().flatten() {
            let Some(info) = copy
                .unassigned
                .as_mut()
                .filter(|u| u.delayed && copy.node.is_none())
            else {
                continue;
            };
            let node_back = info
                .last_node
                .as_ref()
                .is_some_and(|n| state.nodes.contains_key(n));
            if node_back || info.at_millis.saturating_add(delay) <= now_millis {
                info.delayed = false;
                changed = true;
            }
        }
    }
    changed
}

struct Run<'s> {
    state: &'s mut ClusterState,
    settings: AllocationSettings,
    stats: RoutingStats,
    model: BalanceModel,
    now_millis: i64,
    changed: bool,
}

impl<'s> Run<'s> {
    fn new(state: &'s mut ClusterState, settings: AllocationSettings, now_millis: i64) -> Run<'s> {
        let stats = RoutingStats::build(state);
        let model = BalanceModel::build(state, &settings.balance);
        Run {
            state,
            settings,
            stats,
            model,
            now_millis,
            changed: false,
        }
    }

    fn ctx(&self) -> AllocationContext<'_> {
        AllocationContext {
            state: self.state,
            settings: &self.settings,
            stats: &self.stats,
            ignore_disable: false,
        }
    }

    fn copy(&self, at: &CopyRef) -> Option<ShardRouting> {
        at.get(self.state).cloned()
    }

    fn primary_node(&self, at: &CopyRef) -> Option<String> {
        primary_node_of(self.state.copies(&at.index, at.shard)).map(str::to_string)
    }

    fn initialize(&mut self, at: &CopyRef, node: &str, source: Option<RecoverySource>) {
        let Some(before) = self.copy(at) else { return };
        let primary_node = self.primary_node(at);
        if !routing_ops::initialize(self.state, at, node, source) {
            return;
        }
        self.model
            .add(node, &before.index, before.shard, before.primary);
        self.stats.remove(&before, primary_node.as_deref());
        if let Some(after) = at.get(self.state) {
            self.stats.add(after, primary_node.as_deref());
        }
        self.check_stats();
        self.changed = true;
    }

    fn relocate(&mut self, at: &CopyRef, target: &str) {
        let Some(before) = self.copy(at) else { return };
        let Some(source) = before.node.clone() else {
            return;
        };
        let primary_node = self.primary_node(at);
        if !routing_ops::relocate(self.state, at, target) {
            return;
        }
        self.model
            .remove(&source, &before.index, before.shard, before.primary);
        self.model
            .add(target, &before.index, before.shard, before.primary);
        self.stats.remove(&before, primary_node.as_deref());
        let copies = self.state.copies(&at.index, at.shard);
        // The source changed in place and the target was appended last.
        for changed in [copies.get(at.position), copies.last()]
            .into_iter()
            .flatten()
        {
            self.stats.add(changed, primary_node.as_deref());
        }
        self.check_stats();
        self.changed = true;
    }

    /// Tests make sure the incremental counters never drift from a full recount.
    fn check_stats(&self) {
        #[cfg(test)]
        assert_eq!(
            self.stats,
            RoutingStats::build(self.state),
            "incremental routing stats drifted"
        );
    }

    fn set_status(&mut self, at: &CopyRef, status: &str) {
        if let Some(info) = at.get_mut(self.state).and_then(|c| c.unassigned.as_mut()) {
            if info.last_allocation_status != status {
                info.last_allocation_status = status.to_string();
                self.changed = true;
            }
        }
    }

    /// Without data nodes nothing can be placed; new primaries are marked refused so health
    /// reports the index red rather than "being created" (`failAllocationOfNewPrimaries`).
    fn refuse_new_primaries(&mut self) {
        let refs = refs_where(self.state, |c| {
            c.primary
                && c.state == ShardState::Unassigned
                && c.recovery_source == Some(RecoverySource::EmptyStore)
                && c.unassigned
                    .as_ref()
                    .is_some_and(|u| u.last_allocation_status == "no_attempt")
        });
        for at in refs {
            self.set_status(&at, "no");
        }
    }

    /// Existing data first (primaries to their store, replicas back to their node), then
    /// the balancer for the rest, primaries before replicas.
    fn allocate_unassigned(&mut self) {
        let mut refs = refs_where(self.state, |c| c.state == ShardState::Unassigned);
        let primary_of =
            |state: &ClusterState, at: &CopyRef| at.get(state).is_some_and(|c| c.primary);
        refs.sort_by_cached_key(|at| {
            (
                !primary_of(self.state, at),
                at.index.clone(),
                at.shard,
                at.position,
            )
        });

        let mut for_balancer = Vec::new();
        for at in refs {
            let Some(copy) = self.copy(&at) else { continue };
            if copy.primary && copy.recovery_source == Some(RecoverySource::ExistingStore) {
                let decision = decide_existing_primary(&self.ctx(), &copy, DebugMode::Off);
                match (decision.outcome, decision.target) {
                    (Outcome::Yes, Some(node)) => {
                        self.initialize(&at, &node, Some(RecoverySource::ExistingStore))
                    }
                    (outcome, _) => self.set_status(&at, outcome.status()),
                }
            } else if copy.primary {
                for_balancer.push(at);
            } else {
                let decision = decide_replica(&self.ctx(), &copy, DebugMode::Off, self.now_millis);
                match (decision.outcome, decision.target) {
                    (Outcome::Yes, Some(node)) => self.initialize(&at, &node, None),
                    (Outcome::NotTaken, _) => for_balancer.push(at),
                    (outcome, _) => self.set_status(&at, outcome.status()),
                }
            }
        }
        self.allocate_with_balancer(for_balancer);
    }

    /// One copy per shard per pass, so replicas of all shards get a turn before the second
    /// replica of any; when a copy cannot be placed, its same-shard siblings share its fate.
    fn allocate_with_balancer(&mut self, mut current: Vec<CopyRef>) {
        while !current.is_empty() {
            let mut next = Vec::new();
            let mut i = 0;
            while i < current.len() {
                let at = current[i].clone();
                let Some(copy) = self.copy(&at) else {
                    i += 1;
                    continue;
                };
                let siblings = |i: usize| {
                    !copy.primary && i + 1 < current.len() && current[i + 1].same_shard(&at)
                };
                let decision =
                    decide_allocate_unassigned(&self.ctx(), &self.model, &copy, DebugMode::Off);
                match (decision.kind, decision.target) {
                    (DecisionKind::Yes, Some(node)) => {
                        self.initialize(&at, &node, None);
                        while siblings(i) {
                            next.push(current[i + 1].clone());
                            i += 1;
                        }
                    }
                    (kind, target) => {
                        // A throttled copy still counts where it would go, so the copies
                        // after it spread instead of all picking the same light node.
                        if let Some(node) = target {
                            self.model.add(&node, &copy.index, copy.shard, copy.primary);
                        }
                        let status = kind.as_allocation_status();
                        self.set_status(&at, status);
                        while siblings(i) {
                            let sibling = current[i + 1].clone();
                            self.set_status(&sibling, status);
                            i += 1;
                        }
                    }
                }
                i += 1;
            }
            current = next;
        }
    }

    /// Started copies that may not stay go to the lightest node that says YES. Nodes take
    /// turns so one draining node does not hog the recovery slots.
    fn move_shards(&mut self) {
        for at in self.started_interleaved_by_node() {
            let Some(copy) = self.copy(&at).filter(|c| c.state == ShardState::Started) else {
                continue;
            };
            let target = {
                let ctx = self.ctx();
                if deciders::can_move_away(&copy, &ctx).kind() != DecisionKind::Yes {
                    continue;
                }
                let decision = decide_move(&ctx, &self.model, &copy, DebugMode::Off);
                let must_move = decision.must_move();
                decision.target.filter(|_| must_move)
            };
            if let Some(node) = target {
                self.relocate(&at, &node);
            }
        }
    }

    fn started_interleaved_by_node(&self) -> Vec<CopyRef> {
        let mut per_node: std::collections::BTreeMap<String, Vec<CopyRef>> = Default::default();
        for at in refs_where(self.state, |c| c.state == ShardState::Started) {
            if let Some(node) = at.get(self.state).and_then(|c| c.node.clone()) {
                per_node.entry(node).or_default().push(at);
            }
        }
        let longest = per_node.values().map(Vec::len).max().unwrap_or(0);
        (0..longest)
            .flat_map(|i| {
                per_node
                    .values()
                    .filter_map(move |refs| refs.get(i).cloned())
            })
            .collect()
    }

    fn rebalance(&mut self) {
        if self.model.node_ids().len() < 2 {
            return;
        }
        if deciders::can_rebalance_cluster(&self.ctx(), DebugMode::Off).kind() != DecisionKind::Yes
        {
            return;
        }
        let mut budget = MAX_BALANCE_STEPS;
        for index in self.weight_ordered_indices() {
            self.balance_index(&index, &mut budget);
        }
    }

    /// Most unbalanced index first, so one index's moves do not undo another's.
    fn weight_ordered_indices(&self) -> Vec<String> {
        let nodes = self.model.node_ids();
        let mut deltas: Vec<(String, f32)> = self
            .state
            .routing
            .keys()
            .map(|index| {
                let sorted = self.model.sorted_by_weight(index, &nodes);
                let delta = match (sorted.first(), sorted.last()) {
                    (Some(low), Some(high)) => high.1 - low.1,
                    _ => 0.0,
                };
                (index.clone(), delta)
            })
            .collect();
        deltas.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        deltas.into_iter().map(|(index, _)| index).collect()
    }

    /// `balanceByWeights` for one index: repeatedly move a copy from the heaviest to the
    /// lightest node while their weights differ by more than the threshold, narrowing the
    /// window when deciders forbid a pair.
    fn balance_index(&mut self, index: &str, budget: &mut usize) {
        let relevant = self.relevant_nodes(index);
        if relevant.len() < 2 {
            return;
        }
        let threshold = self.settings.balance.threshold;
        let mut sorted = self.model.sorted_by_weight(index, &relevant);
        let (mut low, mut high) = (0usize, relevant.len() - 1);
        'steps: while *budget > 0 {
            *budget -= 1;
            let (min_node, min_weight) = sorted[low].clone();
            let (max_node, max_weight) = sorted[high].clone();
            'advance: {
                if self.model.index_shards(&max_node, index) == 0 {
                    break 'advance;
                }
                let delta = (max_weight - min_weight).abs();
                if delta <= threshold + 0.001 {
                    // Deciders may block the extremes (awareness with uneven zones) while an
                    // inner pair is still unbalanced: shrink from the top instead of stopping.
                    let inner = (sorted[high - 1].1 - sorted[0].1).abs();
                    if low > 0 && high - 1 > 0 && inner > threshold {
                        break 'advance;
                    }
                    return;
                }
                if delta > 1.0 && self.try_relocate(&min_node, &max_node, index) {
                    sorted = self.model.sorted_by_weight(index, &relevant);
                    (low, high) = (0, relevant.len() - 1);
                    continue 'steps;
                }
            }
            if low + 1 < high {
                low += 1;
            } else if low > 0 {
                low = 0;
                high -= 1;
            } else {
                return;
            }
        }
    }

    /// Nodes holding the index or allowed to (filters, data role).
    fn relevant_nodes(&self, index: &str) -> Vec<String> {
        let ctx = self.ctx();
        let Some(meta) = ctx.index(index) else {
            return Vec::new();
        };
        self.model
            .node_ids()
            .into_iter()
            .filter(|id| {
                self.model.index_shards(id, index) > 0
                    || ctx.node(id).is_some_and(|n| {
                        deciders::can_allocate_index(meta, n, &ctx).kind() != DecisionKind::No
                    })
            })
            .collect()
    }

    /// Moves one started copy of `index` from `max_node` to `min_node` if the deciders allow;
    /// a throttled move is only simulated in the model. Returns whether a relocation started.
    fn try_relocate(&mut self, min_node: &str, max_node: &str, index: &str) -> bool {
        if self.has_unrealized_inbound(max_node, index) {
            return false;
        }
        let mut candidates = refs_in_index(self.state, index, |c| {
            c.state == ShardState::Started && c.node.as_deref() == Some(max_node)
        });
        candidates.sort_by(|a, b| b.shard.cmp(&a.shard).then(a.position.cmp(&b.position)));
        let balance = self.settings.balance.clone();
        let primary = |at: &CopyRef| at.get(self.state).is_some_and(|c| c.primary);
        if balance.prefer_primary {
            candidates.sort_by_key(|at| !primary(at));
        } else {
            // Shoal keeps OpenSearch's choice of how many copies move but picks which: a
            // primary when the heavy node has more primaries than the light one, a replica
            // otherwise, so primaries spread as a side effect of shard balancing.
            let primaries_first = self.model.primaries(max_node) > self.model.primaries(min_node);
            candidates.sort_by_key(|at| primary(at) != primaries_first);
        }
        for at in candidates {
            let Some(copy) = self.copy(&at) else { continue };
            let verdict = {
                let ctx = self.ctx();
                let Some(target) = ctx.node(min_node) else {
                    return false;
                };
                let rebalance = deciders::can_rebalance(&copy, &ctx, DebugMode::Off).kind();
                if rebalance == DecisionKind::No {
                    continue;
                }
                let allocate = deciders::can_allocate(&copy, target, &ctx, DebugMode::Off).kind();
                if allocate == DecisionKind::No {
                    continue;
                }
                rebalance.max(allocate)
            };
            if copy.primary && !self.primary_move_helps(&balance, max_node, min_node, index) {
                continue;
            }
            if verdict == DecisionKind::Yes {
                self.relocate(&at, min_node);
                return true;
            }
            self.model.remove(max_node, index, copy.shard, copy.primary);
            self.model.add(min_node, index, copy.shard, copy.primary);
            return false;
        }
        false
    }

    /// With primary balancing on, a primary only moves if that evens primaries out.
    fn primary_move_helps(
        &self,
        balance: &crate::settings::BalanceSettings,
        from: &str,
        to: &str,
        index: &str,
    ) -> bool {
        let gap = |a: usize, b: usize| a as i64 - b as i64;
        if balance.rebalance_primaries {
            return gap(self.model.primaries(from), self.model.primaries(to)) >= 2;
        }
        if balance.prefer_primary {
            return gap(
                self.model.index_primaries(from, index),
                self.model.index_primaries(to, index),
            ) >= 2;
        }
        true
    }

    /// The model already counts simulated (throttled) moves onto this node; moving copies off
    /// it now would act on copies that are not there yet.
    fn has_unrealized_inbound(&self, node: &str, index: &str) -> bool {
        let real = self.stats.node(node);
        self.model.shards(node) > real.owning
            || self.model.index_shards(node, index) > real.owning_of(index)
    }
}
