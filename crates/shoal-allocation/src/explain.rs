//! `GET /_cluster/allocation/explain` (`TransportClusterAllocationExplainAction` and the
//! `toXContent` of `ClusterAllocationExplanation`, `AllocateUnassignedDecision` and
//! `MoveDecision`). The decisions are the allocator's own, run in explain mode.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use shoal_state::{
    ClusterState, DiscoveryNode, RecoverySource, ShardRouting, ShardState, StateError,
    UnassignedInfo,
};

use crate::balancer::{
    decide_allocate_unassigned, decide_move, BalanceModel, MoveDecision, NodeOutcome, NodeResult,
};
use crate::context::{AllocationContext, RoutingStats};
use crate::deciders;
use crate::decision::{DebugMode, DecisionKind};
use crate::format::{iso_millis, time_value};
use crate::gateway::{decide_existing_primary, decide_replica, Outcome, UnassignedOutcome};
use crate::settings::AllocationSettings;

/// The request body; all fields empty means "the first unassigned copy".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainRequest {
    #[serde(default)]
    pub index: Option<String>,
    #[serde(default)]
    pub shard: Option<u32>,
    #[serde(default)]
    pub primary: Option<bool>,
    #[serde(default)]
    pub current_node: Option<String>,
}

impl ExplainRequest {
    fn any_unassigned(&self) -> bool {
        self.index.is_none()
            && self.shard.is_none()
            && self.primary.is_none()
            && self.current_node.is_none()
    }

    /// `ClusterAllocationExplainRequest.toString()`, quoted in errors.
    fn describe(&self, include_yes: bool) -> String {
        let mut out = String::from("ClusterAllocationExplainRequest[");
        if self.any_unassigned() {
            out.push_str("useAnyUnassignedShard=true");
        } else {
            let text = |v: Option<String>| v.unwrap_or_else(|| "null".to_string());
            out.push_str(&format!(
                "index={},shard={},primary?={}",
                text(self.index.clone()),
                text(self.shard.map(|s| s.to_string())),
                text(self.primary.map(|p| p.to_string()))
            ));
            if let Some(node) = &self.current_node {
                out.push_str(&format!(",currentNode={node}"));
            }
        }
        out.push_str(&format!(",include_yes_decisions?={include_yes}]"));
        out
    }
}

fn bad_request(reason: impl Into<String>) -> StateError {
    StateError::new(400, "illegal_argument_exception", reason)
}

pub fn explain(
    state: &ClusterState,
    request: &ExplainRequest,
    include_yes: bool,
    now_millis: i64,
) -> Result<Value, StateError> {
    validate(request)?;
    let copy = find_copy(state, request, include_yes)?;
    let settings = AllocationSettings::from_state(state);
    let stats = RoutingStats::build(state);
    let model = BalanceModel::build(state, &settings.balance);
    let ctx = AllocationContext {
        state,
        settings: &settings,
        stats: &stats,
        ignore_disable: false,
    };
    let mode = if include_yes {
        DebugMode::On
    } else {
        DebugMode::ExcludeYes
    };

    let mut out = Map::new();
    out.insert("index".into(), json!(copy.index));
    out.insert("shard".into(), json!(copy.shard));
    out.insert("primary".into(), json!(copy.primary));
    out.insert(
        "current_state".into(),
        json!(copy.state.as_str().to_ascii_lowercase()),
    );
    if let Some(info) = &copy.unassigned {
        out.insert("unassigned_info".into(), unassigned_info_json(info));
    }
    match copy.state {
        ShardState::Unassigned => {
            explain_unassigned(&ctx, &model, copy, mode, now_millis, &mut out)
        }
        ShardState::Started => explain_started(&ctx, &model, copy, mode, &mut out),
        ShardState::Initializing => {
            let name = node_name(state, copy.node.as_deref());
            insert_current_node(state, copy, None, &mut out);
            out.insert(
                "explanation".into(),
                json!(format!(
                    "the shard is in the process of initializing on node [{name}], wait until initialization has completed"
                )),
            );
        }
        ShardState::Relocating => {
            let (from, to) = (
                node_name(state, copy.node.as_deref()),
                node_name(state, copy.relocating_node.as_deref()),
            );
            insert_current_node(state, copy, None, &mut out);
            out.insert(
                "explanation".into(),
                json!(format!(
                    "the shard is in the process of relocating from node [{from}] to node [{to}], wait until relocation has completed"
                )),
            );
        }
    }
    Ok(Value::Object(out))
}

fn validate(request: &ExplainRequest) -> Result<(), StateError> {
    if request.any_unassigned() {
        return Ok(());
    }
    let missing: Vec<&str> = [
        (request.index.is_none(), "index must be specified"),
        (request.shard.is_none(), "shard must be specified"),
        (request.primary.is_none(), "primary must be specified"),
    ]
    .into_iter()
    .filter_map(|(missing, text)| missing.then_some(text))
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let listed: String = missing
        .iter()
        .enumerate()
        .map(|(i, text)| format!("{}: {text};", i + 1))
        .collect();
    Err(StateError::new(
        400,
        "action_request_validation_exception",
        format!("Validation Failed: {listed}"),
    ))
}

fn find_copy<'a>(
    state: &'a ClusterState,
    request: &ExplainRequest,
    include_yes: bool,
) -> Result<&'a ShardRouting, StateError> {
    if request.any_unassigned() {
        return state
            .all_copies()
            .find(|c| c.state == ShardState::Unassigned)
            .ok_or_else(|| {
                bad_request(format!(
                    "unable to find any unassigned shards to explain [{}]",
                    request.describe(include_yes)
                ))
            });
    }
    let (Some(index), Some(shard), Some(primary)) =
        (&request.index, request.shard, request.primary)
    else {
        return Err(bad_request("index, shard and primary must be specified"));
    };
    let Some(table) = state.routing.get(index) else {
        return Err(StateError::new(
            404,
            "index_not_found_exception",
            format!("no such index [{index}]"),
        ));
    };
    let Some(copies) = table.shards.get(shard as usize) else {
        return Err(StateError::new(
            404,
            "shard_not_found_exception",
            "no such shard",
        ));
    };
    // Relocation targets are not part of the routing table OpenSearch searches.
    let mut candidates = copies
        .iter()
        .filter(|c| c.primary == primary && c.relocation_target_of().is_none());
    let current = match &request.current_node {
        Some(name) => Some(state.resolve_node(name).ok_or_else(|| {
            bad_request(format!("failed to resolve [{name}], no matching nodes"))
        })?),
        None => None,
    };
    let found = match (primary, current) {
        (true, node) => {
            let found = candidates.next();
            if let Some(node) = node {
                if found.and_then(|c| c.node.as_deref()) != Some(node.id.as_str()) {
                    let name = request.current_node.as_deref().unwrap_or_default();
                    return Err(bad_request(format!(
                        "unable to find primary shard assigned to node [{name}]"
                    )));
                }
            }
            found
        }
        (false, Some(node)) => {
            let found = candidates.find(|c| c.node.as_deref() == Some(node.id.as_str()));
            if found.is_none() {
                let name = request.current_node.as_deref().unwrap_or_default();
                return Err(bad_request(format!(
                    "unable to find a replica shard assigned to node [{name}]"
                )));
            }
            found
        }
        (false, None) => pick_replica(candidates.collect()),
    };
    found.ok_or_else(|| {
        bad_request(format!(
            "unable to find any shards to explain [{}] in the routing table",
            request.describe(include_yes)
        ))
    })
}

/// An unassigned replica if any, else a started one (explainable), else the first.
fn pick_replica(replicas: Vec<&ShardRouting>) -> Option<&ShardRouting> {
    let mut found = *replicas.first()?;
    for replica in replicas {
        if replica.state == ShardState::Unassigned {
            return Some(replica);
        }
        if replica.state == ShardState::Started && found.state != ShardState::Started {
            found = replica;
        }
    }
    Some(found)
}

fn unassigned_info_json(info: &UnassignedInfo) -> Value {
    let mut out = Map::new();
    out.insert("reason".into(), json!(info.reason.as_str()));
    out.insert("at".into(), json!(iso_millis(info.at_millis)));
    if info.failed_allocations > 0 {
        out.insert(
            "failed_allocation_attempts".into(),
            json!(info.failed_allocations),
        );
    }
    if let Some(details) = &info.details {
        out.insert("details".into(), json!(details));
    }
    out.insert(
        "last_allocation_status".into(),
        json!(info.last_allocation_status),
    );
    Value::Object(out)
}

fn node_name(state: &ClusterState, id: Option<&str>) -> String {
    id.and_then(|id| state.nodes.get(id))
        .map(|n| n.name.clone())
        .or_else(|| id.map(str::to_string))
        .unwrap_or_default()
}

/// `discoveryNodeToXContent`: `id`/`name` inside a named object, `node_id`/`node_name` in lists.
fn node_fields(node: &DiscoveryNode, outer: bool, out: &mut Map<String, Value>) {
    out.insert(if outer { "id" } else { "node_id" }.into(), json!(node.id));
    out.insert(
        if outer { "name" } else { "node_name" }.into(),
        json!(node.name),
    );
    out.insert("transport_address".into(), json!(node.transport_address));
    if !node.attributes.is_empty() {
        out.insert(
            if outer {
                "attributes"
            } else {
                "node_attributes"
            }
            .into(),
            json!(node.attributes),
        );
    }
}

fn node_object(state: &ClusterState, id: &str) -> Value {
    let mut out = Map::new();
    match state.nodes.get(id) {
        Some(node) => node_fields(node, true, &mut out),
        None => {
            out.insert("id".into(), json!(id));
        }
    }
    Value::Object(out)
}

fn insert_current_node(
    state: &ClusterState,
    copy: &ShardRouting,
    ranking: Option<usize>,
    out: &mut Map<String, Value>,
) {
    let Some(id) = copy.node.as_deref() else {
        return;
    };
    let mut current = match node_object(state, id) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if let Some(rank) = ranking.filter(|r| *r > 0) {
        current.insert("weight_ranking".into(), json!(rank));
    }
    out.insert("current_node".into(), Value::Object(current));
}

/// `node_allocation_decisions`, ordered by decision, then weight ranking, then node id.
fn node_decisions_json(state: &ClusterState, mut nodes: Vec<NodeResult>) -> Value {
    nodes.sort_by(|a, b| {
        (a.outcome, a.weight_ranking, &a.node_id).cmp(&(b.outcome, b.weight_ranking, &b.node_id))
    });
    let list: Vec<Value> = nodes
        .into_iter()
        .map(|result| {
            let mut out = Map::new();
            match state.nodes.get(&result.node_id) {
                Some(node) => node_fields(node, false, &mut out),
                None => {
                    out.insert("node_id".into(), json!(result.node_id));
                }
            }
            out.insert("node_decision".into(), json!(result.outcome.as_str()));
            if let Some(store) = result.store {
                out.insert("store".into(), store);
            }
            if result.weight_ranking > 0 {
                out.insert("weight_ranking".into(), json!(result.weight_ranking));
            }
            if let Some(decisions) = result.decisions.filter(|d| !d.entries.is_empty()) {
                out.insert("deciders".into(), json!(decisions.to_json()));
            }
            Value::Object(out)
        })
        .collect();
    Value::Array(list)
}

fn explain_unassigned(
    ctx: &AllocationContext<'_>,
    model: &BalanceModel,
    copy: &ShardRouting,
    mode: DebugMode,
    now_millis: i64,
    out: &mut Map<String, Value>,
) {
    let balancer = |ctx: &AllocationContext<'_>| {
        let decision = decide_allocate_unassigned(ctx, model, copy, mode);
        let outcome = match decision.kind {
            DecisionKind::Yes => Outcome::Yes,
            DecisionKind::Throttle => Outcome::Throttled,
            DecisionKind::No => Outcome::No,
        };
        UnassignedOutcome {
            target: decision.target.filter(|_| outcome != Outcome::No),
            outcome,
            nodes: decision.nodes,
            reuse_store: false,
            allocation_id: None,
        }
    };
    let decision = if copy.primary && copy.recovery_source == Some(RecoverySource::ExistingStore) {
        decide_existing_primary(ctx, copy, mode)
    } else if copy.primary {
        balancer(ctx)
    } else {
        let mut gateway = decide_replica(ctx, copy, mode, now_millis);
        match gateway.outcome {
            Outcome::NotTaken => balancer(ctx),
            Outcome::Yes => gateway,
            _ => {
                gateway.target = None;
                gateway
            }
        }
    };
    let can_allocate = match decision.outcome {
        Outcome::Yes => "yes",
        Outcome::Throttled => "throttled",
        Outcome::No | Outcome::NotTaken => "no",
        Outcome::NoValidShardCopy => "no_valid_shard_copy",
        Outcome::Delayed { .. } => "allocation_delayed",
    };
    out.insert("can_allocate".into(), json!(can_allocate));
    out.insert(
        "allocate_explanation".into(),
        json!(allocate_explanation(&decision)),
    );
    if let Some(target) = &decision.target {
        out.insert("target_node".into(), node_object(ctx.state, target));
    }
    if let Some(id) = &decision.allocation_id {
        out.insert("allocation_id".into(), json!(id));
    }
    if let Outcome::Delayed {
        remaining_millis,
        configured_millis,
    } = decision.outcome
    {
        out.insert(
            "configured_delay_in_millis".into(),
            json!(configured_millis),
        );
        out.insert("remaining_delay_in_millis".into(), json!(remaining_millis));
    }
    if !decision.nodes.is_empty() {
        out.insert(
            "node_allocation_decisions".into(),
            node_decisions_json(ctx.state, decision.nodes),
        );
    }
}

fn allocate_explanation(decision: &UnassignedOutcome) -> String {
    let any_yes = decision.nodes.iter().any(|n| n.outcome == NodeOutcome::Yes);
    match &decision.outcome {
        Outcome::Yes => "can allocate the shard".into(),
        Outcome::Throttled => "allocation temporarily throttled".into(),
        Outcome::NoValidShardCopy => "cannot allocate because a previous copy of the primary shard existed but can no longer \
                                      be found on the nodes in the cluster"
            .into(),
        Outcome::Delayed { remaining_millis, .. } => format!(
            "cannot allocate because the cluster is still waiting {} for the departed node holding a replica to rejoin{}",
            time_value(*remaining_millis),
            if any_yes { ", despite being allowed to allocate the shard to at least one other node" } else { "" }
        ),
        Outcome::No | Outcome::NotTaken if decision.reuse_store => {
            "cannot allocate because allocation is not permitted to any of the nodes that hold an in-sync shard copy".into()
        }
        Outcome::No | Outcome::NotTaken => "cannot allocate because allocation is not permitted to any of the nodes".into(),
    }
}

fn explain_started(
    ctx: &AllocationContext<'_>,
    model: &BalanceModel,
    copy: &ShardRouting,
    mode: DebugMode,
    out: &mut Map<String, Value>,
) {
    let decision = decide_move(ctx, model, copy, mode);
    if decision.must_move() {
        explain_forced_move(ctx, copy, decision, out);
    } else {
        explain_rebalance(ctx, model, copy, mode, out);
    }
}

fn explain_forced_move(
    ctx: &AllocationContext<'_>,
    copy: &ShardRouting,
    decision: MoveDecision,
    out: &mut Map<String, Value>,
) {
    insert_current_node(ctx.state, copy, None, out);
    if let Some(target) = &decision.target {
        out.insert("target_node".into(), node_object(ctx.state, target));
    }
    out.insert("can_remain_on_current_node".into(), json!("no"));
    if !decision.can_remain.entries.is_empty() {
        out.insert(
            "can_remain_decisions".into(),
            json!(decision.can_remain.to_json()),
        );
    }
    let (can_move, explanation) = match decision.best {
        DecisionKind::Yes => ("yes", "shard cannot remain on this node and is force-moved to another node"),
        DecisionKind::Throttle => ("no", "shard cannot remain on this node but is throttled on moving to another node"),
        DecisionKind::No => ("no", "cannot move shard to another node, even though it is not allowed to remain on its current node"),
    };
    out.insert("can_move_to_other_node".into(), json!(can_move));
    out.insert("move_explanation".into(), json!(explanation));
    if !decision.nodes.is_empty() {
        out.insert(
            "node_allocation_decisions".into(),
            node_decisions_json(ctx.state, decision.nodes),
        );
    }
}

/// `decideRebalance`: ranks the other nodes as better, same or worse than the current one
/// and picks the best allowed node that would improve the balance beyond the threshold.
fn explain_rebalance(
    ctx: &AllocationContext<'_>,
    model: &BalanceModel,
    copy: &ShardRouting,
    mode: DebugMode,
    out: &mut Map<String, Value>,
) {
    let Some(current) = copy.node.clone() else {
        return;
    };
    let can_rebalance = deciders::can_rebalance(copy, ctx, mode);
    let threshold = ctx.settings.balance.threshold;
    let current_weight = model.rebalance_weight(&current, &copy.index);
    let (mut better, mut same, mut worse) = (Vec::new(), Vec::new(), Vec::new());
    let mut best = DecisionKind::No;
    let mut target: Option<String> = None;
    for (node_id, weight) in model.sorted_by_weight(&copy.index, &model.node_ids()) {
        let Some(node) = ctx.node(&node_id).filter(|_| node_id != current) else {
            continue;
        };
        let decisions = deciders::can_allocate(copy, node, ctx, mode);
        let kind = decisions.kind();
        let not_heavier = weight <= current_weight;
        let delta = (weight - current_weight).abs();
        let improves =
            not_heavier && delta > threshold + 0.001 && 2.0 + weight - current_weight < delta;
        if improves && kind < best {
            best = kind;
            target = Some(node_id.clone());
        }
        let entry = (node_id, kind, decisions);
        if improves {
            better.push(entry);
        } else if not_heavier {
            same.push(entry);
        } else {
            worse.push(entry);
        }
    }
    let mut nodes = Vec::new();
    let mut rank = 0;
    let result =
        |(node_id, kind, decisions): (String, DecisionKind, _), outcome, rank| NodeResult {
            node_id,
            outcome: if kind == DecisionKind::No {
                NodeOutcome::No
            } else {
                outcome
            },
            decisions: Some(decisions),
            weight_ranking: rank,
            store: None,
        };
    for entry in better {
        rank += 1;
        let outcome = NodeOutcome::from_kind(entry.1);
        nodes.push(result(entry, outcome, rank));
    }
    rank += 1;
    let current_rank = rank;
    for entry in same {
        nodes.push(result(entry, NodeOutcome::WorseBalance, current_rank));
    }
    for entry in worse {
        rank += 1;
        nodes.push(result(entry, NodeOutcome::WorseBalance, rank));
    }

    let cluster_kind = can_rebalance.kind();
    let (allocation, target) = if cluster_kind == DecisionKind::Yes {
        (best, target)
    } else {
        (cluster_kind, None)
    };
    let any_yes = nodes.iter().any(|n| n.outcome == NodeOutcome::Yes);
    insert_current_node(ctx.state, copy, Some(current_rank), out);
    if let Some(target) = &target {
        out.insert("target_node".into(), node_object(ctx.state, target));
    }
    out.insert("can_remain_on_current_node".into(), json!("yes"));
    out.insert(
        "can_rebalance_cluster".into(),
        json!(cluster_kind.as_allocation_decision()),
    );
    if cluster_kind != DecisionKind::Yes && !can_rebalance.entries.is_empty() {
        out.insert(
            "can_rebalance_cluster_decisions".into(),
            json!(can_rebalance.to_json()),
        );
    }
    out.insert(
        "can_rebalance_to_other_node".into(),
        json!(allocation.as_allocation_decision()),
    );
    let explanation = match cluster_kind {
        DecisionKind::No if any_yes => {
            "rebalancing is not allowed, even though there is at least one node on which the shard can be allocated"
        }
        DecisionKind::No => "rebalancing is not allowed",
        DecisionKind::Throttle => "rebalancing is throttled",
        DecisionKind::Yes if target.is_none() => {
            "cannot rebalance as no target node exists that can both allocate this shard and improve the cluster balance"
        }
        DecisionKind::Yes if allocation == DecisionKind::Throttle => "shard rebalancing throttled",
        DecisionKind::Yes => "can rebalance shard",
    };
    out.insert("rebalance_explanation".into(), json!(explanation));
    if !nodes.is_empty() {
        out.insert(
            "node_allocation_decisions".into(),
            node_decisions_json(ctx.state, nodes),
        );
    }
}
